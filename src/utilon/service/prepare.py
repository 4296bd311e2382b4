"""Preparing jobs' inputs: a bounded pool, fair across tenants, that a cancel stops at once.

A job kind with input (word count and grep generate text, sort generates records, n-body its
bodies) writes it into the job's folder before the scheduler hears of the job.  That can take
minutes, so it must not hold up anyone else:

* **Bounded.**  ``workers`` preparations run at once (each in a process of its own), whatever
  is submitted; the rest wait in per-tenant queues.  Jobs without input never queue here.
* **Fair.**  A free worker takes the next job of the tenant served longest ago (round robin
  over the tenants with jobs waiting), and one tenant never holds more than ``workers - 1``
  workers (all of them when ``workers`` is 1).  So a job of a tenant with nothing else
  waiting starts preparing as soon as one preparation that was running when it arrived ends,
  behind at most one job of each other tenant with jobs waiting; with ``workers >= 2`` and
  only one other tenant preparing, at once.
* **Cancellable.**  ``cancel`` drops a waiting job, or kills the process preparing it (there is
  no safe way to stop Python code mid-way, and the kinds' generators are not ours to
  instrument), and removes what it wrote.  The worker checks for a cancel every 50 ms.
* **Accounted.**  The caller reserves the bytes a job will write (``quotas.Usage``); a
  preparation that writes more than that (plus a slack) is killed and the job fails.

Kept free of heavy imports: each worker process imports only this module until a job's
``prepare`` (a ``functools.partial`` of a kind's function) names what it needs.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing as mp
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from utilon.live.local import stop_child

log = logging.getLogger(__name__)
POLL = 0.05
"""seconds between a worker's checks for a cancel (and for the process's answer)"""
SIZE_EVERY = 0.5
"""seconds between measurements of what a preparation has written"""
SLACK = 16_000_000
"""bytes a preparation may write beyond what was reserved for it (JSON files, rounding)"""
NICE = 10
"""niceness a preparing process adds to its own (``child_main``)"""
PRIOR_RATE = 5e6
"""bytes a second a preparation writes until some have been measured (word count's text
generator on a 2-core machine; sort's records are faster)"""


class Cancelled(Exception):
    """The preparation was cancelled."""


@dataclass(eq=False)
class Prep:
    """One job's preparation."""

    key: str
    tenant: str
    job_dir: Path
    prepare: Callable[[Path], None]
    nbytes: int  # what it is expected to write
    payload: Any = None  # handed back to ``done``
    queued: float = field(default_factory=time.monotonic)
    started: float | None = None
    seconds: float | None = None
    written: int = 0
    cancel: threading.Event = field(default_factory=threading.Event)


class Preparer:
    def __init__(self, workers: int, *, done: Callable[[Prep], None],
                 failed: Callable[[Prep, str], None], start_method: str = "spawn") -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self.per_tenant = max(1, workers - 1)
        self._done = done
        self._failed = failed
        self._mp = mp.get_context(start_method)
        self._cv = threading.Condition()
        self._queues: dict[str, deque[Prep]] = {}
        self._running: dict[str, Prep] = {}  # key -> in flight
        self._held: dict[str, int] = {}  # tenant -> workers it holds
        self._served: dict[str, int] = {}  # tenant -> when it was last served
        self._turn = itertools.count()
        self._stop = False
        self._threads: list[threading.Thread] = []
        self._children: list[_Child | None] = [None] * workers
        self._spawn = threading.Lock()  # the children list
        self.rate = PRIOR_RATE
        self.prepared = 0

    def start(self) -> None:
        for slot in range(self.workers):
            t = threading.Thread(target=self._work, args=(slot,), name=f"utilon-prepare-{slot}",
                                 daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout: float = 10.0) -> None:
        with self._cv:
            self._stop = True
            for p in self._running.values():
                p.cancel.set()
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout)
        with self._spawn:
            for c in self._children:
                if c is not None:
                    c.stop()
            self._children = [None] * self.workers

    # -- the API's side -----------------------------------------------------------------
    def put(self, prep: Prep) -> None:
        self._warm()
        with self._cv:
            self._queues.setdefault(prep.tenant, deque()).append(prep)
            self._cv.notify()

    def _warm(self, slot: int | None = None) -> None:
        """Start the processes of every worker (or of ``slot``) that has none: they import
        the job kinds while the first job waits to be sent (about a second here), and
        only once some job has input to prepare."""
        with self._spawn:
            if self._stop:
                return
            for i in range(self.workers) if slot is None else (slot,):
                c = self._children[i]
                if c is None or not c.alive():
                    self._children[i] = _Child(self._mp)

    def cancel(self, key: str) -> bool:
        """Stop ``key``'s preparation (waiting: dropped; running: killed) and remove its
        files; False if it is not here (never was, or done)."""
        with self._cv:
            p = self._running.get(key)
            if p is not None:
                p.cancel.set()  # the worker kills the process and removes the files
                return True
            for tenant, q in self._queues.items():
                for p in q:
                    if p.key == key:
                        q.remove(p)
                        if not q:
                            del self._queues[tenant]
                        break
                else:
                    continue
                break
            else:
                return False
        p.cancel.set()
        _remove(p.job_dir)
        return True

    def status(self, key: str) -> dict[str, Any] | None:
        """``{"phase": "waiting"|"preparing", ...}`` while ``key`` is here, else None."""
        now = time.monotonic()
        with self._cv:
            p = self._running.get(key)
            if p is not None and p.started is not None:
                return {"phase": "preparing", "waited_s": p.started - p.queued,
                        "prep_s": now - p.started, "input_mb": p.nbytes / 1e6,
                        "written_mb": p.written / 1e6}
            for q in self._queues.values():
                for i, p in enumerate(q):
                    if p.key == key:
                        return {"phase": "waiting", "waited_s": now - p.queued,
                                "ahead_of_tenant": i, "input_mb": p.nbytes / 1e6}
        return None

    def estimate(self, tenant: str, nbytes: int) -> float:
        """Seconds until a job of ``tenant`` writing ``nbytes`` would be prepared: its own
        input and what its tenant has waiting or in preparation before it, at the measured
        rate (another tenant's jobs delay it by at most one preparation: not counted)."""
        with self._cv:
            ahead = sum(p.nbytes for p in self._queues.get(tenant, ()))
            ahead += sum(max(0, p.nbytes - p.written) for p in self._running.values()
                         if p.tenant == tenant)
        return (ahead / self.per_tenant + nbytes) / self.rate

    def waiting(self) -> int:
        with self._cv:
            return sum(len(q) for q in self._queues.values()) + len(self._running)

    # -- the workers ----------------------------------------------------------------------
    def _take(self) -> Prep | None:
        """The next preparation (round robin over tenants), blocking; None to stop."""
        with self._cv:
            while True:
                if self._stop:
                    return None
                free = [t for t, q in self._queues.items()
                        if q and self._held.get(t, 0) < self.per_tenant]
                if free:
                    t = min(free, key=lambda x: (self._served.get(x, -1), x))
                    self._served[t] = next(self._turn)
                    q = self._queues[t]
                    p = q.popleft()
                    if not q:
                        del self._queues[t]
                    self._held[t] = self._held.get(t, 0) + 1
                    self._running[p.key] = p
                    p.started = time.monotonic()
                    return p
                self._cv.wait()

    def _release(self, p: Prep) -> None:
        with self._cv:
            self._running.pop(p.key, None)
            self._held[p.tenant] -= 1
            if not self._held[p.tenant]:
                del self._held[p.tenant]
            self._cv.notify_all()

    def _work(self, slot: int) -> None:
        while True:
            p = self._take()
            if p is None:
                return
            try:
                self._prepare(slot, p)
            except Cancelled:
                _remove(p.job_dir)
            except Exception as e:  # the job fails; the service goes on
                _remove(p.job_dir)
                self._release(p)
                if not p.cancel.is_set():
                    self._failed(p, f"input preparation failed: {e}")
                continue
            self._release(p)
            if not p.cancel.is_set():
                self._done(p)

    def _prepare(self, slot: int, p: Prep) -> None:
        p.job_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        limit = p.nbytes + SLACK
        self._warm(slot)
        child = self._children[slot]
        if child is None:  # stopping
            raise Cancelled(p.key)
        try:
            child.run(p, limit)
        except Exception:
            child.stop(kill=True)  # cancelled, too big, or broken: a fresh one, warming
            self._warm(slot)
            raise
        p.seconds = time.monotonic() - t0
        p.written = du(p.job_dir)
        if p.written > limit:
            raise RuntimeError(f"it wrote {p.written / 1e6:.1f} MB, more than the "
                               f"{p.nbytes / 1e6:.1f} MB reserved")
        self.prepared += 1
        if p.nbytes >= 1_000_000 and p.seconds > 0:  # small ones measure start-up, not rate
            self.rate = 0.7 * self.rate + 0.3 * (p.written / p.seconds)


