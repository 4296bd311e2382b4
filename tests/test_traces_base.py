"""The importer machinery shared by every trace kind: windows, skip accounting, the class rule,
the scenario writer, --capacity with an imported cluster, and the `utilon trace` command."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from utilon.cli.app import app
from utilon.cli.trace import parse_seconds
from utilon.errors import UnknownNameError, UtilonError
from utilon.scenario.load import load_workload, read_data
from utilon.traces import ClassRule, SkipLog, TraceError, Window, importer, importer_kinds
from utilon.traces.api import ImportResult, _flow, write_scenario
from utilon.traces.base import TracePart, parse_size, standalone, work_of

KINDS = {"swim", "coflow-fb2010", "alibaba-2017", "alibaba-2017-servers",
         "google-2019-machines", "solar", "sls", "synth"}


def test_every_kind_the_issue_names_is_registered() -> None:
    assert set(importer_kinds()) >= KINDS
    for k in KINDS:
        cls = importer(k)
        assert cls.produces in ("workload", "cluster")
        assert cls.summary


def test_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="swim"):
        importer("swm")


def test_window_cuts_shifts_and_scales() -> None:
    w = Window(start=100, duration=50, arrival_scale=2)
    assert w.contains(100) and w.contains(149.9) and not w.contains(150)
    assert not w.contains(99)
    assert w.job_time(130) == 15
    assert Window().end == math.inf
    for bad in (dict(start=-1), dict(duration=0), dict(max_jobs=0), dict(arrival_scale=0)):
        with pytest.raises(TraceError):
            Window(**bad)  # type: ignore[arg-type]


def test_skiplog_tolerates_a_few_bad_rows_and_rejects_a_bad_file(tmp_path: Path) -> None:
    log = SkipLog(tmp_path / "t.csv", max_bad=0.1)
    for i in range(100):
        log.row()
        if i in (3, 4):
            log.bad(i + 1, "not a number")
        elif i < 10:
            log.filter(i + 1, "before --start")
        else:
            log.use()
    log.finish()
    assert log.as_dict()["malformed"] == {"not a number": {"count": 2, "first_line": 4}}
    assert "2 x not a number (first at line 4)" in " ".join(log.lines())
    bad = SkipLog(tmp_path / "t.csv", max_bad=0.1)
    for i in range(10):
        bad.row()
        bad.bad(i + 1, "wrong field count") if i < 5 else bad.use()
    with pytest.raises(TraceError) as e:
        bad.finish()
    assert f"{tmp_path / 't.csv'}:1" in e.value.one_line()
    empty = SkipLog(tmp_path / "e.csv")
    with pytest.raises(TraceError, match="no rows"):
        empty.finish()
    none_used = SkipLog(tmp_path / "n.csv")
    none_used.row()
    none_used.filter(1, "after --start+--duration")
    with pytest.raises(TraceError, match="none of the 1 rows"):
        none_used.finish()


def test_class_rule_is_seeded_and_follows_size() -> None:
    rule = ClassRule()
    a = [rule.assign(w, 10.0, np.random.default_rng(3)) for w in (10, 1e3, 1e6)]
    b = [rule.assign(w, 10.0, np.random.default_rng(3)) for w in (10, 1e3, 1e6)]
    assert a == b
    rng = np.random.default_rng(0)
    large = [rule.assign(1e6, 100.0, rng)["class"] for _ in range(400)]
    small = [rule.assign(1.0, 100.0, rng)["class"] for _ in range(400)]
    assert large.count("insensitive") > small.count("insensitive")
    assert small.count("critical") > large.count("critical")
    for cls, u in ((c, rule.assign(1.0, 50.0, np.random.default_rng(i)))
                   for i, c in enumerate(range(50))):
        del cls
        assert 1 <= u["priority"] <= 5
        if u["class"] == "insensitive":
            assert u["utility"]["kind"] == "constant"
        else:
            assert u["utility"]["deadline"] == "2x"
            decay = u["utility"]["mu"] * 50.0
            lo, hi = (4, 6) if u["class"] == "critical" else (0.01, 1)
            assert lo - 1e-6 <= decay <= hi + 1e-6
    step = ClassRule(utility="deadline", slack=3).assign(1.0, 5.0, np.random.default_rng(1))
    assert step["utility"]["kind"] == "deadline" and step["utility"]["deadline"] == "3x"


def test_standalone_and_work_of_match_the_builder_formula() -> None:
    stages = [{"name": "map", "tasks": 10, "duration": 5.0},
              {"name": "reduce", "durations": [3.0, 8.0]}]
    assert work_of(stages) == 61.0
    # 10 maps on 4 slots: max(5, 50/4) = 12.5; then the longest reducer: 8
    assert standalone(stages, 4) == pytest.approx(20.5)


def test_parse_size_and_seconds() -> None:
    assert parse_size("128MiB") == 128 * 2**20
    assert parse_size("1.5GB") == 1.5e9
    assert parse_size(4096) == 4096
    with pytest.raises(ValueError, match="not a size"):
        parse_size("12 parsecs")
    assert parse_seconds("90m", "--start") == 5400
    assert parse_seconds("1.5h", "--start") == 5400
    assert parse_seconds("2d", "--duration") == 172800
    assert parse_seconds("7", "--start") == 7
    with pytest.raises(UtilonError, match="--start"):
        parse_seconds("soon", "--start")


def test_flow_lines_are_yaml_that_reads_floats_as_floats() -> None:
    obj = {"id": "j1e5", "x": 1e-05, "y": 3e20, "z": [2.5e-7, 4]}
    back = yaml.safe_load(_flow(obj))
    assert back == obj


def _result(doc: dict, tmp_path: Path) -> ImportResult:
    return ImportResult("swim", tmp_path / "t.tsv", doc, SkipLog(tmp_path / "t.tsv"), TracePart())


def test_written_cluster_replaces_a_scenarios_cluster(tmp_path: Path) -> None:
    scen = tmp_path / "s.yaml"
    scen.write_text(yaml.safe_dump({
        "name": "s", "cluster": {"machines": [{"id": "a", "capacity": {"slots": 1}}]},
        "workload": {"jobs": [{"id": "j", "submit": 0,
                               "stages": [{"name": "map", "tasks": 4, "duration": 10}]}]}}))
    cluster = {"machines": [{"id": f"m{i}", "capacity": {"slots": 2}} for i in range(3)],
               "capacity": [{"at": 5.0, "action": "leave", "machines": ["m2"]}]}
    out = write_scenario(_result({"metadata": {"real": ["x"]}, "cluster": cluster}, tmp_path),
                         tmp_path / "c.yaml")
    assert read_data(out)["cluster"] == cluster
    w = load_workload(scen, capacity=out)
    assert [m.id for m in w.cluster.machines] == ["m0", "m1", "m2"]
    assert len(w.cluster.timeline) == 1


def test_cli_trace_kinds_and_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(app, ["trace", "kinds"])
    assert r.exit_code == 0, r.output
    for k in KINDS:
        assert k in r.output
    r = runner.invoke(app, ["trace", "import", "nope", str(tmp_path / "x")])
    assert r.exit_code == 2 and "unknown trace kind 'nope'" in r.output
    r = runner.invoke(app, ["trace", "import", "swim", str(tmp_path / "missing.tsv")])
    assert r.exit_code == 2 and "missing.tsv: file not found" in r.output
    assert "Traceback" not in r.output
    bad = tmp_path / "bad.tsv"
    bad.write_text("job0\t1\t1\t100\t0\t5\n")
    r = runner.invoke(app, ["trace", "import", "swim", str(bad), "--set", "warp=9"])
    assert r.exit_code == 2 and "--set warp" in r.output and "block_size" in r.output
    r = runner.invoke(app, ["trace", "import", "swim", str(bad), "--start", "soon"])
    assert r.exit_code == 2 and "--start" in r.output
    r = runner.invoke(app, ["trace", "import", "swim", str(bad), "--utility", "fancy"])
    assert r.exit_code == 2 and "unknown utility" in r.output
