"""Profiled runs: the offline training data of RDS's fuzzy progress models (§3.2.1, §5.2).

The paper trains its models on "data collected from the cluster" (MATLAB subtractive
clustering + ANFIS) before the experiment.  Here each job kind is profiled the same way in the
simulator: every given job runs alone on the cluster at constant capacity, capped at a few
fixed shares of the slots (``fractions``), and each control interval yields one sample
(allocation held, input size, progress before and during the interval).  Each job also runs
``EXCITE_RUNS`` times with a share drawn anew every interval (``excitation``, seeded): on a
shared cluster jobs get from one slot to all of them and the share changes from interval
to interval, and runs at a held share tie y(t-1) to u(t), so the lag's coefficient is not
identifiable from them (issue 22: the models then mispredicted a job whose share fell,
e.g. 0.075 for a measured 0.152; completion NRMSE 37.5% -> 12.7% in scale-up with these
runs, docs/reproduction-rds.md).  The samples of a
kind train its ``ProgressModel`` (``ProgressModel.fit``); ``write_profile`` stores the models
as the JSON file the ``rds`` policy's ``profile`` parameter reads.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from utilon.core.decision import Decision, Grant
from utilon.core.messages import Trigger
from utilon.core.policy import Policy
from utilon.core.snapshot import ClusterSnapshot
from utilon.model.cluster import Cluster
from utilon.model.job import Job
from utilon.policies.rds.capacity import effective_capacity
from utilon.policies.rds.policy import job_work, phase_counts
from utilon.policies.rds.progress import ProgressModel, ProgressSample
from utilon.sim.engine import Simulation

FRACTIONS = (0.25, 0.5, 1.0)
EXCITE_LEVELS = (1 / 60, 1 / 20, 0.1, 0.25, 0.5, 1.0)
"""Slot shares an excitation run draws from, one per interval: the small shares a job gets
on a shared cluster, down to one slot of the Table 3 cluster, and the profiled fractions."""
EXCITE_RUNS = 2


class _Probe(Policy):
    """Gives one job a fixed number of slots and samples its progress every interval."""

    name = "rds-probe"  # not registered: only profiling uses it
    summary = "profiling probe"
    triggers = frozenset({Trigger.ARRIVAL, Trigger.TICK, Trigger.TASK_FINISHED})

    def __init__(self, slots: int | Sequence[int], interval: float) -> None:
        # one slot count per interval (the last one held), or one for the whole run
        self.plan = (slots,) if isinstance(slots, int) else tuple(slots)
        self.tick: float = interval
        self.samples: list[ProgressSample] = []
        self._prev: tuple[float, float, float] | None = None  # time, progress, y of the last
        self._acc = [0.0, 0.0]  # ∫ map / reduce allocation since the last sample
        self._last: tuple[float, int, int, float] | None = None  # time, done m/r, r_slot

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        if not snapshot.jobs:
            return Decision()
        job = snapshot.jobs[0]
        now = snapshot.now
        r_a, slots = effective_capacity(snapshot.machines, snapshot.slot_resource)
        rm, rr, dm, dr, _, _ = phase_counts(job)
        if self._last is not None:  # measured as the rds policy measures (policy.py)
            t0, dm0, dr0, rs = self._last
            self._acc[0] += (now - t0) * rs * (rm + dm - dm0)
            self._acc[1] += (now - t0) * rs * (rr + dr - dr0)
        self._last = (now, dm, dr, r_a / slots if slots else 1.0)
        total, done = job_work(job, now, r_a / slots if slots else 1.0)
        prog = done / total if total > 0 else 1.0
        if self._prev is None:
            self._prev = (now, prog, 0.0)
        elif Trigger.TICK in snapshot.triggers and now > self._prev[0]:
            t0, p0, y_prev = self._prev
            span = now - t0
            y = (prog - p0) * self.tick / span
            self.samples.append(ProgressSample(
                u_map=self._acc[0] / span, u_reduce=self._acc[1] / span, size=total,
                y_prev=y_prev, y=y))
            self._prev = (now, prog, y)
            self._acc = [0.0, 0.0]
        slots = self.plan[min(len(self.samples), len(self.plan) - 1)]
        return Decision(grants=(Grant(job.id, slots=slots),))


def excitation(total_slots: int, runs: int, seed: int, length: int = 64,
               levels: Sequence[float] = EXCITE_LEVELS) -> list[list[int]]:
    """``runs`` slot plans of ``length`` intervals, each interval's share drawn from
    ``levels`` by a seeded generator (the identification input of a controller's model:
    the share changes from interval to interval, so progress in an interval and in the one
    before it are no longer tied to one held allocation)."""
    rng = np.random.default_rng(seed)
    counts = [max(1, math.floor(total_slots * f)) for f in levels]
    return [[counts[i] for i in rng.integers(0, len(counts), length)] for _ in range(runs)]


def profile_samples(jobs: Sequence[Job], cluster: Cluster, *, interval: float = 600.0,
                    fractions: Sequence[float] = FRACTIONS, excite: int = EXCITE_RUNS,
                    seed: int = 0) -> dict[str, list[ProgressSample]]:
    """Samples per job kind (``job_class``) from solo runs at fixed slot shares, plus
    ``excite`` runs per job whose share changes every interval (``excitation``)."""
    steady = Cluster(cluster.machines)  # constant capacity: the profile is the job's alone
    total_slots = int(sum(m.capacity[steady.slot_resource] for m in steady.machines))
    out: dict[str, list[ProgressSample]] = defaultdict(list)
    for n, job in enumerate(jobs):
        plans: list[int | list[int]] = [max(1, math.floor(total_slots * f)) for f in fractions]
        plans += excitation(total_slots, excite, seed + n) if excite else []
        for plan in plans:
            probe = _Probe(plan, interval)
            Simulation(steady, [replace(job, submit=0.0)], probe, record_attempts=False).run()
            out[job.job_class or "default"].extend(probe.samples)
    return dict(out)


def fit_profile(samples: dict[str, list[ProgressSample]], **fit: float) -> dict[str,
                                                                               ProgressModel]:
    return {kind: ProgressModel.fit(s, **fit) for kind, s in sorted(samples.items())}  # type: ignore[arg-type]


def write_profile(path: str | Path, models: dict[str, ProgressModel], interval: float) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {"interval": interval, "models": {k: m.to_dict() for k, m in sorted(models.items())}}
    p.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return p
