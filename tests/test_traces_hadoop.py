"""The ``sls`` and ``synth`` importers (Hadoop YARN Scheduler Load Simulator input formats).

Example inputs in ``tests/data/traces/`` were written for these tests following the formats of
the Hadoop "YARN Scheduler Load Simulator (SLS)" documentation page:

* ``sls-2jobs.json``: SLS JSON, a ``num.nodes`` object and two concatenated job objects.  Job
  ``job_wordcount`` (queue ``sls_queue_1``, submit 0 ms): one map container from start/end
  (30 s), three map containers via ``count`` and ``container.duration.ms`` (40 s, 2048 MB),
  one reduce from start/end (60 s, 4096 MB, 2 vcores).  Job ``job_grep`` (queue
  ``sls_queue_2``, submit 60 000 ms) with legacy ``duration.ms`` maps of 20 and 25 s and the
  utilon extension ``job.deadline.ms`` = 400 000 (deadline 340 s after submit).
* ``synth-small.json``: SYNTH, documented flat class fields; 40 jobs over two workloads
  (interactive: one class with reservations; batch: an ETL class and a map-only class).
* ``synth-tasks.json``: SYNTH, the newer per-task class format with ``{val, std, dist}`` and
  ``{discrete, weights}`` samples; every job has a reservation (deadline).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from utilon.runner import run_policy
from utilon.scenario.build import build_workload
from utilon.scenario.load import parse_scenario
from utilon.traces import ClassRule, ImportResult, TraceError, Window, import_trace

DATA = Path(__file__).parent / "data" / "traces"
SLS = DATA / "sls-2jobs.json"
SYNTH = DATA / "synth-small.json"
SYNTH_TASKS = DATA / "synth-tasks.json"


def simulate_all(r: ImportResult, policy: str = "fifo") -> None:
    """Build the imported scenario, run it, and check every job is accounted for and done."""
    spec = parse_scenario(json.loads(json.dumps(r.document)), "imported")
    w = build_workload(spec)
    out = run_policy(w, policy)
    assert {row["id"] for row in out.rows} == {j["id"] for j in r.document["workload"]["jobs"]}
    assert not out.result.stopped_early
    assert all(row["finish"] is not None for row in out.rows)


def by_id(r: ImportResult) -> dict[str, dict[str, Any]]:
    return {j["id"]: j for j in r.document["workload"]["jobs"]}


def sls_job(i: int, start_ms: int, **extra: Any) -> dict[str, Any]:
    return {"job.start.ms": start_ms, "job.queue.name": f"q{i % 2}", "job.id": f"j{i}",
            "job.tasks": [{"container.type": "map", "duration.ms": 10_000 + 1000 * k}
                          for k in range(3)]
            + [{"container.type": "reduce", "duration.ms": 15_000}], **extra}


# -- SLS ------------------------------------------------------------------------------------
def test_sls_example() -> None:
    r = import_trace("sls", SLS)
    assert r.log.rows == 2 and r.log.used == 2
    jobs = by_id(r)
    wc, gr = jobs["job_wordcount"], jobs["job_grep"]
    assert (wc["submit"], wc["tenant"], gr["submit"], gr["tenant"]) == (
        0.0, "sls_queue_1", 60.0, "sls_queue_2")
    assert wc["stages"] == [
        {"name": "map", "kind": "map", "durations": [30.0, 40.0, 40.0, 40.0],
         "demand": {"slots": 1.0}},
        {"name": "reduce", "kind": "reduce", "durations": [60.0], "demand": {"slots": 1.0}}]
    assert gr["stages"][0]["durations"] == [20.0, 25.0] and len(gr["stages"]) == 1
    assert gr["utility"]["kind"] == "deadline" and gr["utility"]["deadline"] == 340.0
    assert wc["utility"]["kind"] in ("sigmoid", "constant")  # from the class rule
    assert r.document["cluster"] == {
        "machines": [{"id": "node", "count": 4, "capacity": {"slots": 8.0}}]}  # num.nodes
    assert r.stats["jobs"] == 2 and r.stats["tasks"] == 7
    meta = r.document["metadata"]
    assert any("job.start.ms" in s for s in meta["real"])
    assert any("utilon extension" in s for s in meta["assumed"])
    simulate_all(r)


def test_sls_resources_and_machines() -> None:
    r = import_trace("sls", SLS, machines=3,
                     options={"resources": "mem,vcores", "mem_per_machine": 3000})
    wc = by_id(r)["job_wordcount"]
    assert wc["stages"][0]["demand"] == {"slots": 1.0, "mem": 2048.0, "vcores": 1.0}
    assert wc["stages"][1]["demand"] == {"slots": 1.0, "mem": 4096.0, "vcores": 2.0}
    # a container without a size gets SLS's default container
    assert by_id(r)["job_grep"]["stages"][0]["demand"] == {"slots": 1.0, "mem": 1024.0,
                                                         "vcores": 1.0}
    m = r.document["cluster"]["machines"][0]
    assert m["count"] == 3 and m["capacity"] == {"slots": 8.0, "mem": 4096.0, "vcores": 10.0}
    assert any("raised" in s for s in r.document["metadata"]["assumed"])
    simulate_all(r, "fair")


def test_sls_deadline_utility_when_classes_say_deadline() -> None:
    r = import_trace("sls", SLS, classes=ClassRule(utility="deadline", slack=3))
    assert by_id(r)["job_wordcount"]["utility"]["deadline"] == "3x"
    assert by_id(r)["job_grep"]["utility"]["deadline"] == 340.0


def test_sls_stream_forms(tmp_path: Path) -> None:
    """One object per line, several on one line, pretty-printed, a JSON array, job.count."""
    compact = tmp_path / "compact.json"
    objs = [sls_job(i, 5000 * i) for i in range(6)]
    compact.write_text("\n".join(json.dumps(o) for o in objs[:3]) + "\n"
                       + "".join(json.dumps(o) for o in objs[3:5]) + "\n"
                       + json.dumps(objs[5], indent=2) + "\n\n")
    r = import_trace("sls", compact)
    assert r.log.used == 6 and [j["id"] for j in r.document["workload"]["jobs"]] == [
        f"j{i}" for i in range(6)]
    arr = tmp_path / "array.json"
    arr.write_text(json.dumps(objs, indent=1))
    assert import_trace("sls", arr).document["workload"] == r.document["workload"]
    copies = tmp_path / "copies.json"
    copies.write_text(json.dumps({**sls_job(0, 0), "job.count": 3}) + json.dumps(
        {"job.start.ms": 1000, "job.tasks": [{"duration.ms": 5000}]}))
    r = import_trace("sls", copies)
    assert [j["id"] for j in r.document["workload"]["jobs"]] == [
        "job_0", "job_1", "job_2", "job_3"]  # SLS numbers the jobs when job.count > 1
    assert r.log.rows == 2 and r.log.used == 2


def test_sls_window_max_jobs_and_arrival_scale(tmp_path: Path) -> None:
    f = tmp_path / "ten.json"
    f.write_text("\n".join(json.dumps(sls_job(i, 10_000 * (9 - i))) for i in range(10)))
    r = import_trace("sls", f, window=Window(start=20, duration=50, max_jobs=3,
                                             arrival_scale=2))
    jobs = r.document["workload"]["jobs"]
    assert [(j["id"], j["submit"]) for j in jobs] == [("j7", 0.0), ("j6", 5.0), ("j5", 10.0)]
    assert r.log.filtered == {"before the window start": 2, "after the window end": 3,
                              "beyond --max-jobs": 2}


def test_sls_malformed_jobs(tmp_path: Path) -> None:
    good = [json.dumps(sls_job(i, 1000 * i)) for i in range(4)]
    bad = [
        json.dumps({"job.id": "nostart", "job.tasks": [{"duration.ms": 5}]}),
        json.dumps(sls_job(10, 0, **{"job.tasks": [{"container.type": "shuffle",
                                                    "duration.ms": 5}]})),
        json.dumps(sls_job(11, 0, **{"job.tasks": [{"container.start.ms": 9,
                                                    "container.end.ms": 3}]})),
        '{"job.start.ms": 5, "job.tasks": [ oops ]}',
        json.dumps(sls_job(12, 0, **{"job.id": "j0"})),
        json.dumps(sls_job(13, "soon")),
    ]
    f = tmp_path / "bad.json"
    f.write_text("\n".join(good + bad) + "\n")
    r = import_trace("sls", f, max_bad=1.0)
    assert r.log.used == 4 and r.log.rows == 10
    mal = r.document["metadata"]["trace"]["rows"]["malformed"]
    assert mal == {
        "missing job.start.ms": {"count": 1, "first_line": 5},
        "bad container.type (not map or reduce)": {"count": 1, "first_line": 6},
        "container.end.ms before container.start.ms": {"count": 1, "first_line": 7},
        "not valid JSON": {"count": 1, "first_line": 8},
        "duplicate job.id": {"count": 1, "first_line": 9},
        "job.start.ms is not a number": {"count": 1, "first_line": 10},
    }
    with pytest.raises(TraceError) as ei:
        import_trace("sls", f)
    assert f"{f}:" in ei.value.one_line() and "malformed" in ei.value.one_line()


def test_sls_pretty_printed_broken_object_resyncs(tmp_path: Path) -> None:
    broken = json.dumps(sls_job(0, 0), indent=2).replace('"job.queue.name"', '"job.queue.name" 1')
    f = tmp_path / "pretty.json"
    f.write_text(broken + "\n" + json.dumps(sls_job(1, 2000), indent=2) + "\n")
    r = import_trace("sls", f, max_bad=1.0)
    assert [j["id"] for j in r.document["workload"]["jobs"]] == ["j1"]
    assert r.log.rows == 2 and r.log.malformed == {"not valid JSON": 1}
    assert r.log.first_line["not valid JSON"] == 3  # the line with the error


def test_sls_garbage_and_truncated(tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text("hello world\nthis is not json\n")
    with pytest.raises(TraceError) as ei:
        import_trace("sls", junk)
    assert f"{junk}:1" in ei.value.one_line()
    cut = tmp_path / "cut.json"
    text = SLS.read_text()
    cut.write_text(text[: text.rindex("{\"am.type\"") + 40])  # the last job is cut off
    r = import_trace("sls", cut, max_bad=1.0)
    assert r.log.used == 1
    assert r.log.malformed == {"unterminated JSON object": 1}
    assert r.log.first_line["unterminated JSON object"] == 34
    empty = tmp_path / "empty.json"
    empty.write_text("\n\n")
    with pytest.raises(TraceError, match="no job objects"):
        import_trace("sls", empty)


def test_sls_gzip_is_read(tmp_path: Path) -> None:
    import gzip

    gz = tmp_path / "sls.json.gz"
    gz.write_bytes(gzip.compress(SLS.read_bytes()))
    assert import_trace("sls", gz).document["workload"] == import_trace(
        "sls", SLS).document["workload"]


# -- SYNTH ----------------------------------------------------------------------------------
def test_synth_example() -> None:
    r = import_trace("synth", SYNTH, seed=3)
    jobs = r.document["workload"]["jobs"]
    assert len(jobs) == 40 and r.log.used == 40
    assert r.document["cluster"]["machines"][0]["count"] == 6  # num_nodes
    assert {j["tenant"] for j in jobs} == {"q_interactive", "q_batch"}
    submits = [j["submit"] for j in jobs]
    assert submits == sorted(submits) and submits[0] >= 0 and submits[-1] < 1800
    for j in jobs:
        cls = j["id"].rsplit("_", 1)[0]
        assert cls in ("tiny", "etl", "maponly")
        names = [s["name"] for s in j["stages"]]
        assert names == (["map"] if cls == "maponly" else ["map", "reduce"])
        assert all(d > 0 for s in j["stages"] for d in s["durations"])
        if j["tenant"] == "q_interactive":
            assert j["submit"] < 1200
        if j["utility"]["kind"] == "deadline":
            assert cls == "tiny" and j["utility"]["deadline"] > 0  # only tiny has reservations
    assert 0 < r.stats["with_deadline"] < r.stats["per_workload"]["interactive"]
    assert r.stats["rand_seed"] == 7
    assert any("rand_seed" in s for s in r.document["metadata"]["assumed"])
    simulate_all(r)


def test_synth_deterministic_and_seeded() -> None:
    a = import_trace("synth", SYNTH, seed=5)
    b = import_trace("synth", SYNTH, seed=5)
    c = import_trace("synth", SYNTH, seed=6)
    assert a.document == b.document
    assert a.document["workload"] != c.document["workload"]


def test_synth_options() -> None:
    none = import_trace("synth", SYNTH, options={"deadline_jobs": "none"})
    assert none.stats["with_deadline"] == 0
    every = import_trace("synth", SYNTH, options={"deadline_jobs": "all"})
    assert every.stats["with_deadline"] == every.stats["per_workload"]["interactive"]
    mem = import_trace("synth", SYNTH, machines=9, options={"resources": ["slots", "mem"]})
    assert mem.document["cluster"]["machines"][0]["count"] == 9
    demands = [s["demand"] for j in mem.document["workload"]["jobs"] for s in j["stages"]]
    assert all(d["mem"] >= 1024 for d in demands) and all("vcores" not in d for d in demands)
    simulate_all(mem, "fair")


def test_synth_task_format() -> None:
    r = import_trace("synth", SYNTH_TASKS, options={"resources": ["vcores"]})
    jobs = r.document["workload"]["jobs"]
    assert len(jobs) == 12 and r.stats["with_deadline"] == 12  # reservation val 1.0
    for j in jobs:
        m, red = j["stages"]
        assert (m["name"], red["name"]) == ("map", "reduce")
        assert len(red["durations"]) in (1, 2) and red["demand"]["vcores"] == 2.0
        assert m["demand"] == {"slots": 1.0, "vcores": 1.0}
        assert j["tenant"] == "q_reports" and j["submit"] < 900
    simulate_all(r)


def test_synth_documented_style_comments(tmp_path: Path) -> None:
    """The documentation's example carries // comments and a trailing comma."""
    f = tmp_path / "commented.json"
    f.write_text("""{
  "description" : "tiny // not a comment inside a string", // a comment
  "num_nodes" : 2, "num_jobs" : 5, "rand_seed" : 2,
  "workloads" : [ { "workload_name" : "w", "workload_weight": 0.5, "queue_name" : "q",
      "job_classes" : [ { "class_name" : "c", "class_weight" : 1.0,
          "mtasks_avg" : 3, "mtasks_stddev" : 1, "rtasks_avg" : 1, "rtasks_stddev" : 0,
          "mtime_avg" : 10, "mtime_stddev" : 2, "rtime_avg" : 20, "rtime_stddev" : 4,
          "dur_avg" : 60, "dur_stddev" : 5,
          "deadline_factor_avg" : 10.0, "deadline_factor_stddev" : 0.001, } ],
      "time_distribution" : [ { "time" : 1, "weight" : 66 }, { "time" : 60, "weight" : 33 },
                              { "time" : 120, "jobs" : 0 } ] } ]
}
""")
    r = import_trace("synth", f)
    assert len(r.document["workload"]["jobs"]) == 5
    assert all(1 <= j["submit"] < 120 for j in r.document["workload"]["jobs"])
    assert "not a comment" in r.document["metadata"]["real"][0]


