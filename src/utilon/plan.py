"""Capacity planning: the smallest cluster at which a target holds under a policy.

``utilon plan SCENARIO --policy P --target "misses<=1%"`` answers a planner's question —
how many machines so that 99% of these jobs meet their goals under P? — by simulating the
scenario's jobs on clusters of different sizes:

* **Sizes.**  Size n is n machines of the scenario's own kinds, in the proportions of its
  machine groups (largest remainders; a group may drop to none at small n).  The jobs are
  built once, on the scenario's cluster, so their goals (``"3x"`` deadlines multiply the
  runtime alone on *that* cluster) are the same at every size: the targets do not move with
  the cluster.  A scenario whose capacity changes over time (a timeline naming machines) has
  no single size and is refused.
* **Search.**  The target is assumed to get no worse with more machines.  The upper end
  doubles from the scenario's size until the target holds (at most 64 times the scenario's
  size), then the range is cut by evaluating ``jobs`` sizes at once, evenly spaced inside it
  (bisection with one worker, trisection with two, ...), until the smallest size that holds
  is next to the largest that fails.
* **Early stop.**  A target on misses (``misses``, ``miss_rate``) is proved failed as soon as
  more jobs than it allows are unfinished at their goal: the run stops there and says so.
  Other targets run to the end.
* **Cloud scenarios.**  For a cloud scenario (Cura's world) the size is the number of
  servers, the policy one of the cloud services, and the scenario's ``cloud.servers`` (or 8)
  is where the doubling starts.  A run on a target that allows no miss stops at the first job
  the service drops.  A service that sizes its own fleet (``dedicated``: each customer's VMs
  for its peak) has one size; the plan checks the target there.
* **Targets.**  ``METRIC OP VALUE`` with OP one of ``<= < >= >``: any number of the summary
  (``misses``, ``miss_rate``, ``penalty``, ``unfinished``, ``utility_min``, ``utility_sum``,
  ``utility_mean``, ``response_mean``, ``response_p95``, ``makespan``, ``utilisation``),
  ``misses`` with a percentage (``misses<=1%`` is ``miss_rate<=0.01``), or a quantile of the
  jobs' Δ = finish − goal, ``pNN delta`` (unfinished jobs count as infinitely late; jobs
  without a goal are left out).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import operator
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from utilon.cloud.outputs import cloud_rows, cloud_summary
from utilon.cloud.scenario import CloudWorkload
from utilon.cloud.sim import CloudSim
from utilon.core.feasibility import Unrunnable
from utilon.core.scheduler import SchedulerCore
from utilon.core.tolerance import missed
from utilon.errors import UtilonError
from utilon.metrics.outputs import job_rows, summarize
from utilon.model.cluster import Cluster
from utilon.parallel import default_jobs, run_all
from utilon.runner import cloud_policy_for, policy_for
from utilon.scenario.build import Workload, build_cluster
from utilon.sim.engine import Simulation
from utilon.sim.estimates import priors

OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
METRICS = ("misses", "miss_rate", "penalty", "unfinished", "utility_min", "utility_sum",
           "utility_mean", "response_mean", "response_p95", "makespan", "utilisation")
MAX_GROWTH = 64
_EPS = 1e-9
_TARGET = re.compile(r"^\s*(?:(p\d{1,2}(?:\.\d+)?)\s+delta|([a-z_0-9]+))\s*(<=|>=|<|>)\s*"
                     r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(%?)\s*$")


@dataclass(frozen=True)
class Target:
    """``metric op value``; ``quantile`` is set for ``pNN delta`` (then metric is "delta")."""

    metric: str
    op: str
    value: float
    text: str
    quantile: float | None = None

    def holds(self, measured: float) -> bool:
        return OPS[self.op](measured, self.value)

    def measure(self, summary: dict[str, Any], rows: list[dict[str, Any]]) -> float:
        if self.quantile is None:
            return float(summary[self.metric])
        late = [math.inf if r["finish"] is None else float(r["finish"]) - float(r["goal"])
                for r in rows if r["goal"] is not None]
        if not late:
            return -math.inf
        return float(np.quantile(np.asarray(late), self.quantile, method="higher"))

    def miss_budget(self, jobs: int) -> int | None:
        """The most missed jobs the target allows, when it bounds misses from above."""
        if self.op not in ("<=", "<") or self.metric not in ("misses", "miss_rate"):
            return None
        allowed = self.value * jobs if self.metric == "miss_rate" else self.value
        allowed = min(max(allowed, -1.0), float(jobs))  # beyond these, all or none
        return math.ceil(allowed) - 1 if self.op == "<" else math.floor(allowed + _EPS)


def parse_target(text: str) -> Target:
    """``"misses<=1%"``, ``"p99 delta <= 0"``, ``"utility_min>=0.5"`` -> a ``Target``."""
    m = _TARGET.match(text.lower())
    fix = ('e.g. --target "misses<=1%", --target "p99 delta <= 0" or --target '
           f'"utility_min>=0.5"; metrics: {", ".join(METRICS)}, pNN delta')
    if m is None:
        raise UtilonError(f"cannot read the target {text!r}: expected METRIC OP VALUE",
                          where="--target", fix=fix)
    quant, metric, op, num, pct = m.groups()
    value = float(num)
    if not math.isfinite(value):
        raise UtilonError(f"the value in {text!r} is not a finite number", where="--target",
                          fix=fix)
    if quant is not None:
        q = float(quant[1:]) / 100
        if not 0 < q <= 1 or pct:
            raise UtilonError(f"bad quantile in {text!r}", where="--target", fix=fix)
        return Target("delta", op, value, text.strip(), q)
    if metric not in METRICS:
        raise UtilonError(f"unknown metric {metric!r} in {text!r}", where="--target", fix=fix)
    if pct:
        if metric not in ("misses", "miss_rate"):
            raise UtilonError(f"a percentage applies to misses only, not {metric!r}",
                              where="--target", fix=fix)
        metric, value = "miss_rate", value / 100
    return Target(metric, op, value, text.strip())


# ------------------------------------------------------------------------------ cluster sizes
def group_counts(counts: Sequence[int], n: int) -> list[int]:
    """``n`` machines split over groups in proportion to ``counts`` (largest remainders,
    ties to the earlier group)."""
    total = sum(counts)
    exact = [c * n / total for c in counts]
    out = [math.floor(x) for x in exact]
    order = sorted(range(len(counts)), key=lambda g: (-(exact[g] - out[g]), g))
    for g in order[: n - sum(out)]:
        out[g] += 1
    return out


def sized_cluster(workload: Workload, n: int) -> Cluster:
    spec = workload.spec.cluster
    counts = group_counts([g.count for g in spec.machines], n)
    groups = [g.model_copy(update={"count": c}) for g, c in zip(spec.machines, counts,
                                                                    strict=True) if c > 0]
    return build_cluster(spec.model_copy(update={"machines": groups}))


def check_plannable(workload: Workload) -> None:
    spec = workload.spec.cluster
    where = f"{workload.source}: cluster" if workload.source else "cluster"
    if spec.capacity:
        raise UtilonError("the cluster's capacity changes over time (cluster.capacity), so it "
                          "has no single size to plan", where=where,
                          fix="plan on a copy of the scenario without its capacity timeline")
    if any(g.down for g in spec.machines):
        raise UtilonError("a machine group starts down, so the cluster has no single size",
                          where=where, fix="plan on a copy of the scenario without `down`")


# ------------------------------------------------------------------------------ one size
@dataclass(frozen=True)
class Point:
    machines: int
    counts: tuple[int, ...]
    value: float  # the target's metric (NaN when the jobs could not run at all)
    holds: bool
    stopped: str
    wall_s: float
    at_least: bool = False  # stopped at the proof of failure: ``value`` is a lower bound


class _MissProof:
    """Stops a run once more jobs than the budget are unfinished at their goal."""

    def __init__(self, workload: Workload, budget: int) -> None:
        self.budget = budget
        self.goals = [(j.utility.goal, j.id) for j in workload.jobs
                      if j.utility.goal is not None]
        heapq.heapify(self.goals)
        self.missed = 0

    def __call__(self, now: float, core: SchedulerCore) -> str:
        goals = self.goals
        while goals and goals[0][0] + _EPS < now:
            goal, jid = heapq.heappop(goals)
            rt = core.jobs.get(jid)
            if rt is None or missed(rt.finish, goal):
                self.missed += 1
        if self.missed > self.budget:
            return (f"target failed: {self.missed} jobs unfinished at their goal by "
                    f"t={now:.0f} s (at most {self.budget} allowed)")
        return ""


def evaluate(workload: Workload, item: tuple[str, dict[str, Any], Target, int],
             progress: Callable[[int, int], None] | None = None) -> Point:
    """The policy on ``n`` machines: the target's metric, and whether it holds."""
    name, params, target, n = item
    t0 = time.perf_counter()
    cluster = sized_cluster(workload, n)
    counts = tuple(group_counts([g.count for g in workload.spec.cluster.machines], n))
    sized = dataclasses.replace(workload, cluster=cluster)
    budget = target.miss_budget(len(workload.jobs))
    proof = _MissProof(sized, budget) if budget is not None else None
    try:
        known = priors(sized)  # what the policy knows of durations: as `simulate` runs it
        sim = Simulation(cluster, known.jobs, policy_for(sized, name, params),
                         horizon=workload.spec.simulation.horizon, record_attempts=False,
                         estimates=known.learning, progress=progress, stop_when=proof)
    except Unrunnable as e:  # a job that needs more than n machines have
        return Point(n, counts, math.nan, False, f"a job cannot run: {e.message}",
                     time.perf_counter() - t0)
    res = sim.run()
    rows = job_rows(res, sized.jobs)
    summary = summarize(res, sized, sim.policy, rows)
    if proof is not None and res.stopped_early.startswith("target failed"):
        missed = float(proof.missed)
        bound = missed / len(sized.jobs) if target.metric == "miss_rate" else missed
        return Point(n, counts, bound, False, res.stopped_early, time.perf_counter() - t0,
                     at_least=True)
    value = target.measure(summary, rows)
    return Point(n, counts, value, target.holds(value), res.stopped_early,
                 time.perf_counter() - t0)


