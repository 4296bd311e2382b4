"""Plugins (issue 49): ``module:Class`` policies, entry points of installed packages, and
``utilon check-policy``.

The example plugin in ``examples/plugin`` is installed into the test environment (``make
test`` does it; the ``example_plugin`` fixture does it when it is missing) and used end to end
from the command line, in separate processes as a user runs it: trace import, simulate,
compare in parallel processes, plan, a live run and the service.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import logging
import os
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builders import make_cluster, make_job, wait_for
from utilon.checks import check_policy, read_case, replay, write_case
from utilon.core import ClusterSnapshot, Decision, Grant
from utilon.errors import ParameterError, ScenarioError, UnknownNameError
from utilon.plugins import PluginError, refresh
from utilon.policies import (
    Policy,
    make_policy,
    origin,
    plugin_policies,
    policy_class,
    policy_names,
    world_of,
)

if TYPE_CHECKING:  # on purpose: BadHints' hint names it, and it is not there at run time
    from collections import OrderedDict as Hidden

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "examples" / "plugin"
TESTS = Path(__file__).resolve().parent


# --------------------------------------------------------------------- policies of this file
class NeverGrants(Policy):
    """Deliberately broken: it never grants a job anything (check-policy must find it)."""

    name = "never-grants"
    summary = "grants nothing"

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        return Decision()


class Tunable(Policy):
    """First come, first served, with one parameter to validate."""

    name = "tunable"
    summary = "FCFS with a parameter"

    def __init__(self, level: int = 1) -> None:
        if level < 1:
            raise ValueError(f"level must be >= 1, got {level}")
        self.level = level

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        return Decision(grants=tuple(Grant(j.id) for j in snapshot.jobs))


class BadHints(Policy):
    """A constructor hint that names a type imported only for type checkers."""

    name = "bad-hints"
    summary = "unresolvable hints"

    def __init__(self, order: Hidden | None = None) -> None:
        self.order = order

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        return Decision()


NOT_A_POLICY = 42


def _env(**extra: str) -> dict[str, str]:
    """The environment of a ``utilon`` subprocess: this file's directory importable (for
    ``test_plugins:NeverGrants``), plus ``extra``."""
    path = os.pathsep.join([str(TESTS), *extra.pop("PYTHONPATH", "").split(os.pathsep)])
    return {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep), **extra}


def utilon(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
           timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``utilon ARGS`` in a new process, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "utilon.cli", *args], cwd=cwd or ROOT,
                          env=env or _env(), capture_output=True, text=True, timeout=timeout,
                          check=False)


# --------------------------------------------------------------------- module:Class
def test_a_reference_is_a_policy_name_with_parameters_checked_like_a_builtins() -> None:
    ref = "test_plugins:Tunable"
    assert policy_class(ref) is Tunable and world_of(ref) == "slot"
    assert origin(ref) == "reference" and origin("fifo") == "utilon"
    assert make_policy(ref, {"level": "3"}).level == 3  # type: ignore[attr-defined]
    # the same three one-line errors a built-in gives (cf. test_policies)
    with pytest.raises(ParameterError, match=r"policy 'test_plugins:Tunable' has no parameter "
                                             r"'levl'; it accepts: level"):
        make_policy(ref, {"levl": 2})
    with pytest.raises(ParameterError, match=r"parameter 'level'='x': Input should be a valid "
                                             r"integer"):
        make_policy(ref, {"level": "x"})
    with pytest.raises(ParameterError, match=r"policy 'test_plugins:Tunable': level must be "
                                             r">= 1"):
        make_policy(ref, {"level": 0})
    assert ref not in policy_names()  # `--policies all` does not grow


@pytest.mark.parametrize(("ref", "says"), [
    ("test_plugins:Nope", "module test_plugins has no 'Nope'"),
    ("no_such_module_xyz:Policy", "no module named 'no_such_module_xyz'"),
    ("test_plugins:NOT_A_POLICY", "42 is not a policy class"),
    ("test_plugins:Policy", "has no name"),
    ("test_plugins:BadHints", "constructor's type hints do not resolve (NameError"),
    ("not a module:X", "is not a policy reference"),
])
def test_a_bad_reference_is_one_line(ref: str, says: str) -> None:
    with pytest.raises(PluginError) as e:
        make_policy(ref, where="x.yaml: policy")
    line = e.value.one_line()
    assert says in line and "\n" not in line and line.startswith("x.yaml: policy")


def test_an_unknown_name_still_lists_the_builtins() -> None:
    with pytest.raises(UnknownNameError, match="unknown policy 'fiffo'; valid: alsched"):
        policy_class("fiffo")


def test_a_scenario_names_a_reference(tmp_path: Path) -> None:
    """A scenario's policy: and policies: sections take a reference (compare's spawned
    workers import it themselves: test_compare_in_parallel_processes_...)."""
    from utilon.runner import policy_for, run_policy
    from utilon.scenario import load_workload

    ref = "test_plugins:Tunable"
    p = tmp_path / "s.yaml"
    p.write_text(json.dumps({
        "name": "ref", "cluster": {"machines": [{"id": "m", "count": 2,
                                                 "capacity": {"slots": 2}}]},
        "workload": {"jobs": [{"id": f"j{i}", "submit": i, "stages": [
            {"name": "map", "tasks": 3, "duration": 5}]} for i in range(4)]},
        "policy": {"name": ref, "params": {"level": 3}},
        "policies": {ref: {"level": 2}}}), encoding="utf-8")
    wl = load_workload(p)
    assert policy_for(wl, ref).level == 3  # type: ignore[attr-defined]
    summary = run_policy(wl, ref).summary
    assert summary["policy"] == "tunable" and summary["params"] == {"level": 3}
    assert summary["finished"] == 4


# --------------------------------------------------------------------- check-policy
def test_check_policy_finds_the_liveness_bug_of_a_policy_that_never_grants(
        tmp_path: Path) -> None:
    report = check_policy("test_plugins:NeverGrants", examples=10, seed=3)
    f = report.failure
    assert f is not None and f.property == "liveness", f
    assert "never finished" in f.message
    # hypothesis shrank it: one job of one task on one machine is all it takes
    assert len(f.scenario.jobs) == 1 and len(f.scenario.cluster.machines) == 1
    case = tmp_path / "case.json"
    write_case(case, report)
    name, params, sc, mode, seed = read_case(case)
    assert (name, params, sc, mode, seed) == ("test_plugins:NeverGrants", {}, f.scenario,
                                              f.estimates, f.seed)
    again = replay(case).failure
    assert again is not None and again.property == "liveness"
    assert replay(case, "fifo").failure is None  # the same scenario is fine under FIFO


def test_check_policy_passes_a_correct_policy() -> None:
    report = check_policy("test_plugins:Tunable", {"level": 2}, examples=8, seed=1)
    assert report.failure is None and report.examples == 8


def test_check_policy_command(tmp_path: Path) -> None:
    case = tmp_path / "never.json"
    res = utilon("check-policy", "test_plugins:NeverGrants", "--examples", "5", "--out",
                 str(case))
    assert res.returncode == 1, res.stderr
    assert "FAILED liveness:" in res.stdout and "never finished" in res.stdout
    assert "smallest failing scenario: 1 machine(s)" in res.stdout and case.exists()
    res = utilon("check-policy", "fifo", "--replay", str(case))  # the case, under FIFO
    assert res.returncode == 0 and res.stdout.startswith("ok: fifo"), res.stdout


# --------------------------------------------------------------------- broken plugins
def _fake_dist(root: Path, name: str, entry_points: str) -> Path:
    """An installed distribution that exists only as metadata on ``root`` (a sys.path entry)."""
    info = root / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    return root


BROKEN = """\
[utilon.policies]
broken-import = no_such_module_xyz:Policy
wrong-name = test_plugins:Tunable
fifo = test_plugins:Tunable

