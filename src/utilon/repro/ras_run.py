"""One simulated run of the RAS reproduction and what its tables and figures read of it.

Its own module so that the figures (``ras_figures``) and the experiments (``ras``) both
import it, and neither imports the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from utilon.model.job import Job
from utilon.sim.result import SimResult
from utilon.sim.usage import bucket_means

TRACKERS = 20
"""The experiments' TaskTrackers (§4.1)."""


@dataclass
class RasRun:
    label: str
    policy: str
    result: SimResult
    jobs: tuple[Job, ...]
    utility_log: list[tuple[float, dict[str, float]]]

    @property
    def finish(self) -> dict[str, float]:
        return {j: rt.finish for j, rt in self.result.core.jobs.items()
                if rt.finish is not None}

    @property
    def makespan(self) -> float:
        return max(self.finish.values(), default=math.nan)

    def concurrency(self) -> float:
        """Mean running tasks per TaskTracker over the makespan."""
        tl = self.result.core.timeline
        busy = float(np.sum(np.asarray(tl.end) - np.asarray(tl.start)))
        return busy / (self.makespan * TRACKERS)

    def cpu(self, step: float = 60.0) -> dict[str, Any]:
        """CPU use and CPU waiting on other resources (Fig. 4c/d): per-bucket mean and
        standard deviation over TaskTrackers, and the run's means."""
        usage = self.result.usage
        assert usage is not None
        end = math.ceil(self.makespan / step) * step
        b = bucket_means(usage, 0.0, end, step)
        ci = usage.names.index("cpu")
        use, wait = b[:, :, ci], b[:, :, -1]
        return {"step": step, "use_mean": use.mean(axis=0).tolist(),
                "use_std": use.std(axis=0).tolist(), "wait_mean": wait.mean(axis=0).tolist(),
                "wait_std": wait.std(axis=0).tolist(),
                "use": float(use.mean()), "wait": float(wait.mean())}

    def tasks_over_time(self, step: float = 30.0) -> dict[str, Any]:
        """Running map and reduce tasks per job, sampled every ``step`` (Figs. 4a/b, 6a)."""
        tl = self.result.core.timeline
        times = np.arange(0.0, self.makespan + step, step)
        start, end = np.asarray(tl.start), np.asarray(tl.end)
        job, stage = np.asarray(tl.job), np.asarray(tl.stage)
        out: dict[str, Any] = {"t": times.tolist()}
        for seq, jid in enumerate(tl.job_ids):
            for si, kind in ((0, "map"), (1, "reduce")):
                sel = (job == seq) & (stage == si)
                s, e = start[sel], end[sel]
                n = (np.searchsorted(np.sort(s), times, side="right")
                     - np.searchsorted(np.sort(e), times, side="right"))
                out[f"{jid}/{kind}"] = n.tolist()
        return out
