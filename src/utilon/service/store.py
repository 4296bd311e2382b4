"""The service's durable state: jobs, every state change, every task attempt.

One SQLAlchemy Core schema over SQLite by default (one file, WAL, ``synchronous=FULL`` so that
a committed submission survives a crash of the process or of the machine) or any URL
SQLAlchemy serves (``postgresql://...`` with a driver installed).  Every write is one
transaction; the API commits a submission before it answers 201.

Concurrent writers.  SQLite lets one writer in at a time and makes the others poll with
growing sleeps (up to 100 ms each), so under a burst a submission could wait a second for a
lock that had long been free.  On SQLite the store therefore lets one of its own transactions
write at a time (a process-wide lock, which hands the database over at once).  Submissions are
written by one writer thread, every submission waiting when it is free in one transaction
(group commit, ``service.writer``: one fsync for the group); ``submit_job`` returns a future
that resolves once the transaction that holds the submission has committed, ``add_job`` waits
for it.  Other databases (PostgreSQL) handle concurrent writers themselves: there only the
grouping applies.

Tables:

* ``meta``: the service epoch (wall-clock second that is time 0 of the service's clock) and the
  incarnation counter (one per start of ``utilon serve`` on this store);
* ``jobs``: one row per accepted job, keyed by ``TENANT:ID`` (a job's id is its tenant's;
  stores written before issue 46 have rows keyed by the bare id) -- its tenant, the submitted
  spec (JSON, with ``submit`` on the service clock), its state (``queued``, ``running``,
  ``finished``, ``cancelled``, ``failed``), when it was submitted, started and finished, and
  once finished its result (the ``jobs.csv`` row and the output verification);
* ``events``: every state change of a job (and a cancel request), in order;
* ``attempts``: every task attempt, opened at launch and closed with its outcome;
* ``leases``: the one row that says which server is active when two serve one PostgreSQL store
  (``service.lease``): its holder, address, term (the fencing token) and expiry, on the
  database's clock.

**Fencing.**  Once this store's server holds the lease, ``fence`` is set to its (holder, term),
and every transaction ``tx()`` opens first takes a share lock on the lease row and checks it:
a server that lost the lease can commit nothing (``LeaseLost``), and no standby can take the
lease while a transaction of the active one is open.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from utilon.errors import UtilonError
from utilon.service.writer import GroupWriter

R = TypeVar("R")
STATES = ("queued", "running", "finished", "cancelled", "failed")
OPEN_STATES = ("queued", "running")

_md = sa.MetaData()
meta = sa.Table("meta", _md, sa.Column("key", sa.String(64), primary_key=True),
                sa.Column("value", sa.Text, nullable=False))
jobs = sa.Table(
    "jobs", _md,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(200), nullable=False, unique=True),
    sa.Column("tenant", sa.String(100), nullable=False, index=True),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("submitted", sa.Float, nullable=False),
    sa.Column("goal", sa.Float),
    sa.Column("started", sa.Float),
    sa.Column("finished", sa.Float),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("reason", sa.Text, nullable=False, default=""),
    sa.Column("result", sa.Text),
    sa.Column("missed", sa.Boolean),
    sa.Column("utility", sa.Float),
)
events = sa.Table(
    "events", _md,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job", sa.String(200), nullable=False, index=True),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("detail", sa.Text, nullable=False, default=""),
    sa.Column("incarnation", sa.Integer, nullable=False),
)
attempts = sa.Table(
    "attempts", _md,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job", sa.String(200), nullable=False, index=True),
    sa.Column("stage", sa.Integer, nullable=False),
    sa.Column("task", sa.Integer, nullable=False),
    sa.Column("machine", sa.String(200), nullable=False),
    sa.Column("start", sa.Float, nullable=False),
    sa.Column("end", sa.Float),
    sa.Column("outcome", sa.String(32)),
    sa.Column("incarnation", sa.Integer, nullable=False),
)


leases = sa.Table(
    "leases", _md,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("holder", sa.String(200), nullable=False),
    sa.Column("address", sa.String(500), nullable=False),
    sa.Column("term", sa.Integer, nullable=False),
    sa.Column("expires", sa.Float, nullable=False),  # the database's clock, Unix seconds
)
_SCHEMA_LOCK = 0x7574696C6F6E  # "utilon": PostgreSQL's advisory lock for creating tables
ACTIVE = "active"
"""the name of the lease row of the active server"""


class StoreError(UtilonError):
    """The store cannot be opened or written."""


class LeaseLost(StoreError):
    """A transaction of a server that no longer holds the lease: refused, nothing written."""


@dataclass(frozen=True, slots=True)
class LeaseRow:
    """The lease as the store holds it: ``left`` is the seconds until it expires (database
    clock; 0 or less: expired, anyone may take it)."""

    holder: str
    address: str
    term: int
    left: float


@dataclass(frozen=True)
class JobRecord:
    seq: int
    id: str
    tenant: str
    spec: dict[str, Any]
    state: str
    submitted: float
    goal: float | None
    started: float | None
    finished: float | None
    cancel_requested: bool
    reason: str
    result: dict[str, Any] | None

    @property
    def name(self) -> str:
        """The id its tenant gave it (``id`` is the store's key, ``TENANT:ID``)."""
        prefix = self.tenant + ":"
        return self.id[len(prefix):] if self.id.startswith(prefix) else self.id


def _record(row: Any) -> JobRecord:
    return JobRecord(row.seq, row.id, row.tenant, json.loads(row.spec), row.state, row.submitted,
                     row.goal, row.started, row.finished, bool(row.cancel_requested),
                     row.reason or "", json.loads(row.result) if row.result else None)


def url_for(db: str) -> str:
    """A ``--db`` value as a SQLAlchemy URL: a URL as it is, a path as a SQLite file."""
    return db if "://" in db else f"sqlite:///{db}"


def redacted(url: str) -> str:
    """``url`` with its password replaced by ``***``: what banners, logs and errors show
    (issue 46: the PostgreSQL password was printed in the banner and in connection errors)."""
    try:
        u = sa.engine.make_url(url)
    except Exception:  # not a URL SQLAlchemy can read: hide whatever sits between : and @
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
    return u.render_as_string(hide_password=True) if u.password else str(u)


def _password(url: str) -> str | None:
    try:
        return sa.engine.make_url(url).password
    except Exception:
        m = re.search(r"://[^:/@]*:([^@]*)@", url)
        return m.group(1) if m else None


class _Submission:
    """One submission waiting for the transaction of its group."""

    __slots__ = ("added", "goal", "job_id", "seq", "spec", "submitted", "tenant")

    def __init__(self, job_id: str, tenant: str, spec: dict[str, Any], submitted: float,
                 goal: float | None) -> None:
        self.job_id = job_id
        self.tenant = tenant
        self.spec = spec
        self.submitted = submitted
        self.goal = goal
        self.added = False
        self.seq = 0

    def record(self) -> JobRecord:
        """The job as its transaction wrote it (queued)."""
        return JobRecord(self.seq, self.job_id, self.tenant, self.spec, "queued",
                         self.submitted, self.goal, None, None, False, "", None)


class _Work:
    """A write of the engine's for the writer's next transaction (``Store.write``)."""

    __slots__ = ("fn", "result")

    def __init__(self, fn: Callable[[Connection], Any]) -> None:
        self.fn = fn
        self.result: Any = None


class Store:
    def __init__(self, db: str) -> None:
        self.url = url_for(db)
        self.safe_url = redacted(self.url)  # the one to print
        self.sqlite = self.url.startswith("sqlite")
        try:
            kw: dict[str, Any] = {}
            if self.sqlite:
                kw["connect_args"] = {"check_same_thread": False, "timeout": 30.0}
            self.engine: Engine = sa.create_engine(self.url, future=True, **kw)
            if self.sqlite:
                sa.event.listen(self.engine, "connect", _sqlite_pragmas)
                _md.create_all(self.engine)
            else:
                with self.engine.begin() as c:
                    if self.engine.dialect.name == "postgresql":
                        # two servers (an active one and its standby) starting at once on
                        # a new database must not both create the tables
                        c.execute(sa.select(sa.func.pg_advisory_xact_lock(_SCHEMA_LOCK)))
                    _md.create_all(c)
        except Exception as e:  # a bad URL, a missing driver, an unwritable file
            detail = str(e)
            password = _password(self.url)
            if password:
                detail = detail.replace(password, "***")
            raise StoreError(f"cannot open the store: {type(e).__name__}: {detail}",
                             where=redacted(db) if "://" in db else db,
                             fix="give a writable file path or a database URL") from None
        self.incarnation = 0
        self.epoch = 0.0
        # one writing transaction at a time on SQLite (see the module docstring)
        self._write: AbstractContextManager[Any] = (
            threading.Lock() if self.sqlite else nullcontext())
        # group commit of submissions (service.writer)
        self.writer: GroupWriter[_Submission | _Work] = GroupWriter(
            self._write_group, name="utilon-store-writer")
        self.fence: tuple[str, int] | None = None  # (holder, term) once this server is active
        self.fence_idle_ms = 5000  # a fenced transaction idle this long is ended (PostgreSQL)
        self._lease_row = False  # the lease row is known to exist
        # the writer's own connection, kept between its groups (``_group_tx``)
        self._group_conn: Connection | None = None
        self._insert_new = _insert_new_sql(self.engine.dialect.name)

    def close(self) -> None:
        self.writer.close()
        if self._group_conn is not None:
            self._group_conn.close()
            self._group_conn = None
        self.engine.dispose()

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        """One writing transaction (fenced: see the module docstring)."""
        with self._write, self.engine.begin() as conn:
            if self.fence is not None:
                self._check_fence(conn, self.fence)
            yield conn

    @contextmanager
    def _group_tx(self) -> Iterator[Connection]:
        """``tx()`` on the writer's own connection, kept open between groups: checking a
        connection out of the pool and resetting it on the way back cost as much CPU as a
        small group's statements.  A transaction that fails closes it (it may be broken: a
        database restarted), and the next group opens another.  Only the writer's thread
        calls this."""
        with self._write:
            conn = self._group_conn
            if conn is None or conn.closed or conn.invalidated:
                conn = self._group_conn = self.engine.connect()
            try:
                with conn.begin():
                    if self.fence is not None:
                        self._check_fence(conn, self.fence)
                    yield conn
            except BaseException:
                self._group_conn = None
                conn.close()
                raise

    def _check_fence(self, c: Connection, fence: tuple[str, int]) -> None:
        q = sa.select(leases.c.holder, leases.c.term)
        if self.engine.dialect.name == "postgresql":
            # in the same round trip: should this server stall inside the transaction
            # (SIGSTOP, a partition) the database ends it within a lease's length, and with
            # it the lock that would keep the standby from taking over
            q = q.add_columns(sa.func.set_config("idle_in_transaction_session_timeout",
                                                 str(self.fence_idle_ms), True))
        row = c.execute(q.where(leases.c.name == ACTIVE).with_for_update(read=True)).first()
        if row is None or (row.holder, row.term) != fence:
            held = f"term {row.term}, held by {row.holder}" if row is not None else "no lease"
            raise LeaseLost(f"this server no longer holds the lease (it held term {fence[1]}; "
                            f"the store says {held})", where="lease",
                            fix="retry on the active server")

    # -- the lease of the active server (service.lease) ---------------------------------
    def _db_now(self) -> Any:
        """The database's clock in Unix seconds (the lease's: servers' clocks may differ)."""
        name = self.engine.dialect.name
        if name == "postgresql":
            return sa.cast(sa.extract("epoch", sa.func.clock_timestamp()), sa.Float)
        if name == "sqlite":
            return (sa.func.julianday("now") - 2440587.5) * 86400.0
        raise StoreError(f"no lease on a {name} store", where="--db",
                         fix="a standby server needs PostgreSQL")

    @contextmanager
    def _lease_tx(self) -> Iterator[Connection]:
        """A transaction on the lease row, never fenced, that waits at most a second for a
        lock (an active server's transaction, or a dead one's the database has not yet
        noticed): the caller tries again at its next tick."""
        with self._write, self.engine.begin() as c:
            if self.engine.dialect.name == "postgresql":
                c.execute(sa.text("SET LOCAL lock_timeout = '1s'"))
            if not self._lease_row:
                if c.execute(sa.select(leases.c.term).where(leases.c.name == ACTIVE)
                             ).first() is None:
                    c.execute(leases.insert().values(name=ACTIVE, holder="", address="",
                                                     term=0, expires=0.0))
                self._lease_row = True
            yield c

    def lease_acquire(self, holder: str, address: str, ttl: float) -> int | None:
        """Take the lease if it has expired (compare-and-set: of servers trying at once, one
        wins); its new term, or None."""
        now = self._db_now()
        try:
            with self._lease_tx() as c:
                res = c.execute(leases.update().where(leases.c.name == ACTIVE)
                                .where(leases.c.expires < now)
                                .values(holder=holder, address=address,
                                        term=leases.c.term + 1, expires=now + ttl))
                if res.rowcount != 1:
                    return None
                return int(c.execute(sa.select(leases.c.term)
                                     .where(leases.c.name == ACTIVE)).scalar_one())
        except sa.exc.IntegrityError:  # another server inserted the row first: next tick
            return None

    def lease_renew(self, holder: str, term: int, ttl: float) -> bool:
        """Extend the lease by ``ttl`` from now; False if it is not ``holder``'s ``term``."""
        now = self._db_now()
        with self._lease_tx() as c:
            res = c.execute(leases.update().where(leases.c.name == ACTIVE)
                            .where(leases.c.holder == holder).where(leases.c.term == term)
                            .values(expires=now + ttl))
        return res.rowcount == 1

    def lease_release(self, holder: str, term: int) -> None:
        """Let the lease go now (a clean stop): a standby takes it at its next try."""
        with self._lease_tx() as c:
            c.execute(leases.update().where(leases.c.name == ACTIVE)
                      .where(leases.c.holder == holder).where(leases.c.term == term)
                      .values(expires=0.0))

    def lease_read(self) -> LeaseRow | None:
        now = self._db_now()
        with self.engine.connect() as c:
            row = c.execute(sa.select(leases.c.holder, leases.c.address, leases.c.term,
                                      (leases.c.expires - now).label("left"))
                            .where(leases.c.name == ACTIVE)).first()
        return None if row is None else LeaseRow(str(row.holder), str(row.address),
                                                 int(row.term), float(row.left))

    # -- the service's clock and incarnations --------------------------------------------
    def begin_incarnation(self, now: float | None = None) -> tuple[float, int]:
        """Start one run of the service on this store: returns (epoch, incarnation)."""
        wall = time.time() if now is None else now
        with self.tx() as c:
            rows = dict(c.execute(sa.select(meta.c.key, meta.c.value)).all())
            epoch = float(rows.get("epoch", wall))
            inc = int(rows.get("incarnation", 0)) + 1
            if "epoch" not in rows:
                c.execute(meta.insert().values(key="epoch", value=repr(epoch)))
            if "incarnation" in rows:
                c.execute(meta.update().where(meta.c.key == "incarnation")
                          .values(value=str(inc)))
            else:
                c.execute(meta.insert().values(key="incarnation", value=str(inc)))
        self.epoch, self.incarnation = epoch, inc
        return epoch, inc

    def clock(self) -> tuple[float, int]:
        """The epoch and the last incarnation, as stored (0, 0 for a new store)."""
        with self.engine.connect() as c:
            rows = {str(k): str(v) for k, v in c.execute(sa.select(meta.c.key, meta.c.value))}
        return float(rows.get("epoch", 0.0)), int(rows.get("incarnation", 0))

    # -- jobs ---------------------------------------------------------------------------
    def submit_job(self, job_id: str, tenant: str, spec: dict[str, Any], submitted: float,
                   goal: float | None) -> Future[JobRecord | None]:
        """Hand an accepted job to the writer: the future resolves once the transaction that
        holds it has committed, to the job as written, or None if the id is taken (or fails
        with what the transaction raised)."""
        return self.writer.put(_Submission(job_id, tenant, spec, submitted, goal))

    def add_job(self, job_id: str, tenant: str, spec: dict[str, Any], submitted: float,
                goal: float | None) -> bool:
        """Insert an accepted job (durable when this returns); False if the id is taken."""
        return self.submit_job(job_id, tenant, spec, submitted, goal).result() is not None

    def write(self, fn: Callable[[Connection], R]) -> R:
        """``fn(c)`` in the writer's next transaction, with the submissions (and other writes)
        waiting by then; its result once that transaction has committed.  The engine's own
        records go this way: they share the submissions' fsync instead of queueing for the
        database with one of their own.  ``fn`` runs on the writer's thread while the caller
        waits, so it may read what the caller holds; it must not wait for the caller, nor
        call ``write``."""
        return cast(R, self.writer.put(_Work(fn)).result())

    def _write_group(self, batch: list[_Submission | _Work]) -> list[Any]:
        self._commit_group(batch)
        out: list[Any] = []
        for item in batch:
            if isinstance(item, _Work):
                out.append(item.result)
            else:
                out.append(item.record() if item.added else None)
        return out

    def _commit_group(self, batch: list[_Submission | _Work]) -> None:
        """One transaction for ``batch``: the engine's writes in order, then the submissions
        in order; a submission whose id a job in the store or an earlier submission of the
        batch has is refused (``added`` stays False)."""
        subs = [item for item in batch if isinstance(item, _Submission)]
        rows: list[_Submission] = []
        seqs: Sequence[Any] = []
        with self._group_tx() as c:
            for item in batch:
                if isinstance(item, _Work):
                    item.result = item.fn(c)
            if subs:
                rows, seqs = (self._insert_subs(c, subs) if self._insert_new is not None
                              else self._insert_subs_asking(c, subs))
        for sub, seq in zip(rows, seqs, strict=True):  # committed
            sub.added = True
            sub.seq = int(seq)

    def _insert_subs_asking(self, c: Connection, subs: list[_Submission]
                            ) -> tuple[list[_Submission], Sequence[Any]]:
        """``_insert_subs`` for a database without ``ON CONFLICT``: the ids the store has are
        asked for first."""
        taken = set(c.execute(sa.select(jobs.c.id).where(
            jobs.c.id.in_([sub.job_id for sub in subs]))).scalars())
        rows: list[_Submission] = []
        for sub in subs:
            if sub.job_id not in taken:
                taken.add(sub.job_id)
                rows.append(sub)
        if not rows:
            return rows, []
        values = [{"id": sub.job_id, "tenant": sub.tenant, "spec": json.dumps(sub.spec),
                   "state": "queued", "submitted": sub.submitted, "goal": sub.goal,
                   "cancel_requested": False, "reason": ""} for sub in rows]
        seqs: Sequence[Any]
        if getattr(c.dialect, "insert_executemany_returning_sort_by_parameter_order", False):
            seqs = c.execute(jobs.insert().returning(
                jobs.c.seq, sort_by_parameter_order=True), values).scalars().all()
        else:
            c.execute(jobs.insert(), values)
            seqs = [0] * len(rows)
        c.execute(events.insert(), [
            {"job": sub.job_id, "at": sub.submitted, "kind": "submitted", "detail": "",
             "incarnation": self.incarnation} for sub in rows])
        return rows, seqs

    def _insert_subs(self, c: Connection, subs: list[_Submission]
                     ) -> tuple[list[_Submission], list[int]]:
        """Insert ``subs`` (SQLite, PostgreSQL): the first of each id, unless the store has
        it already, found by the insert itself (``ON CONFLICT DO NOTHING``): no query
        before it.  The submissions inserted and their seq."""
        assert self._insert_new is not None
        first: dict[str, _Submission] = {}
        for sub in subs:
            first.setdefault(sub.job_id, sub)  # a later one of the group is refused
        values = [{"id": sub.job_id, "tenant": sub.tenant, "spec": json.dumps(sub.spec),
                   "state": "queued", "submitted": sub.submitted, "goal": sub.goal,
                   "cancel_requested": False, "reason": ""} for sub in first.values()]
        added = {str(r[0]): int(r[1]) for r in c.execute(self._insert_new, values)}
        rows = [sub for sub in first.values() if sub.job_id in added]
        if rows:
            c.execute(events.insert(), [
                {"job": sub.job_id, "at": sub.submitted, "kind": "submitted", "detail": "",
                 "incarnation": self.incarnation} for sub in rows])
        return rows, [added[sub.job_id] for sub in rows]

    def get(self, job_id: str) -> JobRecord | None:
        with self.engine.connect() as c:
            row = c.execute(sa.select(jobs).where(jobs.c.id == job_id)).first()
        return None if row is None else _record(row)

    def find(self, keys: Sequence[str]) -> list[JobRecord]:
        """The jobs with any of these keys, in submission order."""
        if not keys:
            return []
        with self.engine.connect() as c:
            rows = c.execute(sa.select(jobs).where(jobs.c.id.in_(list(dict.fromkeys(keys))))
                             .order_by(jobs.c.seq)).all()
        return [_record(r) for r in rows]

    def states(self, keys: Sequence[str]) -> dict[str, tuple[str, bool]]:
        """State and whether a cancel was requested, of the jobs with these keys (one query:
        the engine checks a batch of jobs before it hands them to the core)."""
        if not keys:
            return {}
        with self.engine.connect() as c:
            rows = c.execute(sa.select(jobs.c.id, jobs.c.state, jobs.c.cancel_requested)
                             .where(jobs.c.id.in_(list(dict.fromkeys(keys))))).all()
        return {str(r.id): (str(r.state), bool(r.cancel_requested)) for r in rows}

    def page(self, *, tenant: str | None = None, states: Sequence[str] = (),
             limit: int = 100, offset: int = 0, newest_first: bool = True
             ) -> tuple[list[JobRecord], int]:
        """A page of jobs (and how many match in all)."""
        q = sa.select(jobs)
        n = sa.select(sa.func.count()).select_from(jobs)
        if tenant is not None:
            q, n = q.where(jobs.c.tenant == tenant), n.where(jobs.c.tenant == tenant)
        if states:
            q, n = q.where(jobs.c.state.in_(states)), n.where(jobs.c.state.in_(states))
        q = q.order_by(jobs.c.seq.desc() if newest_first else jobs.c.seq).limit(limit)
        q = q.offset(offset)
        with self.engine.connect() as c:
            rows = c.execute(q).all()
            total = int(c.execute(n).scalar_one())
        return [_record(r) for r in rows], total

    def counts(self, tenant: str | None = None) -> dict[str, int]:
        q = sa.select(jobs.c.state, sa.func.count()).group_by(jobs.c.state)
        if tenant is not None:
            q = q.where(jobs.c.tenant == tenant)
        with self.engine.connect() as c:
            got: dict[str, int] = {str(k): int(v) for k, v in c.execute(q).all()}
        return {s: int(got.get(s, 0)) for s in STATES}

    def tally(self) -> list[tuple[str, str, int, int, float]]:
        """Per (tenant, state): jobs, deadline misses and utility earned (for /metrics)."""
        q = (sa.select(jobs.c.tenant, jobs.c.state, sa.func.count(),
                       sa.func.sum(sa.case((jobs.c.missed.is_(True), 1), else_=0)),
                       sa.func.coalesce(sa.func.sum(jobs.c.utility), 0.0))
             .group_by(jobs.c.tenant, jobs.c.state))
        with self.engine.connect() as c:
            return [(str(t), str(st), int(n), int(m or 0), float(u or 0.0))
                    for t, st, n, m, u in c.execute(q).all()]

    def open_jobs(self) -> list[JobRecord]:
        """Jobs accepted and not over, in submission order (what a restart re-queues)."""
        with self.engine.connect() as c:
            rows = c.execute(sa.select(jobs).where(jobs.c.state.in_(OPEN_STATES))
                             .order_by(jobs.c.seq)).all()
        return [_record(r) for r in rows]

    def request_cancel(self, job_id: str, at: float) -> None:
        with self.tx() as c:
            c.execute(jobs.update().where(jobs.c.id == job_id)
                      .values(cancel_requested=True))
            c.execute(events.insert().values(job=job_id, at=at, kind="cancel-requested",
                                             detail="", incarnation=self.incarnation))

    def transition(self, c: Connection, job_id: str, state: str, at: float, *,
                   detail: str = "", **values: Any) -> bool:
        """Move an open job to ``state`` (inside the caller's transaction); False when it
        was already over, so that nothing completes twice."""
        res = c.execute(_transition_sql(tuple(sorted(values))),
                        {"b_id": job_id, "b_state": state,
                         **{f"b_{k}": v for k, v in values.items()}})
        if res.rowcount != 1:
            return False
        c.execute(events.insert(), {"job": job_id, "at": at, "kind": state, "detail": detail,
                                    "incarnation": self.incarnation})
        return True

    def events_of(self, job_id: str) -> list[dict[str, Any]]:
        with self.engine.connect() as c:
            rows = c.execute(sa.select(events).where(events.c.job == job_id)
                             .order_by(events.c.seq)).all()
        return [{"at": r.at, "kind": r.kind, "detail": r.detail, "incarnation": r.incarnation}
                for r in rows]

    # -- attempts -----------------------------------------------------------------------
    def open_attempt(self, c: Connection, job: str, stage: int, task: int, machine: str,
                     start: float) -> None:
        self.open_attempts(c, [(job, stage, task, machine, start)])

    def open_attempts(self, c: Connection,
                      rows: Sequence[tuple[str, int, int, str, float]]) -> None:
        """Attempts launched: (job, stage, task, machine, start) each, in one statement."""
        if rows:
            c.execute(attempts.insert(), [
                {"job": j, "stage": s, "task": t, "machine": m, "start": start,
                 "incarnation": self.incarnation} for j, s, t, m, start in rows])

    def close_attempt(self, c: Connection, job: str, stage: int, task: int, end: float,
                      outcome: str) -> None:
        self.close_attempts(c, [(job, stage, task, end, outcome)])

    def close_attempts(self, c: Connection,
                       rows: Sequence[tuple[str, int, int, float, str]]) -> None:
        """Attempts over: (job, stage, task, end, outcome) each, in one statement."""
        if rows:
            c.execute(_CLOSE_ATTEMPT, [{"b_job": j, "b_stage": s, "b_task": t, "b_end": e,
                                        "b_outcome": o} for j, s, t, e, o in rows])

    def close_open_attempts(self, at: float, outcome: str) -> int:
        """Attempts a crash left open (their incarnation is gone): closed as ``outcome``."""
        with self.tx() as c:
            res = c.execute(attempts.update().where(attempts.c.end.is_(None))
                            .where(attempts.c.incarnation < self.incarnation)
                            .values(end=at, outcome=outcome))
        return int(res.rowcount)

    def attempts_of(self, job_id: str) -> list[dict[str, Any]]:
        with self.engine.connect() as c:
            rows = c.execute(sa.select(attempts).where(attempts.c.job == job_id)
                             .order_by(attempts.c.seq)).all()
        return [{"stage": r.stage, "task": r.task, "machine": r.machine, "start": r.start,
                 "end": r.end, "outcome": r.outcome, "incarnation": r.incarnation}
                for r in rows]


# The engine's writes, built once with bound parameters: building and caching a statement
# with its values inside costs more than running it, many times per batch under a burst.
_CLOSE_ATTEMPT = (attempts.update().where(attempts.c.job == sa.bindparam("b_job"))
                  .where(attempts.c.stage == sa.bindparam("b_stage"))
                  .where(attempts.c.task == sa.bindparam("b_task"))
                  .where(attempts.c.end.is_(None))
                  .values(end=sa.bindparam("b_end"), outcome=sa.bindparam("b_outcome")))


def _insert_new_sql(dialect: str) -> sa.Insert | None:
    """INSERT of jobs that skips an id the store has, returning (id, seq) of each row it
    wrote; None for a database without ``ON CONFLICT`` (the store then asks first)."""
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert  # type: ignore[assignment]
    else:
        return None
    return insert(jobs).on_conflict_do_nothing(index_elements=[jobs.c.id]).returning(
        jobs.c.id, jobs.c.seq)


@functools.cache
def _transition_sql(keys: tuple[str, ...]) -> sa.Update:
    """UPDATE of an open job to ``b_state`` setting ``keys`` (bound as ``b_<key>``)."""
    return (jobs.update().where(jobs.c.id == sa.bindparam("b_id"))
            .where(jobs.c.state.in_(OPEN_STATES))
            .values(state=sa.bindparam("b_state"), **{k: sa.bindparam(f"b_{k}") for k in keys}))


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()