[utilon.traces]
broken-trace = test_plugins:NOT_A_POLICY

[utilon.jobs]
broken-kind = test_plugins:Tunable
"""


@pytest.fixture
def broken_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = _fake_dist(tmp_path / "site", "broken-plugins", BROKEN)
    monkeypatch.syspath_prepend(str(root))
    refresh()
    yield root
    refresh()


def test_a_broken_plugin_is_one_warning_and_never_stops_the_builtins(
        broken_plugins: Path, caplog: pytest.LogCaptureFixture) -> None:
    from utilon.jobs.kinds import job_kinds
    from utilon.traces import importer_kinds

    with caplog.at_level(logging.WARNING, logger="utilon.plugins"):
        listed = plugin_policies()
        kinds = importer_kinds()
        jobs = [k.kind for k in job_kinds()]
    assert not {"broken-import", "wrong-name", "fifo"} & set(listed)
    assert "swim" in kinds and "broken-trace" not in kinds
    assert "wordcount" in jobs and "broken-kind" not in jobs
    lines = [r.getMessage() for r in caplog.records]
    for name, why in (("broken-import", "ModuleNotFoundError"),
                      ("wrong-name", "the policy's name is 'tunable'"),
                      ("'fifo'", "a built-in policy's name; the built-in is used"),
                      ("broken-trace", "is not a trace importer"),
                      ("broken-kind", "is not a job kind")):
        hit = [x for x in lines if name in x]
        assert len(hit) == 1 and why in hit[0] and "broken-plugins 0.1" in hit[0], (name, lines)
    assert all("\n" not in x for x in lines)
    assert make_policy("fifo").name == "fifo"  # the built-in, not the impostor
    with pytest.raises(PluginError, match=r"broken-import.*is broken: ModuleNotFoundError"):
        make_policy("broken-import")


def test_a_broken_plugin_in_the_command_line(broken_plugins: Path) -> None:
    env = _env(PYTHONPATH=str(broken_plugins))
    res = utilon("policies", env=env)
    assert res.returncode == 0 and "fifo" in res.stdout, res.stderr
    warnings = [x for x in res.stderr.splitlines() if "broken-plugins" in x]
    assert len(warnings) == 3 and all(x.startswith("WARNING") for x in warnings), res.stderr
    res = utilon("simulate", "examples/small-mapreduce.yaml", "-p", "broken-import", "--out",
                 str(broken_plugins / "o"), env=env)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "broken-import" in res.stderr, res.stderr


def test_an_unknown_job_kind_is_one_line() -> None:
    from utilon.scenario.load import parse_scenario

    doc = {"name": "x", "cluster": {"machines": [{"id": "m", "capacity": {"slots": 1}}]},
           "workload": {"jobs": [{"id": "a", "submit": 0, "run": {"kind": "wordcont"}}]}}
    with pytest.raises(ScenarioError, match=r"x.yaml: workload.jobs\[0\].run: unknown job kind "
                                            r"'wordcont'; valid: wordcount, grep"):
        parse_scenario(doc, "x.yaml")


# --------------------------------------------------------------------- the example plugin
@pytest.fixture(scope="session")
def example_plugin() -> str:
    """The example plugin, installed in this environment (``make test`` installs it; when it
    is missing it is installed here, editable, without network: build isolation off)."""
    try:
        importlib.metadata.distribution("utilon-example-plugin")
    except importlib.metadata.PackageNotFoundError:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                        "--no-build-isolation", "--no-deps", "-e", str(PLUGIN)], check=True)
        import site

        site.addsitedir(sysconfig.get_paths()["purelib"])  # the new .pth of the editable
        refresh()
    module = importlib.import_module("utilon_example_plugin")
    assert Path(module.__file__ or "").resolve().is_relative_to(PLUGIN), (
        "utilon_example_plugin is installed from elsewhere: pip install -e examples/plugin")
    return importlib.metadata.version("utilon-example-plugin")


def test_the_example_plugin_is_registered(example_plugin: str) -> None:
    from utilon.jobs.kinds import job_kinds
    from utilon.traces import importer_kinds

    dist = f"utilon-example-plugin {example_plugin}"
    cls, origin_ = plugin_policies("slot")["shortest-first"]
    assert cls.__module__ == "utilon_example_plugin.policy"
    assert origin_ == dist and origin("shortest-first") == dist
    assert make_policy("shortest-first", {"aging": 0.5}).params() == {"aging": 0.5}
    with pytest.raises(ParameterError, match="aging must be >= 0"):
        make_policy("shortest-first", {"aging": -1})
    assert "shortest-first" not in policy_names()
    assert "simple-csv" in importer_kinds()
    assert [k.origin for k in job_kinds() if k.kind == "sum-squares"] == [dist]


def test_listings_show_the_plugin_and_its_distribution(example_plugin: str) -> None:
    from typer.testing import CliRunner

    from utilon.cli import app

    dist = f"utilon-example-plugin {example_plugin}"
    for args, name in ((["policies"], "shortest-first"), (["trace", "kinds"], "simple-csv"),
                       (["job-kinds"], "sum-squares")):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        row = next(x for x in res.stdout.splitlines() if f" {name} " in x)
        assert dist in row, row
        assert any(" utilon " in x for x in res.stdout.splitlines())  # beside the built-ins


@pytest.fixture(scope="module")
def csv_scenario(tmp_path_factory: pytest.TempPathFactory, example_plugin: str) -> Path:
    out = tmp_path_factory.mktemp("plugin") / "csv.yaml"
    res = utilon("trace", "import", "simple-csv", str(PLUGIN / "sample.csv"), "--out",
                 str(out))
    assert res.returncode == 0, res.stderr
    assert "10 of 10 rows used" in res.stderr
    return out


def test_simulate_and_plan_with_the_plugin_policy(csv_scenario: Path, tmp_path: Path) -> None:
    res = utilon("simulate", str(csv_scenario), "-p", "shortest-first", "--param",
                 "aging=0.1", "--out", str(tmp_path / "sim"))
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text(encoding="utf-8"))
    assert summary["policy"] == "shortest-first" and summary["params"] == {"aging": 0.1}
    assert summary["finished"] == 10
    res = utilon("plan", str(csv_scenario), "-p", "shortest-first", "--target", "misses<=0",
                 "--out", str(tmp_path / "plan"))
    assert res.returncode == 0, res.stderr
    plan = json.loads((tmp_path / "plan" / "plan.json").read_text(encoding="utf-8"))
    assert plan["policy"] == "shortest-first"


def test_compare_in_parallel_processes_with_plugin_and_reference(csv_scenario: Path,
                                                                 tmp_path: Path) -> None:
    names = "fifo,shortest-first,test_plugins:Tunable"
    res = utilon("compare", str(csv_scenario), "--policies", names, "--jobs", "2", "--out",
                 str(tmp_path / "cmp"))
    assert res.returncode == 0, res.stderr
    rows = json.loads((tmp_path / "cmp" / "comparison.json").read_text(encoding="utf-8"))
    assert [r["policy"] for r in rows] == ["fifo", "shortest-first", "tunable"]
    # shortest remaining work first answers the small jobs sooner than FIFO on this trace
    assert rows[1]["response_mean"] < rows[0]["response_mean"]


@pytest.mark.live
def test_run_live_jobs_of_the_plugin_kind_under_the_plugin_policy(example_plugin: str,
                                                                  tmp_path: Path) -> None:
    res = utilon("run", str(PLUGIN / "live.yaml"), "--backend", "local", "--out",
                 str(tmp_path / "live"))
    assert res.returncode == 0, res.stdout + res.stderr
    summary = json.loads((tmp_path / "live" / "summary.json").read_text(encoding="utf-8"))
    assert summary["policy"] == "shortest-first" and summary["finished"] == 3
    assert summary["verified"] == {"ok": 3, "failed": 0, "unverifiable": 0, "plain": 0}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.live
def test_serve_the_plugin_policy_and_a_job_of_the_plugin_kind(example_plugin: str,
                                                              tmp_path: Path) -> None:
    from utilon.service.client import Client, ClientError
    from utilon.service.tenants import create_token

    token = create_token(tmp_path / "tenants.yaml", "team")
    port = _free_port()
    with (tmp_path / "serve.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "utilon.cli", "serve", "--policy", "shortest-first",
             "--param", "aging=0.5", "--db", str(tmp_path / "u.db"), "--tenants",
             str(tmp_path / "tenants.yaml"), "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env=_env())
    try:
        with Client(f"http://127.0.0.1:{port}", token) as c:
            def up() -> bool:
                try:
                    return bool(c.health()["status"] == "ok")
                except ClientError:
                    return False

            wait_for(up, timeout=60, what="utilon serve")
            assert c.policy()["name"] == "shortest-first"
            assert c.policy()["params"] == {"aging": 0.5}
            c.submit({"id": "sq", "utility": {"kind": "deadline", "deadline": 60},
                      "run": {"kind": "sum-squares", "n": 20000, "maps": 2}})
            wait_for(lambda: c.job("sq")["state"] == "finished", timeout=60, what="sq")
            assert c.job("sq")["result"]["verification"]["ok"] is True
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.ray
@pytest.mark.slow
def test_compare_on_ray_workers_with_plugin_and_reference(csv_scenario: Path,
                                                          tmp_path: Path) -> None:
    pytest.importorskip("ray")
    res = utilon("compare", str(csv_scenario), "--policies",
                 "shortest-first,test_plugins:Tunable", "--ray-address", "local", "--out",
                 str(tmp_path / "ray"), timeout=600)
    assert res.returncode == 0, res.stderr
    rows = json.loads((tmp_path / "ray" / "comparison.json").read_text(encoding="utf-8"))
    assert [r["policy"] for r in rows] == ["shortest-first", "tunable"]


def test_the_plugin_policy_keeps_utilons_properties(example_plugin: str) -> None:
    assert check_policy("shortest-first", {"aging": 0.2}, examples=10).failure is None


def test_make_job_builders_still_work_with_a_reference() -> None:
    """A reference runs in the simulator like any policy (builders.run takes a name)."""
    from builders import run

    res = run(make_cluster(1), [make_job("a"), make_job("b", submit=1)],
              "test_plugins:Tunable", level=2)
    assert all(j.finish is not None for j in res.core.jobs.values())
