"""Real jobs for live execution: word count, grep, sort, pi, n-body, or your own callables.

``plan_job`` turns a job's ``run:`` block (``RunSpec``) into a ``JobPlan``: the stages the
scheduler sees, the function each task calls, how to prepare the input and verify the output.
"""

from utilon.jobs.kinds import plan_job
from utilon.jobs.plan import JobPlan, StagePlan, TaskContext, Verification, resolve_call
from utilon.jobs.specs import RunSpec

__all__ = ["JobPlan", "RunSpec", "StagePlan", "TaskContext", "Verification", "plan_job",
           "resolve_call"]