def evaluate_cloud(workload: CloudWorkload, item: tuple[str, dict[str, Any], Target, int],
                   progress: Callable[[int, int], None] | None = None) -> Point:
    """A cloud service on ``n`` servers: the target's metric, and whether it holds."""
    name, params, target, n = item
    t0 = time.perf_counter()
    policy = cloud_policy_for(workload, name, params)
    stop = target.miss_budget(len(workload.jobs)) == 0
    sim = CloudSim(workload.store, policy, workload.jobs, n, seed=workload.seed,
                   stop_on_failure=stop)
    res = sim.run()
    if sim.failed:
        first = min((r.job.arrival for r in res.records if r.dropped), default=0.0)
        bound = 1.0 / len(workload.jobs) if target.metric == "miss_rate" else 1.0
        return Point(n, (n,), bound, False, f"target failed: a job arriving at t={first:.0f} s "
                     "was dropped", time.perf_counter() - t0, at_least=True)
    rows = cloud_rows(res, workload)
    value = target.measure(cloud_summary(res, workload, policy, rows), rows)
    return Point(n, (n,), value, target.holds(value), "", time.perf_counter() - t0)


# ------------------------------------------------------------------------------ the search
@dataclass
class PlanResult:
    target: Target
    policy: str
    scenario_machines: int
    points: dict[int, Point]
    answer: int | None  # the smallest size at which the target holds (None: none up to max)
    limit: int

    def table(self) -> list[Point]:
        return [self.points[n] for n in sorted(self.points)]


