"""The one loop that drives a scheduler core, in every world (SimPy's ``Environment.run``).

One event queue, ``(time, phase, seq, kind, payload)``: one total order, where ``phase`` breaks
ties at equal times (task ends, then capacity changes, then arrivals, then control ticks) and
``seq`` keeps insertion order within a phase.  The loop feeds the workload's arrivals and the
cluster's capacity timeline into it lazily (one entry of each at a time) and the policy's
ticks; a ``World`` is the rest, the part that differs:

* its clock: ``wait(until)`` lets time pass up to ``until`` (the next queued event) and returns
  what the world reported meanwhile (task ends and failures, machines that joined).  The
  simulator's clock jumps to ``until`` and reports nothing: its task ends are queue entries
  (``task_due``), pushed by the fluid model.  A live backend's wall clock waits, at most
  ``max_wait`` at a time, and returns what the backend saw;
* ``apply``: where the core's commands go (the fluid model; a backend);
* ``limit``: a horizon, a timeout or a wall-clock budget, asked before each step;
* ``after``: what happens after every batch (progress, a stop condition).

``step`` is one instant: everything due by then, in phase order, handed to the core as one
batch (a task end alone at its instant goes to ``SchedulerCore.finish_one``, which is
``handle`` for it without the batch).  After a control tick the core says whether to keep
ticking (``after_tick``: a tick-driven policy may hold work back, but not forever).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Any, Final

from mypy_extensions import mypyc_attr

from utilon.core.make import task_finished
from utilon.core.messages import (
    CapacityChanged,
    Command,
    JobSubmitted,
    MachineAdded,
    Stimulus,
    TaskFailed,
    TaskFinished,
    TaskRef,
    Tick,
)
from utilon.core.scheduler import SchedulerCore
from utilon.model.cluster import CapacityChange
from utilon.model.job import Job

INF: Final = float("inf")
Entry = tuple[float, int, int, int, Any]  # (time, phase, seq, kind, payload)
_pop: Final = heapq.heappop
_push: Final = heapq.heappush
_REPORTED_TASK: Final = (TaskFinished, TaskFailed)
_REPORTED_MACHINE: Final = (CapacityChanged, MachineAdded)


class Phase(IntEnum):
    """Order of events that happen at the same instant."""

    TASK = 0
    CAPACITY = 1
    ARRIVAL = 2
    TICK = 3


_TASK: Final = 0
_CAPACITY: Final = 1
_ARRIVAL: Final = 2


@mypyc_attr(allow_interpreted_subclasses=True)
class World:
    """What a loop drives (see the module docstring); each method is a world's to define."""

    def wait(self, until: float) -> list[Stimulus]:
        """Let time pass up to ``until`` at most; what happened meanwhile, task events
        first."""
        raise NotImplementedError

    def now(self) -> float:
        raise NotImplementedError

    def task_due(self, payload: Any, now: float) -> TaskRef | None:
        """A task entry of the queue came due: the task that ended, or None (stale, or only
        its next usage phase began)."""
        raise NotImplementedError

    def capacity(self, change: CapacityChange, now: float) -> None:
        """Apply a change of the cluster's capacity timeline (before the core hears of it)."""
        raise NotImplementedError

    def apply(self, now: float, cmds: list[Command]) -> None:
        raise NotImplementedError

    def running(self) -> bool:
        """Some task is running (a tick that finds none and launches none is idle)."""
        raise NotImplementedError

    def expects(self) -> bool:
        """The world will report something with nothing queued (a live task still running;
        a simulated one always has its end queued)."""
        raise NotImplementedError

    def limit(self, due: float, pending: bool) -> str:
        """Why the run stops before the step due at ``due`` ('' to go on); ``pending``:
        jobs are active or yet to arrive."""
        raise NotImplementedError

    def after(self, now: float) -> str:
        """After a batch: why the run stops ('' to go on)."""
        raise NotImplementedError


