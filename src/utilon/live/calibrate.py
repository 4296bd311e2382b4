"""Priors for this host: measured before a live run (``utilon run --calibrate``), and checked after.

A real job's task durations are only priors (``utilon.jobs.kinds``: rates measured on one
machine, times the job's size), and its goals are multiples of its standalone runtime on those
priors.  On a slower or busier host every task takes longer than its prior and every "3x"
deadline is out of reach before the run starts.

* :func:`check_priors` compares a finished run's measured task times with their priors and
  returns a warning when they differ by more than half overall (:data:`PRIOR_TOLERANCE`).
* :func:`calibrate` runs, before the clock starts, the first task of the first stage of one
  job of each kind, in this process, on its real input; the ratio of its measured time to its
  prior is that kind's speed on this host.  Every stage estimate of every job of the kind is
  scaled by it (the ``run:`` block's ``estimate``), and the workload is built again, so its
  goals are multiples of standalone runtimes *here*.  One task per kind keeps the cost to
  seconds; a kind whose stages scale differently on this host is corrected only on average,
  and online estimation does the rest during the run.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utilon.core.messages import TaskRef
from utilon.core.scheduler import SchedulerCore
from utilon.jobs.plan import resolve_call
from utilon.live.catalog import TaskCatalog
from utilon.scenario.build import Workload, build_workload

#: measured / prior outside [1 - this, 1 + this] over a run's tasks gets a warning
PRIOR_TOLERANCE = 0.5


@dataclass(frozen=True, slots=True)
class KindSpeed:
    kind: str
    job: str        # the job whose first task was measured
    prior: float    # its prior, seconds
    measured: float  # seconds here

    @property
    def factor(self) -> float:
        return self.measured / self.prior


def calibrate(workload: Workload, scratch: Path) -> tuple[Workload, list[KindSpeed]]:
    """The workload with every real job's stage estimates scaled to this host's measured speed
    for its kind (see the module docstring), and the measurements.  ``scratch`` holds the
    calibration's inputs and outputs and is removed afterwards."""
    firsts: dict[str, str] = {}
    for j in workload.jobs:
        plan = workload.plans.get(j.id)
        if plan is not None and plan.kind not in firsts:
            firsts[plan.kind] = j.id
    if not firsts:
        return workload, []
    scratch.mkdir(parents=True, exist_ok=True)
    jobs = {j.id: j for j in workload.jobs}
    chosen = [jobs[jid] for jid in firsts.values()]
    catalog = TaskCatalog(scratch.resolve(), chosen, {j.id: workload.plans[j.id] for j in chosen})
    speeds = []
    try:
        for kind, jid in firsts.items():
            job = jobs[jid]
            catalog.prepare_job(job)
            ref = TaskRef(jid, 0, 0)
            task = catalog.task(ref)
            fn = resolve_call(task.call)
            t0 = time.perf_counter()
            fn(task.context(ref, 1))
            measured = time.perf_counter() - t0
            speeds.append(KindSpeed(kind, jid, job.stages[0].tasks[0].duration, measured))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    factor = {s.kind: s.factor for s in speeds}
    spec = workload.spec
    jobs_out = []
    for js in spec.workload.jobs:
        plan = workload.plans.get(js.id)
        if js.run is None or plan is None:
            jobs_out.append(js)
            continue
        est = {st.name: st.estimate * factor[plan.kind] for st in plan.stages}
        jobs_out.append(js.model_copy(update={"run": js.run.model_copy(
            update={"estimate": est})}))
    new_spec = spec.model_copy(update={"workload": spec.workload.model_copy(
        update={"jobs": jobs_out})})
    rebuilt = build_workload(new_spec, seed=workload.seed, source=workload.source)
    return rebuilt, speeds


def check_priors(core: SchedulerCore, workload: Workload) -> dict[str, Any]:
    """Measured against prior seconds over the run's completed tasks (the core's online
    estimates observe every completion in a live run), and a warning when they differ by more
    than :data:`PRIOR_TOLERANCE` of the priors."""
    measured = prior = 0.0
    n = 0
    for jr in core.jobs.values():
        for st, stage in zip(jr.stages, jr.job.stages, strict=True):
            if st.observed:
                measured += st.observed_sum
                prior += st.observed * stage.expected_duration
                n += st.observed
    ratio = measured / prior if prior > 0 else None
    out: dict[str, Any] = {"tasks": n, "measured_s": round(measured, 3),
                           "prior_s": round(prior, 3),
                           "ratio": None if ratio is None else round(ratio, 3)}
    if ratio is not None and abs(ratio - 1.0) > PRIOR_TOLERANCE:
        out["warning"] = (f"tasks took {ratio:.2f}x their priors on this host (over {n} "
                          "tasks), so goals derived from the priors ('3x' deadlines) were "
                          f"{'out of reach' if ratio > 1 else 'loose'}; run with --calibrate "
                          "to measure priors here first")
    return out
