"""RAS's Job Completion Time Estimator (§3.2): s_req, the map tasks a job should run
concurrently to meet its completion-time goal.

RAS delegates it to its reference [6] (Polo et al., "Performance-driven task co-scheduling
for MapReduce environments", NOMS 2010), which estimates it from the pending map tasks, the
mean length of the job's completed map tasks and the time left to the goal:

    s_req = ⌈ s_pend × mean_task_length / (T_goal − now) ⌉,   at most s_pend.

Our readings of the corners:

* **Before any map task of the job has completed** there is no observed length, and the
  paper says what RAS does then (§4.2, Fig. 5): Job 7 "has a very low utility right after
  it is launched ... even though most resources are actually assigned to Job 7 ... because
  no tasks from Job 7 have been completed and thus its resource demand estimation is not yet
  accurate", until its first maps finish.  With a goal 10⁶ s away, any finite length would
  give s_req = 1 and a utility ≥ 0 from the first slot on; only "requires every pending map"
  (s_req = s_pend) gives a very low utility while holding most of the cluster.  So an
  unmeasured job requires all its pending maps (``unmeasured="all"``, the default).  The
  alternative, the declared (prior) duration, is ``unmeasured="prior"``.  A job is
  unmeasured only when task lengths are learned online (``estimates: online``, as RAS's Job
  Status Updater learns them); with ``estimates: declared`` the scenario hands the
  scheduler the true lengths, and there is nothing to distrust.
* A job without a goal, or whose goal has passed or is closer than one task length,
  requires every pending task at once (s_req = s_pend: "the job needs to be completed at the
  earliest possible time", §3.1).
* A job with no pending map requires 0.
* ``reduce_length`` (the ``ras`` policy's ``reduce_aware`` variant, off by default): the
  maps must end that many seconds before the goal, so that the reduce phase fits.  §3.2
  names only the goal, the pending maps and the mean task length; this is an extension.
"""

from __future__ import annotations

import math

UNMEASURED = ("all", "prior")


def required_map_slots(pending: int, mean_task_length: float, goal: float | None,
                       now: float, measured: bool = True, unmeasured: str = "all",
                       reduce_length: float = 0.0) -> int:
    """s_req for ``pending`` map tasks of ``mean_task_length`` seconds, goal ``goal``;
    ``measured``: some map task of the job has completed; ``reduce_length``: seconds the
    reduce phase takes after the last map (see the module docstring)."""
    if pending <= 0:
        return 0
    if not measured and unmeasured == "all":
        return pending
    if mean_task_length <= 0 or not math.isfinite(mean_task_length):
        raise ValueError(f"mean task length must be a positive number, got {mean_task_length}")
    if goal is None or not math.isfinite(goal):
        return pending
    left = goal - reduce_length - now
    if left < mean_task_length:  # past the goal, or no room for even one wave
        return pending
    return min(pending, max(1, math.ceil(pending * mean_task_length / left - 1e-9)))
