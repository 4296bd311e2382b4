"""Statistics over seeds: each policy's mean with a confidence interval, and paired
wins/ties/losses between policies (``utilon compare --seeds``, the league).

A comparison over seeds runs every policy on the same workloads -- one per scenario and seed
-- so its runs pair up.  Per metric it reports:

* the **mean over seeds** with a **95% confidence interval** from Student's t with ``n - 1``
  degrees of freedom (``mean ± t · s / √n``, ``s`` the sample standard deviation): the seeds
  are few and the per-seed values roughly normal, which is t's case; with one seed there is
  no interval (its half-width is NaN and prints as ``–``);
* **wins/ties/losses** of each policy against each other one, counted over the paired runs
  (same scenario, same seed): a win is a better value in the metric's direction
  (``DIRECTIONS``: misses, penalty, response times lower; utilities higher), a tie is two
  values within ``REL_TOL`` of the larger magnitude (or ``ABS_TOL`` apart, for values near
  0).  Ties are generous on purpose: a utility sum of 830.01 against 830.02 is not a win.

Everything here is a pure function of numbers; no run is read or written.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Direction = Literal["lower", "higher"]

DIRECTIONS: dict[str, Direction] = {
    "misses": "lower",
    "utility_sum": "higher",
    "penalty": "lower",
    "utility_min": "higher",
    "utility_mean": "higher",
    "unfinished": "lower",
    "response_mean": "lower",
    "response_p95": "lower",
    "makespan": "lower",
}
"""Which way is better, per summary metric that a comparison over seeds reports."""

KEY_METRICS = ("misses", "utility_sum", "penalty")
"""The metrics whose wins/ties/losses matrix is printed (every metric's is written)."""

LEVEL = 0.95
REL_TOL = 1e-3
"""Two values tie when they differ by at most this share of the larger magnitude..."""
ABS_TOL = 1e-9
"""... or by at most this much (so that 0 and 1e-12 tie)."""


@dataclass(frozen=True, slots=True)
class Interval:
    """A mean over ``n`` values with the half-width of its confidence interval (NaN when
    ``n < 2``) and the sample standard deviation (NaN when ``n < 2``)."""

    mean: float
    half: float
    n: int
    std: float
    level: float = LEVEL

    @property
    def low(self) -> float:
        return self.mean - self.half

    @property
    def high(self) -> float:
        return self.mean + self.half

    def as_dict(self) -> dict[str, Any]:
        return {"mean": _num(self.mean), "ci_half": _num(self.half), "ci_low": _num(self.low),
                "ci_high": _num(self.high), "std": _num(self.std), "n": self.n}


def t_quantile(level: float, dof: int) -> float:
    """The two-sided Student t critical value: ``t`` with ``P(|T| <= t) = level``."""
    # scipy is a dependency already; scipy.special loads in a fraction of scipy.stats' time
    from scipy.special import stdtrit

    return float(stdtrit(dof, 0.5 + level / 2.0))


def mean_ci(values: Iterable[float], level: float = LEVEL) -> Interval:
    """Mean and Student-t confidence interval of the finite ``values`` (NaNs are left out:
    a metric a run could not measure)."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return Interval(math.nan, math.nan, 0, math.nan, level)
    mean = math.fsum(xs) / n
    if n < 2:
        return Interval(mean, math.nan, 1, math.nan, level)
    std = statistics.stdev(xs)
    return Interval(mean, t_quantile(level, n - 1) * std / math.sqrt(n), n, std, level)


def tied(a: float, b: float, rel: float = REL_TOL, abs_tol: float = ABS_TOL) -> bool:
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_tol)


def outcome(a: float, b: float, direction: Direction, rel: float = REL_TOL) -> int:
    """+1 when ``a`` beats ``b`` in ``direction``, -1 when it loses, 0 for a tie."""
    if tied(a, b, rel):
        return 0
    return 1 if (a < b) == (direction == "lower") else -1


@dataclass(frozen=True, slots=True)
class WTL:
    wins: int = 0
    ties: int = 0
    losses: int = 0

    @property
    def n(self) -> int:
        return self.wins + self.ties + self.losses

    def __str__(self) -> str:
        return f"{self.wins}/{self.ties}/{self.losses}"

    def as_dict(self) -> dict[str, int]:
        return {"wins": self.wins, "ties": self.ties, "losses": self.losses}


def wins_ties_losses(values: Mapping[str, Sequence[float]], direction: Direction,
                     rel: float = REL_TOL) -> dict[str, dict[str, WTL]]:
    """``{a: {b: WTL}}`` for every ordered pair of different policies: ``values[p][i]`` is
    policy ``p``'s value on paired run ``i`` (the same scenario and seed for every policy).
    A pair where either value is missing (NaN) is not counted."""
    lengths = {len(v) for v in values.values()}
    if len(lengths) > 1:
        raise ValueError(f"paired values must have one length per policy, got {lengths}")
    out: dict[str, dict[str, WTL]] = {}
    for a, xs in values.items():
        row: dict[str, WTL] = {}
        for b, ys in values.items():
            if a == b:
                continue
            w = t = lo = 0
            for x, y in zip(xs, ys, strict=True):
                if not (math.isfinite(x) and math.isfinite(y)):
                    continue
                r = outcome(x, y, direction, rel)
                w, t, lo = w + (r > 0), t + (r == 0), lo + (r < 0)
            row[b] = WTL(w, t, lo)
        out[a] = row
    return out


Runs = Mapping[str, Mapping[int, Mapping[str, Mapping[str, Any]]]]
"""``{scenario: {seed: {policy: summary}}}``: what a comparison over seeds measured."""


def _metric(summary: Mapping[str, Any], metric: str) -> float:
    v = summary.get(metric)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan


def seed_statistics(runs: Runs, metrics: Mapping[str, Direction] | None = None,
                    level: float = LEVEL) -> dict[str, Any]:
    """The document ``comparison-seeds.json`` holds: per scenario, per policy and metric the
    per-seed values, their mean and confidence interval; per metric the wins/ties/losses
    matrix over every (scenario, seed) pair, overall and per scenario."""
    metrics = dict(metrics or DIRECTIONS)
    policies = list(dict.fromkeys(p for by_seed in runs.values() for per in by_seed.values()
                                  for p in per))
    scenarios: dict[str, Any] = {}
    paired: dict[str, dict[str, list[float]]] = {m: {p: [] for p in policies} for m in metrics}
    for scen, by_seed in runs.items():
        seeds = list(by_seed)
        per_policy: dict[str, Any] = {}
        local: dict[str, dict[str, list[float]]] = {m: {} for m in metrics}
        for p in policies:
            stats: dict[str, Any] = {}
            for m in metrics:
                vals = [_metric(by_seed[s].get(p, {}), m) for s in seeds]
                local[m][p] = vals
                paired[m][p] += vals
                stats[m] = {**mean_ci(vals, level).as_dict(), "values": [_num(v) for v in vals]}
            stats["stopped"] = sum(1 for s in seeds if by_seed[s].get(p, {}).get("stopped_early"))
            per_policy[p] = stats
        scenarios[scen] = {
            "seeds": seeds, "policies": per_policy,
            "wtl": {m: _wtl_json(wins_ties_losses(local[m], d)) for m, d in metrics.items()}}
    return {
        "level": level,
        "ties": {"relative": REL_TOL, "absolute": ABS_TOL},
        "metrics": metrics,
        "key_metrics": [m for m in KEY_METRICS if m in metrics],
        "policies": policies,
        "scenarios": scenarios,
        "pairs": sum(len(by_seed) for by_seed in runs.values()),
        "wtl": {m: _wtl_json(wins_ties_losses(paired[m], d)) for m, d in metrics.items()},
    }


def _wtl_json(m: Mapping[str, Mapping[str, WTL]]) -> dict[str, dict[str, dict[str, int]]]:
    return {a: {b: w.as_dict() for b, w in row.items()} for a, row in m.items()}


def _num(x: float) -> float | None:
    """JSON has no NaN: a missing interval is ``null``."""
    return None if not math.isfinite(x) else x


def ci_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``comparison-seeds.csv``: one row per scenario, policy and metric."""
    rows = []
    for scen, s in doc["scenarios"].items():
        for p, stats in s["policies"].items():
            for m, d in doc["metrics"].items():
                st = stats[m]
                rows.append({"scenario": scen, "policy": p, "metric": m, "better": d,
                             "n": st["n"], "mean": st["mean"], "ci_half": st["ci_half"],
                             "ci_low": st["ci_low"], "ci_high": st["ci_high"],
                             "std": st["std"], "stopped": stats["stopped"]})
    return rows


def wtl_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``comparison-wtl.csv``: one row per metric and ordered pair of policies, over every
    (scenario, seed) pair."""
    return [{"metric": m, "policy": a, "against": b, **w}
            for m, matrix in doc["wtl"].items() for a, row in matrix.items()
            for b, w in row.items()]


def pm(st: Mapping[str, Any], nd: int = 2) -> str:
    """``mean ± half`` of one metric's entry (``mean`` alone when there is no interval)."""
    mean, half = st.get("mean"), st.get("ci_half")
    if mean is None:
        return "–"
    return f"{mean:.{nd}f}" if half is None else f"{mean:.{nd}f} ± {half:.{nd}f}"
