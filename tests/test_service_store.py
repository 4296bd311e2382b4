"""The service's store on SQLite and on PostgreSQL: the same SQLAlchemy code serves both.

PostgreSQL is ``UTILON_TEST_POSTGRES`` when it names a database
(``postgresql+psycopg://user:pass@host/db``; its tables are dropped first); otherwise, when
Debian's PostgreSQL server binaries are installed, a throwaway server is started for these
tests in a temporary folder (a Unix socket, no TCP port) and stopped after them.  Only a
machine with neither skips the PostgreSQL half, and says why.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from utilon.service.store import Store, StoreError, _md

PG = os.environ.get("UTILON_TEST_POSTGRES", "")


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    if PG:
        yield PG
        return
    pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        pytest.skip("no PostgreSQL server here (apt-get install postgresql), and "
                    "UTILON_TEST_POSTGRES is not set")
    bindir = Path(bins[-1]).parent
    # not pytest's tmp_path: its parents are private to root, and a socket path must be short
    d = Path(tempfile.mkdtemp(prefix="utilon-pg-"))
    data = d / "data"
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot start PostgreSQL")
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(d, "postgres")
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-A", "trust",
                    "-U", "postgres"], check=True, capture_output=True)
    opts = f"-k {d} -c listen_addresses='' -p 54329"
    subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-w",
                    "-l", str(d / "log"), "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@/postgres?host={d}&port=54329"
    finally:
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "stop"], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "postgres":
        import sqlalchemy as sa

        url = request.getfixturevalue("pg_url")
        engine = sa.create_engine(url)
        _md.drop_all(engine)
        engine.dispose()
        s = Store(url)
    else:
        s = Store(str(tmp_path / "u.db"))
    yield s
    s.close()


def test_a_job_moves_once_and_keeps_its_history(store: Store) -> None:
    epoch, inc = store.begin_incarnation(1000.0)
    assert (epoch, inc) == (1000.0, 1)
    assert store.add_job("a", "t1", {"id": "a", "submit": 0.0}, 0.0, 60.0)
    assert not store.add_job("a", "t2", {}, 1.0, None)  # ids are unique
    assert store.add_job("b", "t2", {"id": "b"}, 1.0, None)
    with store.tx() as c:
        assert store.transition(c, "a", "running", 2.0, started=2.0)
        store.open_attempt(c, "a", 0, 0, "m0", 2.0)
        store.open_attempt(c, "a", 0, 1, "m1", 2.0)
        store.close_attempt(c, "a", 0, 0, 3.0, "done")
    with store.tx() as c:
        assert store.transition(c, "a", "finished", 5.0, finished=5.0, missed=False,
                                utility=1.0, result='{"row": {"id": "a"}}')
        assert not store.transition(c, "a", "finished", 6.0)  # never twice
    rec = store.get("a")
    assert rec is not None and rec.state == "finished" and rec.result == {"row": {"id": "a"}}
    assert [e["kind"] for e in store.events_of("a")] == ["submitted", "running", "finished"]
    assert [(a["task"], a["outcome"]) for a in store.attempts_of("a")] == [(0, "done"),
                                                                          (1, None)]
    assert [r.id for r in store.open_jobs()] == ["b"]
    assert store.counts() == {"queued": 1, "running": 0, "finished": 1, "cancelled": 0,
                              "failed": 0}
    assert ("t1", "finished", 1, 0, 1.0) in store.tally()
    page, total = store.page(tenant="t2")
    assert total == 1 and [r.id for r in page] == ["b"]


def test_a_restart_closes_what_the_crash_left_open(store: Store) -> None:
    store.begin_incarnation(1000.0)
    store.add_job("a", "t", {}, 0.0, None)
    with store.tx() as c:
        store.open_attempt(c, "a", 0, 0, "m0", 1.0)
    epoch, inc = store.begin_incarnation(2000.0)
    assert (epoch, inc) == (1000.0, 2)  # the epoch stays; the incarnation counts starts
    assert store.close_open_attempts(9.0, "lost") == 1
    assert store.attempts_of("a")[0]["outcome"] == "lost"
    store.request_cancel("a", 10.0)
    rec = store.get("a")
    assert rec is not None and rec.cancel_requested


def test_a_bad_store_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as ei:
        Store(str(tmp_path / "missing-dir" / "u.db"))
    assert "\n" not in ei.value.one_line() and "missing-dir" in ei.value.one_line()
    with pytest.raises(StoreError):
        Store("nosuchdriver://x/y")
