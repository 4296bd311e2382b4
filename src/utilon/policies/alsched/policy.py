"""The ``alsched`` policy: allocate schedulable units to maximise total utility (§4).

Every pending stage is an agent's resource request (§4): its ``request`` (the stage's utility
expression over equivalence classes; ``lnck(all, tasks, tasks)`` -- any units, linear -- when
the stage has none) bound to the cluster with ``tasks`` = its ready tasks.  A request is
therefore *resubmitted* whenever the agent's needs change: a new stage becomes pending (§4
point 2), part of a stage was started and fewer tasks are left (points 3-4: the rest is asked
for again).  The scheduler runs event-driven (on arrivals, task and job completions and
capacity changes) or, with ``interval``, periodically (§4); it solves only when some request
is pending and some unit is free.

A solve maximises the total (priority-weighted) utility of the pending requests over the
*free* units of every machine (``solvers``: greedy -- the paper's simulation choice, the
default --, branch-and-bound, MILP, or ``auto``).  A request whose allocation evaluates to
zero gets nothing and stays pending (§4).

Exact where it can (issue 47): greedy is not exact (0.5 where the optimum is 10 on a 3-unit
instance), so ``solver="auto"`` runs greedy, then the HiGHS MILP warm-started from it for at
most ``budget`` seconds (default 0.2) unless the instance has more than ``max_size`` MILP
columns (default 2000), and keeps the better allocation (greedy's on a tie).  Every solve
records the gap it accepted (``solve_log``: 0 proven optimal, the relative distance to the
MILP's bound when out of budget, unknown when no bound was proven) and ``report()`` counts
exact solves, fallbacks (``budget``, ``size``), proven optima and the largest and mean gap.
It is not the default: its exact allocations place units where the MILP's optimum falls,
not first-fit, which changes None's chance co-locations in the reproduction (None's sweeps
up to 22% slower), and a wall-clock budget makes a loaded machine's run differ from an idle
one's (docs/policies.md#alsched).

The allocation becomes one grant per (stage, machine); since the solver only hands out free
units, a stage's grants start in the same dispatch pass, together (an ``nck``'s k units at
once).  They are not gang grants: when a stage's tasks differ in what they declare, the ones
that fit start rather than none.

Constraint handling (§5.2): ``soft`` uses the full utility function; ``hard`` keeps, at every
``max``, only the branches of highest bound (the preferred placement becomes a requirement:
the job waits for it); ``none`` keeps only the branches of lowest bound (the fallback: any
resources).  None "simply ignores" the preference: it neither seeks nor avoids co-location,
so its units are taken first-fit like everyone's (``fill``, the greedy solver's
``first_fit``) and a job that happens to land whole on one machine is co-located by chance;
``fill="spread"`` (never co-located by chance) is the reading before issue 44.  Branches of
equal bound are all kept, so a ``max`` over equally good machines (LOCAL's "one machine,
any") stays a hard constraint under every policy.

Units and tasks.  The solvers count *tasks* of a stage: the paper's task is one schedulable
unit (a core), and a request's expression, ``tasks`` and ``cap(x)`` (how many of the stage's
tasks machine ``x`` holds) all count tasks.  A machine's free capacity is counted in units of
the cluster's slot resource (``unit`` of it, or the smallest pending task's slot demand if that
is less, so 0.5-cpu machines still have units), and a task of a stage takes ``size`` =
ceil(slot demand / unit) of them: a two-core task is never split across machines.  (The unit
shrinks to a common divisor of the pending demands when they are not whole multiples of it:
tasks of 1.5 cores count in half cores, three each.)  Resources
other than the slot resource are respected per stage: a request only sees the machines where
one of its tasks fits the free resources right now, and never gets more tasks on a machine
than fit there.  A gang stage (``gang: true``) must start whole: its expression is wrapped in
``min(expr, nck(all, tasks, upper))`` (worth nothing short of every task) and its allocation
becomes one gang grant over the machines the solver chose -- or over every machine that fits,
if the stage's tasks do not pack onto those (the dispatcher does the packing).

A job that can never run under this policy -- a request no allocation on the whole, empty
cluster can satisfy (a Hard preference for machines the cluster lacks, an ``nck`` wider than
the cluster) -- is refused before the run (``unrunnable``).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from utilon.core.decision import Decision, Grant, Infeasible
from utilon.core.feasibility import pack, reach_by_machine
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView, StageView
from utilon.model.cluster import Cluster, Machine
from utilon.model.job import Job
from utilon.policies.alsched.lang import Request, fallback, preferred
from utilon.policies.alsched.lang.ast import Lit, LnCk, Min, NCk, Node, Tasks
from utilon.policies.alsched.solvers import (
    DEFAULT_BUDGET,
    DEFAULT_MAX_SIZE,
    SOLVERS,
    Problem,
    Solution,
    solve,
    solve_auto_outcome,
)
from utilon.policies.alsched.solvers import Request as Ask
from utilon.policies.alsched.solvers.auto import accepted_gap
from utilon.policies.alsched.solvers.problem import FILLS
from utilon.policies.base import EVENT_TRIGGERS, Policy, register

DEFAULT_REQUEST = Request(LnCk("all", Tasks(), Tasks()), (), ())
"""A stage without a request: any units, utility linear in the units up to its ready tasks."""

CONSTRAINTS = ("soft", "hard", "none")
_Bound = tuple[Node, dict[str, tuple[int, ...]]]  # a concrete expression and its classes
_EPS = 1e-9
_MANY = 1 << 30  # "no limit" for a task that demands nothing of a resource
_DENOMINATOR = 64  # slot demands are read as fractions with denominators up to this
_MEMO = 4096  # entries of the restricted-classes memo before it is emptied
SOLVE_LOG = 1000
"""Solves kept in ``Alsched.solve_log`` (the most recent)."""


@dataclass(frozen=True, slots=True)
class SolveRecord:
    """One decision's solve: what the solver accepted (``report()`` sums these up)."""

    solve: int
    requests: int
    how: str
    """``auto``: ``optimal``, ``improved``, ``budget`` or ``size`` (``solvers/auto.py``);
    other solvers: their status."""
    total: float
    bound: float
    gap: float | None
    """``(bound - total) / bound``: 0 proven optimal, ``None`` unknown (no bound proven)."""
    seconds: float


