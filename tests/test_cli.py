"""The ``utilon`` command line, driven in-process with typer's CliRunner."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from utilon.cli import app
from utilon.errors import ScenarioError
from utilon.scenario import scenario_json_schema

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
SMALL = str(ROOT / "examples" / "small-mapreduce.yaml")
POLICIES = ["alsched", "cora", "cora-ct", "cora-lp", "edf-n", "edf-p", "fair", "fair-slots",
            "fifo", "ras", "rds", "rrh", "triage"]
HEADER = "id,tenant,class,submit,start,finish,goal,utility,delta,missed,penalty,cost"
SUMMARY_KEYS = [
    "scenario", "scenario_digest", "policy", "params", "seed", "jobs", "finished", "unfinished",
    "unsubmitted",
    "utility_min",
    "utility_sum",
    "utility_mean", "misses", "miss_rate", "penalty", "hard_misses", "makespan",
    "response_mean",
    "response_p95", "utilisation", "utilisation_by_resource", "servers", "cost", "tasks",
    "decisions", "infeasible", "stopped_early", "warnings", "timeline", "timing",
]
COMPARISON_COLUMNS = [
    "policy", "utility_min", "utility_sum", "utility_mean", "misses", "miss_rate", "unfinished",
    "penalty",
    "makespan", "response_mean", "response_p95", "utilisation", "servers", "cost",
]

runner = CliRunner()


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def assert_clean_error(res: Any, *parts: str) -> str:
    """Exit status 2, exactly one ``error:`` line on stderr, no traceback."""
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    line = lines[0]
    assert line.startswith("error: "), line
    for p in parts:
        assert p in line, f"{p!r} not in {line!r}"
    return line


def write_scenario(tmp_path: Path, extra: dict[str, Any] | None = None) -> Path:
    data: dict[str, Any] = {
        "name": "cli",
        "seed": 4,
        "cluster": {"machines": [{"id": "m", "count": 2, "capacity": {"slots": 4}}]},
        "workload": {"generate": [{
            "count": 8,
            "arrival": {"process": "poisson", "mean_interarrival": 5},
            "templates": [{"name": "t", "utility": {"kind": "deadline", "deadline": "2x"},
                           "stages": [{"name": "map", "tasks": {"dist": "uniform", "low": 2,
                                                                "high": 10},
                                       "duration": {"dist": "exponential", "mean": 10,
                                                    "min": 1}},
                                      {"name": "reduce", "tasks": 1, "duration": 5}]}],
        }]},
        **(extra or {}),
    }
    p = tmp_path / "cli.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return p


# ------------------------------------------------------------------------------ policies
def test_policies_lists_every_baseline() -> None:
    res = invoke("policies")
    assert res.exit_code == 0, res.output
    for name in POLICIES:
        assert name in res.stdout
    assert "k=4" in res.stdout  # fair-slots' parameter and its default


def test_policies_lists_the_cloud_services_too() -> None:
    from utilon.errors import UtilonError
    from utilon.policies import make_cloud_policy, policy_names

    res = invoke("policies")
    assert res.exit_code == 0, res.output
    assert "cloud services" in res.stdout
    assert {"per-job-cluster", "dedicated", "per-job-opt", "vm-aware",
            "cura"} <= set(policy_names("cloud"))
    for name in policy_names("cloud"):
        assert name in res.stdout
    assert "reconf_window=300.0" in res.stdout  # cura's parameter and its default
    # the one-line error for an unknown service points at a command that exists
    with pytest.raises(UtilonError, match="run `utilon policies`"):
        make_cloud_policy("nope", None)  # type: ignore[arg-type]


def test_no_arguments_shows_help() -> None:
    res = invoke()
    assert "simulate" in res.output and "compare" in res.output


# ------------------------------------------------------------------------------ validate
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_validate_examples(path: Path) -> None:
    res = invoke("validate", str(path))
    assert res.exit_code == 0, res.output
    if path.name.startswith("cloud-"):  # Cura's world: servers, VM types, profiles
        assert res.stdout.startswith(f"ok: {path}: cloud scenario ")
        assert "servers" in res.stdout and "VM types" in res.stdout
    else:
        assert res.stdout.startswith(f"ok: {path}: scenario ")
        assert "machines" in res.stdout
    assert "jobs" in res.stdout


def test_validate_counts(tmp_path: Path) -> None:
    res = invoke("validate", SMALL)
    assert "3 machines, 0 capacity changes, 5 jobs, 65 tasks" in res.stdout


def test_piped_output_never_wraps_even_from_a_deep_directory(tmp_path: Path) -> None:
    """Run the installed command for real, stdout and stderr piped, from a directory whose
    path alone is longer than a terminal line: every message stays on one line."""
    import shutil
    import subprocess
    import sys

    deep = tmp_path.joinpath(*["a-rather-long-directory-name"] * 8)
    deep.mkdir(parents=True)
    scenario = deep / "small.yaml"
    shutil.copy(SMALL, scenario)
    cmd = [sys.executable, "-c", "from utilon.cli import main; main()"]
    ok = subprocess.run([*cmd, "validate", str(scenario)], cwd=deep, capture_output=True,
                        text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    assert len(str(scenario)) > 200
    assert ok.stdout.count("\n") == 1 and ok.stdout.startswith(f"ok: {scenario}: ")
    bad = deep / "bad.yaml"
    bad.write_text("name: x\ncluster: {machines: [{id: m, capacty: {slots: 1}}]}\n",
                   encoding="utf-8")
    err = subprocess.run([*cmd, "validate", str(bad)], cwd=deep, capture_output=True,
                         text=True, check=False)
    assert err.returncode == 2
    assert err.stderr.count("\n") == 1 and err.stderr.startswith(f"error: {bad}: ")


def test_a_gang_wider_than_the_static_slots_is_refused_before_the_run(tmp_path: Path) -> None:
    p = tmp_path / "gang.yaml"
    p.write_text(yaml.safe_dump({
        "name": "gang", "cluster": {"machines": [{"id": "m", "count": 1,
                                                  "capacity": {"slots": 8}}]},
        "workload": {"jobs": [{"id": "j", "submit": 0, "stages": [
            {"name": "map", "tasks": 5, "duration": 10, "demand": {"slots": 1},
             "gang": True}]}]},
        "policies": {"fair-slots": {"k": 4}}}), encoding="utf-8")
    line = assert_clean_error(invoke("simulate", str(p), "-p", "fair-slots",
                                     "--out", str(tmp_path / "o")),
                              str(p), "job j", "gang stage 'map' needs 5 tasks at once",
                              "k=4", "policy 'fair-slots'", "it can never run")
    assert "raise k" in line
    assert invoke("simulate", str(p), "-p", "fifo", "--out", str(tmp_path / "f")).exit_code == 0
    # validate checks the policies the scenario configures
    assert_clean_error(invoke("validate", str(p)), str(p), "job j", "k=4")


def test_unfinished_jobs_are_counted_and_never_free(tmp_path: Path) -> None:
    p = write_scenario(tmp_path, {"simulation": {"horizon": 5}})
    res = invoke("simulate", str(p), "-p", "fifo", "--out", str(tmp_path / "o"))
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text(encoding="utf-8"))
    assert summary["unfinished"] == summary["jobs"] - summary["finished"] > 0
    with (tmp_path / "o" / "jobs.csv").open(encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if not r["finish"]]
    assert rows and all(r["missed"] == "true" for r in rows)
    assert all(float(r["penalty"]) >= 1.0 for r in rows if r["goal"])
    assert "unfinished" in res.stdout  # the table's column
    assert "job(s) unfinished" in res.stderr and "charged a penalty" in res.stderr


def test_validate_broken_file(tmp_path: Path) -> None:
    p = tmp_path / "broken.yaml"
    p.write_text("name: x\ncluster:\n  machines:\n    - {id: m, capacty: {slots: 1}}\n"
                 "workload: {jobs: []}\n", encoding="utf-8")
    assert_clean_error(invoke("validate", str(p)), str(p), "cluster.machines[0].capacty",
                       "unknown field")


def test_validate_yaml_syntax_error(tmp_path: Path) -> None:
    p = tmp_path / "syntax.yaml"
    p.write_text("name: [x\n", encoding="utf-8")
    assert_clean_error(invoke("validate", str(p)), f"{p}:", "YAML syntax error")


def test_validate_missing_file(tmp_path: Path) -> None:
    assert_clean_error(invoke("validate", str(tmp_path / "nope.yaml")), "file not found")


def test_validate_checks_policy_parameters(tmp_path: Path) -> None:
    p = write_scenario(tmp_path, {"policies": {"fair-slots": {"kk": 3}}})
    assert_clean_error(invoke("validate", str(p)), str(p), "policies.fair-slots", "'kk'",
                       "k, reduce_k")


def test_debug_shows_the_exception(tmp_path: Path) -> None:
    res = invoke("--debug", "validate", str(tmp_path / "nope.yaml"))
    assert isinstance(res.exception, ScenarioError)
    invoke("validate", SMALL)  # --debug does not stick to later invocations
    assert_clean_error(invoke("validate", str(tmp_path / "nope.yaml")), "file not found")


def test_bug_validate_checks_the_default_policy(tmp_path: Path) -> None:
    """BUG (cli/app.py ``validate``): ``policy:`` is never checked, so a misspelt default
    policy passes ``validate`` and only fails at ``simulate``."""
    p = write_scenario(tmp_path, {"policy": {"name": "fair-slotz"}})
    assert_clean_error(invoke("validate", str(p)), "'fair-slotz'")


def test_bug_unknown_policy_in_policies_names_the_file(tmp_path: Path) -> None:
    """BUG (policies/base.py ``make_policy``): ``policy_class`` raises ``UnknownNameError``
    without ``where``, so ``validate`` prints no file or field for ``policies: {fair-slotz:
    ...}``."""
    p = write_scenario(tmp_path, {"policies": {"fair-slotz": {"k": 1}}})
    assert_clean_error(invoke("validate", str(p)), str(p), "policies.fair-slotz")


# ------------------------------------------------------------------------------ simulate
@pytest.fixture(scope="module")
def fifo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    out = tmp_path_factory.mktemp("fifo")
    return invoke("simulate", SMALL, "--policy", "fifo", "--out", str(out)), out


def test_simulate_writes_outputs(fifo_run: tuple[Any, Path]) -> None:
    res, out = fifo_run
    assert res.exit_code == 0, res.output
    assert "fifo" in res.stdout and "outputs:" in res.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "allocation.csv", "attempts.csv", "capacity.csv", "jobs.csv", "provenance.json",
        "story.jsonl", "summary.json"]
    lines = (out / "jobs.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == HEADER
    assert len(lines) == 6
    assert [r["id"] for r in csv.DictReader(lines)] == [
        "etl-nightly", "dashboard", "adhoc-query", "ml-features", "report"]


def test_simulate_summary_keys_are_documented(fifo_run: tuple[Any, Path]) -> None:
    _, out = fifo_run
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert list(summary) == SUMMARY_KEYS
    assert summary["policy"] == "fifo" and summary["scenario"] == "small-mapreduce"
    assert summary["jobs"] == 5 and summary["seed"] == 1
    docs = (ROOT / "docs" / "outputs.md").read_text(encoding="utf-8")
    for key in SUMMARY_KEYS + HEADER.split(","):
        assert f"`{key}`" in docs, f"{key} is not documented in docs/outputs.md"


def test_simulate_provenance(fifo_run: tuple[Any, Path]) -> None:
    _, out = fifo_run
    prov = json.loads((out / "provenance.json").read_text(encoding="utf-8"))
    assert prov["scenario"] == "small-mapreduce"
    assert prov["source"] == SMALL
    assert prov["seed"] == 1
    assert set(prov["standalone_runtime"]) == {"etl-nightly", "dashboard", "adhoc-query",
                                               "ml-features", "report"}
    assert prov["standalone_runtime"]["etl-nightly"] == 120.0
    assert prov["derivations"]


def test_simulate_param(tmp_path: Path) -> None:
    res = invoke("simulate", SMALL, "-p", "fair-slots", "--param", "k=2", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["policy"] == "fair-slots"
    assert summary["params"] == {"k": 2, "reduce_k": None}


def test_simulate_unknown_param(tmp_path: Path) -> None:
    res = invoke("simulate", SMALL, "-p", "fair-slots", "--param", "kk=2", "--out", str(tmp_path))
    assert_clean_error(res, "no parameter 'kk'", "k, reduce_k")
    assert not (tmp_path / "jobs.csv").exists()


def test_simulate_bad_param_value_and_syntax(tmp_path: Path) -> None:
    assert_clean_error(invoke("simulate", SMALL, "-p", "fair-slots", "--param", "k=many",
                              "--out", str(tmp_path)), "'k'")
    assert_clean_error(invoke("simulate", SMALL, "-p", "fair-slots", "--param", "k",
                              "--out", str(tmp_path)), "KEY=VALUE")
    assert_clean_error(invoke("simulate", SMALL, "-p", "fair-slots", "--param", "k=0",
                              "--out", str(tmp_path)), "k must be >= 1")


def test_simulate_unknown_policy(tmp_path: Path) -> None:
    line = assert_clean_error(invoke("simulate", SMALL, "--policy", "nope", "--out",
                                     str(tmp_path)), "'nope'")
    for name in POLICIES:
        assert name in line
    assert not (tmp_path / "jobs.csv").exists()


def test_simulate_without_a_policy_runs_utilons_own(tmp_path: Path) -> None:
    res = invoke("simulate", SMALL, "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["policy"] == "triage"
    res = invoke("simulate", SMALL, "-p", "default", "--out", str(tmp_path / "d"))
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "d" / "summary.json").read_text(encoding="utf-8"))[
        "policy"] == "triage"


def test_simulate_default_policy_and_parameter_precedence(tmp_path: Path) -> None:
    p = write_scenario(tmp_path, {"policy": {"name": "fair-slots", "params": {"k": 2}},
                                  "policies": {"fair-slots": {"k": 3, "reduce_k": 1}}})
    res = invoke("simulate", str(p), "--out", str(tmp_path / "a"))
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "a" / "summary.json").read_text(encoding="utf-8"))
    assert summary["policy"] == "fair-slots"
    assert summary["params"] == {"k": 2, "reduce_k": 1}  # policy.params over policies:
    res = invoke("simulate", str(p), "--param", "k=1", "--out", str(tmp_path / "b"))
    summary = json.loads((tmp_path / "b" / "summary.json").read_text(encoding="utf-8"))
    assert summary["params"] == {"k": 1, "reduce_k": 1}  # --param over both


def test_simulate_seed_override(tmp_path: Path) -> None:
    p = write_scenario(tmp_path)
    invoke("simulate", str(p), "-p", "fifo", "--out", str(tmp_path / "a"))
    res = invoke("simulate", str(p), "-p", "fifo", "--seed", "9", "--out", str(tmp_path / "b"))
    assert res.exit_code == 0, res.output
    assert "(seed 9)" in res.stdout
    a = json.loads((tmp_path / "a" / "summary.json").read_text(encoding="utf-8"))
    b = json.loads((tmp_path / "b" / "summary.json").read_text(encoding="utf-8"))
    assert (a["seed"], b["seed"]) == (4, 9)
    prov = json.loads((tmp_path / "b" / "provenance.json").read_text(encoding="utf-8"))
    assert prov["seed"] == 9
    assert ((tmp_path / "a" / "jobs.csv").read_text(encoding="utf-8")
            != (tmp_path / "b" / "jobs.csv").read_text(encoding="utf-8"))


def test_simulate_warns_when_stopped_early(tmp_path: Path) -> None:
    p = write_scenario(tmp_path, {"simulation": {"horizon": 20}})
    res = invoke("simulate", str(p), "-p", "fifo", "--out", str(tmp_path / "o"))
    assert res.exit_code == 0, res.output
    assert "warning:" in res.stderr and "horizon 20 s reached" in res.stderr
    summary = json.loads((tmp_path / "o" / "summary.json").read_text(encoding="utf-8"))
    assert summary["stopped_early"] == "horizon 20 s reached"


# ------------------------------------------------------------------------------ compare
def test_compare_three_policies(tmp_path: Path) -> None:
    res = invoke("compare", SMALL, "--policies", "fifo,fair,edf-p", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    for name in ("fifo", "fair", "edf-p"):
        assert name in res.stdout
        assert (tmp_path / name / "jobs.csv").exists()
        assert (tmp_path / name / "summary.json").exists()
    with (tmp_path / "comparison.csv").open(encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == COMPARISON_COLUMNS
    assert [r[0] for r in rows[1:]] == ["fifo", "fair", "edf-p"]
    full = json.loads((tmp_path / "comparison.json").read_text(encoding="utf-8"))
    assert [s["policy"] for s in full] == ["fifo", "fair", "edf-p"]
    for s, row in zip(full, rows[1:], strict=True):
        assert row == [str(s[c]) for c in COMPARISON_COLUMNS]
        single = json.loads((tmp_path / s["policy"] / "summary.json").read_text("utf-8"))
        assert {k: v for k, v in single.items() if k != "timing"} == {
            k: v for k, v in s.items() if k != "timing"}


def test_compare_all(tmp_path: Path) -> None:
    res = invoke("compare", SMALL, "--policies", "all", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    with (tmp_path / "comparison.csv").open(encoding="utf-8") as f:
        assert [r["policy"] for r in csv.DictReader(f)] == POLICIES
    for name in POLICIES:
        assert name in res.stdout


def test_compare_uses_scenario_parameters(tmp_path: Path) -> None:
    p = write_scenario(tmp_path, {"policies": {"fair-slots": {"k": 1}}})
    res = invoke("compare", str(p), "--policies", "fair-slots", "--out", str(tmp_path / "o"))
    assert res.exit_code == 0, res.output
    full = json.loads((tmp_path / "o" / "comparison.json").read_text(encoding="utf-8"))
    assert full[0]["params"] == {"k": 1, "reduce_k": None}


def test_compare_demo_workload(tmp_path: Path) -> None:
    """The `make demo` scenario, with two policies to keep the suite fast."""
    fb = str(ROOT / "examples" / "facebook-mix.yaml")
    res = invoke("compare", fb, "--policies", "edf-p,fair", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert "facebook-mix: 300 jobs, 50 machines, seed 7" in res.stdout
    full = json.loads((tmp_path / "comparison.json").read_text(encoding="utf-8"))
    for s in full:
        assert s["jobs"] == s["finished"] == 300
        assert not s["stopped_early"] and not s["warnings"]


def test_compare_unknown_policy(tmp_path: Path) -> None:
    line = assert_clean_error(invoke("compare", SMALL, "--policies", "fifo,nope", "--out",
                                     str(tmp_path)), "'nope'")
    assert "fair-slots" in line
    assert not (tmp_path / "comparison.csv").exists()


def test_compare_no_policies(tmp_path: Path) -> None:
    assert_clean_error(invoke("compare", SMALL, "--policies", " , ", "--out", str(tmp_path)),
                       "no policies given")


# ------------------------------------------------------------------------------ schema
def test_schema_prints_json() -> None:
    res = invoke("schema")
    assert res.exit_code == 0
    assert json.loads(res.stdout) == json.loads(json.dumps(scenario_json_schema()))


def test_schema_out_file_is_the_published_one(tmp_path: Path) -> None:
    res = invoke("schema", "--out", str(tmp_path / "s.json"))
    assert res.exit_code == 0
    published = (ROOT / "docs" / "scenario.schema.json").read_text(encoding="utf-8")
    assert (tmp_path / "s.json").read_text(encoding="utf-8") == published, (
        "docs/scenario.schema.json is stale: run `utilon schema --out docs/scenario.schema.json`"
    )


def test_unwritable_output_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    res = CliRunner().invoke(app, ["simulate", str(ROOT / "examples" / "small-mapreduce.yaml"),
                                   "-p", "fifo", "--out", str(blocker / "run")])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and str(blocker) in lines[0]


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_max_wall_must_be_positive(tmp_path: Path, command: str) -> None:
    policy = ["--policy", "fifo"] if command == "simulate" else ["--policies", "fifo"]
    res = invoke(command, SMALL, *policy, "--max-wall", "0", "--out", str(tmp_path / "o"))
    assert res.exit_code == 2
    assert "--max-wall: --max-wall must be a positive number of seconds, got 0" in res.stderr
    assert not (tmp_path / "o").exists()


def test_max_wall_generous_enough_changes_nothing(tmp_path: Path) -> None:
    for limit in ([], ["--max-wall", "600"]):
        res = invoke("compare", SMALL, "--policies", "fifo,edf-p", *limit, "--jobs", "1",
                     "--out", str(tmp_path / str(len(limit))))
        assert res.exit_code == 0, res.output
    for p in ("fifo", "edf-p"):
        assert ((tmp_path / "0" / p / "jobs.csv").read_bytes()
                == (tmp_path / "2" / p / "jobs.csv").read_bytes())


@pytest.mark.parametrize(("argv", "says"), [
    (["simulate"], "utilon simulate: Missing argument 'scenario'."),
    (["simulate", "x.yaml", "--bogus"], "utilon simulate: No such option: --bogus"),
    (["frobnicate"], "utilon: No such command 'frobnicate'."),
    (["simulate", "x.yaml", "--seed", "abc"], "Invalid value for '--seed'"),
])
def test_command_line_mistakes_are_one_error_line(argv: list[str], says: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """What the ``utilon`` command prints for a mistake in its own arguments: one
    ``error:`` line naming the command and pointing at its help, exit 2 -- not a box."""
    from utilon.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ") and says in lines[0]
    assert "--help'" in lines[0] and "╭" not in lines[0]


def test_the_command_exits_0_on_help_and_on_success(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    from utilon.cli import main

    main(["--help"])  # returns: no SystemExit on success
    main(["policies"])
    assert "fifo" in capsys.readouterr().out


def test_option_names_a_user_can_guess(tmp_path: Path) -> None:
    """``--workers`` is ``--jobs``; ``--timeout`` and ``--max-wall`` are one option for
    ``simulate``, ``compare`` and ``run`` (issue 47): each spelling gives the same outputs."""
    for i, names in enumerate((["--jobs", "1", "--max-wall", "600"],
                               ["--workers", "1", "--timeout", "600"])):
        res = invoke("compare", SMALL, "--policies", "fifo", *names,
                     "--out", str(tmp_path / str(i)))
        assert res.exit_code == 0, res.output
    assert ((tmp_path / "0" / "fifo" / "jobs.csv").read_bytes()
            == (tmp_path / "1" / "fifo" / "jobs.csv").read_bytes())
    res = invoke("simulate", SMALL, "--policy", "fifo", "--timeout", "0")
    assert_clean_error(res, "--max-wall must be a positive number of seconds")
    for command in ("run", "simulate", "compare"):
        assert "--timeout" in invoke(command, "--help").output
        assert "--max-wall" in invoke(command, "--help").output


@pytest.mark.parametrize("deadline", [5, "0.5x"])
def test_an_impossible_deadline_is_refused_unless_accepted(tmp_path: Path,
                                                           deadline: Any) -> None:
    """Issue 47: a deadline before the job's critical path (map 60 s then reduce 30 s = 90 s)
    is one line and exit 2 in validate and simulate; `admission: accept` runs it and counts
    it in the summary."""
    doc: dict[str, Any] = {
        "name": "imp", "seed": 1,
        "cluster": {"machines": [{"id": "m", "count": 2, "capacity": {"slots": 4}}]},
        "workload": {"jobs": [
            {"id": "ok", "submit": 0, "utility": {"kind": "deadline", "deadline": "2x"},
             "stages": [{"name": "map", "tasks": 2, "duration": 10}]},
            {"id": "late", "submit": 3, "utility": {"kind": "deadline", "deadline": deadline},
             "stages": [{"name": "map", "tasks": 4, "duration": 60},
                        {"name": "reduce", "tasks": 1, "duration": 30}]}]}}
    p = tmp_path / "imp.yaml"
    p.write_text(yaml.safe_dump(doc), encoding="utf-8")
    for argv in (["validate", str(p)], ["simulate", str(p), "-p", "fifo", "--out",
                                        str(tmp_path / "o")]):
        line = assert_clean_error(invoke(*argv), str(p), "'late'", "needs at least 90 s",
                                  "admission: accept")
        assert "'ok'" not in line
    assert not (tmp_path / "o").exists()
    p.write_text(yaml.safe_dump({**doc, "admission": "accept"}), encoding="utf-8")
    res = invoke("validate", str(p))
    assert res.exit_code == 0 and "1 job(s) with a goal no schedule can meet" in res.stdout
    res = invoke("simulate", str(p), "-p", "fifo", "--out", str(tmp_path / "o"))
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["impossible_goals"] == 1 and summary["misses"] >= 1
    assert "goal no schedule can meet" in res.stderr


def test_run_backends_match_the_runner() -> None:
    from utilon.cli.app import BACKENDS
    from utilon.runner import BACKENDS as RUNNER_BACKENDS

    assert BACKENDS == RUNNER_BACKENDS
