"""Run outputs: determinism of jobs.csv / summary.json / provenance.json, and the definitions of
the per-job columns and summary metrics (docs/outputs.md)."""

from __future__ import annotations

import csv
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from utilon.errors import ScenarioError
from utilon.metrics.outputs import JOB_COLUMNS
from utilon.policies import policy_names
from utilon.runner import RunOutput, run_policy
from utilon.scenario import load_workload
from utilon.scenario.build import Workload

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ["small-mapreduce", "capacity-changes"]
POLICIES = policy_names()


@cache
def workload(name: str, seed: int | None = None) -> Workload:
    return load_workload(ROOT / "examples" / f"{name}.yaml", seed=seed)


def read(out: Path) -> tuple[bytes, dict[str, Any], bytes]:
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return (out / "jobs.csv").read_bytes(), summary, (out / "provenance.json").read_bytes()


def without_timing(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k != "timing"}


def csv_rows(out: Path) -> list[dict[str, str]]:
    with (out / "jobs.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


# ------------------------------------------------------------------------------ determinism
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", SCENARIOS)
def test_runs_are_deterministic(name: str, policy: str, tmp_path: Path) -> None:
    w1 = load_workload(ROOT / "examples" / f"{name}.yaml")
    w2 = load_workload(ROOT / "examples" / f"{name}.yaml")  # rebuilt from the file
    run_policy(w1, policy, out_dir=tmp_path / "a")
    run_policy(w2, policy, out_dir=tmp_path / "b")
    jobs_a, summary_a, prov_a = read(tmp_path / "a")
    jobs_b, summary_b, prov_b = read(tmp_path / "b")
    assert jobs_a == jobs_b
    assert without_timing(summary_a) == without_timing(summary_b)
    assert prov_a == prov_b
    # the written summary, minus timing, is also byte-identical text
    text_a = json.dumps(without_timing(summary_a), indent=2)
    assert text_a == json.dumps(without_timing(summary_b), indent=2)


def test_summary_file_is_the_returned_summary(tmp_path: Path) -> None:
    res = run_policy(workload("small-mapreduce"), "fair", out_dir=tmp_path)
    _, summary, prov = read(tmp_path)
    assert summary == json.loads(json.dumps(res.summary))
    assert json.loads(prov)["standalone_runtime"]["etl-nightly"] == 120.0


def test_different_seed_changes_jobs_csv(tmp_path: Path) -> None:
    run_policy(workload("capacity-changes"), "fifo", out_dir=tmp_path / "a")
    run_policy(workload("capacity-changes", 4), "fifo", out_dir=tmp_path / "b")
    jobs_a, summary_a, prov_a = read(tmp_path / "a")
    jobs_b, summary_b, prov_b = read(tmp_path / "b")
    assert jobs_a != jobs_b
    assert (summary_a["seed"], summary_b["seed"]) == (3, 4)
    assert (json.loads(prov_a)["seed"], json.loads(prov_b)["seed"]) == (3, 4)


def test_capacity_changes_lose_and_rerun_tasks() -> None:
    s = run_policy(workload("capacity-changes"), "fifo").summary
    assert s["tasks"]["lost"] > 0
    assert s["tasks"]["completed"] == sum(j.n_tasks for j in workload("capacity-changes").jobs)
    assert s["tasks"]["launched"] == s["tasks"]["completed"] + s["tasks"]["lost"]
    assert s["servers"] == 12


# ------------------------------------------------------------------------------ definitions
def _num(x: str) -> float | None:
    return None if x == "" else float(x)


def check_rows(w: Workload, res: RunOutput, out: Path) -> None:
    jobs = {j.id: j for j in w.jobs}
    rows = csv_rows(out)
    assert list(rows[0]) == list(JOB_COLUMNS)
    assert len(rows) == len(res.rows) == res.summary["jobs"]
    end = res.result.end_time
    exact = {jid: jr.finish for jid, jr in res.result.core.jobs.items()}
    for r in rows:
        job = jobs[r["id"]]
        u = job.utility
        submit, start, finish = _num(r["submit"]), _num(r["start"]), _num(r["finish"])
        goal, delta = _num(r["goal"]), _num(r["delta"])
        utility, penalty = float(r["utility"]), float(r["penalty"])
        assert r["tenant"] == job.tenant and r["class"] == job.job_class
        assert submit == pytest.approx(job.submit, abs=1e-3)
        assert r["missed"] in ("true", "false")
        missed = r["missed"] == "true"
        lo, hi = u.bounds
        assert lo - 1e-6 <= utility <= hi + 1e-6
        assert float(r["cost"]) >= 0
        if u.goal is None:
            assert goal is None and delta is None and penalty == 0
        else:
            assert goal == pytest.approx(u.goal, abs=1e-3)
        if finish is None:  # unfinished: lowest utility, missed, charged up to the end
            assert missed and delta is None
            assert utility == pytest.approx(lo)
            t = end
        else:
            assert start is not None and submit <= start <= finish
            assert utility == pytest.approx(u.value(finish), abs=1e-5)
            t = exact[job.id]
            assert t == pytest.approx(finish, abs=1e-3)
            if u.goal is not None:
                assert delta == pytest.approx(t - u.goal, abs=1e-3)
                assert missed == (t - u.goal > 1e-9)
            else:
                assert not missed
        if u.goal is not None:
            late = t - u.goal
            expected = job.weight * max(0.0, late) / (u.goal - job.submit)
            assert penalty == pytest.approx(expected, rel=1e-5, abs=1e-6)
            if abs(late) > 1e-3:
                assert (penalty > 0) == (late > 0) == missed


def check_summary(res: RunOutput, out: Path) -> None:
    rows = csv_rows(out)
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    utilities = [float(r["utility"]) for r in rows]
    finished = [r for r in rows if r["finish"]]
    responses = [float(r["finish"]) - float(r["submit"]) for r in finished]
    assert s["jobs"] == len(rows)
    assert s["finished"] == len(finished)
    assert s["misses"] == sum(1 for r in rows if r["missed"] == "true")
    assert s["miss_rate"] == pytest.approx(s["misses"] / len(rows), abs=1e-6)
    assert s["utility_min"] == pytest.approx(min(utilities), abs=1e-6)
    assert s["utility_sum"] == pytest.approx(sum(utilities), abs=1e-5)
    assert s["utility_mean"] == pytest.approx(sum(utilities) / len(rows), abs=1e-5)
    assert s["penalty"] == pytest.approx(sum(float(r["penalty"]) for r in rows), abs=1e-5)
    assert s["cost"] == pytest.approx(sum(float(r["cost"]) for r in rows), abs=1e-5)
    if responses:
        assert s["response_mean"] == pytest.approx(sum(responses) / len(responses), abs=1e-2)
        assert min(responses) - 1e-3 <= s["response_p95"] <= max(responses) + 1e-3
    assert s["utilisation"] >= 0
    if s["policy"] != "fair-slots":  # k slots per machine, blind to resources: may over-commit
        assert s["utilisation"] <= 1 + 1e-9
        assert all(0 <= v <= 1 + 1e-9 for v in s["utilisation_by_resource"].values())
    first = min(float(r["submit"]) for r in rows)
    last = max((float(r["finish"]) for r in finished), default=first)
    if not s["stopped_early"]:
        assert s["makespan"] == pytest.approx(last - first, abs=1e-3)
        assert s["finished"] == s["jobs"]


@pytest.mark.parametrize("policy", ["edf-n", "fifo", "fair-slots"])
@pytest.mark.parametrize("name", ["small-mapreduce", "capacity-changes", "multi-resource"])
def test_rows_and_summary_follow_the_definitions(name: str, policy: str, tmp_path: Path) -> None:
    w = workload(name)
    res = run_policy(w, policy, out_dir=tmp_path)
    check_rows(w, res, tmp_path)
    check_summary(res, tmp_path)


def test_some_runs_miss(tmp_path: Path) -> None:
    """edf-n runs one job at a time: on small-mapreduce some jobs finish late."""
    res = run_policy(workload("small-mapreduce"), "edf-n", out_dir=tmp_path)
    rows = csv_rows(tmp_path)
    late = [r for r in rows if r["missed"] == "true"]
    assert res.summary["misses"] == len(late) > 0
    assert all(float(r["delta"]) > 0 and float(r["penalty"]) > 0 for r in late)
    assert all(float(r["delta"]) <= 0 and float(r["penalty"]) == 0
               for r in rows if r["missed"] == "false")


def _tiny(tmp_path: Path, extra: dict[str, Any], jobs: list[dict[str, Any]]) -> Workload:
    data = {"name": "tiny", "cluster": {"machines": [{"id": "m", "capacity": {"slots": 2},
                                                      "price": 3.6}]},
            "workload": {"jobs": jobs}, **extra}
    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_workload(p)


def test_unfinished_jobs_at_the_horizon(tmp_path: Path) -> None:
    jobs = [{"id": "a", "submit": 0, "utility": {"kind": "deadline", "deadline": 10},
             "stages": [{"name": "map", "tasks": 4, "duration": 10}]},
            {"id": "b", "submit": 0, "weight": 2,
             "utility": {"kind": "soft_hard", "soft": 5, "hard": 40},
             "stages": [{"name": "map", "tasks": 2, "duration": 30}]}]
    w = _tiny(tmp_path, {"simulation": {"horizon": 25}}, jobs)
    res = run_policy(w, "fifo", out_dir=tmp_path / "o")
    rows = {r["id"]: r for r in csv_rows(tmp_path / "o")}
    assert res.summary["stopped_early"] == "horizon 25 s reached"
    assert rows["a"]["finish"] == "20.0" and rows["a"]["missed"] == "true"
    assert rows["a"]["delta"] == "10.0" and float(rows["a"]["penalty"]) == 1.0
    # b has not finished: lowest utility, missed, penalty charged up to the horizon
    assert rows["b"]["finish"] == "" and rows["b"]["delta"] == ""
    assert rows["b"]["missed"] == "true" and float(rows["b"]["utility"]) == 0.0
    assert float(rows["b"]["penalty"]) == pytest.approx(2 * (25 - 5) / 5)
    check_rows(w, res, tmp_path / "o")
    check_summary(res, tmp_path / "o")


def test_cost_is_price_times_time_times_dominant_share(tmp_path: Path) -> None:
    # price 3.6 per machine-hour = 0.001 per machine-second; a task holding 1 of 2 slots
    # for 10 s pays 10 * 0.001 * 1/2.
    jobs = [{"id": "a", "submit": 0, "stages": [{"name": "map", "tasks": 3, "duration": 10}]}]
    res = run_policy(_tiny(tmp_path, {}, jobs), "fifo")
    assert res.rows[0]["cost"] == pytest.approx(3 * 10 * 0.001 * 0.5)
    assert res.rows[0]["goal"] is None and res.rows[0]["missed"] is False
    assert res.summary["utilisation"] == pytest.approx(30 / (2 * 20))


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def test_bug_summary_is_strict_json_when_the_deadline_is_the_submit_time(tmp_path: Path) -> None:
    """BUG (metrics/outputs.py ``job_rows``): a goal at (or before) the submit time, which the
    loader accepts (``deadline: 0``), gives ``penalty = weight * inf``; summary.json then
    contains ``Infinity``, which strict JSON parsers (JavaScript, jq, ...) reject.  Either fix
    passes: rejecting such a goal when loading, or writing a finite/null penalty."""
    jobs = [{"id": "a", "submit": 0, "utility": {"kind": "deadline", "deadline": 0},
             "stages": [{"name": "map", "tasks": 1, "duration": 10}]}]
    try:
        w = _tiny(tmp_path, {}, jobs)
    except ScenarioError:
        return
    run_policy(w, "fifo", out_dir=tmp_path / "o")
    text = (tmp_path / "o" / "summary.json").read_text(encoding="utf-8")
    json.loads(text, parse_constant=_reject_constant)


def test_work_still_running_at_the_horizon_is_busy_and_paid_for(tmp_path: Path) -> None:
    """Issue 47: one 1-slot machine at 3600/h, one 10 s task, horizon 5: the slot was busy the
    whole 5 s (utilisation 1, not 0) and those 5 s cost 5, in the summary and in jobs.csv."""
    from typer.testing import CliRunner

    from utilon.cli import app

    doc = {"name": "h", "seed": 1, "simulation": {"horizon": 5},
           "cluster": {"machines": [{"id": "m", "capacity": {"slots": 1}, "price": 3600}]},
           "workload": {"jobs": [{"id": "j", "submit": 0, "utility": {"kind": "deadline",
                                                                      "deadline": 20},
                                  "stages": [{"name": "map", "tasks": 1, "duration": 10}]}]}}
    (tmp_path / "h.yaml").write_text(json.dumps(doc), encoding="utf-8")
    res = CliRunner().invoke(app, ["simulate", str(tmp_path / "h.yaml"), "-p", "fifo",
                                   "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["unfinished"] == 1
    assert s["utilisation"] == pytest.approx(1.0)
    assert s["cost"] == pytest.approx(5.0)
    with (tmp_path / "o" / "jobs.csv").open() as f:
        assert float(next(csv.DictReader(f))["cost"]) == pytest.approx(5.0)
