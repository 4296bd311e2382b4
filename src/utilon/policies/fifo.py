"""FIFO: Hadoop's default scheduler.

Jobs are served strictly in order of priority (higher first), then submit time: the head job
gets every slot it can use, the next job only what the head cannot use, and so on.  Nothing is
preempted: when capacity frees up, it goes to the first job in that order with a ready task.

The order depends only on which jobs are active, so FIFO decides on arrivals, failures and
capacity changes only: a job that finishes simply drops out of the installed order, and newly
ready stages are dispatched by the core without a new decision.  It is *order-only*
(``order_only``): a job arriving after the others joins the end of the installed order without a
call to ``decide`` (the same decision, without a snapshot, sort and validation of every
active job).
"""

from __future__ import annotations

from utilon.core.decision import Decision, Grant
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView
from utilon.policies.base import Policy, register


@register
class Fifo(Policy):
    name = "fifo"
    summary = "first in, first out (by priority, then submit time); no preemption"
    triggers = frozenset({Trigger.ARRIVAL, Trigger.TASK_FAILED, Trigger.CAPACITY})

    order_only = True

    def order_key(self, job: JobView) -> tuple[int, float]:
        return fifo_key(job)

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        return Decision(grants=tuple([_tuple(Grant, (j.id, None, None, None, False, False))
                                      for j in sorted(snapshot.jobs, key=fifo_key)]))


def fifo_key(job: JobView) -> tuple[int, float]:
    """Priority (higher first), then submit time; a stable sort keeps arrival order."""
    return (-job.priority, job.submit)


_tuple = tuple.__new__  # a whole-job Grant(job_id), without the NamedTuple's Python __new__
