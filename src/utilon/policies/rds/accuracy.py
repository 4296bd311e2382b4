"""How well RDS's progress model predicts completion times (§6.3, Fig. 10a).

A completion-time prediction made for a job's *planned* allocation is mostly a test of the
plan: the scheduler changes the allocation at every later step (and backfill hands out more
than planned), so the error would measure the scheduling, not the model.  We score the model
as the paper's "accuracy of the fuzzy models" asks: at each control step we keep the model's
consequent parameters as they were then; when the job finishes, each kept model replays the
job from that step with the allocations the job actually received, interval by interval, and
its predicted finish is compared with the real one (``CompletionLog``: RMSE over the mean
remaining time at prediction, and over the mean job completion time, our reading of the
paper's NRMSE).

That replay knows the job's future share perfectly: it is the model's error *given* the
allocations, not the error of a forecast the controller could have made.  The controller's
own forecast is scored as well (issue 44, ``replay_planned``): the same kept model, run from
the same step with the allocation the QP *planned* for the job -- its H_c planned steps,
then the last one held (the MPC convention the QP itself uses beyond H_c).  A job the plan
gives nothing never finishes in that forecast; such forecasts are counted, not scored
(``CompletionLog.unfinished``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from utilon.policies.rds.progress import CompletionLog, ProgressModel, bounded_progress

MAX_EXTRA_STEPS = 200  # beyond the recorded allocations, extrapolate with their mean


@dataclass
class JobHistory:
    size: float
    submit: float = 0.0
    intervals: list[tuple[float, float, float]] = field(default_factory=list)
    """(map allocation, reduce allocation, seconds) of each measured interval, in order."""
    forecasts: list[tuple[float, float, float, int, np.ndarray]] = field(default_factory=list)
    """(time, progress, y(t-1), intervals seen, consequents) at each control step."""
    plans: list[tuple[np.ndarray, np.ndarray] | None] = field(default_factory=list)
    """The (map, reduce) allocation the controller planned for the job over H_c steps at
    each forecast (None: the controller made no plan, e.g. ``objective: tardiness``)."""

    def forecast_point(self, t: float, progress: float, y_prev: float,
                       model: ProgressModel,
                       plan: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.forecasts.append((t, progress, y_prev, len(self.intervals), model.theta.copy()))
        self.plans.append(None if plan is None else (np.array(plan[0], dtype=float),
                                                     np.array(plan[1], dtype=float)))


def _mean_allocation(steps: list[tuple[float, float, float]], interval: float
                     ) -> tuple[float, float, float]:
    """What a replay assumes once the recorded allocations run out (the model predicted less
    progress than the job made): the job's time-weighted mean allocation, one interval at a
    time.  Not the last interval's: that is the drain of the job's last tasks (partial, a few
    stragglers), and carrying it on turned a model one interval behind into a prediction
    hours late (issue 22: 78.6% -> 17.2% NRMSE on 2016-07-22 in scale-up)."""
    secs = sum(s[2] for s in steps)
    if secs <= 0:
        return steps[-1][0], steps[-1][1], interval
    return (sum(s[0] * s[2] for s in steps) / secs, sum(s[1] * s[2] for s in steps) / secs,
            interval)


def replay(model: ProgressModel, hist: JobHistory, k: int, interval: float) -> float:
    """Predicted finish of forecast ``k`` under the allocations the job received."""
    t, p, y_prev, start, theta = hist.forecasts[k]
    steps = hist.intervals[start:] or [(0.0, 0.0, interval)]
    original = model.theta
    model.theta = theta
    tail = _mean_allocation(steps, interval)
    try:
        for m in range(len(steps) + MAX_EXTRA_STEPS):
            um, ur, dur = steps[min(m, len(steps) - 1)]
            if m >= len(steps):
                um, ur, dur = tail
            y = bounded_progress(model, um, ur, hist.size, y_prev, interval) * dur / interval
            if p + y >= 1.0 - 1e-12 and y > 0:
                return t + dur * (1.0 - p) / y
            p, t, y_prev = p + y, t + dur, y * interval / dur
        return math.inf
    finally:
        model.theta = original


def replay_planned(model: ProgressModel, hist: JobHistory, k: int, interval: float
                   ) -> float | None:
    """Predicted finish of forecast ``k`` under the allocation planned at that step (its
    H_c steps, the last held); None when no plan was recorded, ``inf`` when the plan never
    finishes the job."""
    plan = hist.plans[k] if k < len(hist.plans) else None
    if plan is None or not len(plan[0]):
        return None
    t, p, y_prev, _, theta = hist.forecasts[k]
    um_plan, ur_plan = plan
    original = model.theta
    model.theta = theta
    try:
        for m in range(MAX_EXTRA_STEPS):
            i = min(m, len(um_plan) - 1)
            y = bounded_progress(model, float(um_plan[i]), float(ur_plan[i]), hist.size,
                                 y_prev, interval)
            if p + y >= 1.0 - 1e-12 and y > 0:
                return t + interval * (1.0 - p) / y
            p, t, y_prev = p + y, t + interval, y
        return math.inf
    finally:
        model.theta = original


def record_finish(log: CompletionLog, job: str, model: ProgressModel, hist: JobHistory,
                  finish: float, interval: float,
                  planned: CompletionLog | None = None) -> None:
    """Score every kept forecast of a finished job: replayed with the allocations it
    received (``log``) and, when ``planned`` is given, with the planned ones."""
    for k in range(len(hist.forecasts)):
        pred = replay(model, hist, k, interval)
        if math.isfinite(pred):
            log.predict(job, hist.forecasts[k][0], pred)
        if planned is not None:
            pp = replay_planned(model, hist, k, interval)
            if pp is not None:
                planned.predict(job, hist.forecasts[k][0], pp)
    log.finished(job, finish, hist.submit)
    if planned is not None:
        planned.finished(job, finish, hist.submit)