def plan(workload: Workload | CloudWorkload, policy: str, target: Target, *,
         params: dict[str, Any] | None = None, lo: int = 1, hi: int | None = None,
         jobs: int | None = None, ray_address: str | None = None,
         on_point: Callable[[Point], None] | None = None) -> PlanResult:
    cloud = isinstance(workload, CloudWorkload)
    one: Callable[..., Point] = evaluate_cloud if cloud else evaluate
    if isinstance(workload, CloudWorkload):
        base = workload.servers or 8
        own = cloud_policy_for(workload, policy, params).fixed_servers(workload.jobs)
        if own is not None:  # a service that sizes its own fleet has one size to check
            p = evaluate_cloud(workload, (policy, dict(params or {}), target, own))
            if on_point is not None:
                on_point(p)
            return PlanResult(target, policy, own, {own: p}, own if p.holds else None, own)
    else:
        check_plannable(workload)
        base = sum(g.count for g in workload.spec.cluster.machines)
    limit = hi if hi is not None else base * MAX_GROWTH
    if lo < 1 or limit < lo:
        raise UtilonError(f"empty range of sizes: {lo}..{limit}", where="--min/--max",
                          fix="give 1 <= --min <= --max")
    width = jobs if jobs is not None else default_jobs(8)
    points: dict[int, Point] = {}

    def run(sizes: list[int]) -> None:
        todo = [n for n in dict.fromkeys(sizes) if n not in points]
        found = run_all(one, workload, [(policy, dict(params or {}), target, n) for n in todo],
                        jobs=jobs, ray_address=ray_address)
        for p in found:
            points[p.machines] = p
            if on_point is not None:
                on_point(p)

    # the upper end: the scenario's size (or --max), doubled until the target holds
    top = min(max(base, lo), limit) if hi is None else limit
    run([top])
    while not points[top].holds and top < limit:
        top = min(top * 2, limit)
        run([top])
    if not points[top].holds:
        return PlanResult(target, policy, base, points, None, limit)
    good = top
    bad = max((n for n, p in points.items() if not p.holds and n < good), default=lo - 1)
    if bad == lo - 1 and lo not in points:
        run([lo])
        if points[lo].holds:
            return PlanResult(target, policy, base, points, lo, limit)
        bad = lo
    while good - bad > 1:  # k-section: `width` sizes at once, evenly inside (bad, good)
        k = min(width, good - bad - 1)
        sizes = sorted({bad + (good - bad) * (i + 1) // (k + 1) for i in range(k)})
        run(sizes)
        for n in sizes:
            if points[n].holds:
                good = min(good, n)
        bad = max(n for n, p in points.items() if not p.holds and n < good)
    return PlanResult(target, policy, base, points, good, limit)
