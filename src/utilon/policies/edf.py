"""Earliest-deadline-first, non-preemptive (EDF-N) and preemptive (EDF-P), as in RDS §6.

The deadline of a job is its utility function's goal (deadline, soft bound, sigmoid midpoint);
jobs without one come last, ties go to the earlier submission.

* EDF-N "enforces the EDF policy at the job queue – there is always only one job, the job with
  the earliest deadline, in the running queue.  Even if a job with an earlier deadline arrives,
  it needs to wait for the running job's completion."  One grant, to the running job (or, when
  none runs, to the queued job with the earliest deadline); slots it cannot use stay idle.
* EDF-P "allows multiple jobs in the running queue.  A job can preempt a running job's slots.
  However, EDF-P does not kill the running tasks of the preempted job but waits for their
  completion."  Every job is granted in deadline order with no cap: a freed slot goes to the
  earliest-deadline job that has a ready task — the no-kill preemption.  Like FIFO, its
  order depends only on which jobs are active, so it decides on arrivals, failures and
  capacity changes only.
"""

from __future__ import annotations

from utilon.core.decision import Decision, Grant
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView
from utilon.policies.base import Policy, register


def deadline_key(job: JobView) -> tuple[float, float]:
    return (job.goal, job.submit)


@register
class EdfNonPreemptive(Policy):
    name = "edf-n"
    summary = "EDF, non-preemptive: one job runs at a time, chosen by earliest deadline (RDS §6)"
    paper = "rds"

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        started = [j for j in snapshot.jobs if j.started is not None]
        pool = started or list(snapshot.jobs)
        if not pool:
            return Decision()
        head = min(pool, key=deadline_key)
        return Decision(grants=(Grant(head.id),))


@register
class EdfPreemptive(Policy):
    name = "edf-p"
    summary = "EDF, preemptive without killing: freed slots go to the earliest deadline (RDS §6)"
    paper = "rds"
    triggers = frozenset({Trigger.ARRIVAL, Trigger.TASK_FAILED, Trigger.CAPACITY})
    order_only = True  # an arrival after every deadline so far just joins the end

    def order_key(self, job: JobView) -> tuple[float, float]:
        return deadline_key(job)

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        order = sorted(snapshot.jobs, key=deadline_key)  # = order_key
        return Decision(grants=tuple(Grant(j.id) for j in order))