@pytest.mark.parametrize("edit, where, match", [
    (lambda d: d.pop("num_jobs"), "num_jobs", "Field required"),
    (lambda d: d["workloads"][0].update(job_classes=[]), "workloads[0].job_classes",
     "at least 1"),
    (lambda d: d["workloads"][1]["time_distribution"][0].update(weight=0),
     "workloads[1]", "no positive weight"),
    (lambda d: d["workloads"][1]["job_classes"][1].update(mtasks_avg=0), "job_classes[1]",
     "no tasks"),
    (lambda d: d["workloads"][0]["job_classes"][0].update(mtime_avg="long"),
     "workloads[0].job_classes[0].mtime_avg", "valid number"),
])
def test_synth_malformed(tmp_path: Path, edit: Any, where: str, match: str) -> None:
    data = json.loads(SYNTH.read_text())
    edit(data)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data, indent=2))
    with pytest.raises(TraceError, match=match) as ei:
        import_trace("synth", f)
    assert str(f) in ei.value.one_line() and where in ei.value.one_line()


def test_synth_bad_sample(tmp_path: Path) -> None:
    data = json.loads(SYNTH_TASKS.read_text())
    data["workloads"][0]["job_classes"][0]["tasks"][1]["count"]["weights"] = [1]
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data))
    with pytest.raises(TraceError, match="weights must match discrete") as ei:
        import_trace("synth", f)
    assert "workloads[0].job_classes[0].tasks[1].count" in ei.value.one_line()


