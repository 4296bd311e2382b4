"""What flows into the scheduler core (stimuli) and out of it (commands).

Backends, simulated or live, turn what happened into stimuli and execute commands; the core
never talks to the world directly.  All messages are small frozen values.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from utilon.model.cluster import CapacityChange
from utilon.model.job import Job


class TaskRef(NamedTuple):
    """One task of one job: (job id, stage index, task index within the stage)."""

    job: str
    stage: int
    index: int  # type: ignore[assignment]  # shadows tuple.index; the name reads best


class Trigger(IntEnum):
    """Why the core may call the policy; each policy declares which ones it wants."""

    ARRIVAL = 0
    TASK_FINISHED = 1
    STAGE_FINISHED = 2
    JOB_FINISHED = 3
    TASK_FAILED = 4
    CAPACITY = 5
    TICK = 6


# -- stimuli ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class JobSubmitted:
    job: Job


@dataclass(frozen=True, slots=True)
class TaskFinished:
    task: TaskRef


@dataclass(frozen=True, slots=True)
class TaskFailed:
    task: TaskRef
    reason: str = "failed"


@dataclass(frozen=True, slots=True)
class CapacityChanged:
    change: CapacityChange


@dataclass(frozen=True, slots=True)
class Tick:
    pass


Stimulus = JobSubmitted | TaskFinished | TaskFailed | CapacityChanged | Tick


# -- commands --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Launch:
    task: TaskRef
    machine: str


@dataclass(frozen=True, slots=True)
class Preempt:
    """Kill a running task; the core has already put it back in its stage's ready queue."""

    task: TaskRef
    machine: str
    reason: str = "preempted"


Command = Launch | Preempt
