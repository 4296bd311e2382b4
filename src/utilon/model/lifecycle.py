"""Lifecycles of jobs, tasks and machines: enums plus a table of legal moves.

Every state change in the scheduler core goes through ``move``; an illegal move raises
``IllegalTransition`` naming the object, its state and the move, which turns a silent
bookkeeping bug into an immediate, precise failure.
"""

from __future__ import annotations

from enum import IntEnum

from utilon.errors import IllegalTransition


class TaskState(IntEnum):
    WAITING = 0  # its stage waits for earlier stages
    READY = 1
    RUNNING = 2
    DONE = 3


class JobState(IntEnum):
    """Where a job is in its life (``JOB_MOVES`` lists the legal moves)."""

    QUEUED = 0
    """Submitted, nothing launched yet."""
    RUNNING = 1
    """At least one task has been launched."""
    DONE = 2
    """Every task has finished."""
    CANCELLED = 3
    """Withdrawn by its owner before it finished (a service's cancel)."""


class MachineState(IntEnum):
    DOWN = 0
    UP = 1


TASK_MOVES: frozenset[tuple[TaskState, TaskState]] = frozenset({
    (TaskState.WAITING, TaskState.READY),
    (TaskState.READY, TaskState.RUNNING),
    (TaskState.RUNNING, TaskState.DONE),
    (TaskState.RUNNING, TaskState.READY),  # killed (preempted) or lost with its machine
})

JOB_MOVES: frozenset[tuple[JobState, JobState]] = frozenset({
    (JobState.QUEUED, JobState.RUNNING),
    (JobState.RUNNING, JobState.DONE),
    (JobState.QUEUED, JobState.CANCELLED),
    (JobState.RUNNING, JobState.CANCELLED),
})

MACHINE_MOVES: frozenset[tuple[MachineState, MachineState]] = frozenset({
    (MachineState.DOWN, MachineState.UP),
    (MachineState.UP, MachineState.DOWN),
})

_TABLES = {TaskState: TASK_MOVES, JobState: JOB_MOVES, MachineState: MACHINE_MOVES}


def check_move(what: str, old: IntEnum, new: IntEnum) -> None:
    """Raise ``IllegalTransition`` unless ``old -> new`` is in the table of ``old``'s type."""
    if (old, new) not in _TABLES[type(old)]:
        raise IllegalTransition(f"{what}: illegal move {old.name} -> {new.name}")
