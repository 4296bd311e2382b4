"""Cura's workload (§4.2): arrivals, 50 customers, small/medium/large jobs, deadlines.

* **Arrivals**: a Poisson process (``arrivals="poisson"``, the paper's choice) with as many
  jobs as asked for in ``duration`` seconds (the paper: 11,500 jobs in 100 minutes), or the
  real submit times of the SWIM Facebook trace (``arrivals="swim"``), the trace's day scaled
  into ``duration`` and thinned to ``jobs`` evenly.
* **Sizes**: the category (small / medium / large, and the extra-large of Fig. 10) is drawn from
  ``mix``.  With ``sizes="swim"`` the input size is a real SWIM job's input within the
  category's decade around its nominal size (100 MB: 31.6-316 MB, ...); with ``sizes="fixed"``
  it is the nominal size itself.
* **Job kind and customer**: uniform over the profiled jobs and over ``customers``.
* **Deadlines** (relative to arrival): uniform on ``[0, 2·mean]`` (so ``2·mean`` is Fig. 5's
  "maximum deadline"), Poisson with that mean, or exponential.  A draw below what the job can
  possibly do is raised to ``floor × fastest t_run + boot_time`` (``floor`` = 2): a deadline
  no cluster could meet would make every service fail and measure nothing; twice the fastest
  leaves the job more than one possible cluster (the fastest takes a whole pool), and the boot
  time lets a per-job cluster meet it too.  How many were raised is reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from utilon.cloud.model import CloudJob, CloudSpec
from utilon.cloud.profile import ModelProfile, ProfileStore
from utilon.errors import ModelError

CATEGORY_MB: dict[str, float] = {"small": 100.0, "medium": 1000.0, "large": 10000.0,
                                 "xlarge": 100000.0}

DeadlineKind = Literal["uniform", "poisson", "exponential"]


@dataclass(frozen=True)
class DeadlineDist:
    kind: DeadlineKind = "uniform"
    mean: float = 400.0

    def __post_init__(self) -> None:
        if self.kind not in ("uniform", "poisson", "exponential"):
            raise ModelError(f"unknown deadline distribution {self.kind!r}",
                             fix="use uniform, poisson or exponential")
        if self.mean <= 0:
            raise ModelError(f"mean deadline {self.mean} must be positive")

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "uniform":
            return rng.uniform(0.0, 2.0 * self.mean, n)
        if self.kind == "poisson":
            return rng.poisson(self.mean, n).astype(float)
        return rng.exponential(self.mean, n)


@dataclass(frozen=True)
class Workload:
    jobs: tuple[CloudJob, ...]
    raised_deadlines: int
    description: str


def generate(store: ProfileStore, *, jobs: int = 11500, duration: float = 6000.0,
             customers: int = 50, mix: dict[str, float] | None = None,
             sizes: Literal["swim", "fixed"] = "swim",
             arrivals: Literal["poisson", "swim"] = "poisson",
             deadline: DeadlineDist | None = None, swim_path: str | Path | None = None,
             floor: float = 2.0, seed: int = 0) -> Workload:
    """A seeded workload over the profiled job kinds of ``store``."""
    mix = mix or {"small": 1 / 3, "medium": 1 / 3, "large": 1 / 3}
    deadline = deadline or DeadlineDist()
    unknown = sorted(set(mix) - set(CATEGORY_MB))
    if unknown:
        raise ModelError(f"unknown job size categories {unknown}",
                         fix=f"use {sorted(CATEGORY_MB)}")
    if jobs < 1 or duration <= 0 or customers < 1:
        raise ModelError("workload: jobs, duration and customers must be positive")
    rng = np.random.default_rng(seed)
    rows = None
    if sizes == "swim" or arrivals == "swim":
        if swim_path is None:
            raise ModelError("workload: sizes/arrivals from SWIM need the trace file",
                             fix="pass swim_path (../shared/data/swim_facebook/...tsv)")
        from utilon.traces.swim import read_rows

        rows = read_rows(Path(swim_path))

    if arrivals == "poisson":
        t = np.cumsum(rng.exponential(duration / jobs, jobs))
    else:
        assert rows is not None
        sub = np.sort(np.array([r.submit for r in rows], dtype=float))
        pick = np.linspace(0, len(sub) - 1, jobs).round().astype(int)
        s = sub[pick] - sub[0]
        t = s * (duration / max(s[-1], 1.0))

    cats = list(mix)
    p = np.array([mix[c] for c in cats], dtype=float)
    if (p < 0).any() or p.sum() <= 0:
        raise ModelError("workload: the size mix must be non-negative and not all zero")
    cat = rng.choice(len(cats), size=jobs, p=p / p.sum())
    size = np.array([CATEGORY_MB[cats[c]] for c in cat])
    if sizes == "swim":
        assert rows is not None
        inputs = np.array([r.input for r in rows], dtype=float) / 1e6
        for ci, c in enumerate(cats):
            nominal = CATEGORY_MB[c]
            band = inputs[(inputs >= nominal / 10**0.5) & (inputs < nominal * 10**0.5)]
            if len(band) == 0:
                raise ModelError(f"{swim_path}: no SWIM job has an input near {nominal:g} MB "
                                 f"({c})", where=str(swim_path))
            mask = cat == ci
            size[mask] = rng.choice(band, size=int(mask.sum()))
    kinds = sorted(store.profiles)
    kind = rng.integers(0, len(kinds), jobs)
    cust = rng.integers(0, customers, jobs)
    rel = deadline.draw(rng, jobs)

    out: list[CloudJob] = []
    raised = 0
    boot = store.cloud.boot_time
    for i in range(jobs):
        probe = CloudJob(f"j{i}", int(cust[i]), kinds[kind[i]], float(round(size[i], 3)),
                         float(round(t[i], 3)), float(round(t[i], 3)) + 1.0)
        fastest = float(store.configs(probe).t_run.min())
        low = floor * fastest + boot
        d = float(rel[i])
        if d < low:
            d, raised = low, raised + 1
        out.append(CloudJob(probe.id, probe.customer, probe.kind, probe.size_mb,
                            probe.arrival, round(probe.arrival + d, 3),
                            category=cats[cat[i]]))
    desc = (f"{jobs} jobs in {duration:g} s ({arrivals} arrivals), {customers} customers, "
            f"sizes {sizes} {'/'.join(cats)}, deadlines {deadline.kind} mean {deadline.mean:g} s "
            f"({raised} raised to the feasible floor)")
    return Workload(tuple(out), raised, desc)


# -- Appendix B ---------------------------------------------------------------------------

APPENDIX_B_JOBS: tuple[tuple[int, str, float, float], ...] = (
    (1, "type4", 0, 270), (2, "type4", 0, 150), (3, "type2", 0, 275), (4, "type3", 0, 475),
    (5, "type1", 0, 185), (6, "type1", 5, 310), (7, "type1", 105, 250), (8, "type1", 160, 500),
    (9, "type1", 215, 850), (10, "type1", 220, 400), (11, "type1", 230, 650),
    (12, "type2", 240, 460), (13, "type1", 400, 800), (14, "type2", 430, 730),
    (15, "type4", 460, 700),
)
"""Table 5's jobs: (id, type, arrival, deadline).  Table 6 repeats them with two differences,
which we take for typos: job 8's deadline 510 (500 in Table 5) and job 14's arrival 480 (430)."""


def appendix_b_jobs() -> tuple[CloudJob, ...]:
    return tuple(CloudJob(str(i), 0, kind, 0.0, a, d) for i, kind, a, d in APPENDIX_B_JOBS)


# -- the 50 profiled jobs of §4.1, from real SWIM rows --------------------------------------
# (here, not in ``profile``: reading a trace is the scenario room's work, a room above the
# profiles that the services and the cloud simulator use; docs/architecture.md, "Rooms")


def swim_profiles(path: str | Path, cloud: CloudSpec, count: int = 50, seed: int = 0,
                  max_vms: int = 40, type_loss: float = 0.12, type_loss_exp: float = 1.0
                  ) -> dict[str, ModelProfile]:
    """``count`` profiled jobs, each from one real SWIM job's data ratios.

    ``ρ = (shuffle + output) / input`` (clipped to [0, 4]) sets work = 0.3 × (1 + ρ)
    core-seconds per MB, the best VM type (the ``count`` jobs split into equal ρ-quantile bins,
    one per type, smallest ρ on the smallest VM) and the scaling loss 0.005 + 0.0025 ρ.
    ``type_loss`` and ``type_loss_exp`` set what a job loses on another type (see
    :class:`ModelProfile`; :data:`APPENDIX_B_TYPE_LOSS` is Appendix B's).
    """
    from utilon.traces.swim import read_rows  # the trace readers load with the first use

    rows = [r for r in read_rows(Path(path)) if r.input > 0]
    if len(rows) < count:
        raise ModelError(f"{path}: only {len(rows)} SWIM jobs with input, need {count}",
                         where=str(path))
    rng = np.random.default_rng(seed)
    picked = [rows[i] for i in sorted(rng.choice(len(rows), size=count, replace=False))]
    rho = np.array([min(4.0, (r.shuffle + r.output) / r.input) for r in picked])
    ranks = np.argsort(np.argsort(rho, kind="stable"), kind="stable")
    out: dict[str, ModelProfile] = {}
    for r, p, rank in zip(picked, rho, ranks, strict=True):
        best = min(cloud.k - 1, int(rank * cloud.k // count))
        out[r.id] = ModelProfile(work=0.3 * (1.0 + p), best=best, type_loss=type_loss,
                                 scale_loss=0.005 + 0.0025 * p, max_vms=max_vms,
                                 type_loss_exp=type_loss_exp)
    return out
