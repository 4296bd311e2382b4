"""An in-memory backend with a virtual clock, for tests and the simulator parity test.

A launched task completes after ``duration(ref, machine)`` virtual seconds (default: its
declared duration divided by the machine's speed when it started; unlike the simulator's fluid
model, a later speed change does not touch running tasks).  ``fail(ref, attempt)`` may make an
attempt fail at its end instead; ``events`` scripts backend-side happenings (a machine found or
lost) at given times.  Nothing real runs, so a run is instantaneous and deterministic.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from utilon.core.messages import (
    CapacityChanged,
    Command,
    Launch,
    MachineAdded,
    Stimulus,
    TaskFailed,
    TaskFinished,
    TaskRef,
)
from utilon.live.backend import Backend, BackendError
from utilon.live.catalog import TaskCatalog
from utilon.live.guard import CapacityGuard
from utilon.model.cluster import CapacityAction, CapacityChange, Cluster

INF = float("inf")


class FakeBackend(Backend):
    name = "fake"

    def __init__(
        self,
        *,
        duration: Callable[[TaskRef, str], float] | None = None,
        fail: Callable[[TaskRef, int], str | None] | None = None,
        events: Sequence[tuple[float, Stimulus]] = (),
    ) -> None:
        self._duration = duration
        self._fail = fail
        self._events = sorted(events, key=lambda e: e[0])
        self._next_event = 0
        self._now = 0.0
        self._heap: list[tuple[float, int, TaskRef, int]] = []
        self._seq = 0
        self._running: dict[TaskRef, tuple[int, str]] = {}  # ref -> (attempt seq, machine)
        self.attempts: dict[TaskRef, int] = {}
        self.launched: list[tuple[float, TaskRef, str]] = []
        self.preempted: list[tuple[float, TaskRef, str]] = []
        self.guard: CapacityGuard | None = None
        self._speed: dict[str, float] = {}
        self.closed = False

    # -- Backend ----------------------------------------------------------------------------
    def start(self, cluster: Cluster, catalog: TaskCatalog) -> Cluster:
        self.catalog = catalog
        self.guard = CapacityGuard(cluster, self.strict_capacity)
        self._speed = {m.id: 1.0 for m in cluster.machines}
        return cluster

    def now(self) -> float:
        return self._now

    def apply(self, commands: Sequence[Command]) -> None:
        assert self.guard is not None, "start() first"
        for c in commands:
            ref = c.task
            demand = self.catalog.task(ref).demand
            if type(c) is Launch:
                if ref in self._running:
                    raise BackendError(f"task {ref} launched while already running")
                self.guard.launch(c.machine, demand, f"task {ref}")
                n = self.attempts[ref] = self.attempts.get(ref, 0) + 1
                if self._duration is not None:
                    d = self._duration(ref, c.machine)
                else:
                    task = self.catalog.job(ref.job).stages[ref.stage].tasks[ref.index]
                    d = task.duration / self._speed[c.machine]
                self._seq += 1
                self._running[ref] = (self._seq, c.machine)
                heapq.heappush(self._heap, (self._now + d, self._seq, ref, n))
                self.launched.append((self._now, ref, c.machine))
            else:
                run = self._running.pop(ref, None)
                if run is None:
                    raise BackendError(f"preempt of task {ref}, which is not running")
                self.guard.release(run[1], demand)
                self.preempted.append((self._now, ref, c.machine))

    def poll(self, timeout: float) -> list[Stimulus]:
        return self.wait_until(self._now + timeout)

    def wait_until(self, deadline: float) -> list[Stimulus]:
        self._drop_stale()
        t_task = self._heap[0][0] if self._heap else INF
        t_event = (self._events[self._next_event][0]
                   if self._next_event < len(self._events) else INF)
        t = min(t_task, t_event)
        if t > deadline:
            self._now = max(self._now, deadline)
            return []
        self._now = max(self._now, t)
        out: list[Stimulus] = []
        while self._heap and self._heap[0][0] == t:
            _, seq, ref, attempt = heapq.heappop(self._heap)
            run = self._running.get(ref)
            if run is None or run[0] != seq:
                continue  # preempted or lost meanwhile
            del self._running[ref]
            assert self.guard is not None
            self.guard.release(run[1], self.catalog.task(ref).demand)
            reason = self._fail(ref, attempt) if self._fail is not None else None
            out.append(TaskFailed(ref, reason) if reason else TaskFinished(ref))
        while self._next_event < len(self._events) and self._events[self._next_event][0] == t:
            ev = self._events[self._next_event][1]
            self._next_event += 1
            self._apply_event(ev)
            out.append(ev)
        return out

    def apply_capacity(self, change: CapacityChange) -> None:
        assert self.guard is not None
        if change.action is CapacityAction.LEAVE:
            for ref, (_, m) in list(self._running.items()):
                if m == change.machine:
                    del self._running[ref]
                    self.guard.release(m, self.catalog.task(ref).demand)
        elif change.action is CapacityAction.SPEED:
            self._speed[change.machine] = change.factor
        self.guard.apply(change)

    def close(self) -> None:
        self.closed = True
        self._running.clear()
        self._heap.clear()

    # -- helpers ----------------------------------------------------------------------------
    def _apply_event(self, ev: Stimulus) -> None:
        assert self.guard is not None
        if type(ev) is MachineAdded:
            self.guard.add(ev.machine)
            self._speed[ev.machine.id] = 1.0
        elif type(ev) is CapacityChanged:
            self.apply_capacity(ev.change)

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            _, seq, ref, _ = heap[0]
            run = self._running.get(ref)
            if run is not None and run[0] == seq:
                return
            heapq.heappop(heap)

    @property
    def running(self) -> int:
        return len(self._running)
