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
from contextlib import contextmanager
from pathlib import Path

import pytest

from utilon.service.store import Store, StoreError, _md

PG = os.environ.get("UTILON_TEST_POSTGRES", "")


@contextmanager
def throwaway_postgres(port: int) -> Iterator[str]:
    """A PostgreSQL server for one test module: ``UTILON_TEST_POSTGRES`` if set, else a
    throwaway one in a temporary folder (a Unix socket, no TCP port; ``port`` names the
    socket), stopped afterwards; a skip that says why when neither can be had."""
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
    opts = f"-k {d} -c listen_addresses='' -p {port}"
    subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-w",
                    "-l", str(d / "log"), "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@/postgres?host={d}&port={port}"
    finally:
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "stop"], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with throwaway_postgres(54329) as url:
        yield url


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


def test_concurrent_submissions_go_in_groups_and_each_id_is_taken_once(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Submissions that arrive together are written in one transaction (group commit), each
    returns only once its group has committed, and a duplicate id in the same group is
    refused like one already in the store."""
    import threading
    import time

    store.begin_incarnation(1000.0)
    assert store.add_job("dup-0", "t", {}, 0.0, None)
    groups: list[list[str]] = []
    insert = store._commit_group

    def slow_insert(batch):  # type: ignore[no-untyped-def]
        groups.append([s.job_id for s in batch])
        time.sleep(0.05)  # a slow fsync: the others arrive meanwhile and wait for the next
        insert(batch)

    monkeypatch.setattr(store, "_commit_group", slow_insert)
    ids = [f"j{i}" for i in range(40)] + ["dup-0", "dup-1", "dup-1", "dup-1"]
    results: dict[int, bool] = {}
    seen_after: dict[int, bool] = {}
    start = threading.Barrier(len(ids))

    def submit(k: int) -> None:
        start.wait()
        results[k] = store.add_job(ids[k], "t", {"k": k}, float(k), None)
        seen_after[k] = store.get(ids[k]) is not None  # durable when add_job returns

    threads = [threading.Thread(target=submit, args=(k,)) for k in range(len(ids))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == len(ids) and all(seen_after.values())
    assert all(results[k] for k in range(40))
    assert not results[40]  # already in the store
    assert sorted(results[k] for k in (41, 42, 43)) == [False, False, True]
    assert len(groups) < len(ids) and max(map(len, groups)) > 1  # grouped
    assert sorted(r.id for r in store.open_jobs()) == sorted(set(ids))
    assert [e["kind"] for e in store.events_of("dup-1")] == ["submitted"]


def test_a_database_without_on_conflict_asks_first_and_answers_the_same(
        tmp_path: Path) -> None:
    """Other databases than SQLite and PostgreSQL: the ids a group's submissions name are
    asked for before the insert; a taken id and a duplicate in the group are refused alike."""
    from utilon.service.store import _Submission

    store = Store(str(tmp_path / "u.db"))
    try:
        store.begin_incarnation(1000.0)
        store._insert_new = None  # as on a database without INSERT ... ON CONFLICT
        assert store.add_job("a", "t", {"k": 1}, 0.0, None)
        subs = [_Submission(i, "t", {"k": k}, 1.0, None) for k, i in enumerate(["a", "b", "b"])]
        store._commit_group(list(subs))
        assert [s.added for s in subs] == [False, True, False]
        assert subs[1].seq == store.get("b").seq  # type: ignore[union-attr]
        assert store.get("b").spec == {"k": 1}  # type: ignore[union-attr]
    finally:
        store.close()


def test_the_writer_opens_another_connection_after_a_failed_transaction(
        tmp_path: Path) -> None:
    """The writer keeps its connection between groups; one that breaks fails the group that
    found it broken, and the next group writes on a new one."""
    store = Store(str(tmp_path / "u.db"))
    try:
        store.begin_incarnation(1000.0)
        assert store.add_job("a", "t", {}, 0.0, None)
        first = store._group_conn
        assert first is not None
        assert store.add_job("b", "t", {}, 0.0, None) and store._group_conn is first  # kept
        first.connection.dbapi_connection.close()  # type: ignore[union-attr]  # it breaks
        import sqlalchemy as sa

        with pytest.raises(sa.exc.DBAPIError):  # (the API answers it with a 5xx, never a 201)
            store.add_job("c", "t", {}, 0.0, None)
        assert store.add_job("d", "t", {}, 0.0, None)
        assert store._group_conn is not first
        assert [r.id for r in store.open_jobs()] == ["a", "b", "d"]
    finally:
        store.close()


def test_a_failed_group_fails_every_submission_in_it(store: Store,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A group whose transaction fails raises in every call it holds; nothing is half
    written, and the next submission goes through."""
    import threading

    store.begin_incarnation(1000.0)
    gate = threading.Event()
    insert = store._commit_group
    calls = []

    def failing_once(batch):  # type: ignore[no-untyped-def]
        calls.append(len(batch))
        if len(calls) == 1:
            gate.wait(5)  # hold the first group while the others queue up
            raise OSError("disk full")
        insert(batch)

    monkeypatch.setattr(store, "_commit_group", failing_once)
    outcome: dict[str, object] = {}

    def submit(job_id: str) -> None:
        try:
            outcome[job_id] = store.add_job(job_id, "t", {}, 0.0, None)
        except OSError as e:
            outcome[job_id] = e

    first = threading.Thread(target=submit, args=("a",))
    first.start()
    while not calls:
        threading.Event().wait(0.01)
    rest = [threading.Thread(target=submit, args=(j,)) for j in ("b", "c")]
    for t in rest:
        t.start()
    gate.set()
    for t in [first, *rest]:
        t.join(10)
    assert isinstance(outcome["a"], OSError)
    assert outcome["b"] is True and outcome["c"] is True  # the next group
    assert store.get("a") is None


def test_one_server_holds_the_lease_and_one_that_lost_it_commits_nothing(store: Store) -> None:
    """The standby's lease (service.lease): compare-and-set acquisition, renewal, expiry,
    release; a server whose term is over is fenced off in the store itself."""
    import time

    from utilon.service.lease import Lease
    from utilon.service.store import LeaseLost

    store.begin_incarnation(1000.0)
    other = Store(store.url)  # the second server: its own connections
    try:
        a = Lease(store, "a", "http://a:1", ttl=0.6)
        b = Lease(other, "b", "http://b:1", ttl=0.6)
        assert a.try_acquire() and a.held() and a.term == 1
        assert not b.try_acquire() and not b.held()
        assert b.active_address() == "http://a:1"  # what b's 503s name
        assert a.renew() and store.add_job("x", "t", {}, 0.0, None)  # a's writes go through
        time.sleep(0.7)  # a stalls: no renewal for longer than the lease lasts
        assert not a.held()  # it fenced itself before the store let b in
        assert b.try_acquire() and b.term == 2
        assert not a.renew()  # lost for good
        with pytest.raises(LeaseLost):  # and the store refuses whatever it still tries
            store.add_job("y", "t", {}, 0.0, None)
        assert store.get("y") is None
        assert other.add_job("z", "t", {}, 0.0, None)
        b.release()  # a clean stop: the next server need not wait for the expiry
        c = Lease(store, "c", "http://c:1", ttl=0.6)
        assert c.try_acquire() and c.term == 3
    finally:
        other.close()


def test_of_servers_racing_for_the_lease_one_wins(store: Store) -> None:
    import threading

    from utilon.service.lease import Lease

    stores = [Store(store.url) for _ in range(5)]
    won: list[str] = []
    go = threading.Barrier(len(stores))

    def race(k: int) -> None:
        lease = Lease(stores[k], f"s{k}", f"http://s{k}:1", ttl=30)
        go.wait()
        if lease.try_acquire():
            won.append(lease.holder)

    threads = [threading.Thread(target=race, args=(k,)) for k in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for s in stores:
        s.close()
    assert len(won) == 1


def test_a_second_server_on_a_sqlite_store_is_refused(tmp_path: Path) -> None:
    """SQLite has no standby: the store's lock file names the server that holds it."""
    import sys

    from utilon.service.lease import lock_sqlite

    db = tmp_path / "u.db"
    held = lock_sqlite(Store(str(db)), "http://127.0.0.1:8765")
    assert held is not None
    # a lock held by another process (POSIX locks are per process)
    probe = ("import sys; from utilon.service.lease import lock_sqlite; "
             "from utilon.service.store import Store; from utilon.errors import UtilonError\n"
             "try:\n    lock_sqlite(Store(sys.argv[1]), 'http://x:1')\n"
             "except UtilonError as e:\n    print(e.one_line()); sys.exit(3)\n")
    r = subprocess.run([sys.executable, "-c", probe, str(db)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 3, r.stderr
    assert "another utilon serve serves this SQLite store" in r.stdout
    assert f"pid {os.getpid()}" in r.stdout and "http://127.0.0.1:8765" in r.stdout
    held.close()  # the first server is gone: the next one may serve it
    r = subprocess.run([sys.executable, "-c", probe, str(db)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
