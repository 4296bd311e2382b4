"""The order of the ``tardiness`` variant of ``rds``: weighted modified due dates over the
remaining time RDS's progress model predicts (issue 22; not in the paper).

Eq. 1 charges a late job ``ω_j × (finish − s_j) / (s_j − a_j)``: its lateness, weighted by
``w_j = ω_j / (s_j − a_j)`` -- the slope of Eq. 4's δ, the value a job loses per second
late.  Summed over the jobs that is *total weighted tardiness*, and in overload (when most
jobs are late anyway) earliest-deadline-first is a poor rule for it: a job whose deadline is
near but whose remaining work is large holds the cluster while several short jobs behind it
all go late (the "domino effect").  The classic rule for weighted tardiness is the weighted
modified due date (WMDD; Kanet & Li, 2004), a generalisation of Baker & Bertrand's MDD: serve
first the job with the least

    max(p_j, s_j − now) / w_j,

where ``p_j`` is the time the job still needs with the whole cluster.  A job with slack left
is ranked by its deadline, as EDF does (scaled by 1 / w_j); once the slack is gone it is
ranked by its remaining time over its weight (Smith's rule, WSPT), which is what minimises
weighted lateness when every job is late.  ``p_j`` is what RDS's progress model is for: the
remaining work at the model's gain per unit of capacity (relative to the fluid law
``u·Δ/d_j``), at the capacity RDS forecasts (``remaining_time``).
"""

from __future__ import annotations

import math

from utilon.core.snapshot import JobView


def lateness_weight(job: JobView) -> float:
    """``w_j = ω_j / (s_j − a_j)``: what Eq. 1 (and Eq. 4's δ) charges per second late."""
    return job.weight / max(job.goal - job.submit, 1.0)


def remaining_time(job: JobView, capacity: float, r_slot: float,
                   slowdown: tuple[float, float] = (1.0, 1.0)) -> float:
    """Seconds the job still needs at ``capacity`` (slots × speed), each phase (map-like
    stages, then reduces) limited to the slots its remaining tasks can fill.

    ``slowdown``: the fluid law's gain over the progress model's, for the map and the reduce
    phase (1 = the fluid law; 2 = the model expects half the progress per unit of capacity).
    Running tasks count whole (a slight over-estimate, the same for every job)."""
    capacity = max(capacity, 1e-9)
    r_slot = max(r_slot, 1e-12)
    seconds = 0.0
    for phase, factor in zip(("map", "reduce"), slowdown, strict=True):
        work = tasks = 0.0
        for s in job.stages:
            if (s.kind == "reduce") == (phase == "reduce"):
                work += s.remaining * s.expected_duration
                tasks += s.remaining
        if tasks:
            seconds += factor * work / min(capacity, tasks * r_slot)
    return seconds


def wmdd_key(job: JobView, now: float, remaining: float) -> float:
    """The WMDD priority of a job (smaller first): ``max(p_j, s_j − now) / w_j``.  A job
    Eq. 1 never charges (weight 0, or no deadline: w_j = 0) goes last: ``inf``."""
    w = lateness_weight(job)
    if not w > 0 or not math.isfinite(job.goal):
        return math.inf
    return max(remaining, job.goal - now) / w
