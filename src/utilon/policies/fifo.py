"""FIFO: Hadoop's default scheduler.

Jobs are served strictly in order of priority (higher first), then submit time: the head job
gets every slot it can use, the next job only what the head cannot use, and so on.  Nothing is
preempted: when capacity frees up, it goes to the first job in that order with a ready task.

The order depends only on which jobs are active, so FIFO decides on arrivals, failures and
capacity changes only: a job that finishes simply drops out of the installed order, and newly
ready stages are dispatched by the core without a new decision.
"""

from __future__ import annotations

from operator import itemgetter

from utilon.core.decision import Decision, Grant
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot
from utilon.policies.base import Policy, register


@register
class Fifo(Policy):
    name = "fifo"
    summary = "first in, first out (by priority, then submit time); no preemption"
    triggers = frozenset({Trigger.ARRIVAL, Trigger.TASK_FAILED, Trigger.CAPACITY})

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        # Priority (higher first), then submit time, then arrival: two stable sorts, the
        # secondary key first, give exactly that order without a key tuple per job.
        order = sorted(snapshot.jobs, key=_submit)
        order.sort(key=_priority, reverse=True)  # reverse keeps equal keys in order
        return Decision(grants=tuple([_tuple(Grant, (j.id, None, None, None, False, False))
                                      for j in order]))


_submit = itemgetter(2)  # JobView.submit (a NamedTuple: by index, no descriptor call)
_priority = itemgetter(4)  # JobView.priority
_tuple = tuple.__new__  # a whole-job Grant(job_id), without the NamedTuple's Python __new__
