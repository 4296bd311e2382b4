"""The service's store on SQLite and, when ``UTILON_TEST_POSTGRES`` names a database
(``postgresql+psycopg://user:pass@localhost/db``; its tables are dropped first), on
PostgreSQL: the same SQLAlchemy code serves both."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from utilon.service.store import Store, StoreError, _md

PG = os.environ.get("UTILON_TEST_POSTGRES", "")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "postgres":
        if not PG:
            pytest.skip("set UTILON_TEST_POSTGRES to a PostgreSQL URL to test it")
        import sqlalchemy as sa

        engine = sa.create_engine(PG)
        _md.drop_all(engine)
        engine.dispose()
        s = Store(PG)
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