def test_synth_not_json(tmp_path: Path) -> None:
    f = tmp_path / "broken.json"
    f.write_text('{\n  "num_jobs": 3,\n  "workloads": [ oops ]\n}\n')
    with pytest.raises(TraceError) as ei:
        import_trace("synth", f)
    assert f"{f}:3" in ei.value.one_line()


# -- properties -----------------------------------------------------------------------------

@given(seed=st.integers(0, 2**31), start=st.integers(0, 1500), length=st.integers(1, 2000),
       max_jobs=st.one_of(st.none(), st.integers(1, 50)),
       scale=st.sampled_from([0.5, 1.0, 3.0]))
def test_property_synth_windows(seed: int, start: int, length: int, max_jobs: int | None,
                                scale: float) -> None:
    window = Window(start=start, duration=length, max_jobs=max_jobs, arrival_scale=scale)
    try:
        r = import_trace("synth", SYNTH, seed=seed, window=window)
    except TraceError as e:  # an empty window is an error, never a silent empty scenario
        assert "none of the 40" in e.message
        return
    jobs = r.document["workload"]["jobs"]
    assert 1 <= len(jobs) <= (max_jobs or 40)
    assert r.log.used + sum(r.log.filtered.values()) == 40
    assert all(0 <= j["submit"] < length / scale + 1e-6 for j in jobs)
    assert [j["submit"] for j in jobs] == sorted(j["submit"] for j in jobs)
    assert len({j["id"] for j in jobs}) == len(jobs)
    assert r.document == import_trace("synth", SYNTH, seed=seed, window=window).document



@given(starts=st.lists(st.integers(0, 100_000), min_size=1, max_size=12),
       start=st.integers(0, 60), length=st.integers(1, 120))
def test_property_sls_windows(tmp_path_factory: pytest.TempPathFactory, starts: list[int],
                              start: int, length: int) -> None:
    f = tmp_path_factory.mktemp("sls") / "t.json"
    f.write_text("\n".join(json.dumps(sls_job(i, s)) for i, s in enumerate(starts)))
    inside = sorted(s / 1000 - start for s in starts if start <= s / 1000 < start + length)
    try:
        r = import_trace("sls", f, window=Window(start=start, duration=length))
    except TraceError:
        assert not inside
        return
    assert [j["submit"] for j in r.document["workload"]["jobs"]] == pytest.approx(inside)
