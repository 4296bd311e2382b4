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
*free* units of every machine (``solvers``: greedy -- the paper's simulation choice --,
branch-and-bound or MILP).  A request whose allocation evaluates to zero gets nothing and
stays pending (§4).  The allocation becomes one gang grant per (stage, machine): the stage's
tasks on that machine start together, and since the solver only hands out free units, all of a
stage's grants start in the same dispatch pass.

Constraint handling (§5.2): ``soft`` uses the full utility function; ``hard`` keeps, at every
``max``, only the branches of highest bound (the preferred placement becomes a requirement:
the job waits for it); ``none`` keeps only the branches of lowest bound (the fallback: any
resources).  Branches of equal bound are all kept, so a ``max`` over equally good machines
(LOCAL's "one machine, any") stays a hard constraint under every policy.

The model's unit is one task = ``unit`` of the cluster's slot resource (a core, in the paper).
Each request only sees the machines where its task's declared demand fits at all; tasks that
declare more than one unit start only where they actually fit (the dispatcher checks), so on
such workloads a grant may wait for the next decision.
"""

from __future__ import annotations

import math
import time
from typing import Any, Literal

import numpy as np

from utilon.core.decision import Decision, Grant, Infeasible
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView, StageView
from utilon.model.cluster import Cluster, Machine
from utilon.policies.alsched.lang import Request, fallback, preferred
from utilon.policies.alsched.lang.ast import LnCk, Node, Tasks
from utilon.policies.alsched.solvers import SOLVERS, Problem, solve
from utilon.policies.alsched.solvers import Request as Ask
from utilon.policies.base import EVENT_TRIGGERS, Policy, register

DEFAULT_REQUEST = Request(LnCk("all", Tasks(), Tasks()), (), ())
"""A stage without a request: any units, utility linear in the units up to its ready tasks."""

CONSTRAINTS = ("soft", "hard", "none")
_Bound = tuple[Node, dict[str, tuple[int, ...]]]  # a concrete expression and its classes
_EPS = 1e-9


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
                 solver: Literal["greedy", "bnb", "milp"] = "greedy",
                 interval: float | None = None, time_limit: float = 10.0,
                 unit: float = 1.0, weighted: bool = True) -> None:
        if constraints not in CONSTRAINTS:
            raise ValueError(f"constraints must be one of {', '.join(CONSTRAINTS)}")
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(SOLVERS)}")
        if interval is not None and not (interval > 0 and math.isfinite(interval)):
            raise ValueError("interval must be > 0 seconds (or omitted: event-driven)")
        if not (time_limit > 0 and math.isfinite(time_limit)):
            raise ValueError("time_limit must be > 0 seconds")
        if not (unit > 0 and math.isfinite(unit)):
            raise ValueError("unit must be > 0")
        self.constraints = constraints
        self.solver = solver
        self.interval = interval
        self.time_limit = float(time_limit)
        self.unit = float(unit)
        self.weighted = weighted
        if interval is not None:
            self.tick = float(interval)
            self.triggers = frozenset({Trigger.TICK})  # type: ignore[misc]
        self._machines: tuple[Machine, ...] = ()
        self._cap_key: tuple[float, ...] = ()
        self._fits_cache: dict[Any, tuple[int, ...]] = {}  # demand -> machines it fits, now
        self._bound: dict[tuple[Any, ...], _Bound | None] = {}
        self._seen: dict[tuple[str, int], int] = {}  # (job, stage) -> ready tasks last asked for
        self.solves = 0
        self.submissions = 0
        self.resubmissions = 0
        self.granted_utility = 0.0
        self.optimal_solves = 0

    def bind(self, cluster: Cluster) -> None:
        self._machines = tuple(cluster.machines)

    def report(self) -> dict[str, Any]:
        return {"solves": self.solves, "optimal_solves": self.optimal_solves,
                "submissions": self.submissions, "resubmissions": self.resubmissions,
                "granted_utility": round(self.granted_utility, 6)}

    # -- one decision ------------------------------------------------------------------------
    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        assert snapshot.free is not None and snapshot.placement is not None
        slot = snapshot.resource_names.index(snapshot.slot_resource)
        up = tuple(m.index for m in snapshot.machines if m.up)
        free = np.zeros(len(snapshot.machines), dtype=np.int64)
        cap = np.zeros(len(snapshot.machines), dtype=float)
        for m in snapshot.machines:
            if m.up:
                free[m.index] = math.floor(max(snapshot.free[m.index, slot], 0.0) / self.unit
                                           + _EPS)
                cap[m.index] = math.floor(m.capacity[snapshot.slot_resource] / self.unit + _EPS)
        self._cap_key = tuple(cap.tolist())
        self._fits_cache.clear()
        asks: list[Ask] = []
        owners: list[tuple[JobView, StageView]] = []
        infeasible: list[Infeasible] = []
        for job in snapshot.jobs:
            for st in job.stages:
                if st.ready <= 0:
                    continue
                self._count_submission(job.id, st)
                ask = self._ask(job, st, snapshot, up, cap)
                if ask is None:
                    infeasible.append(Infeasible(job.id, f"stage {st.name!r}: its request can "
                                                 "never be met on this cluster"))
                    continue
                asks.append(ask)
                owners.append((job, st))
        if not asks or int(free.sum()) == 0:
            return Decision(infeasible=tuple(infeasible))
        t0 = time.perf_counter()
        sol = solve(Problem(tuple(int(x) for x in free), tuple(asks)), self.solver,
                    time_limit=self.time_limit)
        seconds = time.perf_counter() - t0
        self.solves += 1
        self.optimal_solves += sol.status == "optimal"
        grants: list[Grant] = []
        placed = snapshot.placement
        for ask, (job, st) in zip(asks, owners, strict=True):
            alloc = sol.alloc.get(ask.job)
            if not alloc:
                continue  # zero utility: the request stays pending (§4)
            self.granted_utility += sol.utility[ask.job] * ask.weight
            running = placed.get(job.id, {})
            for mi in sorted(alloc):
                n = alloc[mi]
                if n > 0:
                    mid = snapshot.machines[mi].id
                    grants.append(Grant(job.id, running.get((st.index, mi), 0) + n,
                                        stage=st.name, machines=frozenset((mid,)), gang=True))
        return Decision(tuple(grants), tuple(infeasible), solver_seconds=seconds)

    def _count_submission(self, job: str, st: StageView) -> None:
        key = (job, st.index)
        last = self._seen.get(key)
        if last != st.ready:
            if last is None:
                self.submissions += 1
            else:
                self.resubmissions += 1
            self._seen[key] = st.ready

    def _ask(self, job: JobView, st: StageView, snapshot: ClusterSnapshot,
             up: tuple[int, ...], cap: np.ndarray) -> Ask | None:
        """The stage's request bound to the machines that are up and fit its tasks, under the
        constraint handling; ``None`` if no allocation can ever give it utility."""
        request = st.request if isinstance(st.request, Request) else DEFAULT_REQUEST
        fits = self._fits_cache.get(st.demand)
        if fits is None:
            fits = self._fits_cache[st.demand] = tuple(
                mi for mi in up if _fits(st, snapshot.machines[mi].capacity))
        key = (request, st.ready, fits, self._cap_key)
        if key not in self._bound:
            self._bound[key] = self._bind(request, st, fits, cap, job.id)
        bound = self._bound[key]
        if bound is None:
            return None
        expr, classes = bound
        weight = job.weight if self.weighted else 1.0
        return Ask(f"{job.id}#{st.index}", expr, classes, weight, st.ready)

    def _bind(self, request: Request, st: StageView, fits: tuple[int, ...], cap: np.ndarray,
              job: str) -> _Bound | None:
        # Bind against every machine (an explicit machine id stays valid while that machine
        # is down), then keep in each class only the machines that are up and fit the task.
        b = request.bind(self._machines, [float(x) for x in cap], st.ready,
                         where=f"job {job}, stage {st.name}: request")
        if b is None:
            return None
        expr = b.expr
        if self.constraints == "hard":
            expr = preferred(expr)
        elif self.constraints == "none":
            expr = fallback(expr)
        ok = set(fits)
        classes = {name: tuple(i for i in idx if i in ok) for name, idx in b.classes.items()}
        if _best_case(expr, classes, cap) <= 0:
            return None
        return expr, classes


def _fits(st: StageView, capacity: Any) -> bool:
    return all(capacity.get(r) + _EPS >= amount for r, amount in st.demand.as_dict().items())


def _best_case(expr: Node, classes: dict[str, tuple[int, ...]], cap: np.ndarray) -> float:
    """The request's utility if it had every machine to itself: an upper bound (utility is
    monotone), so zero means it can never be met here."""
    return expr.evaluate({name: sum(cap[i] for i in idx) for name, idx in classes.items()})
