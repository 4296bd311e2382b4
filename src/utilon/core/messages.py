"""What flows into the scheduler core (stimuli) and out of it (commands).

Backends, simulated or live, turn what happened into stimuli and execute commands; the core
never talks to the world directly.  All messages are small immutable values; they are
``NamedTuple``s rather than frozen dataclasses because one or two are built per task event and a
NamedTuple is several times cheaper to build.  Dispatch on them with ``type(m) is ...``:
tuple equality means two different message types with equal fields compare equal.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from utilon.model.cluster import CapacityChange, Machine
from utilon.model.job import Job


class TaskRef(NamedTuple):
    """One task of one job: (job id, stage index, task index within the stage)."""

    job: str
    stage: int
    index: int  # type: ignore[assignment]  # shadows tuple.index; the name reads best


class Trigger(IntEnum):
    """Why the core may call the policy; each policy declares which ones it wants."""

    ARRIVAL = 0
    """Jobs were submitted."""
    TASK_FINISHED = 1
    """A task completed."""
    STAGE_FINISHED = 2
    """A stage's last task completed."""
    JOB_FINISHED = 3
    """A job's last task completed."""
    TASK_FAILED = 4
    """A task failed and is queued again."""
    CAPACITY = 5
    """Machines joined or left, or a machine's capacity or speed changed."""
    TICK = 6
    """The policy's periodic tick (``Policy.tick``)."""


# -- stimuli ---------------------------------------------------------------------------------
class JobSubmitted(NamedTuple):
    job: Job


class TaskFinished(NamedTuple):
    task: TaskRef


class TaskFailed(NamedTuple):
    task: TaskRef
    reason: str = "failed"


class CapacityChanged(NamedTuple):
    change: CapacityChange


class MachineAdded(NamedTuple):
    """A machine the cluster did not declare joined (a Ray node started during a live run).

    Machines the cluster declares join and leave through ``CapacityChanged``; this stimulus is
    for machines discovered at run time, which have no id in the cluster yet.
    """

    machine: Machine


class Tick(NamedTuple):
    """A periodic control tick (for policies with a ``tick``)."""


class JobCancelled(NamedTuple):
    """The job's owner withdrew it (``utilon cancel``): its running tasks are killed and it
    leaves the active set unfinished, as if it had never been wanted."""

    job: str
    reason: str = "cancelled"


Stimulus = (JobSubmitted | TaskFinished | TaskFailed | CapacityChanged | MachineAdded | Tick
            | JobCancelled)


# -- commands --------------------------------------------------------------------------------
class Launch(NamedTuple):
    task: TaskRef
    machine: str


class Preempt(NamedTuple):
    """Kill a running task; the core has already put it back in its stage's ready queue."""

    task: TaskRef
    machine: str
    reason: str = "preempted"


Command = Launch | Preempt
