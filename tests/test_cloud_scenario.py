"""Cura's world from the command line: the cloud scenario format, simulate / compare / report /
validate / plan on it, and its one-line errors."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from utilon.cli import app
from utilon.cloud.scenario import CloudWorkload, cloud_json_schema
from utilon.errors import UtilonError
from utilon.plan import parse_target, plan
from utilon.policies import policy_names
from utilon.runner import run_cloud_policy, run_policies
from utilon.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
OWN = ROOT / "examples" / "cloud-own-jobs.yaml"
SWIM = ROOT / "examples" / "cloud-swim.yaml"
SERVICES = ["cura", "dedicated", "per-job-cluster", "per-job-opt", "vm-aware"]
runner = CliRunner()

DOC: dict[str, Any] = yaml.safe_load(OWN.read_text(encoding="utf-8"))


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def write(tmp_path: Path, doc: dict[str, Any], name: str = "c.yaml") -> Path:
    f = tmp_path / name
    f.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return f


def edited(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


# ------------------------------------------------------------------------------ the format
def test_published_schema_is_current() -> None:
    published = json.loads((ROOT / "docs" / "cloud-scenario.schema.json").read_text())
    assert published == json.loads(json.dumps(cloud_json_schema(), sort_keys=True)), (
        "docs/cloud-scenario.schema.json is stale: run `utilon schema --world cloud --out "
        "docs/cloud-scenario.schema.json`")
    res = invoke("schema", "--world", "cloud")
    assert res.exit_code == 0 and json.loads(res.stdout) == published


@pytest.mark.parametrize("path", [OWN, SWIM], ids=lambda p: p.name)
def test_examples_match_the_schema_and_load(path: Path) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(cloud_json_schema()).validate(data)
    w = load_scenario(path)
    assert isinstance(w, CloudWorkload)
    assert w.name == data["name"] and w.jobs and w.servers == data["cloud"]["servers"]


def test_listed_jobs_are_built_as_written() -> None:
    w = load_scenario(OWN)
    assert isinstance(w, CloudWorkload)
    j = next(j for j in w.jobs if j.id == "adhoc-2")
    assert (j.customer, j.kind, j.size_mb, j.arrival, j.deadline) == (1, "scan", 5000, 120, 420)
    assert [v.name for v in w.store.cloud.vm_types] == ["small", "medium", "large"]
    assert w.store.error == pytest.approx(0.1)


def test_generated_jobs_follow_the_seed(tmp_path: Path) -> None:
    doc = edited(("workload",), {"generate": {"jobs": 40, "duration": 200,
                                              "deadline": {"kind": "exponential", "mean": 300}}})
    a = load_scenario(write(tmp_path, doc))
    b = load_scenario(write(tmp_path, doc, "b.yaml"))
    c = load_scenario(write(tmp_path, doc, "c2.yaml"), seed=9)
    assert len(a.jobs) == 40 and a.jobs == b.jobs and a.jobs != c.jobs
    assert "generated" in a.notes[0]


@pytest.mark.parametrize(("path", "value", "mention"), [
    (("profiles", "models", "sort", "best"), "huge", "profiles.models.sort.best"),
    (("workload", "jobs", 0, "kind"), "nope", "workload.jobs[0].kind"),
    (("workload", "jobs", 1, "id"), "etl-1", "workload.jobs[1].id"),
    (("workload", "jobs", 0, "deadline"), 5, "workload.jobs[0].deadline"),
    (("workload", "jobs", 0, "deadline"), -5, "deadline"),
    (("cloud", "vm_types", 2, "cores"), 64, "cloud"),
    (("cloud", "prediction_error", ), 1.5, "cloud.prediction_error"),
    (("cloud", "servrs"), 3, "cloud.servrs"),
    (("profiles",), {}, "profiles"),
    (("workload",), {}, "workload"),
])
def test_bad_input_is_one_line(tmp_path: Path, path: tuple[Any, ...], value: Any,
                               mention: str) -> None:
    f = write(tmp_path, edited(path, value))
    with pytest.raises(UtilonError) as ei:
        load_scenario(f)
    line = ei.value.one_line()
    assert "\n" not in line and str(f) in line and mention in line, line
    res = invoke("validate", str(f))
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and mention in res.stderr


def test_an_impossible_deadline_says_what_would_do(tmp_path: Path) -> None:
    f = write(tmp_path, edited(("workload", "jobs", 0, "deadline"), 5))
    with pytest.raises(UtilonError, match=r"cannot be met.*give at least \d+ s"):
        load_scenario(f)


def test_a_missing_trace_is_named(tmp_path: Path) -> None:
    doc = edited(("profiles",), {"swim": {"trace": "nowhere.tsv"}})
    with pytest.raises(UtilonError, match=r"profiles\.swim\.trace"):
        load_scenario(write(tmp_path, doc))


# ------------------------------------------------------------------------------ the registry
def test_one_registry_two_worlds() -> None:
    assert set(policy_names("cloud")) >= set(SERVICES)
    assert not set(policy_names("cloud")) & set(policy_names("slot"))
    assert "cura" not in policy_names() and "fifo" in policy_names()


def test_a_policy_of_the_other_world_says_where_it_runs(tmp_path: Path) -> None:
    res = invoke("simulate", str(OWN), "--policy", "fifo", "--out", str(tmp_path / "a"))
    assert res.exit_code == 2 and "slot-world policy" in res.stderr
    small = str(ROOT / "examples" / "small-mapreduce.yaml")
    res = invoke("simulate", small, "--policy", "cura", "--out", str(tmp_path / "b"))
    assert res.exit_code == 2 and "cloud service" in res.stderr and "cloud:" in res.stderr


def test_slot_only_options_are_refused_on_a_cloud_scenario(tmp_path: Path) -> None:
    res = invoke("simulate", str(OWN), "--policy", "cura", "--max-wall", "5")
    assert res.exit_code == 2 and "--max-wall" in res.stderr
    res = invoke("compare", str(OWN), "--capacity", str(OWN))
    assert res.exit_code == 2 and "cloud.servers" in res.stderr
    res = invoke("run", str(OWN), "--policy", "fifo")
    assert res.exit_code == 2 and "cloud scenario" in res.stderr


def test_no_fleet_size_points_at_plan(tmp_path: Path) -> None:
    doc = copy.deepcopy(DOC)
    del doc["cloud"]["servers"]
    f = write(tmp_path, doc)
    res = invoke("simulate", str(f), "--policy", "vm-aware", "--out", str(tmp_path / "o"))
    assert res.exit_code == 2 and "cloud.servers" in res.stderr and "utilon plan" in res.stderr
    # a service that sizes its own fleet needs none
    res = invoke("simulate", str(f), "--policy", "dedicated", "--out", str(tmp_path / "d"))
    assert res.exit_code == 0, res.output


def test_bad_service_parameters_name_the_file(tmp_path: Path) -> None:
    f = write(tmp_path, edited(("policies",), {"cura": {"beta": "lots"}}))
    res = invoke("simulate", str(f), "--policy", "cura", "--out", str(tmp_path / "o"))
    assert res.exit_code == 2 and "policies.cura" in res.stderr and "beta" in res.stderr
    res = invoke("simulate", str(OWN), "--policy", "cura", "--param", "betta=2",
                 "--out", str(tmp_path / "p"))
    assert res.exit_code == 2 and "betta" in res.stderr and "beta" in res.stderr


# ------------------------------------------------------------------------------ runs
def test_simulate_writes_the_slot_worlds_files(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = invoke("simulate", str(OWN), "--policy", "cura", "--out", str(out))
    assert res.exit_code == 0, res.output
    for name in ("jobs.csv", "summary.json", "provenance.json", "allocation.csv",
                 "capacity.csv"):
        assert (out / name).is_file(), name
    with (out / "jobs.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["id"] for r in rows][:2] == ["etl-1", "etl-2"] and len(rows) == 12
    assert list(rows[0])[:12] == ["id", "tenant", "class", "submit", "start", "finish", "goal",
                                  "utility", "delta", "missed", "penalty", "cost"]
    s = json.loads((out / "summary.json").read_text())
    assert s["world"] == "cloud" and s["policy"] == "cura" and s["servers"] == 6
    assert s["misses"] == sum(r["missed"] == "true" for r in rows)
    assert s["params"] == {"beta": 1.5, "reconf_window": 300.0, "window_bound": 600.0}
    for r in rows:  # a met job finished by its deadline; a dropped one never ran
        if r["missed"] == "false":
            assert float(r["finish"]) <= float(r["goal"]) + 1e-6
        if r["dropped"]:
            assert r["finish"] == "" and float(r["penalty"]) >= 1.0


def _without_timing(directory: Path) -> dict[str, Any]:
    files = {}
    for f in sorted(directory.rglob("*")):
        if f.is_file() and f.suffix != ".png":
            text = f.read_text(encoding="utf-8")
            if f.name in ("summary.json", "comparison.json"):
                data = json.loads(text)
                for item in data if isinstance(data, list) else [data]:
                    item.pop("timing", None)
                text = json.dumps(data)
            files[str(f.relative_to(directory))] = text
    return files


def test_compare_runs_every_service_the_same_serially_and_in_parallel(tmp_path: Path) -> None:
    w = load_scenario(OWN)
    assert isinstance(w, CloudWorkload)
    serial = run_policies(w, SERVICES, out_dir=tmp_path / "s", jobs=1)
    parallel = run_policies(w, SERVICES, out_dir=tmp_path / "p", jobs=2)
    assert [s["policy"] for s in serial] == SERVICES
    assert _without_timing(tmp_path / "s") == _without_timing(tmp_path / "p")
    assert [dict(s, timing=None) for s in serial] == [dict(s, timing=None) for s in parallel]


def test_compare_and_report_from_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    res = invoke("compare", str(OWN), "--policies", "all", "--out", str(out), "--jobs", "1",
                 "--report")
    assert res.exit_code == 0, res.output
    with (out / "comparison.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["policy"] for r in rows] == policy_names("cloud")
    assert "reconfigurations" in rows[0] and "success_rate" in rows[0]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "cloud-own-jobs" in html and "Allocation over time" in html
    assert "Tasks per machine" not in html  # clusters of VMs, not task attempts
    res = invoke("report", str(out / "cura"))
    assert res.exit_code == 0, res.output


def test_a_dedicated_service_runs_on_its_own_fleet() -> None:
    w = load_scenario(OWN)
    assert isinstance(w, CloudWorkload)
    ded = run_cloud_policy(w, "dedicated")
    assert ded.summary["servers"] == ded.policy.fixed_servers(w.jobs) != w.servers


# ------------------------------------------------------------------------------ plan
def test_plan_finds_the_smallest_fleet(tmp_path: Path) -> None:
    w = load_scenario(OWN)
    assert isinstance(w, CloudWorkload)
    res = plan(w, "vm-aware", parse_target("misses<=0"), jobs=1)
    assert res.answer is not None
    at = run_cloud_policy(w, "vm-aware", servers=res.answer).summary
    below = run_cloud_policy(w, "vm-aware", servers=res.answer - 1).summary
    assert at["misses"] == 0 and below["misses"] > 0


def test_plan_on_a_rate_target_runs_to_the_end() -> None:
    w = load_scenario(OWN)
    assert isinstance(w, CloudWorkload)
    res = plan(w, "per-job-opt", parse_target("misses<=20%"), jobs=1)
    assert res.answer is not None
    for p in res.table():
        assert not p.at_least
        assert p.holds == (p.value <= 0.2)


def test_plan_from_the_cli_writes_its_table_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    res = invoke("plan", str(OWN), "--policy", "cura", "--target", "misses<=0", "--out",
                 str(out), "--jobs", "1")
    assert res.exit_code == 0, res.output
    assert "smallest fleet on every seed:" in res.stdout and "servers" in res.stdout
    doc = json.loads((out / "plan.json").read_text())
    assert doc["unit"] == "servers" and doc["answer"] >= 1
    assert (out / "plan.png").stat().st_size > 1000
    res = invoke("plan", str(OWN), "--policy", "dedicated", "--target", "misses<=0",
                 "--out", str(tmp_path / "d"))
    assert res.exit_code == 0 and "sizes its own fleet" in res.stdout
    res = invoke("plan", str(OWN), "--policy", "edf-p", "--target", "misses<=0")
    assert res.exit_code == 2 and "slot-world policy" in res.stderr