@mypyc_attr(allow_interpreted_subclasses=True)
class Loop:
    def __init__(self, core: SchedulerCore, world: World, jobs: Sequence[Job],
                 timeline: Sequence[CapacityChange], tick: float | None, *,
                 queue: list[Entry] | None = None, seq: Any = None, limited: bool = False,
                 watched: bool = False,
                 on_batch: Callable[[float, list[Stimulus], list[Command]], None] | None = None,
                 ) -> None:
        if tick is not None and tick <= 0:
            raise ValueError("policy tick must be > 0")
        self.core = core
        self.world = world
        self.jobs = jobs
        self.timeline = timeline
        self.tick = tick
        self.queue: list[Entry] = queue if queue is not None else []
        self._next: Callable[[], int] = (seq if seq is not None else iter(range(1, 1 << 62))
                                         ).__next__
        self.limited = limited  # the world has a limit (else ``limit`` is not asked)
        self.watched = watched or on_batch is not None  # ``after`` wants every batch
        self.on_batch = on_batch
        self.fused = True  # core.fast.fuse_finishes, read when the run starts
        self.next_job = 0
        self.next_change = 0
        self.events = 0  # queue entries and reported stimuli handled
        self.last = 0.0  # the time of the last batch
        self.stopped = ""
        self.idle_ticks = 0

    def push(self, t: float, phase: int) -> None:
        _push(self.queue, (t, phase, self._next(), phase, None))

    def run(self) -> str:
        """Step until every job is over or nothing will change; why it stopped early."""
        jobs = self.jobs
        if jobs:
            self.push(jobs[0].submit, _ARRIVAL)
        if self.timeline:
            self.push(self.timeline[0].time, _CAPACITY)
        if self.tick is not None and jobs:
            self.push(jobs[0].submit + self.tick, Phase.TICK)
        core = self.core
        world = self.world
        self.fused = core.fast.fuse_finishes  # (switched off in tests: the general path)
        total = len(jobs)
        queue = self.queue
        while True:
            if self.next_job == total and not core.active:
                break  # every job is done: later capacity changes and ticks change nothing
            if self.limited:
                why = world.limit(queue[0][0] if queue else INF,
                                  bool(core.active) or self.next_job < total)
                if why:
                    self.stopped = why
                    break
            if not queue and not world.expects():
                break  # nothing queued and nothing to wait for: nothing will change
            if not self.step():
                break
        if core.active and not self.stopped:
            self.stopped = "no task can run and nothing will change"
        return self.stopped

    def step(self) -> bool:
        """One instant; False when the run must stop."""
        core = self.core
        world = self.world
        queue = self.queue
        reported = world.wait(queue[0][0] if queue else INF)
        now = world.now()
        first: tuple[int, Any] | None = None
        if queue and queue[0][0] <= now:
            now, _, _, kind, payload = _pop(queue)
            self.events += 1
            if kind == _TASK and not reported and (not queue or queue[0][0] != now):
                # The hot path: a task event alone at its instant.  Same as the batch below
                # with one stimulus, without building it (``finish_one`` is ``handle`` for it).
                ref = world.task_due(payload, now)
                if ref is None:
                    return True
                cmds = (core.finish_one(now, ref) if self.fused else
                        core.handle(now, [task_finished(task=ref)]))
                self.last = now
                if not cmds and not self.watched:
                    return True  # nothing to launch and no one to tell: the next event
                world.apply(now, cmds)
                if self.on_batch is not None:
                    self.on_batch(now, [task_finished(task=ref)], cmds)
                return self._after(now, False, cmds)
            first = (kind, payload)
        stimuli, ticked = self._gather(reported, first, now)
        if not stimuli:
            return True
        cmds = core.handle(now, stimuli)
        self.last = now
        world.apply(now, cmds)
        if self.on_batch is not None:
            self.on_batch(now, stimuli, cmds)
        return self._after(now, ticked, cmds)

    def _gather(self, reported: list[Stimulus], first: tuple[int, Any] | None,
                now: float) -> tuple[list[Stimulus], bool]:
        """Everything due by ``now``, in phase order: the task events the world reported and
        the queue's task ends, then machine events (reported, then the capacity timeline's),
        arrivals and the tick."""
        queue = self.queue
        world = self.world
        jobs = self.jobs
        timeline = self.timeline
        stimuli: list[Stimulus] = [s for s in reported if isinstance(s, _REPORTED_TASK)]
        changes: list[Stimulus] = [s for s in reported if isinstance(s, _REPORTED_MACHINE)]
        self.events += len(stimuli) + len(changes)
        arrivals: list[Stimulus] = []
        ticked = False
        entry = first
        while True:
            if entry is None:
                if not queue or queue[0][0] > now:
                    break
                _, _, _, kind, payload = _pop(queue)
                self.events += 1
            else:
                kind, payload = entry
                entry = None
            if kind == _TASK:
                ref = world.task_due(payload, now)
                if ref is not None:
                    stimuli.append(task_finished(task=ref))
            elif kind == _ARRIVAL:
                arrivals.append(JobSubmitted(jobs[self.next_job]))
                self.next_job += 1
                if self.next_job < len(jobs):
                    self.push(jobs[self.next_job].submit, _ARRIVAL)
            elif kind == _CAPACITY:
                change = timeline[self.next_change]
                self.next_change += 1
                if self.next_change < len(timeline):
                    self.push(timeline[self.next_change].time, _CAPACITY)
                world.capacity(change, now)
                changes.append(CapacityChanged(change))
            else:
                ticked = True
        stimuli += changes
        stimuli += arrivals
        if ticked:
            stimuli.append(Tick())
        return stimuli, ticked

    def _after(self, now: float, ticked: bool, cmds: list[Command]) -> bool:
        if ticked:
            more = (self.next_job < len(self.jobs)
                    or self.next_change < len(self.timeline))
            self.idle_ticks, keep, why = self.core.after_tick(
                bool(cmds) or self.world.running(), more, self.idle_ticks)
            if keep:
                assert self.tick is not None
                self.push(now + self.tick, Phase.TICK)
            self.stopped = self.stopped or why
        if self.watched:
            why = self.world.after(now)
            if why:
                self.stopped = why
                return False
        return True
