"""The candidate's targets on one workload and estimate mode, from the means over seeds.

* **misses**: the candidate's mean misses ≤ the lowest mean of every other competitor;
* **utility sum**: its mean utility sum ≥ the highest of every other competitor;
* **penalty**: its mean penalty ≤ ``penalty_factor`` (1.25) × the lowest mean penalty among
  the baselines (FIFO, Fair, EDF-P, RRH);
* **minimum utility**: its mean minimum utility ≥ the highest baseline's − ``utility_min_slack``
  (0.05).

A competitor that was stopped (wall-clock limit, or its run stopped early) on any seed is no
reference: its numbers count unfinished jobs at the moment it stopped, which is neither its
result nor a bound on it.  Excluded competitors were not run.  A target with no reference left
does not hold or fail: it is ``None`` and printed as such.  Comparisons allow a relative
``EPS`` (1e-9) for floating point, nothing more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from utilon.league.spec import Targets
from utilon.metrics.stats import Interval, mean_ci

EPS = 1e-9
METRICS = ("misses", "utility_sum", "penalty", "utility_min", "unfinished", "response_mean")
"""The summary metrics a league keeps per run."""


@dataclass(frozen=True)
class Cell:
    """One competitor on one workload and estimate mode: its per-seed values (in seed order),
    how many of its runs were stopped, or why it was not run."""

    name: str
    values: dict[str, list[float]] = field(default_factory=dict)
    stopped: int = 0
    excluded: str | None = None

    def mean(self, metric: str) -> float:
        return self.interval(metric).mean

    def interval(self, metric: str) -> Interval:
        return mean_ci(self.values.get(metric, []))

    @property
    def reference(self) -> bool:
        """Whether the targets may compare with this competitor."""
        return self.excluded is None and self.stopped == 0 and bool(self.values)


@dataclass(frozen=True)
class Target:
    """One target: ``holds`` (None: no reference), the candidate's value, the reference value
    and who set it, and the bound the candidate had to meet."""

    name: str
    holds: bool | None
    value: float
    reference: float | None
    by: str | None
    bound: float | None
    better: str

    def text(self) -> str:
        """``✓ 3.0 ≤ 4.2 (fair)``: the mark, the candidate's value, the bound and its source."""
        if self.holds is None:
            return f"– {self.value:.4g} (no reference)"
        mark = "✓" if self.holds else "✗"
        op = "≤" if self.better == "lower" else "≥"
        assert self.bound is not None
        return f"{mark} {_g(self.value)} {op} {_g(self.bound)} ({self.by})"

    def as_dict(self) -> dict[str, Any]:
        return {"holds": self.holds, "value": _j(self.value), "reference": _j(self.reference),
                "by": self.by, "bound": _j(self.bound), "better": self.better}


TARGETS = ("misses", "utility_sum", "penalty", "utility_min")


def evaluate(candidate: Cell, others: Sequence[Cell], targets: Targets) -> dict[str, Target]:
    """The four targets of ``candidate`` against the other competitors' cells."""
    refs = [c for c in others if c.reference and c.name != candidate.name]
    base = [c for c in refs if c.name in targets.baselines]
    stopped = candidate.stopped > 0 or not candidate.values
    out = {}
    for name, pool, better, bound in (
            ("misses", refs, "lower", lambda r: r),
            ("utility_sum", refs, "higher", lambda r: r),
            ("penalty", base, "lower", lambda r: targets.penalty_factor * r),
            ("utility_min", base, "higher", lambda r: r - targets.utility_min_slack)):
        value = candidate.mean(name) if not stopped else math.nan
        means = [(c.mean(name), c.name) for c in pool if math.isfinite(c.mean(name))]
        if not means:
            out[name] = Target(name, None, value, None, None, None, better)
            continue
        ref, by = min(means) if better == "lower" else max(means, key=lambda m: (m[0], m[1]))
        b = bound(ref)
        if stopped:
            holds = False
        elif better == "lower":
            holds = value <= b + EPS * max(1.0, abs(b))
        else:
            holds = value >= b - EPS * max(1.0, abs(b))
        out[name] = Target(name, holds, value, ref, by, b, better)
    return out


def cell_of(name: str, summaries: Sequence[Mapping[str, Any] | None],
            excluded: str | None = None) -> Cell:
    """A competitor's cell from its per-seed summaries (``None``: not run)."""
    if excluded is not None:
        return Cell(name, excluded=excluded)
    ran = [s for s in summaries if s is not None]
    values = {m: [float(s[m]) for s in ran] for m in METRICS}
    stopped = sum(1 for s in ran if s.get("stopped_early"))
    return Cell(name, values, stopped)


def _g(x: float) -> str:
    return f"{x:.0f}" if x == int(x) and abs(x) < 1e6 else f"{x:.3f}"


def _j(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x
