"""``shortest-first``: jobs with the least expected work left go first.

Shortest-remaining-processing-time is the classic way to lower mean response time; on its own
it can starve a long job while short ones keep arriving, so ``aging`` lets waiting count: each
second a job has waited takes ``aging`` task-seconds off the work it is ranked by.
"""

from __future__ import annotations

from utilon.core import ClusterSnapshot, Decision, Grant
from utilon.policies import Policy


class ShortestFirst(Policy):
    name = "shortest-first"
    summary = "least expected work left first (SRPT), with optional aging; no preemption"

    def __init__(self, aging: float = 0.0) -> None:
        if aging < 0:
            # raised as ValueError, reported by utilon as a one-line parameter error
            raise ValueError(f"aging must be >= 0, got {aging:g}")
        self.aging = aging

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        now = snapshot.now
        order = sorted(snapshot.jobs,
                       key=lambda j: (j.remaining_work - self.aging * (now - j.submit),
                                      j.submit))
        return Decision(grants=tuple(Grant(j.id) for j in order))
