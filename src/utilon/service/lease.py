"""One active server per store: the lease that makes a second ``utilon serve`` a standby.

Two ``utilon serve`` processes on one PostgreSQL store play the roles of YARN's
ResourceManager pair or Slurm's primary and backup controllers: one is *active* (it schedules
and answers the API), the other a *standby* that takes over when the active one dies.  Which
one is active is a lease, one row of the store's ``leases`` table (``Store.lease_*``): its
holder, the holder's address, a term and an expiry on the database's clock (the servers'
clocks need not agree).

* **Acquire.**  A conditional UPDATE that succeeds only once the lease has expired
  (compare-and-set): of any number of servers trying at once, exactly one wins, and the term
  goes up by one.  A standby tries every ``poll`` seconds.
* **Renew.**  The active server extends the lease by ``ttl`` every ``ttl / 5`` seconds, on
  condition that it still holds its term.
* **Fencing.**  The active server believes it holds the lease only until ``ttl - ttl / 5``
  seconds after it *sent* its last successful renewal (on its monotonic clock), which is before
  the database lets anyone else take it; the engine checks that before every dispatch batch.
  And every transaction of the active server first takes a share lock on the lease row and
  checks its term (``Store.tx``), so a server that lost the lease can commit nothing.
* **Release.**  A clean stop (SIGTERM) checkpoints, then lets the lease go: the standby takes
  over at its next try instead of after the expiry.

So after a ``kill -9`` of the active server the standby holds the lease within ``ttl + poll``
seconds (5.5 s by default), and serves once its engine has started (the same recovery as a
restart: what was running is re-queued).

SQLite has no standby: its file cannot be shared between hosts, and a restart on the same host
already recovers.  ``lock_sqlite`` holds an OS lock on a file next to the store for the
server's life, so a second ``utilon serve`` on it is refused at once, naming the first (the
kernel drops the lock when the first dies, even by ``kill -9``).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import sqlalchemy as sa

from utilon.errors import UtilonError
from utilon.service.store import LeaseRow, Store

log = logging.getLogger(__name__)
DEFAULT_TTL = 5.0
"""seconds a lease lasts unless renewed: the failover bound is about this plus the poll"""


def holder_id() -> str:
    """This process's name in the lease: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Lease:
    """This server's view of the lease (the I/O is the store's; the clock is injected)."""

    def __init__(self, store: Store, holder: str, address: str, ttl: float = DEFAULT_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if ttl <= 0:
            raise ValueError(f"ttl must be > 0, got {ttl}")
        self.store = store
        self.holder = holder
        self.address = address
        self.ttl = ttl
        self.renew_every = ttl / 5
        self.clock = clock
        self.term = 0
        self._until = -float("inf")
        self.seen: LeaseRow | None = None  # the lease as last read (who is active)

    def try_acquire(self) -> bool:
        sent = self.clock()
        term = self.store.lease_acquire(self.holder, self.address, self.ttl)
        if term is None:
            self.seen = self.store.lease_read()
            return False
        self.term = term
        self._until = sent + self.ttl - self.renew_every
        self.store.fence = (self.holder, term)
        self.store.fence_idle_ms = int(1000 * self.ttl)
        self.seen = LeaseRow(self.holder, self.address, term, self.ttl)
        return True

    def renew(self) -> bool:
        """Extend it; False when another server has taken it (then it is lost for good)."""
        sent = self.clock()
        if self.store.lease_renew(self.holder, self.term, self.ttl):
            self._until = sent + self.ttl - self.renew_every
            return True
        self._until = -float("inf")
        return False

    def held(self) -> bool:
        """Whether this server may still act as the active one (see Fencing)."""
        return self.term > 0 and self.clock() < self._until

    def release(self) -> None:
        if self.term > 0:
            self.store.lease_release(self.holder, self.term)
        self._until = -float("inf")

    def active_address(self) -> str:
        """The address of the active server as last seen ("" when none holds the lease)."""
        seen = self.seen
        if seen is None or seen.left <= 0 or not seen.holder:
            return ""
        return seen.address


class Elector:
    """A server's part in the lease, on a thread of its own.  The standby tries to acquire it
    every ``poll`` s and, once it has, runs ``on_active`` on another thread (renewals go on
    while the engine starts); the active one renews it every ``renew_every`` s and calls
    ``on_lost`` once, when it is no longer held (taken by another, or lapsed because the store
    could not be reached)."""

    def __init__(self, lease: Lease, *, on_active: Callable[[], None],
                 on_lost: Callable[[str], None], poll: float | None = None) -> None:
        self.lease = lease
        self.on_active = on_active
        self.on_lost = on_lost
        self.poll = poll if poll is not None else min(0.5, lease.ttl / 10)
        self.active = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._complained = False

    def start(self) -> bool:
        """Try once now (True: this server is active, and the caller starts it), then go on
        on the thread."""
        self.active = self._try(self.lease.try_acquire, "acquire") is True
        self._thread = threading.Thread(target=self._run, name="utilon-lease", daemon=True)
        self._thread.start()
        return self.active

    def stop(self, *, release: bool) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)
        if release and self.active:
            self._try(self.lease.release, "release")

    def _try(self, fn: Callable[[], Any], what: str) -> Any:
        """``fn()``, or None when the store cannot be reached (said once until it can)."""
        try:
            out = fn()
        except (sa.exc.SQLAlchemyError, OSError) as e:
            if not self._complained:
                log.warning("cannot %s the lease: %s: %s", what, type(e).__name__,
                            str(e).splitlines()[0] if str(e) else "")
                self._complained = True
            return None
        self._complained = False
        return out

    def _run(self) -> None:
        lease = self.lease
        while not self._stop.wait(lease.renew_every if self.active else self.poll):
            if not self.active:
                if self._try(lease.try_acquire, "acquire") is True:
                    self.active = True
                    threading.Thread(target=self.on_active, name="utilon-takeover",
                                     daemon=True).start()
                continue
            renewed = self._try(lease.renew, "renew")
            if renewed is False:
                self.on_lost(f"another server took the lease (term {lease.term} is over)")
                return
            if not lease.held():
                self.on_lost(f"the lease lapsed: it could not be renewed for "
                             f"{lease.ttl - lease.renew_every:g} s")
                return


def lock_sqlite(store: Store, address: str) -> IO[str] | None:
    """Hold the lock file of a SQLite store (``<db>.lock``) for this process's life; a second
    server on the store is a ``UtilonError`` naming the first.  POSIX record locks: the
    kernel drops them when the process dies, and worker processes do not inherit them."""
    import fcntl

    db = sa.engine.make_url(store.url).database
    if not db or db == ":memory:":
        return None
    path = Path(db + ".lock")
    f = path.open("a+", encoding="utf-8")
    try:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        who = f.read().strip() or "another process"
        f.close()
        raise UtilonError(f"another utilon serve serves this SQLite store: {who}",
                          where=db, fix="stop it first; a standby server needs a PostgreSQL "
                          "store (--db postgresql+psycopg://..., docs/service.md#a-standby-"
                          "server)") from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} on {socket.gethostname()}, {address}\n")
    f.flush()
    return f
