"""``google-2019-machines``: Google clusterdata-2019 cell a machine events -> a cluster with a
capacity timeline, on slices of the real table (and the whole file)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import head_lines
from utilon.runner import run_policy
from utilon.scenario import build_workload, parse_scenario
from utilon.scenario.build import build_cluster
from utilon.scenario.spec import ClusterSpec
from utilon.traces import TraceError, Window, import_trace
from utilon.traces.base import Common, SkipLog
from utilon.traces.google import Google2019Machines, GoogleOptions

EVENTS = "google_2019_machine_events/machine_events-000000000000.json.gz"
KIND = "google-2019-machines"
T0 = 600_000_000  # trace start, in microseconds since the time origin
ALL = {"default_machines": None}


def ev(t: int, mid: str, typ: int, cap: tuple[float, float] | None = None) -> str:
    e: dict[str, Any] = {"time": str(t), "machine_id": mid, "type": str(typ),
                         "switch_id": "s", "platform_id": "p"}
    if cap is not None:
        e["capacity"] = {"cpus": cap[0], "memory": cap[1]}
    return json.dumps(e)


def every_nth(src: Path, k: int, dest: Path) -> Path:
    """Every k-th line of the real (gzip) table as a plain test file: all event types, in the
    file's own (unsorted) order, with sequences broken the way a partial export breaks them."""
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        dest.write_text("".join(ln for i, ln in enumerate(fh) if i % k == 0), encoding="utf-8")
    return dest


def valid_timeline(cluster: dict[str, Any]) -> None:
    build_cluster(ClusterSpec.model_validate(cluster))  # raises on join-while-up etc.


