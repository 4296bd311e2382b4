"""Utility tables: every job's utility at many candidate completion times, in one pass."""

from __future__ import annotations

import numpy as np

from utilon.core.snapshot import JobView
from utilon.model.utility import Sigmoid


def utility_table(jobs: list[JobView], times: np.ndarray) -> np.ndarray:
    """U_i(times[i, t]) for every job: sigmoids (CORA's utility) in one vectorised pass, any
    other utility through its own ``values``."""
    out = np.empty_like(times)
    sig = [i for i, j in enumerate(jobs) if type(j.utility) is Sigmoid]
    if sig:
        p, mu, d = (np.array([getattr(jobs[i].utility, a) for i in sig])[:, None]
                    for a in ("p", "mu", "d"))
        x = mu * (times[sig] - d)
        e = np.exp(-np.abs(x))
        out[sig] = np.where(x > 0, p * e / (1.0 + e), p / (1.0 + e))  # = Sigmoid.values
    for i, j in enumerate(jobs):
        if type(j.utility) is not Sigmoid:
            out[i] = j.utility.values(times[i])
    return out
