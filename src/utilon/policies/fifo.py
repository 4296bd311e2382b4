"""FIFO: Hadoop's default scheduler.

Jobs are served strictly in order of priority (higher first), then submit time: the head job
gets every slot it can use, the next job only what the head cannot use, and so on.  Nothing is
preempted: when capacity frees up, it goes to the first job in that order with a ready task.
"""

from __future__ import annotations

from utilon.core.decision import Decision, Grant
from utilon.core.snapshot import ClusterSnapshot
from utilon.policies.base import Policy, register


@register
class Fifo(Policy):
    name = "fifo"
    summary = "first in, first out (by priority, then submit time); no preemption"

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        order = sorted(snapshot.jobs, key=lambda j: (-j.priority, j.submit))  # stable: arrival
        return Decision(grants=tuple(Grant(j.id) for j in order))
