"""Jobs, stages and tasks.

A job is a DAG of stages listed in a topological order (a stage may only wait for stages listed
before it).  A MapReduce job is the common case: a ``map`` stage and a ``reduce`` stage that
waits for it.  Each task has a ``duration`` (seconds of work at full speed on an uncontended
machine), a declared ``demand`` (what the dispatcher reserves on a machine) and an actual usage
profile over its phases (what the fluid simulator charges against the machine; RAS's map /
shuffle / reduce phases).  A stage marked ``gang`` launches all its tasks at once or not at all.

Two fields serve alsched (§5.1 of its paper): ``colocate_speedup`` is placement-dependent
duration -- a stage whose tasks all start at one instant on one machine runs that many times
faster (NBODY's locality speedup ``f``) -- and ``request`` is the stage's placement utility
(an ``utilon.policies.alsched.lang.Request``), which the agent submits when the stage becomes
pending.  Policies other than alsched ignore both; the simulator applies the speedup.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from utilon.errors import ModelError
from utilon.model.resources import Resources
from utilon.model.utility import Constant, TimeUtility


@dataclass(frozen=True, slots=True)
class UsagePhase:
    """A share of a task's work during which it actually uses ``usage``."""

    fraction: float
    usage: Resources
    name: str = ""

    def __post_init__(self) -> None:
        if not (0.0 < self.fraction <= 1.0 + 1e-12):
            raise ModelError(f"usage phase {self.name!r}: fraction {self.fraction} not in (0, 1]")
        if not self.usage.is_nonnegative():
            raise ModelError(f"usage phase {self.name!r}: usage must be non-negative")


@dataclass(frozen=True, slots=True)
class Task:
    duration: float
    demand: Resources
    phases: tuple[UsagePhase, ...] = ()

    def __post_init__(self) -> None:
        _check_duration(self.duration)
        _check_shared(self.demand, self.phases)

    @classmethod
    def many(cls, durations: Iterable[float], demand: Resources,
             phases: tuple[UsagePhase, ...] = ()) -> tuple[Task, ...]:
        """Tasks of one stage: demand and phases are checked once for the stage (not once per
        task: a sampled stage has thousands of distinct durations), each distinct duration
        once, and tasks with equal durations share one (immutable) object."""
        ds = durations if isinstance(durations, list | tuple) else list(durations)
        if not ds:
            return ()
        _check_duration(float(ds[0]))  # the error a task-by-task build would raise first
        _check_shared(demand, phases)
        made: dict[float, Task] = dict.fromkeys(ds)  # type: ignore[assignment]
        for d in made:
            # __init__ without __post_init__, which would check the shared demand again
            t = made[d] = _new(cls)
            _set(t, "duration", _check_duration(float(d)))
            _set(t, "demand", demand)
            _set(t, "phases", phases)
        return tuple(map(made.__getitem__, ds))

    def usage_phases(self) -> tuple[UsagePhase, ...]:
        """The phases, defaulting to one phase that uses exactly what was declared."""
        return self.phases or (UsagePhase(1.0, self.demand, "run"),)


def _check_duration(duration: float) -> float:
    if not (math.isfinite(duration) and duration > 0):
        raise ModelError(f"task duration must be a positive number, got {duration!r}")
    return duration


def _check_shared(demand: Resources, phases: tuple[UsagePhase, ...]) -> None:
    """The checks of what a stage's tasks share: their demand and usage phases."""
    if not demand.is_nonnegative():
        raise ModelError(f"task demand must be non-negative, got {demand!r}")
    if phases:
        total = sum(p.fraction for p in phases)
        if abs(total - 1.0) > 1e-6:
            raise ModelError(f"task usage phase fractions sum to {total:g}, not 1")


_new = object.__new__
_set = object.__setattr__


_duration = attrgetter("duration")


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    tasks: tuple[Task, ...]
    after: tuple[str, ...] = ()
    kind: str = "task"
    gang: bool = False
    estimate: float | None = None
    """Expected task duration known to policies; ``None`` means the tasks' mean duration."""
    colocate_speedup: float = 1.0
    """Tasks run this many times faster when the whole stage starts at once on one machine."""
    request: Any = None
    """alsched's placement utility for this stage (``Request``), or ``None``."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ModelError("stage name must not be empty")
        if not (math.isfinite(self.colocate_speedup) and self.colocate_speedup > 0):
            raise ModelError(f"stage {self.name!r}: colocate_speedup must be a number > 0")
        if not self.tasks:
            raise ModelError(f"stage {self.name!r} has no tasks")
        if self.estimate is not None and not (self.estimate > 0 and math.isfinite(self.estimate)):
            raise ModelError(f"stage {self.name!r}: estimate must be a positive number")

    @property
    def expected_duration(self) -> float:
        if self.estimate is not None:
            return self.estimate
        return sum(map(_duration, self.tasks)) / len(self.tasks)

    @property
    def work(self) -> float:
        return sum(map(_duration, self.tasks))


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    submit: float
    stages: tuple[Stage, ...]
    utility: TimeUtility = field(default_factory=Constant)
    tenant: str = "default"
    weight: float = 1.0
    priority: int = 0
    job_class: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            raise ModelError("job id must not be empty")
        if not (math.isfinite(self.submit) and self.submit >= 0):
            raise ModelError(f"job {self.id}: submit time must be >= 0, got {self.submit!r}")
        if not (math.isfinite(self.weight) and self.weight > 0):
            raise ModelError(f"job {self.id}: weight must be > 0, got {self.weight!r}")
        if not self.stages:
            raise ModelError(f"job {self.id} has no stages")
        seen: set[str] = set()
        for st in self.stages:
            if st.name in seen:
                raise ModelError(f"job {self.id}: stage name {st.name!r} used twice")
            for dep in st.after:
                if dep not in seen:
                    raise ModelError(
                        f"job {self.id}: stage {st.name!r} waits for {dep!r}, which is not a "
                        "stage listed before it"
                    )
            seen.add(st.name)

    @property
    def n_tasks(self) -> int:
        return sum(len(s.tasks) for s in self.stages)

    def stage_index(self, name: str) -> int:
        for i, s in enumerate(self.stages):
            if s.name == name:
                return i
        raise ModelError(f"job {self.id} has no stage {name!r}")


def mapreduce_job(
    job_id: str,
    *,
    submit: float = 0.0,
    maps: int,
    map_duration: float,
    reduces: int = 0,
    reduce_duration: float = 1.0,
    demand: Resources | None = None,
    reduce_demand: Resources | None = None,
    utility: TimeUtility | None = None,
    tenant: str = "default",
    weight: float = 1.0,
    priority: int = 0,
    job_class: str = "",
) -> Job:
    """Builder for the common two-stage MapReduce job; reduces wait for all maps."""
    d = demand if demand is not None else Resources(slots=1)
    rd = reduce_demand if reduce_demand is not None else d
    stages = [Stage("map", tuple(Task(map_duration, d) for _ in range(maps)), kind="map")]
    if reduces:
        stages.append(
            Stage("reduce", tuple(Task(reduce_duration, rd) for _ in range(reduces)),
                  after=("map",), kind="reduce")
        )
    return Job(job_id, submit, tuple(stages), utility or Constant(), tenant, weight, priority,
               job_class)
