"""The ``swim`` importer on slices of the real SWIM Facebook files: derivations, skipped rows,
windows, determinism, simulation of what it builds, the YAML round trip and the full FB-2010 day."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from conftest import head_lines, run_fifo
from utilon.scenario.load import load_workload
from utilon.traces import TraceError, Window, import_trace, write_scenario

FB2010 = Path("swim_facebook/FB-2010_samples_24_times_1hr_0.tsv")
FB2009 = Path("swim_facebook/FB-2009_samples_24_times_1hr_0.tsv")


def _rows(path: Path) -> list[list[str]]:
    return [ln.split("\t") for ln in path.read_text().splitlines() if ln.strip()]


@pytest.fixture(scope="module")
def slice300(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return head_lines(shared_data / FB2010, 300, tmp_path_factory.mktemp("swim") / "fb.tsv")


def test_jobs_follow_the_documented_derivation(slice300: Path) -> None:
    r = import_trace("swim", slice300)
    jobs = {j["id"]: j for j in r.document["workload"]["jobs"]}
    assert len(jobs) == 300
    map_only = 0
    for jid, submit, _gap, inp, shuffle, out in ((x[0], *map(int, x[1:])) for x in
                                                 _rows(slice300)):
        j = jobs[jid]
        assert j["submit"] == submit
        assert j["class"] in ("critical", "sensitive", "insensitive") and 1 <= j["priority"] <= 5
        m = j["stages"][0]
        assert m["name"] == "map" and m["demand"] == {"slots": 1}
        written = out if shuffle == 0 else 0  # a map-only job's maps write its output
        assert m["tasks"] == min(500, max(1, math.ceil(max(inp, written) / 2**28)))
        map_bytes = inp + written
        assert m["duration"] == pytest.approx(map_bytes / m["tasks"] / 20e6 + 2.0, abs=1e-3)
        if shuffle == 0:
            map_only += 1
            assert len(j["stages"]) == 1
            continue
        red = j["stages"][1]
        assert red["tasks"] == min(200, max(1, math.ceil(max(shuffle, out) / 2**30)))
        assert red["duration"] == pytest.approx((shuffle + out) / red["tasks"] / 10e6 + 2.0,
                                                abs=1e-3)
    assert r.part.stats["map_only_jobs"] == map_only > 0
    # without --machines the cluster is sized for an offered load of 0.7
    (group,) = r.document["cluster"]["machines"]
    assert group["id"] == "node" and group["capacity"] == {"slots": 8}
    load = r.stats["offered_load"]["slots"]
    assert load <= 0.7 < load * group["count"] / (group["count"] - 1)
    meta = r.document["metadata"]
    assert any(f"offered load of 0.7: {group['count']} machines" in a for a in meta["assumed"])
    assert any("256 MiB" in a for a in meta["assumed"])
    assert any("classes by size" in a for a in meta["assumed"])
    assert any("shuffle" in x for x in meta["real"])


def test_options_change_splits_and_the_cap_conserves_work(slice300: Path) -> None:
    small = import_trace("swim", slice300, machines=7,
                         options={"block_size": "64MiB", "max_maps": 50, "slots_per_machine": 4})
    assert small.document["cluster"]["machines"][0] == {
        "id": "node", "count": 7, "capacity": {"slots": 4}}
    capped = [j for j in small.document["workload"]["jobs"] if j["stages"][0]["tasks"] == 50]
    assert capped and small.part.stats["capped_map_jobs"] == len(capped)
    # a map-only job's maps also write its output
    map_bytes = {x[0]: int(x[3]) + (int(x[5]) if x[4] == "0" else 0) for x in _rows(slice300)}
    for j in capped:
        m = j["stages"][0]
        # 50 bigger splits carry all the bytes: work = bytes / rate + 50 x overhead
        assert m["tasks"] * m["duration"] == pytest.approx(
            map_bytes[j["id"]] / 20e6 + 50 * 2.0, rel=1e-4)
    with pytest.raises(TraceError, match="block_size") as e:
        import_trace("swim", slice300, options={"block_size": "12 parsecs"})
    assert "--set block_size" in e.value.one_line()


def test_malformed_rows_are_skipped_and_reported(shared_data: Path, tmp_path: Path) -> None:
    extra = ["job9001\t5\t5\t100\t0",             # 5 fields
             "",                                   # blank: ignored, not a row
             "job9002\t7\t2\t12x\t0\t1",           # not an integer
             "job9003\t9\t2\t-4\t0\t1",            # negative size
             "job0\t11\t2\t5\t0\t1",               # job0 again
             "job9004\t13\t999\t1000\t10\t10"]     # a gap that disagrees: fine
    f = head_lines(shared_data / FB2010, 500, tmp_path / "fb.tsv", extra)
    r = import_trace("swim", f)
    rows = r.log.as_dict()
    assert rows["rows"] == 505 and rows["used"] == 501
    assert rows["malformed"] == {
        "wrong field count (need 6)": {"count": 1, "first_line": 501},
        "a time or byte count is not an integer": {"count": 1, "first_line": 503},
        "negative byte count": {"count": 1, "first_line": 504},
        "duplicate job id": {"count": 1, "first_line": 505},
    }
    assert r.document["metadata"]["trace"]["rows"] == rows
    assert "job9004" in {j["id"] for j in r.document["workload"]["jobs"]}


def test_a_file_of_mostly_garbage_fails_naming_file_and_line(shared_data: Path,
                                                              tmp_path: Path) -> None:
    f = head_lines(shared_data / FB2010, 10, tmp_path / "bad.tsv",
                   [f"job{i}\tsoon\t1\t2\t3\t4" for i in range(100, 120)])
    with pytest.raises(TraceError) as e:
        import_trace("swim", f)
    assert f"{f}:11" in e.value.one_line()
    assert "20 of 30 jobs are malformed" in e.value.one_line()
    # another format altogether: the coflow file's header is already wrong
    with pytest.raises(TraceError) as e:
        import_trace("swim", shared_data / "coflow_fb2010" / "FB2010-1Hr-150-0.txt")
    assert "FB2010-1Hr-150-0.txt:1" in e.value.one_line()
    with pytest.raises(TraceError, match="file not found"):
        import_trace("swim", tmp_path / "missing.tsv")


def test_window_shifts_scales_and_limits(slice300: Path) -> None:
    rows = _rows(slice300)
    want = [x[0] for x in rows if 200 <= int(x[1]) < 500]
    r = import_trace("swim", slice300, window=Window(start=200, duration=300, arrival_scale=2))
    jobs = r.document["workload"]["jobs"]
    assert [j["id"] for j in jobs] == want
    assert all(0 <= j["submit"] < 150 for j in jobs)
    first = next(x for x in rows if x[0] == want[0])
    assert jobs[0]["submit"] == (int(first[1]) - 200) / 2
    filtered = r.log.as_dict()["filtered"]
    assert filtered["before --start"]["first_line"] == 1
    assert filtered["before --start"]["count"] + filtered["after --start+--duration"]["count"] \
        == 300 - len(want)
    r = import_trace("swim", slice300, window=Window(start=200, max_jobs=5))
    assert [j["id"] for j in r.document["workload"]["jobs"]] == want[:5]
    beyond = r.log.as_dict()["filtered"]["beyond --max-jobs"]
    assert beyond["count"] == 300 - 5 - filtered["before --start"]["count"]
    with pytest.raises(TraceError, match="none of the 300 jobs is usable"):
        import_trace("swim", slice300, window=Window(start=1e6))


def test_same_seed_same_document_other_seed_other_classes(slice300: Path) -> None:
    a = import_trace("swim", slice300, seed=5).document
    b = import_trace("swim", slice300, seed=5).document
    c = import_trace("swim", slice300, seed=6).document
    assert a == b
    assert [j["class"] for j in a["workload"]["jobs"]] != \
        [j["class"] for j in c["workload"]["jobs"]]
    # the seed draws classes only: the jobs' shapes do not depend on it
    assert [j["stages"] for j in a["workload"]["jobs"]] == \
        [j["stages"] for j in c["workload"]["jobs"]]


def test_imported_slice_simulates_to_completion_and_round_trips(slice300: Path,
                                                                tmp_path: Path) -> None:
    r = import_trace("swim", slice300, window=Window(max_jobs=120))
    workload, finished = run_fifo(r.document)
    assert finished == len(workload.jobs) == 120
    out = write_scenario(r, tmp_path / "swim.yaml", "utilon trace import swim fb.tsv")
    back = load_workload(out)
    assert back.jobs == workload.jobs
    assert back.spec.metadata == r.document["metadata"]
    assert back.cluster.machines == workload.cluster.machines


@pytest.fixture(scope="module")
def slice80(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return head_lines(shared_data / FB2010, 80, tmp_path_factory.mktemp("swim") / "fb80.tsv")


@settings(max_examples=6)
@given(start=st.integers(0, 250), duration=st.none() | st.integers(20, 300),
       max_jobs=st.none() | st.integers(1, 30), scale=st.sampled_from([0.5, 1.0, 3.0]),
       seed=st.integers(0, 2**16))
def test_any_window_imports_and_every_job_finishes(slice80: Path, start: int,
                                                   duration: int | None, max_jobs: int | None,
                                                   scale: float, seed: int) -> None:
    window = Window(start, duration, max_jobs, scale)
    want = [x[0] for x in _rows(slice80) if window.contains(int(x[1]))][:max_jobs]
    event(f"jobs: {len(want) > 0}")
    if not want:
        with pytest.raises(TraceError, match="none of the"):
            import_trace("swim", slice80, window=window, seed=seed)
        return
    r = import_trace("swim", slice80, window=window, seed=seed, machines=4)
    jobs = r.document["workload"]["jobs"]
    assert [j["id"] for j in jobs] == want
    assert all(0 <= j["submit"] <= (window.end - start) / scale for j in jobs)
    _, finished = run_fifo(r.document)
    assert finished == len(want)


def test_full_fb2010_day_imports_every_row(shared_data: Path) -> None:
    r = import_trace("swim", shared_data / FB2010)
    rows = r.log.as_dict()
    assert rows["rows"] == rows["used"] == 24_442
    assert rows["malformed"] == {} and rows["filtered"] == {}
    assert r.stats["jobs"] == 24_442
    assert r.part.stats["map_only_jobs"] == 8_324  # the README's count of shuffle = 0
    assert r.stats["submit_span_s"] == 86_408
    # job7103 is map-only and writes 5 TB from no input: its maps are split by the output
    (j,) = (j for j in r.document["workload"]["jobs"] if j["id"] == "job7103")
    assert j["stages"] == [{"name": "map", "kind": "map", "tasks": 500,
                            "duration": round(5_008_892_849_833 / 500 / 20e6 + 2, 3),
                            "demand": {"slots": 1}}]
    # FB-2009 too (the README's facts): smaller, lighter
    r9 = import_trace("swim", shared_data / FB2009)
    assert r9.stats["jobs"] == 5_894 and r9.part.stats["map_only_jobs"] == 4_448


def test_ras_table2_profiles(slice300: Path) -> None:
    from utilon.policies.ras.profiles import TABLE2, app_of

    assert app_of(100, 0) == "select" and app_of(100, 4) == "select"
    assert app_of(100, 50) == "sort" and app_of(100, 20) == "combine"
    r = import_trace("swim", slice300, options={"profiles": "ras-table2"})
    doc = r.document
    assert doc["cluster"]["machines"][0]["capacity"] == {"cpu": 1, "io": 1, "mem": 1}
    rows = {x[0]: tuple(map(int, x[3:])) for x in _rows(slice300)}
    for j in doc["workload"]["jobs"]:
        inp, shuffle, _out = rows[j["id"]]
        prof = TABLE2[app_of(inp, shuffle)]
        for stage, want in zip(j["stages"], prof, strict=False):
            assert stage["demand"] == want
    assert sum(v for k, v in r.stats.items() if k.endswith("_like_jobs")) == 300
    assert any("Table 2" in a for a in doc["metadata"]["assumed"])
    # what it builds loads and simulates
    wl = load_workload(write_scenario(r, Path(slice300).with_suffix(".ras.yaml")))
    assert len(wl.jobs) == 300
