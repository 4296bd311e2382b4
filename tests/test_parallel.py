"""Parallel simulations (``utilon.parallel``): the same results as one after another.

The CLI test runs every registered policy serially and on two processes and compares every
file byte for byte, apart from the ``timing`` key (wall-clock numbers).  The Ray test is marked
``ray``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from utilon.cli import app
from utilon.errors import UnknownNameError, UtilonError
from utilon.parallel import Progress, run_all

ROOT = Path(__file__).resolve().parent.parent
SMALL = str(ROOT / "examples" / "small-mapreduce.yaml")
runner = CliRunner()


def _scaled(shared: int, item: int, progress: Progress | None) -> int:
    if progress is not None:
        progress(1, 2)
        progress(2, 2)
    return shared * item


def _fails_on_three(shared: int, item: int, progress: Progress | None) -> int:
    if item == 3:
        raise UnknownNameError("policy", "fiffo", ["fifo"], where="there", fix="spell it")
    return item


@pytest.mark.parametrize("jobs", [1, 2])
def test_results_keep_the_items_order_and_every_run_reports_its_end(jobs: int) -> None:
    seen: dict[int, list[tuple[int, int]]] = {}
    got = run_all(_scaled, 10, [5, 1, 4, 2], jobs=jobs,
                  on_progress=lambda i, d, t: seen.setdefault(i, []).append((d, t)))
    assert got == [50, 10, 40, 20]
    assert sorted(seen) == [0, 1, 2, 3]
    for calls in seen.values():
        assert (2, 2) in calls  # what the run said (at most every 0.2 s, and its end)
        assert calls[-1] == (1, 1)  # and then that it returned


def test_an_error_in_a_worker_reaches_the_caller_whole() -> None:
    with pytest.raises(UnknownNameError) as e:
        run_all(_fails_on_three, 0, [1, 2, 3, 4], jobs=2)
    assert e.value.where == "there" and e.value.fix == "spell it"
    assert e.value.valid == ("fifo",)
    assert e.value.one_line() == ("there: unknown policy 'fiffo'; valid: fifo "
                                  "(fix: spell it)")


def test_no_items_is_no_work() -> None:
    assert run_all(_scaled, 1, [], jobs=2) == []


def test_jobs_below_one_is_refused() -> None:
    with pytest.raises(UtilonError, match="--jobs must be at least 1"):
        run_all(_scaled, 1, [1], jobs=0)


def _without_timing(x: Any) -> Any:
    """``x`` with every ``timing`` object replaced by its keys (their values are measured)."""
    if isinstance(x, dict):
        return {k: list(v) if k == "timing" else _without_timing(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_without_timing(v) for v in x]
    return x


def assert_same_outputs(a: Path, b: Path) -> int:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for f in files:
        x, y = (a / f).read_bytes(), (b / f).read_bytes()
        if f.suffix == ".json":  # the same keys in the same order, the same values
            assert (json.dumps(_without_timing(json.loads(x)))
                    == json.dumps(_without_timing(json.loads(y)))), f
        else:
            assert x == y, f
    return len(files)


def test_parallel_compare_writes_what_a_serial_one_writes(tmp_path: Path) -> None:
    """Every registered policy, serially in this process and on two spawned processes."""
    for jobs in ("1", "2"):
        res = runner.invoke(app, ["compare", SMALL, "--policies", "all", "--jobs", jobs,
                                  "--out", str(tmp_path / jobs)])
        assert res.exit_code == 0, res.output
    assert assert_same_outputs(tmp_path / "1", tmp_path / "2") > 12 * 5


def test_compare_refuses_zero_jobs(tmp_path: Path) -> None:
    res = runner.invoke(app, ["compare", SMALL, "--policies", "fifo", "--jobs", "0",
                              "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "--jobs must be at least 1" in res.stderr
    assert not (tmp_path / "fifo").exists()


@pytest.mark.ray
def test_compare_on_ray_writes_what_a_serial_one_writes(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    for flag in (["--jobs", "1"], ["--ray-address", "local"]):
        res = runner.invoke(app, ["compare", SMALL, "--policies", "fifo,cora,ras", *flag,
                                  "--out", str(tmp_path / flag[0])])
        assert res.exit_code == 0, res.output
    assert assert_same_outputs(tmp_path / "--jobs", tmp_path / "--ray-address") == 3 * 7 + 2


def test_an_unreachable_ray_address_fails_in_seconds_with_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens at: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        res = runner.invoke(app, ["compare", SMALL, "--policies", "fifo", "--ray-address",
                                  f"127.0.0.1:{port}", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert f"--ray-address 127.0.0.1:{port}: cannot reach a Ray cluster" in res.stderr
    assert "--ray-address local" in res.stderr
    assert "Traceback" not in res.output
