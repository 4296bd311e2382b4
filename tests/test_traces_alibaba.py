"""Alibaba cluster-trace-v2017 importers on slices of the real tables (and the whole files):
``alibaba-2017`` (batch_task.csv -> jobs) and ``alibaba-2017-servers`` (server_event.csv ->
machines and a capacity timeline)."""

from __future__ import annotations

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

TASKS = "alibaba_v2017/batch_task.csv"
SERVERS = "alibaba_v2017/server_event.csv"


def simulate(doc: dict[str, Any], policy: str = "fifo") -> dict[str, Any]:
    """Build the scenario the way `utilon simulate` reads it and run it."""
    w = build_workload(parse_scenario(json.loads(json.dumps(doc)), "imported"))
    return run_policy(w, policy).summary


@pytest.fixture(scope="module")
def tasks_slice(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Header + 400 rows of the real batch_task.csv."""
    return head_lines(shared_data / TASKS, 401, tmp_path_factory.mktemp("ali") / "bt.csv")


# ============================================================================ alibaba-2017
def test_slice_imports_and_every_job_completes_under_fifo(tasks_slice: Path) -> None:
    r = import_trace("alibaba-2017", tasks_slice, machines=20)
    jobs = r.document["workload"]["jobs"]
    assert r.log.rows == 400 and r.log.used > 0
    assert r.log.used + sum(r.log.filtered.values()) == r.log.rows
    assert [j["submit"] for j in jobs] == sorted(j["submit"] for j in jobs)
    assert all(j["id"].startswith("j") and j["class"] in ("critical", "sensitive",
                                                         "insensitive") for j in jobs)
    assert r.document["cluster"] == {"machines": [{"id": "m", "count": 20,
                                                   "capacity": {"cpu": 64.0, "mem": 0.69}}]}
    assert r.stats["jobs"] == len(jobs) and "offered_load" in r.stats
    assert "status Waiting" in r.log.filtered  # Waiting rows (empty cpu/mem) are filtered
    assert not r.log.malformed
    meta = r.document["metadata"]
    assert any("batch_instance.csv" in a for a in meta["assumed"])
    s = simulate(r.document)
    assert s["finished"] == s["jobs"] == len(jobs)


def test_first_rows_map_to_stages(tasks_slice: Path) -> None:
    """Row 1: job 3, task 4, 15,740 instances, 6459 -> 6524, plan_cpu 50, plan_mem 0.00796."""
    r = import_trace("alibaba-2017", tasks_slice, options={"max_tasks_per_stage": None})
    j3 = next(j for j in r.document["workload"]["jobs"] if j["id"] == "j3")
    st = {s["name"]: s for s in j3["stages"]}
    assert st["t4"] == {"name": "t4", "kind": "task", "tasks": 15740, "duration": 65.0,
                        "demand": {"cpu": 0.5, "mem": 0.007956928}}
    assert st["t5"]["tasks"] == 1 and st["t5"]["duration"] == 76.0


def test_bundling_preserves_work_and_fits_a_machine(tasks_slice: Path) -> None:
    plain = import_trace("alibaba-2017", tasks_slice, options={"max_tasks_per_stage": None})
    bundled = import_trace("alibaba-2017", tasks_slice, options={"max_tasks_per_stage": 8})

    def work(doc: dict[str, Any]) -> dict[str, float]:
        w = {"cpu": 0.0, "mem": 0.0}
        for j in doc["workload"]["jobs"]:
            for s in j["stages"]:
                for k in w:
                    w[k] += s["tasks"] * s["duration"] * s["demand"][k]
        return w

    a, b = work(plain.document), work(bundled.document)
    assert b["cpu"] == pytest.approx(a["cpu"], rel=1e-6)
    assert b["mem"] == pytest.approx(a["mem"], rel=1e-6)
    assert bundled.stats["tasks"] < plain.stats["tasks"] / 10
    assert bundled.stats["bundled_trace_tasks"] > 0
    assert bundled.stats["instances"] == plain.stats["instances"]
    for j in bundled.document["workload"]["jobs"]:
        for s in j["stages"]:
            assert s["demand"]["cpu"] <= 64 and s["demand"]["mem"] <= 0.69
    j3 = next(j for j in bundled.document["workload"]["jobs"] if j["id"] == "j3")
    t4 = j3["stages"][0] if j3["stages"][0]["name"] == "t4" else j3["stages"][1]
    # 15,740 instances: ceil(15740/8) per bundle is more than a machine holds (mem 0.69 /
    # 0.00796 = 86 instances), so bundles of <= 86 -> 184 tasks (more than 8)
    assert t4["tasks"] == 184 and t4["demand"]["mem"] <= 0.69
    assert any("bundled" in a for a in bundled.document["metadata"]["assumed"])


def test_dag_inference_and_filters(tmp_path: Path, shared_data: Path) -> None:
    extra = [
        "100,200,900001,1,2,Terminated,50,0.01",
        "100,150,900001,2,1,Terminated,100,0.01",
        "210,300,900001,3,1,Terminated,50,0.01",
        "310,400,900001,4,3,Terminated,50,0.01",
        "90,90,900001,5,1,Terminated,50,0.01",        # zero duration -> min_duration
        "-5,100,900002,6,1,Terminated,50,0.01",        # created before the trace
        "120,130,900001,7,1,Waiting,,",                 # filtered, not malformed
        "130,140,900001,8,1,Terminated,,",              # no request
    ]
    f = head_lines(shared_data / TASKS, 1, tmp_path / "dag.csv", extra)
    r = import_trace("alibaba-2017", f)
    (job,) = r.document["workload"]["jobs"]
    assert job["id"] == "j900001" and job["submit"] == 90.0  # the earliest task creation
    names = [s["name"] for s in job["stages"]]
    assert names == ["t5", "t2", "t1", "t3", "t4"]  # by create, then end
    after = {s["name"]: s.get("after") for s in job["stages"]}
    # t3 waits for t2 and t1 (both ended by 210); t4 only for t3 (t1, t2 implied by it);
    # t5 (90 -> 90, 1 s) ended before everything else was created but is implied via t3
    assert after == {"t5": None, "t2": ["t5"], "t1": ["t5"], "t3": ["t2", "t1"],
                     "t4": ["t3"]}
    assert job["stages"][0]["duration"] == 1.0
    assert r.log.filtered["created before the trace"] == 1
    assert r.log.filtered["status Waiting"] == 1
    assert r.log.filtered["no cpu/mem request"] == 1
    assert r.log.first_line["created before the trace"] == 7
    flat = import_trace("alibaba-2017", f, options={"infer_dag": False})
    assert all("after" not in s for s in flat.document["workload"]["jobs"][0]["stages"])
    s = simulate(r.document)
    assert s["finished"] == 1
    # the chain t5 -> t2/t1 -> t3 -> t4 runs one after the other: 1 + 100 + 90 + 90
    assert s["makespan"] == pytest.approx(281.0)


def test_malformed_lines_are_skipped_and_reported(tmp_path: Path, shared_data: Path) -> None:
    f = head_lines(shared_data / TASKS, 401, tmp_path / "bad.csv",
                   ["1,2,3", "abc,6524,3,99,1,Terminated,50,0.1"])
    r = import_trace("alibaba-2017", f)
    assert r.log.malformed["expected 8 fields, got 3"] == 1
    assert r.log.first_line["expected 8 fields, got 3"] == 402
    assert r.log.first_line["time, id or instance count is not an integer"] == 403
    assert any("malformed" in ln and "line 402" in ln for ln in r.log.lines())
    with pytest.raises(TraceError) as e:  # 2 of 402 rows is more than max_bad = 0.1%
        import_trace("alibaba-2017", f, max_bad=0.001)
    assert f"{f}:402" in str(e.value)


def test_garbage_fails_naming_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "garbage.csv"
    f.write_text("hello world\nthis is, not a trace\nnor, is, this\n", encoding="utf-8")
    with pytest.raises(TraceError) as e:
        import_trace("alibaba-2017", f)
    assert f"{f}:2" in str(e.value)
    with pytest.raises(TraceError):
        import_trace("alibaba-2017", tmp_path / "missing.csv")
    with pytest.raises(TraceError, match="unknown status"):
        import_trace("alibaba-2017", f, options={"statuses": ["Done"]})


def test_window_max_jobs_and_statuses(tasks_slice: Path) -> None:
    t0 = import_trace("alibaba-2017", tasks_slice)  # the default window: trace second 0 on
    full = t0
    raw = {j["id"]: j["submit"] for j in t0.document["workload"]["jobs"]}
    mid = sorted(raw.values())[len(raw) // 2]
    w = Window(start=mid, duration=3000, arrival_scale=2)
    r = import_trace("alibaba-2017", tasks_slice, window=w)
    got = r.document["workload"]["jobs"]
    expect = sorted((s, j) for j, s in raw.items() if mid <= s < mid + 3000)
    assert [j["id"] for j in got] == [j for _, j in
                                      sorted(expect, key=lambda x: (x[0], int(x[1][1:])))]
    assert all(j["submit"] == round((raw[j["id"]] - mid) / 2, 6) for j in got)
    assert "job submitted outside the window" in r.log.filtered
    r5 = import_trace("alibaba-2017", tasks_slice, window=Window(max_jobs=5))
    assert [j["id"] for j in r5.document["workload"]["jobs"]] == [
        j["id"] for j in t0.document["workload"]["jobs"][:5]]
    assert "beyond max_jobs" in r5.log.filtered
    more = import_trace("alibaba-2017", tasks_slice,
                        options={"statuses": ["Terminated", "Running", "Failed"]})
    assert more.log.used > full.log.used


def test_deterministic_and_seeded(tasks_slice: Path) -> None:
    a = import_trace("alibaba-2017", tasks_slice, seed=3)
    b = import_trace("alibaba-2017", tasks_slice, seed=3)
    c = import_trace("alibaba-2017", tasks_slice, seed=4)
    assert a.document == b.document
    strip = [{k: v for k, v in j.items() if k not in ("class", "priority", "utility")}
             for j in a.document["workload"]["jobs"]]
    assert strip == [{k: v for k, v in j.items() if k not in ("class", "priority", "utility")}
                     for j in c.document["workload"]["jobs"]]
    assert [j["utility"] for j in a.document["workload"]["jobs"]] != [
        j["utility"] for j in c.document["workload"]["jobs"]]


@settings(max_examples=8)
@given(start=st.floats(0, 20_000), duration=st.floats(10, 30_000),
       max_jobs=st.none() | st.integers(1, 30), seed=st.integers(0, 10),
       scale=st.sampled_from([0.5, 1.0, 3.0]))
def test_property_windows(tasks_slice: Path, start: float, duration: float,
                          max_jobs: int | None, seed: int, scale: float) -> None:
    w = Window(start, duration, max_jobs, scale)
    try:
        r = import_trace("alibaba-2017", tasks_slice, window=w, seed=seed)
    except TraceError as e:
        assert "is usable" in str(e)  # an empty window is an error, not an empty scenario
        return
    jobs = r.document["workload"]["jobs"]
    assert 0 < len(jobs) <= (max_jobs or math.inf)
    assert all(0 <= j["submit"] < duration / scale + 1e-6 for j in jobs)
    assert [j["submit"] for j in jobs] == sorted(j["submit"] for j in jobs)
    log = r.log
    assert log.used + sum(log.filtered.values()) + sum(log.malformed.values()) == log.rows
    build_workload(parse_scenario(json.loads(json.dumps(r.document))))  # valid


def test_whole_file_imports_with_defaults(shared_data: Path) -> None:
    r = import_trace("alibaba-2017", shared_data / TASKS)
    s = r.stats
    assert r.log.rows == 80_553
    assert r.log.filtered["status Waiting"] == 8847
    assert r.log.filtered["created before the trace"] == 167
    assert s["jobs"] == len(r.document["workload"]["jobs"]) > 11_000
    assert s["instances"] > 10_000_000 and s["tasks"] < 1_500_000
    # no --machines: the proposed cluster is sized for an offered load of 0.7 (memory binds)
    assert s["machines"] > 1313 and max(s["offered_load"].values()) == pytest.approx(0.7, 0.01)
    assert any("offered load" in a for a in r.document["metadata"]["assumed"])


# ==================================================================== alibaba-2017-servers
SMALL_CPU = {
    "name": "small", "seed": 0,
    "cluster": {"machines": [{"id": "x", "count": 2, "capacity": {"cpu": 64, "mem": 1}}]},
    "workload": {"jobs": [
        {"id": f"job{i}", "submit": 600.0 * i,
         "stages": [{"name": "map", "tasks": 40, "duration": 500, "demand": {"cpu": 1}},
                    {"name": "reduce", "tasks": 4, "duration": 200, "demand": {"cpu": 1}}]}
        for i in range(12)]},
}


def write_scenario_file(tmp_path: Path, doc: dict[str, Any]) -> Path:
    p = tmp_path / "small.yaml"
    p.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return p


def valid_timeline(cluster: dict[str, Any]) -> None:
    build_cluster(ClusterSpec.model_validate(cluster))  # raises on join-while-up etc.


def test_servers_whole_file(shared_data: Path) -> None:
    r = import_trace("alibaba-2017-servers", shared_data / SERVERS)
    assert not r.is_scenario and set(r.document) == {"metadata", "cluster"}
    c = r.document["cluster"]
    assert len(c["machines"]) == 1313 and r.log.used == r.log.rows == 1352
    assert r.stats["errors"] == {"softerror": 39}
    # 39 errors on 7 machines; errors closer than the recovery time merge into one outage
    ev = r.stats["events"]
    assert ev["leave"] == ev["join"] and 7 <= ev["leave"] < 39
    assert r.stats["machines_up"]["max"] == 1313 and r.stats["machines_up"]["min"] < 1313
    m1 = next(m for m in c["machines"] if m["id"] == "m1")
    assert m1["capacity"] == {"cpu": 64.0, "mem": 0.6899697150104833}
    assert m1["attributes"] == {"disk": 1.0}
    first = [e for e in c["capacity"] if e["machines"] == "m1075"][:2]
    assert first == [{"at": 1351.0, "action": "leave", "machines": "m1075"},
                     {"at": 3151.0, "action": "join", "machines": "m1075"}]
    valid_timeline(c)
    assert any("pessimistic" in a for a in r.document["metadata"]["assumed"])


def test_servers_window_and_recovery(shared_data: Path) -> None:
    # machine 930 fails at 777 (down until 2577): from 1000 on it starts down
    r = import_trace("alibaba-2017-servers", shared_data / SERVERS,
                     window=Window(start=1000, duration=3000))
    c = r.document["cluster"]
    m930 = next(m for m in c["machines"] if m["id"] == "m930")
    assert m930.get("down") is True
    evs = [e for e in c["capacity"] if e["machines"] == "m930"]
    assert evs[0] == {"at": 1577.0, "action": "join", "machines": "m930"}
    # 1075 fails at 1351 -> leave at 351, rejoin 2151; 372 at 4407 (after the window: none)
    assert {"at": 351.0, "action": "leave", "machines": "m1075"} in c["capacity"]
    assert not any(e["machines"] == "m372" for e in c["capacity"])
    assert all(e["at"] >= 0 for e in c["capacity"])
    valid_timeline(c)
    long = import_trace("alibaba-2017-servers", shared_data / SERVERS,
                        options={"recovery": 10_000})
    # 930 reports errors every ~7,300 s: with 10,000 s recovery it never comes back
    assert sum(e["machines"] == "m930" and e["action"] == "leave"
               for e in long.document["cluster"]["capacity"]) == 1
    valid_timeline(long.document["cluster"])


def test_servers_sampling(shared_data: Path) -> None:
    f = shared_data / SERVERS
    a = import_trace("alibaba-2017-servers", f, machines=10, seed=1)
    b = import_trace("alibaba-2017-servers", f, machines=10, seed=1)
    c = import_trace("alibaba-2017-servers", f, machines=10, seed=2)
    ids = [m["id"] for m in a.document["cluster"]["machines"]]
    assert a.document == b.document and len(ids) == 10
    # the 7 machines with errors come first, the other 3 are drawn with the seed
    for m in ("m930", "m1075", "m372", "m618", "m689", "m731", "m401"):
        assert m in ids
    assert ids != [m["id"] for m in c.document["cluster"]["machines"]]
    assert a.log.filtered["machine not in the sample"] == 1303
    few = import_trace("alibaba-2017-servers", f, machines=3, seed=1)
    assert {m["id"] for m in few.document["cluster"]["machines"]} <= set(ids)
    plain = import_trace("alibaba-2017-servers", f, machines=10, seed=1,
                         options={"prefer_events": False})
    assert len(plain.document["cluster"]["machines"]) == 10
    for r in (a, c, few, plain):
        valid_timeline(r.document["cluster"])


def test_servers_malformed_and_garbage(tmp_path: Path, shared_data: Path) -> None:
    f = head_lines(shared_data / SERVERS, 300, tmp_path / "se.csv", [
        "100,1148,softerror,agent_check,0,0,0",
        "200,999999,softerror,agent_check,0,0,0",  # machine never added
        "x,1,add,,64,0.69,1",
        "300,1148,reboot,,0,0,0",
        "0,1148,add,,64,0.69,1",                    # second add
    ])
    r = import_trace("alibaba-2017-servers", f)
    assert r.log.malformed["time, machine id or capacity is not a number"] == 1
    assert r.log.first_line["unknown event type"] == 304
    assert r.log.filtered["error of a machine not added yet"] == 1
    assert r.log.filtered["second add of a machine (first kept)"] == 1
    assert len(r.document["cluster"]["machines"]) == 300
    assert r.document["cluster"]["capacity"] == [
        {"at": 100.0, "action": "leave", "machines": "m1148"},
        {"at": 1900.0, "action": "join", "machines": "m1148"}]
    g = tmp_path / "g.csv"
    g.write_text("a,b,c\n1,2,3,4,5,6,7\n", encoding="utf-8")
    with pytest.raises(TraceError) as e:
        import_trace("alibaba-2017-servers", g)
    assert f"{g}:1" in str(e.value)


def test_servers_with_scenario_simulates(tmp_path: Path, shared_data: Path) -> None:
    base = write_scenario_file(tmp_path, SMALL_CPU)
    r = import_trace("alibaba-2017-servers", shared_data / SERVERS, machines=7, seed=0,
                     with_scenario=base)
    doc = r.document
    assert r.is_scenario and doc["workload"] == SMALL_CPU["workload"]
    assert len(doc["cluster"]["machines"]) == 7 and doc["cluster"]["capacity"]
    assert doc["metadata"]["workload_from"] == str(base)
    s = simulate(doc)
    assert s["finished"] == s["jobs"] == 12
    # the 7 machines with errors: m372 (filled first) fails at 4407 while job 7 runs on it
    assert s["tasks"]["lost"] > 0


@settings(max_examples=8)
@given(start=st.floats(0, 80_000), duration=st.none() | st.floats(100, 50_000),
       machines=st.none() | st.integers(1, 40), seed=st.integers(0, 5),
       recovery=st.sampled_from([60.0, 1800.0, 9000.0]))
def test_property_servers_timeline_valid(shared_data: Path, start: float,
                                         duration: float | None, machines: int | None,
                                         seed: int, recovery: float) -> None:
    r = import_trace("alibaba-2017-servers", shared_data / SERVERS,
                     window=Window(start, duration), machines=machines, seed=seed,
                     options={"recovery": recovery})
    c = r.document["cluster"]
    assert len(c["machines"]) == (machines or 1313)
    valid_timeline(c)
    end = math.inf if duration is None else duration
    for e in c["capacity"]:
        assert e["at"] >= 0
        if e["action"] == "leave":
            assert e["at"] < end
