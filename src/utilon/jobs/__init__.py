"""Real jobs for live execution: word count, grep, sort, pi, n-body, or your own callables.

``plan_job`` turns a job's ``run:`` block (``RunSpec``) into a ``JobPlan``: the stages the
scheduler sees, the function each task calls, how to prepare the input and verify the output.

The names below are imported when first asked for (``from utilon.jobs import plan_job``), not
with the package: reading a scenario needs the ``run:`` models (``utilon.jobs.specs``), not
every job kind's code (``utilon validate`` must start fast, issue 47).  ``import
utilon.jobs.kinds`` loads every built-in kind.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from utilon.jobs.kinds import plan_job
    from utilon.jobs.plan import JobPlan, StagePlan, TaskContext, Verification, resolve_call
    from utilon.jobs.specs import RunSpec

__all__ = ["JobPlan", "RunSpec", "StagePlan", "TaskContext", "Verification", "plan_job",
           "resolve_call"]

#: where each name of ``__all__`` lives
_HOME = {"plan_job": "kinds", "JobPlan": "plan", "StagePlan": "plan", "TaskContext": "plan",
         "Verification": "plan", "resolve_call": "plan", "RunSpec": "specs"}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = globals()[name] = getattr(import_module(f"{__name__}.{_HOME[name]}"), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