@pytest.fixture(scope="module")
def sliced(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return every_nth(shared_data / EVENTS, 10, tmp_path_factory.mktemp("g") / "ev.json")


@pytest.fixture(scope="module")
def crafted(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 100 real lines (ADDs without capacity) plus events written to test every
    rule: lines 101.. below."""
    a, b, c = "9000000001", "9000000002", "9000000003"
    extra = [
        ev(0, a, 1, (1, 0.5)),                        # 101 present before the trace
        ev(T0 + 100_000_000, a, 2, (1, 0.5)),         # 102 leave at 100 s
        ev(T0 + 200_000_000, a, 2, (1, 0.5)),         # 103 REMOVE of a down machine
        ev(T0 + 350_000_000, a, 1, (1, 0.5)),         # 104 ADD of an up machine (after 105)
        ev(T0 + 300_000_000, a, 1, (1, 0.5)),         # 105 join at 300 s (lines unsorted)
        ev(T0 + 400_000_000, a, 3, (0.5, 0.5)),       # 106 cpus halved: scale 0.5
        ev(T0 + 450_000_000, a, 3, (0.5, 0.25)),      # 107 memory only: not replayed
        ev(T0 + 500_000_000, b, 1),                   # 108 ADD without capacity ...
        ev(T0 + 502_000_000, b, 3, (0.25, 0.125)),    # 109 ... which follows in an UPDATE
        ev(0, c, 1),                                  # 110 never any capacity
        json.dumps({"time": "5", "machine_id": c, "type": "0"}),  # 111 unknown type
        '{"time": "7", "machine_id"',                 # 112 broken JSON
    ]
    return head_lines(shared_data / EVENTS, 100, tmp_path_factory.mktemp("g") / "c.json",
                      extra)


# ----------------------------------------------------------------------------- the rules
def test_crafted_events(crafted: Path) -> None:
    r = import_trace(KIND, crafted, options=ALL)
    c = r.document["cluster"]
    machines = {m["id"]: m for m in c["machines"]}
    assert machines["m9000000001"] == {"id": "m9000000001",
                                       "capacity": {"cpu": 1.0, "mem": 0.5, "slots": 16}}
    # B's ADD has no capacity: it takes the capacity the machine reports next
    assert machines["m9000000002"] == {"id": "m9000000002", "down": True,
                                       "capacity": {"cpu": 0.25, "mem": 0.125, "slots": 4}}
    # C never reports one: the most common capacity in the file
    assert machines["m9000000003"]["capacity"] == {"cpu": 1.0, "mem": 0.5, "slots": 16}
    mine = [e for e in c["capacity"] if e["machines"].startswith("m900000000")]
    assert mine == [
        {"at": 100.0, "action": "leave", "machines": "m9000000001"},
        {"at": 300.0, "action": "join", "machines": "m9000000001"},
        {"at": 400.0, "action": "scale", "machines": "m9000000001", "factor": 0.5},
        {"at": 500.0, "action": "join", "machines": "m9000000002"},
    ]
    log = r.log
    assert log.first_line["REMOVE of a machine that is not up"] == 103
    assert log.first_line["ADD of a machine that is already up"] == 104
    assert log.filtered["UPDATE that leaves cpus unchanged"] == 2  # 107 and 109
    assert log.first_line["event type 0 (not ADD, REMOVE or UPDATE)"] == 111
    assert log.malformed["not a machine event (JSON with time, machine_id, type)"] == 1
    assert log.first_line["not a machine event (JSON with time, machine_id, type)"] == 112
    assert log.filtered["after the window"] > 50  # real ADDs of later days
    assert log.used + sum(log.filtered.values()) + sum(log.malformed.values()) == log.rows
    valid_timeline(c)
    meta = r.document["metadata"]
    assert any("default_duration" in a for a in meta["assumed"])
    assert r.stats["window_s"] == 86400.0 and r.stats["events"]["scale"] == 1
    # the metadata states the window actually replayed, not "to the end"
    assert meta["trace"]["window"] == "trace seconds from 0 for 86400 s"


def test_window_shifts_not_scales(crafted: Path) -> None:
    r = import_trace(KIND, crafted, options=ALL, window=Window(start=150, arrival_scale=2))
    c = r.document["cluster"]
    a = next(m for m in c["machines"] if m["id"] == "m9000000001")
    assert a["down"] is True  # removed at 100 s, before the window
    mine = [e for e in c["capacity"] if e["machines"].startswith("m900000000")]
    assert mine == [
        {"at": 150.0, "action": "join", "machines": "m9000000001"},
        {"at": 250.0, "action": "scale", "machines": "m9000000001", "factor": 0.5},
        {"at": 350.0, "action": "join", "machines": "m9000000002"},
    ]
    short = import_trace(KIND, crafted, options=ALL, window=Window(start=150, duration=200))
    ids = {m["id"] for m in short.document["cluster"]["machines"]}
    assert "m9000000001" in ids and "m9000000002" not in ids  # B joins after the window
    assert [e["action"] for e in short.document["cluster"]["capacity"]
            if e["machines"] == "m9000000001"] == ["join"]
    whole = import_trace(KIND, crafted, options={"default_machines": None,
                                                 "default_duration": None})
    assert whole.stats["window_s"] is None
    assert "after the window" not in whole.log.filtered


def test_garbage_fails_naming_file_and_line(tmp_path: Path, crafted: Path) -> None:
    g = tmp_path / "garbage.json"
    g.write_text("hello\nworld\n", encoding="utf-8")
    with pytest.raises(TraceError) as e:
        import_trace(KIND, g)
    assert f"{g}:1" in str(e.value)
    with pytest.raises(TraceError):  # 1 broken line of 112 is more than 0.5%
        import_trace(KIND, crafted, max_bad=0.005)
    with pytest.raises(TraceError, match="unknown option"):
        import_trace(KIND, crafted, options={"slots": 3})


# ---------------------------------------------------------------------- real slices
def test_slice_defaults_and_sampling(sliced: Path) -> None:
    r = import_trace(KIND, sliced)
    c = r.document["cluster"]
    assert len(c["machines"]) == 200 and r.stats["machines"] == 200
    assert all(0 <= e["at"] < 86400 for e in c["capacity"])
    # every 10th line: REMOVEs whose ADD was not kept are skipped, not errors
    assert r.log.filtered["machine not in the sample"] > 0
    for m in c["machines"]:
        cap = m["capacity"]
        assert 0 < cap["cpu"] <= 1 and cap["slots"] == max(1, round(cap["cpu"] * 16))
    valid_timeline(c)
    a = import_trace(KIND, sliced, machines=20, seed=1)
    b = import_trace(KIND, sliced, machines=20, seed=1)
    d = import_trace(KIND, sliced, machines=20, seed=2)
    assert a.document == b.document
    assert len(a.document["cluster"]["machines"]) == 20
    assert a.document["cluster"]["machines"] != d.document["cluster"]["machines"]
    big = import_trace(KIND, sliced, machines=100_000, options={"slots_per_unit": 8})
    assert big.stats["machines"] == big.stats["machines_in_window"] > 200
    assert all(m["capacity"]["slots"] == max(1, round(m["capacity"]["cpu"] * 8))
               for m in big.document["cluster"]["machines"])


@settings(max_examples=8)
@given(start=st.floats(0, 2.5e6), duration=st.none() | st.floats(600, 5e5),
       machines=st.none() | st.integers(1, 60), seed=st.integers(0, 5))
def test_property_windows(sliced: Path, start: float, duration: float | None,
                          machines: int | None, seed: int) -> None:
    w = Window(start, duration)
    r = import_trace(KIND, sliced, window=w, machines=machines, seed=seed)
    c = r.document["cluster"]
    span = duration if duration is not None else 86400.0
    assert len(c["machines"]) == min(machines or 200, r.stats["machines_in_window"])
    assert all(0 <= e["at"] < span for e in c["capacity"])
    valid_timeline(c)
    again = import_trace(KIND, sliced, window=w, machines=machines, seed=seed)
    assert again.document["cluster"] == c


def test_with_scenario_simulates(tmp_path: Path, shared_data: Path) -> None:
    doc = {"name": "slots", "seed": 0,
           "cluster": {"machines": [{"id": "x", "count": 2, "capacity": {"slots": 8}}]},
           "workload": {"jobs": [
               {"id": f"job{i}", "submit": 1800.0 * i,
                "stages": [{"name": "map", "tasks": 30, "duration": 900},
                           {"name": "reduce", "tasks": 3, "duration": 300}]}
               for i in range(16)]}}
    base = tmp_path / "slots.yaml"
    base.write_text(yaml.safe_dump(doc), encoding="utf-8")
    r = import_trace(KIND, shared_data / EVENTS, machines=12, seed=3, with_scenario=base)
    assert r.is_scenario and len(r.document["cluster"]["machines"]) == 12
    w = build_workload(parse_scenario(json.loads(json.dumps(r.document)), "imported"))
    assert w.cluster.timeline  # machines come and go during the day
    s = run_policy(w, "fifo").summary
    assert s["finished"] == s["jobs"] == 16


# ------------------------------------------------------------------------- whole file
def test_whole_file_with_defaults(shared_data: Path) -> None:
    r = import_trace(KIND, shared_data / EVENTS)
    assert r.log.rows == 46_219 and not r.log.malformed
    assert r.stats["machines"] == 200 and r.stats["window_s"] == 86400.0
    assert r.stats["machines_in_window"] > 9500
    assert set(r.stats["events"]) <= {"join", "leave", "scale"}
    assert not r.is_scenario and set(r.document) == {"metadata", "cluster"}


def test_whole_month_matches_the_published_facts(shared_data: Path) -> None:
    """Replaying every event of every machine reproduces the README's quick facts (9,369 to
    9,850 machines up, total cpu 6,322 to 6,737).  The importer alone: the API's cluster
    check is quadratic in machines x events for 10,000 machines."""
    p = shared_data / EVENTS
    log = SkipLog(p)
    opts = GoogleOptions(default_duration=None, default_machines=None)
    part = Google2019Machines().read(p, Common(), opts, log)
    s = part.stats
    assert s["machines"] == 10_001 and s["machines_up_at_start"] == 9526
    assert s["machines_up"] == {"min": 9369, "max": 9850}
    assert math.isclose(s["capacity"]["cpu"]["min"], 6322, abs_tol=1)
    assert math.isclose(s["capacity"]["cpu"]["max"], 6737, abs_tol=1)
    assert s["events"] == {"join": 27777 - 9526, "leave": 17941}  # no cpus ever change
    assert log.used == 46_219 - 501 and log.filtered["UPDATE that leaves cpus unchanged"] == 501
