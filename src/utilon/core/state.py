"""Mutable runtime state owned by the scheduler core (one place, never shared).

These are plain ``__slots__`` classes rather than dataclasses because the dispatcher touches
them once per task event; values handed to policies are the frozen views in ``snapshot``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Final

from mypy_extensions import mypyc_attr

from utilon.core.messages import TaskRef
from utilon.core.snapshot import JobView, MachineView, StageView
from utilon.core.tolerance import EPS
from utilon.model.cluster import Machine
from utilon.model.job import Job, Stage
from utilon.model.lifecycle import JobState, MachineState, TaskState

_duration: Final = attrgetter("duration")


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class Running:
    """A running task's record (``JobRT.running``): where and since when it runs.  A class
    of the compiled core, not a NamedTuple: one is built at every launch and read at every
    completion, and a compiled class is built by a direct call and read as a typed field."""

    __slots__ = ("launch", "machine", "start")

    def __init__(self, machine: int, start: float, launch: int) -> None:
        self.machine = machine  # the machine's index
        self.start = start
        self.launch = launch  # the core's count of launches before it: orders a machine's tasks

    def __repr__(self) -> str:
        return f"Running(machine={self.machine}, start={self.start}, launch={self.launch})"


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class StageRT:
    __slots__ = ("dependents", "deps_left", "done", "durations", "expected", "gang", "index",
                 "is_reduce", "locked", "observed", "observed_sum", "ready", "running", "stage",
                 "started_sum", "states", "total", "vectors", "view", "vkeys")

    def __init__(self, index: int, stage: Stage, vectors: list[tuple[float, ...]],
                 vkeys: list[int] | None = None) -> None:
        self.index = index
        self.stage = stage
        self.total = len(stage.tasks)
        self.vectors = vectors  # declared demand per task, ordered like the cluster resources
        # each task's demand as a small number, one per distinct vector in the run (the core's
        # busy-time accumulators are indexed by it: no float-tuple hashing per completion)
        self.vkeys = vkeys if vkeys is not None else [0] * self.total
        self.gang = stage.gang
        # each task's duration: what a simulator's launch reads, as a native field
        self.durations: list[float] = list(map(_duration, stage.tasks))
        # O(tasks): computed once, not per snapshot (``Stage.expected_duration``, the same sum)
        self.expected = (stage.estimate if stage.estimate is not None else
                         sum(self.durations) / self.total)
        self.observed = 0  # completed attempts measured (online estimation only)
        self.observed_sum = 0.0
        self.is_reduce = stage.kind == "reduce"
        self.deps_left = len(stage.after)
        self.locked = self.deps_left > 0
        self.dependents: list[int] = []
        self.running = 0
        self.started_sum = 0.0  # sum of the running tasks' start times (elapsed work, O(1))
        self.done = 0
        # the stage's snapshot view, reset to None by every change of what it shows
        self.view: StageView | None = None
        if self.locked:
            self.states = [TaskState.WAITING] * self.total
            self.ready: deque[int] = deque()
        else:
            self.states = [TaskState.READY] * self.total
            self.ready = deque(range(self.total))


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class JobRT:
    __slots__ = ("cost", "dirty", "finish", "gstates", "id", "job", "n_ready", "running",
                 "seq", "stages", "start", "state", "view")

    def __init__(self, job: Job, stages: list[StageRT], seq: int = 0) -> None:
        self.job = job
        self.id = job.id
        self.seq = seq  # arrival number: the job's row in the run's timeline
        self.stages = stages
        self.state = JobState.QUEUED
        self.start: float | None = None
        self.finish: float | None = None
        # running task -> (machine index, start time, launch number: the core's count of
        # launches before it, which orders the tasks of a machine); insertion order = launch
        # order
        self.running: dict[TaskRef, Running] = {}
        self.n_ready = sum(len(s.ready) for s in stages)
        self.gstates: list[GrantState] = []
        self.cost = 0.0
        self.dirty = True
        self.view: JobView | None = None


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class MachineRT:
    __slots__ = ("base", "cap", "capx", "free", "id", "index", "machine", "nreduce", "ntasks",
                 "price", "scale", "speed", "state", "view")

    def __init__(self, index: int, machine: Machine, names: tuple[str, ...], up: bool) -> None:
        self.index = index
        self.machine = machine
        self.id = machine.id
        self.base = machine.capacity.vector(names)
        self.scale = 1.0
        self.speed = 1.0
        self.cap = self.base
        self.capx = [c + EPS for c in self.cap]  # what one task alone may demand here
        # cap - used + a float tolerance: the only usage record, so that a fit test is one
        # C-level ``all(map(le, demand, free))`` and a launch updates one list
        self.free = [c + EPS for c in self.cap]
        self.price = machine.price
        self.state = MachineState.UP if up else MachineState.DOWN
        self.ntasks = 0
        self.nreduce = 0
        self.view: MachineView | None = None

    @property
    def used(self) -> list[float]:
        """Declared demand of the running tasks, per resource."""
        return [c + EPS - f for c, f in zip(self.cap, self.free, strict=True)]

    def reset_free(self) -> None:
        """Recompute ``free`` from scratch (capacity change, or no task left: drops float
        noise)."""
        if not self.ntasks:
            self.free = [c + EPS for c in self.cap]


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class GrantState:
    """A grant as installed: resolved indices and its running-task count."""

    __slots__ = ("gang", "job", "limit", "mask", "order", "running", "stage")

    def __init__(self, order: int, job: JobRT, stage: int | None, mask: frozenset[int] | None,
                 limit: float, gang: bool = False) -> None:
        self.order = order
        self.gang = gang
        self.job = job
        self.stage = stage
        self.mask = mask
        self.limit = limit
        self.running = 0

    def covers(self, stage: int, machine: int) -> bool:
        return (self.stage is None or self.stage == stage) and (
            self.mask is None or machine in self.mask)


class RunningCounts:
    """One job's running tasks counted by stage, by machine and by both, so that installing
    a scoped grant counts the tasks it covers (``GrantState.covers``) in O(machines it names)
    rather than a pass over the job's running tasks for each of its grants."""

    __slots__ = ("by_machine", "by_pair", "by_stage", "total")

    def __init__(self, job: JobRT) -> None:
        self.total = len(job.running)
        self.by_pair: dict[tuple[int, int], int] = {}
        self.by_stage: dict[int, int] = {}
        self.by_machine: dict[int, int] = {}
        for ref, run in job.running.items():
            stage, mi = ref.stage, run.machine
            self.by_pair[(stage, mi)] = self.by_pair.get((stage, mi), 0) + 1
            self.by_stage[stage] = self.by_stage.get(stage, 0) + 1
            self.by_machine[mi] = self.by_machine.get(mi, 0) + 1

    def covered(self, stage: int | None, mask: frozenset[int] | None) -> int:
        """How many of the job's running tasks a grant scoped to ``stage`` (every stage if
        None) and the machines ``mask`` (every machine if None) covers."""
        if mask is None:
            return self.total if stage is None else self.by_stage.get(stage, 0)
        if stage is None:
            if len(mask) <= len(self.by_machine):
                return sum([self.by_machine.get(mi, 0) for mi in mask])
            return sum([n for mi, n in self.by_machine.items() if mi in mask])
        if len(mask) <= len(self.by_pair):
            return sum([self.by_pair.get((stage, mi), 0) for mi in mask])
        return sum([n for (st, mi), n in self.by_pair.items() if st == stage and mi in mask])


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
@dataclass(slots=True)
class CoreStats:
    """The core's counters (an output of every run: ``summary.json``)."""

    launched: int = 0
    completed: int = 0
    killed: int = 0
    lost: int = 0
    failed: int = 0
    stale: int = 0
    decisions: int = 0
    decide_seconds: list[float] = field(default_factory=list)
    solver_seconds: list[float] = field(default_factory=list)  # optimization policies only
