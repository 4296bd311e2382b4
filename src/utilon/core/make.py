"""Builders of the records the core makes per task event or per decision.

A ``NamedTuple`` called by keyword runs its Python-level ``__new__``, which costs more than the
rest of a launch; ``tuple.__new__`` skips it but takes the values by position, where a field
added to the record would shift every value after it silently.  These builders keep both
properties: each takes the record's fields by name (callers name them) and builds the tuple in
one place.  Compiled with the core (``setup.py``), a call to one is a C call.
``tests/test_records.py`` calls every builder with the record's fields as keywords and
compares the result with the record built by name, so a field added without updating its
builder fails there, not in a run.
"""

from __future__ import annotations

from typing import Final

from utilon.core.decision import Grant
from utilon.core.messages import Launch, Preempt, TaskFinished, TaskRef
from utilon.core.snapshot import JobView, StageView
from utilon.model.lifecycle import JobState
from utilon.model.resources import Resources
from utilon.model.utility import TimeUtility

_tuple: Final = tuple.__new__


def task_ref(job: str, stage: int, index: int) -> TaskRef:
    return _tuple(TaskRef, (job, stage, index))


def task_finished(task: TaskRef) -> TaskFinished:
    return _tuple(TaskFinished, (task,))


def launch(task: TaskRef, machine: str) -> Launch:
    return _tuple(Launch, (task, machine))


def preempt(task: TaskRef, machine: str, reason: str = "preempted") -> Preempt:
    return _tuple(Preempt, (task, machine, reason))


def grant(job: str, slots: int | None = None, stage: str | None = None,
          machines: frozenset[str] | None = None, kill_excess: bool = False,
          gang: bool = False) -> Grant:
    return _tuple(Grant, (job, slots, stage, machines, kill_excess, gang))


def stage_view(*, name: str, index: int, kind: str, total: int, waiting: int, ready: int,
               running: int, done: int, expected_duration: float, demand: Resources,
               slot_size: float, gang: bool, request: object = None,
               started_sum: float = 0.0) -> StageView:
    return _tuple(StageView, (name, index, kind, total, waiting, ready, running, done,
                              expected_duration, demand, slot_size, gang, request, started_sum))


def job_view(*, id: str, tenant: str, submit: float, weight: float, priority: int,
             job_class: str, utility: TimeUtility, state: JobState, started: float | None,
             stages: tuple[StageView, ...]) -> JobView:
    return _tuple(JobView, (id, tenant, submit, weight, priority, job_class, utility, state,
                            started, stages))
