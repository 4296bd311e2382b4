"""The ``solar`` importer on slices of the real NREL SERF East PV series.

Slices come from ``../shared/data/nrel_pvdaq_serf_east/serf_east_15min_ac_power.csv`` (header +
15-minute rows from 2016-07-01 00:00 -07:00): 97 lines = one day, 673 lines = one week.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import head_lines
from utilon.runner import run_policy
from utilon.scenario.build import build_cluster, build_workload
from utilon.scenario.load import parse_scenario
from utilon.scenario.spec import ClusterSpec
from utilon.traces import TraceError, Window, import_trace

DAY = 86_400.0
SERIES = "nrel_pvdaq_serf_east/serf_east_15min_ac_power.csv"


@pytest.fixture(scope="module")
def real(shared_data: Path) -> Path:
    return shared_data / SERIES


@pytest.fixture(scope="module")
def week(real: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return head_lines(real, 673, tmp_path_factory.mktemp("solar") / "week.csv")


@pytest.fixture(scope="module")
def day(real: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return head_lines(real, 97, tmp_path_factory.mktemp("solar") / "day.csv")


def replay(cluster: dict[str, Any]) -> list[tuple[float, int]]:
    """(time, machines up) after each event of a scale-out timeline, starting at t=0."""
    up = {m["id"] for m in cluster["machines"] if not m.get("down")}
    out = [(0.0, len(up))]
    for ev in cluster["capacity"]:
        ids = set(ev["machines"])
        if ev["action"] == "join":
            assert not ids & up
            up |= ids
        else:
            assert ev["action"] == "leave" and ids <= up
            up -= ids
        out.append((ev["at"], len(up)))
    return out


def test_one_day_scale_out(day: Path) -> None:
    r = import_trace("solar", day)
    cl = r.document["cluster"]
    assert r.log.rows == 96 and r.log.used == 96 and not r.log.malformed
    assert len(cl["machines"]) == 10
    # Midnight: no sun, half the cluster on grid power; the top-numbered half is down.
    assert [m.get("down", False) for m in cl["machines"]] == [False] * 5 + [True] * 5
    states = replay(cl)
    assert min(n for _, n in states) == r.stats["machines_up_min"] == 5
    assert max(n for _, n in states) == r.stats["machines_up_max"] > 5
    ats = [e["at"] for e in cl["capacity"]]
    assert ats == sorted(ats) and ats[0] > 0 and ats[-1] < DAY
    assert all(at % 900 == 0 for at in ats)  # on sample times
    # Sunrise after 05:00 and the cluster back to half before midnight.
    assert ats[0] >= 5 * 3600 and states[-1][1] == 5
    assert 0.5 <= r.stats["min_factor"] <= r.stats["mean_factor"] <= r.stats["max_factor"] <= 1
    ClusterSpec.model_validate(cl)
    build_cluster(ClusterSpec.model_validate(cl))
    meta = r.document["metadata"]
    assert any("measured AC power" in s for s in meta["real"])
    assert any("negative power" in s for s in meta["assumed"])
    assert meta["trace"]["rows"]["used"] == 96


@pytest.mark.parametrize("mode, action", [("scale-up", "speed"), ("scale-capacity", "scale")])
def test_one_week_fixed_nodes(week: Path, mode: str, action: str) -> None:
    r = import_trace("solar", week, machines=4, options={"mode": mode, "slots": 4, "cpu": 16})
    cl = r.document["cluster"]
    assert r.log.used == 672
    assert all(not m.get("down") for m in cl["machines"]) and len(cl["machines"]) == 4
    assert cl["machines"][0]["capacity"] == {"slots": 4.0, "cpu": 16.0}
    evs = cl["capacity"]
    assert {e["action"] for e in evs} == {action} and {e["machines"] for e in evs} == {"all"}
    # Midnight start: the first event sets the night level at t = 0.
    assert evs[0] == {"at": 0.0, "action": action, "machines": "all", "factor": 0.5}
    factors = [e["factor"] for e in evs]
    assert min(factors) == 0.5 and max(factors) <= 1
    # the dead band: consecutive levels differ by >= min_change unless one is an extreme
    for a, b in itertools.pairwise(factors):
        assert abs(a - b) >= 0.02 - 1e-4 or b in (0.5, 1.0)
    assert 7 <= sum(1 for f in factors if f == 0.5) <= 8  # every night at the night level
    assert r.stats["machines_up_min"] == r.stats["machines_up_max"] == 4
    build_cluster(ClusterSpec.model_validate(cl))


def test_week_scale_out_follows_the_factor(week: Path) -> None:
    r = import_trace("solar", week, machines=20, options={"brown": 0.2, "min_change": 0.0})
    states = replay(r.document["cluster"])
    assert states[0][1] == 4  # round(20 x 0.2)
    assert r.stats["machines_up_max"] <= 20 and r.stats["machines_up_min"] == 4
    assert len(r.document["cluster"]["capacity"]) == r.stats["events"]


def test_at_least_one_machine_and_nameplate(day: Path) -> None:
    r = import_trace("solar", day, machines=3, options={"brown": 0.0, "normalise": 2000})
    assert r.stats["machines_up_min"] == 1  # no grid power at night, still one machine
    assert r.stats["max_factor"] == 1.0  # the noon peak is above the 2 kW "nameplate"
    assert any("capped at 1" in s for s in r.document["metadata"]["assumed"])


def test_window_and_date(real: Path) -> None:
    by_start = import_trace("solar", real, window=Window(start=2 * DAY, duration=DAY))
    by_date = import_trace("solar", real, window=Window(duration=DAY),
                           options={"date": "2016-07-03"})
    assert by_start.document["cluster"] == by_date.document["cluster"]
    assert by_start.log.used == 96
    assert by_start.log.filtered["before the window start"] == 2 * 96
    with pytest.raises(TraceError, match="not both"):
        import_trace("solar", real, window=Window(start=10), options={"date": "2016-07-03"})
    with pytest.raises(TraceError, match="before the series starts"):
        import_trace("solar", real, options={"date": "2016-06-30"})
    # A start between samples holds the sample before it; events keep their real times.
    mid = import_trace("solar", real, window=Window(start=2 * DAY + 450, duration=DAY))
    assert mid.log.used == 97
    assert all(e["at"] % 900 == 450 for e in mid.document["cluster"]["capacity"])
    with pytest.raises(TraceError, match="none of the"):
        import_trace("solar", real, window=Window(start=200 * DAY))


def test_malformed_rows_skipped_and_reported(week: Path, tmp_path: Path) -> None:
    bad = head_lines(week, 673, tmp_path / "bad.csv", extra=[
        "2016-07-08 00:00:00-07:00,n/a",     # line 674: power not a number
        "yesterday,12.5",                    # line 675: bad timestamp
        "2016-07-07 23:00:00-07:00,1.0",     # line 676: goes back in time
        "", ""])                             # blank trailing lines are not rows
    r = import_trace("solar", bad, max_bad=0.01)
    assert r.log.used == 672 and r.log.rows == 675
    rows = r.document["metadata"]["trace"]["rows"]["malformed"]
    assert rows == {"power is not a number": {"count": 1, "first_line": 674},
                    "bad timestamp": {"count": 1, "first_line": 675},
                    "timestamp not after the previous row": {"count": 1, "first_line": 676}}
    with pytest.raises(TraceError) as ei:
        import_trace("solar", bad, max_bad=0.001)
    assert f"{bad}:674" in ei.value.one_line()


def test_gap_holds_the_last_value(day: Path, tmp_path: Path) -> None:
    lines = day.read_text().splitlines()
    gappy = tmp_path / "gap.csv"
    gappy.write_text("\n".join(lines[:41] + lines[49:]) + "\n")  # drop 2 h around 10:00
    r = import_trace("solar", gappy)
    assert r.stats["gaps"] == 1 and r.log.used == 88
    assert any("gaps" in s and "holds" in s for s in r.document["metadata"]["assumed"])


def test_garbage_file_fails_naming_file_and_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.csv"
    junk.write_text("measured_on,ac_power\nhello,world\nfoo,bar\nbaz,1\n")
    with pytest.raises(TraceError) as ei:
        import_trace("solar", junk)
    assert f"{junk}:2" in ei.value.one_line() and "malformed" in ei.value.one_line()
    noheader = tmp_path / "noheader.csv"
    noheader.write_text("when,watts\n2016-07-01 00:00:00-07:00,1\n")
    with pytest.raises(TraceError, match="no column 'ac_power'"):
        import_trace("solar", noheader)
    dark = tmp_path / "dark.csv"
    dark.write_text("measured_on,ac_power\n2016-07-01 00:00:00-07:00,-1\n"
                    "2016-07-01 00:15:00-07:00,-2\n")
    with pytest.raises(TraceError, match="never positive"):
        import_trace("solar", dark)
    with pytest.raises(TraceError, match="unknown option"):
        import_trace("solar", dark, options={"bronw": 0.3})


SMALL = {
    "name": "small-slots",
    "seed": 1,
    "cluster": {"machines": [{"id": "m", "count": 2, "capacity": {"slots": 4}}]},
    "workload": {"jobs": [
        {"id": f"j{i}", "submit": i * 3600.0, "class": "sensitive", "priority": 1 + i % 3,
         "utility": {"kind": "deadline", "deadline": "3x", "value": 1},
         "stages": [{"name": "map", "tasks": 6 + i, "duration": 900.0,
                     "demand": {"slots": 1}},
                    {"name": "reduce", "tasks": 2, "duration": 600.0,
                     "demand": {"slots": 1}}]}
        for i in range(12)]},
}


@pytest.mark.parametrize("mode", ["scale-out", "scale-up", "scale-capacity"])
def test_with_scenario_build_and_simulate(day: Path, tmp_path: Path, mode: str) -> None:
    scen = tmp_path / "small.json"
    scen.write_text(json.dumps(SMALL))
    r = import_trace("solar", day, with_scenario=scen, machines=4, options={"mode": mode})
    assert r.is_scenario and r.document["metadata"]["workload_from"] == str(scen)
    spec = parse_scenario(json.loads(json.dumps(r.document)), "imported")
    w = build_workload(spec)
    assert len(w.cluster.machines) == 4
    out = run_policy(w, "fifo")
    assert {row["id"] for row in out.rows} == {j["id"] for j in SMALL["workload"]["jobs"]}
    assert not out.result.stopped_early
    assert all(row["finish"] is not None for row in out.rows)



@given(start=st.integers(0, 6 * 96), length=st.integers(1, 4 * 96),
       mode=st.sampled_from(["scale-out", "scale-up", "scale-capacity"]),
       brown=st.sampled_from([0.0, 0.3, 0.5, 1.0]), n=st.integers(1, 12))
def test_property_any_window_gives_a_valid_cluster(week: Path, start: int, length: int,
                                                   mode: str, brown: float, n: int) -> None:
    r = import_trace("solar", week, window=Window(start=start * 900.0, duration=length * 900.0),
                     machines=n, options={"mode": mode, "brown": brown})
    cl = r.document["cluster"]
    cluster = build_cluster(ClusterSpec.model_validate(cl))
    assert len(cluster.machines) == n
    ats = [e["at"] for e in cl["capacity"]]
    assert ats == sorted(ats) and all(0 <= a < length * 900.0 for a in ats)
    assert r.log.used == min(length, 672 - start)
    if mode == "scale-out":
        assert all(1 <= up <= n for _, up in replay(cl))
    else:
        assert all(brown - 1e-4 <= e["factor"] <= 1 for e in cl["capacity"])
    if brown == 1.0:
        assert not cl["capacity"] and r.stats["mean_factor"] == 1.0
    assert math.isfinite(r.stats["mean_factor"])


def test_cluster_document_written_and_used_as_capacity_file(day: Path, tmp_path: Path) -> None:
    """Without a scenario the import is a cluster document that --capacity FILE accepts."""
    from utilon.scenario.load import with_capacity_file
    from utilon.traces import write_scenario

    r = import_trace("solar", day, machines=4)
    assert not r.is_scenario and set(r.document) == {"metadata", "cluster"}
    out = write_scenario(r, tmp_path / "solar-cluster.yaml")
    spec = with_capacity_file(parse_scenario(SMALL, "small"), out)
    w = build_workload(spec)
    assert len(w.cluster.machines) == 4 and len(w.cluster.initially_down) == 2
    assert len(w.cluster.timeline) == sum(len(e["machines"])
                                          for e in r.document["cluster"]["capacity"])
