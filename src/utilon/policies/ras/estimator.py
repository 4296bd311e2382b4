"""RAS's Job Completion Time Estimator (§3.2): s_req, the map tasks a job should run
concurrently to meet its completion-time goal.

RAS delegates it to its reference [6] (Polo et al., "Performance-driven task co-scheduling
for MapReduce environments", NOMS 2010), which estimates it from the pending map tasks, the
mean length of the job's completed map tasks and the time left to the goal:

    s_req = ⌈ s_pend × mean_task_length / (T_goal − now) ⌉,   at most s_pend.

Our readings of the corners: before any map task has completed, the mean length is the
task's declared (expected) duration; a job without a goal, or whose goal has passed or is
closer than one task length, requires every pending task at once (s_req = s_pend: "the job
needs to be completed at the earliest possible time", §3.1); a job with no pending map
requires 0.
"""

from __future__ import annotations

import math


def required_map_slots(pending: int, mean_task_length: float, goal: float | None,
                       now: float) -> int:
    """s_req for ``pending`` map tasks of ``mean_task_length`` seconds, goal ``goal``."""
    if pending <= 0:
        return 0
    if mean_task_length <= 0 or not math.isfinite(mean_task_length):
        raise ValueError(f"mean task length must be a positive number, got {mean_task_length}")
    if goal is None or not math.isfinite(goal):
        return pending
    left = goal - now
    if left < mean_task_length:  # past the goal, or no room for even one wave
        return pending
    return min(pending, max(1, math.ceil(pending * mean_task_length / left - 1e-9)))