class _Child:
    """A process that runs preparations one at a time, reused until killed."""

    def __init__(self, ctx: Any) -> None:
        parent, child = ctx.Pipe(duplex=True)
        self.conn: Connection = parent
        self.proc = ctx.Process(target=child_main, args=(child,), daemon=True,
                                name="utilon-prepare")
        self.proc.start()
        child.close()

    def alive(self) -> bool:
        return bool(self.proc.is_alive())

    def run(self, p: Prep, limit: int) -> None:
        """Prepare ``p`` in this process: returns when done; raises ``Cancelled``, or
        ``RuntimeError`` when it failed, died or wrote more than ``limit`` bytes."""
        try:
            self.conn.send((p.prepare, str(p.job_dir)))
        except Exception as e:  # a prepare that does not pickle: in this thread, uncancellable
            log.warning("preparing %s in the service's process: %s", p.key, e)
            p.prepare(p.job_dir)
            return
        measured = time.monotonic()
        while True:
            if p.cancel.is_set():
                raise Cancelled(p.key)
            if self.conn.poll(POLL):
                try:
                    msg = self.conn.recv()
                except EOFError:
                    raise RuntimeError("the preparing process died") from None
                if msg[0] == "done":
                    return
                raise RuntimeError(msg[1])
            if not self.proc.is_alive():
                raise RuntimeError(f"the preparing process died (exit code "
                                   f"{self.proc.exitcode})")
            if time.monotonic() - measured >= SIZE_EVERY:
                measured = time.monotonic()
                p.written = du(p.job_dir)
                if p.written > limit:
                    raise RuntimeError(f"it wrote {p.written / 1e6:.1f} MB, more than the "
                                       f"{p.nbytes / 1e6:.1f} MB reserved")

    def stop(self, kill: bool = False) -> None:
        stop_child(self.proc, self.conn, kill)


def child_main(conn: Connection) -> None:
    """A preparing process: run ``(prepare, job_dir)`` calls until told to stop (None)."""
    parent = os.getppid()

    def orphaned() -> None:  # the service was killed (-9): stop writing its input
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=orphaned, daemon=True).start()
    with contextlib.suppress(OSError, AttributeError):
        # bulk work in the background: on a machine of a few cores two of these would
        # otherwise take the CPU from the API and the scheduler (every tenant's requests
        # and task starts); when the machine is idle it runs as fast as ever
        os.nice(NICE)
    with contextlib.suppress(Exception):
        import utilon.jobs.kinds  # noqa: F401  # what every kind's prepare needs, in advance
    while True:
        try:
            msg = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if msg is None:
            return
        prepare, job_dir = msg
        try:
            prepare(Path(job_dir))
            conn.send(("done",))
        except (BrokenPipeError, ConnectionResetError):
            return
        except BaseException as e:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                conn.send(("error", f"{type(e).__name__}: {e}"))


def du(path: Path) -> int:
    """Bytes of the files under ``path`` (0 if it does not exist)."""
    total = 0
    stack = [str(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        else:
                            total += e.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
