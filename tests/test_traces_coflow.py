"""The ``coflow-fb2010`` importer on the real coflow-benchmark hour (and slices of it): rack-level
mappers and reducers -> tasks, skipped rows, the header, windows, determinism, simulation of
what it builds and the YAML round trip."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from conftest import head_lines, run_fifo
from utilon.scenario.load import load_workload
from utilon.traces import TraceError, Window, import_trace, write_scenario

FB2010 = Path("coflow_fb2010/FB2010-1Hr-150-0.txt")
KIND = "coflow-fb2010"


def _coflows(path: Path) -> list[tuple[str, int, int, list[float]]]:
    """(id, arrival ms, mapper racks, shuffle MB per reducer rack) of each job line."""
    out = []
    for ln in path.read_text().splitlines()[1:]:
        f = ln.split()
        m = int(f[2])
        out.append((f[0], int(f[1]), m, [float(e.split(":")[1]) for e in f[4 + m:]]))
    return out


@pytest.fixture(scope="module")
def slice300(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return head_lines(shared_data / FB2010, 300, tmp_path_factory.mktemp("coflow") / "fb.txt")


def test_full_hour_imports_every_coflow(shared_data: Path) -> None:
    r = import_trace(KIND, shared_data / FB2010)
    rows = r.log.as_dict()
    assert rows["rows"] == rows["used"] == 526
    assert rows["malformed"] == {} and rows["filtered"] == {}
    assert r.part.stats["shuffle_mb"] == 35_533_534  # the README's total
    assert r.part.stats["ports"] == 150 and r.part.stats["header_coflows"] == 526
    assert r.stats["submit_span_s"] == 3629.235
    (group,) = r.document["cluster"]["machines"]  # sized for an offered load of 0.7
    assert group["id"] == "rack" and group["capacity"] == {"slots": 8}
    assert r.stats["offered_load"]["slots"] <= 0.7


def test_racks_become_tasks_as_documented(slice300: Path) -> None:
    r = import_trace(KIND, slice300, options={"reduce_bytes": None})
    jobs = r.document["workload"]["jobs"]
    assert len(jobs) == 299
    for j, (cid, ms, m, mbs) in zip(jobs, _coflows(slice300), strict=True):
        assert j["id"] == cid and j["submit"] == ms / 1000
        mp, red = j["stages"]
        assert mp["tasks"] == 4 * m
        assert mp["duration"] == pytest.approx(sum(mbs) * 2**20 / mp["tasks"] / 20e6 + 2,
                                               abs=1e-3)
        assert red["durations"] == pytest.approx([mb * 2**20 / 10e6 + 2 for mb in mbs],
                                                 abs=1e-3)
    assert "header_coflows" in r.part.stats
    assert any("maps_per_rack = 4" in a for a in r.document["metadata"]["assumed"])
    # options: more maps per rack, map input twice the shuffle, split reducers
    r2 = import_trace(KIND, slice300, machines=10, options={
        "maps_per_rack": 2, "input_ratio": 2.0, "reduce_bytes": "256MiB",
        "max_reduces_per_rack": 3, "task_overhead": 0})
    assert r2.document["cluster"]["machines"][0]["count"] == 10
    for j, (_, _, m, mbs) in zip(r2.document["workload"]["jobs"], _coflows(slice300),
                                 strict=True):
        mp, red = j["stages"]
        assert mp["tasks"] == 2 * m
        # work is conserved, up to rounding each task to 1 ms
        assert mp["tasks"] * mp["duration"] == pytest.approx(
            2 * sum(mbs) * 2**20 / 20e6, abs=mp["tasks"] * 1e-3)
        n = len(red["durations"])
        assert n == sum(min(3, max(1, -(-mb // 256))) for mb in mbs)
        assert sum(red["durations"]) == pytest.approx(sum(mbs) * 2**20 / 10e6, abs=n * 1e-3)


def test_malformed_lines_are_skipped_and_reported(shared_data: Path, tmp_path: Path) -> None:
    extra = ["9001 3630000 1 5 2 7:1.0",               # R says 2, one entry
             "9002 3630001 1 150 1 7:1.0",             # mapper rack 150 of 150 ports
             "",                                       # blank: ignored
             "9003 3630002 1 5 1 7:-3.0",              # negative MB
             "9004 3630003 1 5 1 7",                   # not rack:MB
             "9005 soon 1 5 1 7:1.0",                  # not an integer
             "9006 3630004 1 5 1 7:2.0"]               # fine
    f = head_lines(shared_data / FB2010, 527, tmp_path / "fb.txt", extra)
    r = import_trace(KIND, f)
    rows = r.log.as_dict()
    assert rows["rows"] == 532 and rows["used"] == 527
    assert rows["malformed"] == {
        "R does not match the number of reducer entries": {"count": 1, "first_line": 528},
        "rack location outside [0, ports)": {"count": 1, "first_line": 529},
        "shuffle MB is negative or not finite": {"count": 1, "first_line": 531},
        "a reducer entry is not rack:MB": {"count": 1, "first_line": 532},
        "arrival, M, a mapper rack or R is not an integer": {"count": 1, "first_line": 533},
    }
    assert r.document["workload"]["jobs"][-1]["id"] == "9006"


def test_a_bad_header_or_mostly_garbage_fails_naming_file_and_line(
        shared_data: Path, tmp_path: Path) -> None:
    swim = shared_data / "swim_facebook" / "FB-2010_samples_24_times_1hr_0.tsv"
    for header in ("150", "150 526 3", "ports 526", "0 526", ""):
        f = tmp_path / "h.txt"
        f.write_text(header + "\n1 0 1 22 1 65:1.0\n")
        with pytest.raises(TraceError) as e:
            import_trace(KIND, f)
        assert f"{f}:1: header" in e.value.one_line()
    with pytest.raises(TraceError) as e:
        import_trace(KIND, swim)
    assert f"{swim}:1: header" in e.value.one_line()
    garbage = [f"{i} {i} 2 1 1 3:4.0" for i in range(100, 120)]  # M = 2 but one rack
    f = head_lines(shared_data / FB2010, 11, tmp_path / "bad.txt", garbage)
    with pytest.raises(TraceError) as e:
        import_trace(KIND, f)
    assert f"{f}:12" in e.value.one_line() and "20 of 30 coflows are malformed" in str(e.value)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(TraceError, match="empty"):
        import_trace(KIND, empty)


def test_window_shifts_scales_and_limits(slice300: Path) -> None:
    cf = _coflows(slice300)
    want = [c[0] for c in cf if 600_000 <= c[1] < 1_200_000]
    r = import_trace(KIND, slice300, window=Window(start=600, duration=600, arrival_scale=0.5))
    jobs = r.document["workload"]["jobs"]
    assert [j["id"] for j in jobs] == want and want
    assert all(0 <= j["submit"] < 1200 for j in jobs)
    first = next(c for c in cf if c[0] == want[0])
    assert jobs[0]["submit"] == pytest.approx((first[1] / 1000 - 600) * 2)
    filtered = r.log.as_dict()["filtered"]
    assert sum(v["count"] for v in filtered.values()) == 299 - len(want)
    assert filtered["before --start"]["first_line"] == 2
    r = import_trace(KIND, slice300, window=Window(start=600, max_jobs=3))
    assert [j["id"] for j in r.document["workload"]["jobs"]] == want[:3]
    assert "beyond --max-jobs" in r.log.as_dict()["filtered"]


def test_same_seed_same_document_other_seed_other_classes(slice300: Path) -> None:
    a = import_trace(KIND, slice300, seed=11).document
    assert a == import_trace(KIND, slice300, seed=11).document
    c = import_trace(KIND, slice300, seed=12).document
    assert [j["class"] for j in a["workload"]["jobs"]] != \
        [j["class"] for j in c["workload"]["jobs"]]
    assert [j["stages"] for j in a["workload"]["jobs"]] == \
        [j["stages"] for j in c["workload"]["jobs"]]


def test_imported_slice_simulates_to_completion_and_round_trips(slice300: Path,
                                                                tmp_path: Path) -> None:
    r = import_trace(KIND, slice300, window=Window(max_jobs=80))
    workload, finished = run_fifo(r.document)
    assert finished == len(workload.jobs) == 80
    out = write_scenario(r, tmp_path / "coflow.yaml")
    back = load_workload(out)
    assert back.jobs == workload.jobs
    assert back.spec.metadata == r.document["metadata"]


@pytest.fixture(scope="module")
def slice60(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return head_lines(shared_data / FB2010, 61, tmp_path_factory.mktemp("coflow") / "fb60.txt")


@settings(max_examples=6)
@given(start=st.integers(0, 350), duration=st.none() | st.integers(30, 400),
       max_jobs=st.none() | st.integers(1, 25), scale=st.sampled_from([0.5, 1.0, 4.0]),
       seed=st.integers(0, 2**16))
def test_any_window_imports_and_every_job_finishes(slice60: Path, start: int,
                                                   duration: int | None, max_jobs: int | None,
                                                   scale: float, seed: int) -> None:
    window = Window(start, duration, max_jobs, scale)
    want = [c[0] for c in _coflows(slice60) if window.contains(c[1] / 1000)][:max_jobs]
    event(f"jobs: {len(want) > 0}")
    if not want:
        with pytest.raises(TraceError, match="none of the"):
            import_trace(KIND, slice60, window=window, seed=seed)
        return
    r = import_trace(KIND, slice60, window=window, seed=seed)
    jobs = r.document["workload"]["jobs"]
    assert [j["id"] for j in jobs] == want
    assert all(0 <= j["submit"] <= (window.end - start) / scale for j in jobs)
    _, finished = run_fifo(r.document)
    assert finished == len(want)