@register
class Alsched(Policy):
    name = "alsched"
    summary = ("alsched: composable placement utility functions over equivalence classes, "
               "total utility maximised (Soft / Hard / None constraints)")
    paper = "alsched"
    triggers = EVENT_TRIGGERS | {Trigger.TASK_FINISHED}
    uses_free_capacity = True
    uses_placement = True

    def __init__(self, constraints: Literal["soft", "hard", "none"] = "soft",
                 solver: Literal["greedy", "bnb", "milp", "auto"] = "greedy",
                 interval: float | None = None, time_limit: float = 10.0,
                 unit: float = 1.0, weighted: bool = True,
                 fill: Literal["first-fit", "spread"] = "first-fit",
                 budget: float = DEFAULT_BUDGET, max_size: int = DEFAULT_MAX_SIZE) -> None:
        if constraints not in CONSTRAINTS:
            raise ValueError(f"constraints must be one of {', '.join(CONSTRAINTS)}")
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(SOLVERS)}")
        if interval is not None and not (interval > 0 and math.isfinite(interval)):
            raise ValueError("interval must be > 0 seconds (or omitted: event-driven)")
        if not (time_limit > 0 and math.isfinite(time_limit)):
            raise ValueError("time_limit must be > 0 seconds")
        if not (budget > 0 and math.isfinite(budget)):
            raise ValueError("budget must be > 0 seconds")
        if max_size < 0:
            raise ValueError("max_size must be >= 0 (0: never try the MILP)")
        if not (unit > 0 and math.isfinite(unit)):
            raise ValueError("unit must be > 0")
        if fill not in FILLS:
            raise ValueError(f"fill must be one of {', '.join(FILLS)}")
        self.constraints = constraints
        self.solver = solver
        self.interval = interval
        self.time_limit = float(time_limit)
        self.unit = float(unit)
        self.weighted = weighted
        self.fill = fill
        self.budget = float(budget)
        self.max_size = int(max_size)
        if interval is not None:
            self.tick = float(interval)
            self.triggers = frozenset({Trigger.TICK})  # type: ignore[misc]
        self._machines: tuple[Machine, ...] = ()
        self._bound: dict[tuple[Any, ...], _Bound | None] = {}
        self._reach: tuple[Cluster, float, np.ndarray] | None = None  # unrunnable's last
        self._fits: dict[tuple[int, bytes], Mapping[str, tuple[int, ...]]] = {}
        self._requests: dict[Request, int] = {}  # a number per distinct request ...
        self._request_ids: dict[int, tuple[Request, int]] = {}  # ... found by identity
        self._seen: dict[tuple[str, int], int] = {}  # (job, stage) -> ready tasks last asked for
        self.solves = 0
        self.submissions = 0
        self.resubmissions = 0
        self.granted_utility = 0.0
        self.optimal_solves = 0
        self.solve_log: deque[SolveRecord] = deque(maxlen=SOLVE_LOG)
        self._exact = 0
        self._fallbacks = {"budget": 0, "size": 0}
        self._gap_n = 0  # solves with a known gap, their sum, the largest
        self._gap_sum = 0.0
        self._worst: SolveRecord | None = None

    def bind(self, cluster: Cluster) -> None:
        self._machines = tuple(cluster.machines)

    def report(self) -> dict[str, Any]:
        """Counts over the run; the gaps are those accepted per solve (``SolveRecord``):
        ``gap_unknown`` solves had no proven bound (greedy, or ``auto``'s ``size``
        fallback), and are in neither ``gap_max`` nor ``gap_mean``."""
        worst = self._worst
        n = self._gap_n
        return {"solves": self.solves, "optimal_solves": self.optimal_solves,
                "exact_solves": self._exact,
                "fallbacks": sum(self._fallbacks.values()),
                "fallbacks_budget": self._fallbacks["budget"],
                "fallbacks_size": self._fallbacks["size"],
                "gap_max": round(worst.gap or 0.0, 6) if worst is not None else None,
                "gap_mean": round(self._gap_sum / n, 6) if n else None,
                "gap_unknown": self.solves - n,
                "gap_worst": None if worst is None or worst.gap == 0 else {
                    "solve": worst.solve, "requests": worst.requests, "how": worst.how,
                    "total": round(worst.total, 6), "bound": round(worst.bound, 6)},
                "submissions": self.submissions, "resubmissions": self.resubmissions,
                "granted_utility": round(self.granted_utility, 6)}

    def unrunnable(self, job: Job, cluster: Cluster) -> str | None:
        """A stage whose request is worth nothing even with the whole cluster empty (every
        machine at its largest capacity after the job's submission) never gets anything."""
        names = cluster.resource_names
        last = self._reach
        if last is None or last[0] is not cluster or last[1] != job.submit:
            # the same for every job submitted at one time (all of them, in §5.2's runs)
            last = self._reach = (cluster, job.submit, np.asarray(
                reach_by_machine(cluster, names, job.submit), dtype=float))
        caps = last[2]
        slot = names.index(cluster.slot_resource)
        for st in job.stages:
            demand = np.asarray(st.tasks[0].demand.vector(names), dtype=float)
            q = self._unit_now((demand[slot],))
            units = np.floor(caps[:, slot] / q + _EPS)
            held = np.minimum(units // _size(demand[slot], q), _tasks_fitting(caps, demand))
            request = st.request if isinstance(st.request, Request) else DEFAULT_REQUEST
            bound = self._bind(request, len(st.tasks), st.gang, held, st.name, job.id,
                               cluster.machines)
            if bound is None:
                why = "its placement request" if st.request is not None else "it"
                return (f"stage {st.name!r}: {why} can never be met on this cluster "
                        f"(constraints={self.constraints})")
        return None

    # -- one decision ------------------------------------------------------------------------
    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        assert snapshot.free is not None and snapshot.placement is not None
        names = snapshot.resource_names
        slot = names.index(snapshot.slot_resource)
        up = np.array([m.up for m in snapshot.machines], dtype=bool)
        free = np.where(up[:, None], np.maximum(snapshot.free, 0.0), 0.0)
        caps = snapshot.capacity_matrix(names)
        pending = [(job, st) for job in snapshot.jobs for st in job.stages if st.ready > 0]
        q = self._unit_now(st.demand[snapshot.slot_resource] for _, st in pending)
        free_units = np.floor(free[:, slot] / q + _EPS).astype(np.int64)
        cap_units = np.floor(caps[:, slot] / q + _EPS)
        asks: list[Ask] = []
        owners: list[tuple[JobView, StageView, np.ndarray]] = []
        infeasible: list[Infeasible] = []
        # per decision, what depends only on a stage's demand (most stages share one) and
        # on a bound request's classes and where its tasks fit now
        fitting: dict[bytes, tuple[int, np.ndarray, np.ndarray]] = {}
        for job, st in pending:
            self._count_submission(job.id, st)
            demand = np.asarray(st.demand.vector(names), dtype=float)
            hit = fitting.get(demand.tobytes())
            if hit is None:
                size = _size(demand[slot], q)
                hit = fitting[demand.tobytes()] = (
                    size, np.minimum(cap_units // size, _tasks_fitting(caps, demand)),
                    np.minimum(free_units // size, _tasks_fitting(free, demand)))
            size, held, now = hit
            ask = self._ask(job, st, size, held, now)
            if ask is None:
                infeasible.append(Infeasible(job.id, f"stage {st.name!r}: its request can "
                                             "never be met on this cluster"))
                continue
            asks.append(ask)
            owners.append((job, st, now))
        if not asks or int(free_units.sum()) == 0:
            return Decision(infeasible=tuple(infeasible))
        t0 = time.perf_counter()
        sol = self._solve(Problem(tuple(int(x) for x in free_units), tuple(asks), self.fill))
        seconds = time.perf_counter() - t0
        grants: list[Grant] = []
        for ask, (job, st, now) in zip(asks, owners, strict=True):
            alloc = sol.alloc.get(ask.job)
            if not alloc:
                continue  # zero utility: the request stays pending (§4)
            self.granted_utility += sol.utility[ask.job] * ask.weight
            running = snapshot.placement.get(job.id, {})
            if st.gang:
                grant = _gang_grant(job, st, alloc, ask, free, snapshot)
                if grant is not None:
                    grants.append(grant)
                continue
            for mi in sorted(alloc):
                n = min(alloc[mi], int(now[mi]))  # what fits there in every resource
                if n > 0:
                    mid = snapshot.machines[mi].id
                    grants.append(Grant(job.id, running.get((st.index, mi), 0) + n,
                                        stage=st.name, machines=frozenset((mid,))))
        return Decision(tuple(grants), tuple(infeasible), solver_seconds=seconds)

    def _solve(self, problem: Problem) -> Solution:
        """One solve with the configured solver, recorded in ``solve_log`` and the counts."""
        self.solves += 1
        how: str
        if self.solver == "auto":
            out = solve_auto_outcome(problem, budget=self.budget, max_size=self.max_size)
            sol, how, gap = out.solution, out.how, out.gap
            self._exact += out.exact
            if out.fallback:
                self._fallbacks[how] += 1
        else:
            sol = solve(problem, self.solver, time_limit=self.time_limit)
            how, gap = sol.status, accepted_gap(problem, sol)
            self._exact += self.solver != "greedy"
        self.optimal_solves += sol.status == "optimal"
        rec = SolveRecord(self.solves, len(problem.requests), how, sol.total, sol.bound, gap,
                          sol.seconds)
        self.solve_log.append(rec)
        if gap is not None:
            self._gap_n += 1
            self._gap_sum += gap
            if self._worst is None or gap > (self._worst.gap or 0.0):
                self._worst = rec
        return sol

    def _unit_now(self, slot_demands: Iterable[float]) -> float:
        """This decision's machine unit: the largest amount of the slot resource that
        ``unit`` and every pending task's slot demand are whole multiples of (1 when tasks
        take whole cores; 0.5 for tasks of 1.5), so that sizes are exact; the smallest
        demand if that common divisor would be absurdly small."""
        values = {d for d in slot_demands if d > 0} | {self.unit}
        smallest = min(values)
        g = Fraction(0)
        for v in values:
            f = Fraction(v).limit_denominator(_DENOMINATOR)
            if f == 0 or abs(float(f) - v) > v * 1e-4:
                return smallest  # not a simple fraction: count in the smallest demand
            g = Fraction(math.gcd(g.numerator * f.denominator, f.numerator * g.denominator),
                         g.denominator * f.denominator)
        return float(g) if float(g) >= smallest / _DENOMINATOR else smallest

    def _count_submission(self, job: str, st: StageView) -> None:
        key = (job, st.index)
        last = self._seen.get(key)
        if last != st.ready:
            if last is None:
                self.submissions += 1
            else:
                self.resubmissions += 1
            self._seen[key] = st.ready

    def _ask(self, job: JobView, st: StageView, size: int, held: np.ndarray,
             now: np.ndarray) -> Ask | None:
        """The stage's request bound to the machines that can hold its tasks, restricted to
        those where one fits right now; ``None`` if no allocation can ever give it utility."""
        request = st.request if isinstance(st.request, Request) else DEFAULT_REQUEST
        bound = self._bind(request, st.ready, st.gang, held, st.name, job.id)
        if bound is None:
            return None
        expr, bound_classes = bound
        classes = self._restricted(bound_classes, now)
        weight = job.weight if self.weighted else 1.0
        return Ask(f"{job.id}#{st.index}", expr, classes, weight, st.ready, size)

    def _request_number(self, request: Request) -> int:
        """A number per distinct request (equal requests share it), found by identity: a
        request's structural hash walks its whole expression, and every decision looks up
        every pending stage's.  The entry holds the request, so its id is not reused."""
        hit = self._request_ids.get(id(request))
        if hit is None or hit[0] is not request:
            hit = self._request_ids[id(request)] = (
                request, self._requests.setdefault(request, len(self._requests)))
        return hit[1]

    def _restricted(self, classes: dict[str, tuple[int, ...]], now: np.ndarray
                    ) -> Mapping[str, tuple[int, ...]]:
        """``classes`` (a bound request's) without the machines where no task fits now;
        memoised (stages share bound requests, decisions see the same free machines again)
        and read-only, so that the solvers may memoise what they derive from it."""
        key = (id(classes), now.tobytes())  # the bound classes live in self._bound
        hit = self._fits.get(key)
        if hit is not None:
            return hit
        fits = set(np.flatnonzero(now > 0).tolist())
        out = MappingProxyType({name: tuple(i for i in idx if i in fits)
                                for name, idx in classes.items()})
        if len(self._fits) >= _MEMO:
            self._fits.clear()
        self._fits[key] = out
        return out

    def _bind(self, request: Request, tasks: int, gang: bool, held: np.ndarray, stage: str,
              job: str, machines: tuple[Machine, ...] | None = None) -> _Bound | None:
        """``request`` bound with ``tasks`` and ``cap(x)`` = the tasks each machine holds,
        under the constraint handling (cached); None if it can never give utility."""
        machines = self._machines if machines is None else machines
        key = (self._request_number(request), tasks, gang, held.tobytes(), len(machines))
        if key in self._bound:
            return self._bound[key]
        # Bind against every machine (an explicit machine id stays valid while that machine
        # is down), then keep in each class only the machines that can hold a task.
        b = request.bind(machines, [float(x) for x in held], tasks,
                         where=f"job {job}, stage {stage}: request")
        out: _Bound | None = None
        if b is not None:
            expr = b.expr
            if self.constraints == "hard":
                expr = preferred(expr)
            elif self.constraints == "none":
                expr = fallback(expr)
            ok = set(np.flatnonzero(held > 0).tolist())
            classes = {name: tuple(i for i in idx if i in ok) for name, idx in b.classes.items()}
            if gang:  # all the stage's tasks or nothing
                expr = Min((expr, NCk("all", Lit(float(tasks)), Lit(expr.upper()))))
                classes["all"] = tuple(sorted(ok))
            if _best_case(expr, classes, held) > 0:
                out = (expr, classes)
        self._bound[key] = out
        return out


def _size(slot_demand: float, unit: float) -> int:
    """Machine units one task takes (at least one)."""
    return max(1, math.ceil(slot_demand / unit - _EPS))


def _tasks_fitting(room: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """Per machine (row of ``room``), how many tasks of ``demand`` fit in every resource."""
    used = demand > 0
    if not used.any():
        return np.full(len(room), _MANY, dtype=np.int64)
    return np.floor(np.min(room[:, used] / demand[used], axis=1) + _EPS).astype(np.int64)


def _gang_grant(job: JobView, st: StageView, alloc: dict[int, int], ask: Ask,
                free: np.ndarray, snapshot: ClusterSnapshot) -> Grant | None:
    """One gang grant for the whole stage: on the machines the solver chose if the tasks
    pack there (the stage's head demand stands for every task), else on every machine of
    the request that could hold one now -- the dispatcher packs the gang."""
    n = sum(alloc.values())
    vec = tuple(st.demand.vector(snapshot.resource_names))
    chosen = sorted(alloc)
    if pack([vec] * n, [tuple(free[mi] + _EPS) for mi in chosen]).placement is None:
        chosen = sorted({i for idx in ask.classes.values() for i in idx})
        if pack([vec] * n, [tuple(free[mi] + _EPS) for mi in chosen]).placement is None:
            return None  # it waits: the solver's units are there, other resources are not
    mids = frozenset(snapshot.machines[mi].id for mi in chosen)
    return Grant(job.id, st.running + n, stage=st.name, machines=mids, gang=True)


def _best_case(expr: Node, classes: dict[str, tuple[int, ...]], held: np.ndarray) -> float:
    """The request's utility if it had every machine to itself: an upper bound (utility is
    monotone), so zero means it can never be met here."""
    return expr.evaluate({name: float(sum(held[i] for i in idx))
                          for name, idx in classes.items()})
