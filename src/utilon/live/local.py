"""LocalBackend: real tasks in worker processes on this machine.

The scenario's machines become *logical* machines: their declared capacities are what the
dispatcher schedules against, and the backend runs each launched task in a worker process of
its own (workers are started on demand, reused when idle, and a pool of them is started before
the clock so the first tasks do not pay for interpreter start-up).  A preempted task's worker
is killed (there is no safe way to stop Python code mid-way) and replaced.  A worker that dies
reports its task as failed; the core re-queues it.

The guard refuses any launch that would exceed a logical machine's declared capacity, and
records peak usage per machine.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import multiprocessing as mp
import os
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from utilon.core.messages import Command, Launch, Stimulus, TaskFailed, TaskFinished, TaskRef
from utilon.live.backend import Backend, BackendError
from utilon.live.catalog import TaskCatalog
from utilon.live.guard import CapacityGuard
from utilon.live.worker import worker_main
from utilon.model.cluster import CapacityAction, CapacityChange, Cluster

log = logging.getLogger(__name__)


class _Worker:
    __slots__ = ("attempt", "conn", "proc")

    def __init__(self, ctx: Any) -> None:
        parent, child = ctx.Pipe(duplex=True)
        self.conn: Connection = parent
        self.proc = ctx.Process(target=worker_main, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.attempt: int | None = None  # attempt id running, None when idle

    def ready(self, timeout: float = 60.0) -> None:
        if not self.conn.poll(timeout):
            raise BackendError(f"a local worker process did not start within {timeout:g} s")
        msg = self.conn.recv()
        if msg != ("ready",):
            raise BackendError(f"a local worker process sent {msg!r} instead of ready")

    def stop(self, kill: bool = False) -> None:
        stop_child(self.proc, self.conn, kill)


def stop_child(proc: Any, conn: Any, kill: bool = False) -> None:
    """End a child process that serves requests over ``conn``: ask it to stop (``None``), or
    kill it; kill it anyway if it has not ended within 2 s; close the pipe."""
    if kill:
        proc.kill()
    else:
        with contextlib.suppress(BrokenPipeError, OSError):
            conn.send(None)
    proc.join(timeout=2.0)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=2.0)
    conn.close()


class LocalBackend(Backend):
    name = "local"

    def __init__(self, *, prestart: int | None = None, start_method: str = "spawn",
                 max_workers: int = 256) -> None:
        self._prestart = prestart
        self._mp = mp.get_context(start_method)
        self._max_workers = max_workers
        self._idle: list[_Worker] = []
        self._busy: dict[int, _Worker] = {}  # attempt id -> worker
        self._attempts: dict[int, tuple[TaskRef, str]] = {}  # attempt id -> (task, machine)
        self._by_task: dict[TaskRef, int] = {}
        self._tries: dict[TaskRef, int] = {}
        self._ids = itertools.count(1)
        self._t0 = 0.0
        self.guard: CapacityGuard | None = None
        self.results: dict[TaskRef, dict[str, Any]] = {}
        self.errors: list[tuple[TaskRef, str]] = []
        self._closed = False

    # -- Backend ----------------------------------------------------------------------------
    def start(self, cluster: Cluster, catalog: TaskCatalog) -> Cluster:
        self.catalog = catalog
        self.guard = CapacityGuard(cluster, self.strict_capacity)
        n = self._prestart
        if n is None:  # one worker per slot the cluster can run at once, within reason
            r = cluster.slot_resource
            n = int(sum(math.floor(m.capacity[r]) for m in cluster.machines))
            n = max(1, min(n, 4 * (os.cpu_count() or 1), self._max_workers))
        self._idle = [_Worker(self._mp) for _ in range(n)]
        for w in self._idle:  # wait until every worker has imported its modules
            w.ready()
        self._t0 = time.perf_counter()
        return cluster

    def now(self) -> float:
        return time.perf_counter() - self._t0

    def apply(self, commands: Sequence[Command]) -> None:
        guard = self.guard
        if guard is None:
            raise BackendError("LocalBackend.apply before start()")
        placed = self.catalog.placement_args(commands)
        for c in commands:
            ref = c.task
            spec = self.catalog.task(ref)
            if type(c) is Launch:
                if ref in self._by_task:
                    raise BackendError(f"task {ref} launched while already running")
                guard.launch(c.machine, spec.demand, f"task {ref}")
                tries = self._tries[ref] = self._tries.get(ref, 0) + 1
                aid = next(self._ids)
                w = self._idle.pop() if self._idle else self._spawn()
                w.attempt = aid
                payload = {"call": spec.call, "job": ref.job, "stage": spec.stage,
                           "index": ref.index, "tasks": spec.tasks, "attempt": tries,
                           "job_dir": str(spec.job_dir),
                           "args": {**spec.args, **placed.get(ref, {})}}
                w.conn.send((aid, payload))
                self._busy[aid] = w
                self._attempts[aid] = (ref, c.machine)
                self._by_task[ref] = aid
            else:
                aid_or_none = self._by_task.get(ref)
                if aid_or_none is None:
                    raise BackendError(f"preempt of task {ref}, which is not running")
                self._cancel(aid_or_none)

    def poll(self, timeout: float) -> list[Stimulus]:
        if not self._busy:
            time.sleep(max(0.0, timeout))
            return []
        by_conn = {w.conn: aid for aid, w in self._busy.items()}
        by_sentinel = {w.proc.sentinel: aid for aid, w in self._busy.items()}
        ready = wait([*by_conn, *by_sentinel], timeout=max(0.0, timeout))
        out: list[Stimulus] = []
        handled: set[int] = set()
        for obj in ready:  # messages first: a worker that answered and then died is fine
            got = by_conn.get(obj)  # type: ignore[call-overload]
            if got is not None:
                aid = got
                w = self._busy[aid]
                try:
                    msg = w.conn.recv()
                except (EOFError, OSError):
                    continue  # died without answering: its sentinel reports it below
                handled.add(aid)
                out.append(self._finish(aid, msg))
        for obj in ready:
            lost = by_sentinel.get(obj)
            if lost is None or lost in handled or lost not in self._busy:
                continue
            aid = lost
            w = self._busy.pop(aid)
            ref, machine = self._attempts.pop(aid)
            del self._by_task[ref]
            assert self.guard is not None
            self.guard.release(machine, self.catalog.task(ref).demand)
            code = w.proc.exitcode
            w.stop(kill=True)
            reason = f"worker process died (exit code {code})"
            self.errors.append((ref, reason))
            out.append(TaskFailed(ref, reason))
        return out

    def apply_capacity(self, change: CapacityChange) -> None:
        guard = self.guard
        assert guard is not None
        if change.action is CapacityAction.LEAVE:
            for aid, (_, m) in list(self._attempts.items()):
                if m == change.machine:
                    self._cancel(aid)
        # SPEED: a logical machine's speed cannot be changed; the core still records it.
        guard.apply(change)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for aid in list(self._busy):
            self._cancel(aid)
        for w in self._idle:
            w.stop()
        self._idle.clear()

    # -- helpers ----------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        if len(self._busy) + len(self._idle) >= self._max_workers:
            raise BackendError(f"more than {self._max_workers} tasks at once on the local "
                               "backend", fix="declare smaller logical machines")
        w = _Worker(self._mp)
        w.ready()
        return w

    def _finish(self, aid: int, msg: tuple[Any, ...]) -> Stimulus:
        w = self._busy.pop(aid)
        w.attempt = None
        self._idle.append(w)
        ref, machine = self._attempts.pop(aid)
        del self._by_task[ref]
        assert self.guard is not None
        self.guard.release(machine, self.catalog.task(ref).demand)
        if msg[0] == "done":
            self.results[ref] = msg[2]
            return TaskFinished(ref)
        reason = msg[2]
        log.warning("task %s failed: %s", ref, reason)
        self.errors.append((ref, reason))
        return TaskFailed(ref, reason)

    def _cancel(self, aid: int) -> None:
        w = self._busy.pop(aid)
        ref, machine = self._attempts.pop(aid)
        del self._by_task[ref]
        assert self.guard is not None
        self.guard.release(machine, self.catalog.task(ref).demand)
        w.stop(kill=True)

    @property
    def running(self) -> int:
        return len(self._busy)

    @property
    def workers(self) -> int:
        return len(self._busy) + len(self._idle)
