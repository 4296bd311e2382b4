"""One run of the RDS reproduction: its summary, its jobs' rows and the jobs, and the misses
and means the claims and figures read of it.

Its own module so that the claims (``rds_claims``), the figures (``rds_figures``) and the
experiments (``rds``) all import it, and none of them imports another's importer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from utilon.model.job import Job


@dataclass(frozen=True)
class Run:
    label: str
    policy: str
    summary: dict[str, Any]
    rows: list[dict[str, Any]]
    jobs: tuple[Job, ...]

    @property
    def penalty(self) -> float:
        return float(self.summary["penalty"])

    def misses(self, kind: str | None = None) -> tuple[int, int, int]:
        """(soft misses, hard misses, jobs) over the jobs of ``kind`` (all when None)."""
        soft = hard = n = 0
        for row, job in zip(self.rows, self.jobs, strict=True):
            if kind is not None and job.job_class != kind:
                continue
            n += 1
            soft += bool(row["missed"])
            h = getattr(job.utility, "hard", math.inf)
            hard += row["finish"] is None or row["finish"] > h + 1e-9
        return soft, hard, n

    @property
    def response_mean(self) -> float:
        return float(self.summary["response_mean"])
