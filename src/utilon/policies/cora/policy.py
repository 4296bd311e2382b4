"""The CORA policies: ``cora`` (exact lexicographic max-min) and ``cora-lp`` (the paper's FINAL
LP as written), sharing the slotted-time mapping of §III-A.

At every scheduling event the paper names — a job arrives, a task completes, a job completes
(and, here, a stage completes, a task fails or the capacity changes) — the active jobs become
a slotted instance (``slotted_instance``) and the first slot of its solution becomes grants:

* **Slot length** ``L``: the ``slot`` parameter, or (``slot: 0``, the default) the median
  expected duration of the tasks the active jobs could run now, at least 1 s — so that one slot
  is "one task wave", the paper's unit (its example: 160 tasks on 40 containers → |T| = 4).
* **Capacity** C: the up machines' capacity in the cluster's slot resource (containers), an
  integer; one resource bundles CPU, memory and I/O as in the paper's Hadoop implementation.
  A container is one unit of the slot resource, or the smallest pending task's slot demand
  when that is less (a cluster of 0.5-cpu machines running 0.5-cpu tasks has containers).
* **Remaining work** R_i: what the paper's technical report calls scaling the task count by
  task durations: Σ over the job's unfinished tasks of slot size × expected duration / L,
  rounded up (running tasks counted whole — the snapshot's pessimistic bound).
* **Parallelism cap**: a job cannot hold more containers at once than it has tasks left
  (Σ remaining tasks × slot size).  The paper has no such cap; without it the optimum would
  give a 2-task job 40 containers.
* **|T|**: large enough that every job can finish (``slots_needed``), doubled (``spare``) so
  that a job whose utility no longer falls can be pushed beyond the busy period, capped at
  ``max_slots`` unless more are needed for feasibility.
* **Deadlines**: absolute, converted by evaluating each job's utility at the end of each slot:
  u_it = U_i(max(now + (t + 1) L, E_i)), where E_i = now + the expected task durations of
  its unfinished stages one after another — our addition: the paper's model treats a job's
  work as fluid, but reduces wait for maps, so a job cannot finish before E_i however many
  containers it gets, and pretending it could hides how urgent it is.
* **Grants**: job i gets x_i0 containers in the first slot, i.e. ⌈x_i0 / slot size⌉ tasks,
  grants ordered by planned completion slot (earliest first), with backfill so that containers
  a job cannot use right now (e.g. reduces waiting for maps) go to the next grants instead of
  idling — as Hadoop's capacity scheduler lends unused queue capacity.

Reductions of the paper's model are listed in docs/policies.md#cora.
"""

from __future__ import annotations

import dataclasses
import math
import time
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from utilon.core.decision import Decision, Grant
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView
from utilon.model.utility import Sigmoid, TimeUtility
from utilon.policies.base import EVENT_TRIGGERS, Policy, register
from utilon.policies.cora.continuous import FluidPlan, Pieces, job_pieces
from utilon.policies.cora.continuous import plan as plan_fluid
from utilon.policies.cora.exact import slots_needed, solve_exact
from utilon.policies.cora.instance import CoraInstance, CoraSolution
from utilon.policies.cora.table import utility_table


@dataclass(frozen=True)
class Slotted:
    """A snapshot as a slotted CORA instance."""

    instance: CoraInstance
    jobs: tuple[JobView, ...]  # row i of the instance
    slot: float  # L, seconds
    now: float
    earliest: np.ndarray  # E_i: no job finishes before its stages have run in sequence
    unit: float = 1.0  # one container in the slot resource (``container_size``)

    def planned_finish(self, i: int, slot: int) -> float:
        """When job i finishes if it completes in ``slot``: the slot's end, or its earliest
        possible finish when that is later (the time its utility is evaluated at)."""
        return max(self.now + self.slot * (slot + 1), float(self.earliest[i]))

    def value(self, i: int, slot: int) -> float:
        """Job i's utility when it finishes in ``slot`` (which may lie beyond |T|)."""
        return float(self.jobs[i].utility.value(self.planned_finish(i, slot)))


def _slot_length(jobs: list[JobView], slot: float, steep: float) -> float:
    if slot > 0:
        return slot
    durs = [s.expected_duration for j in jobs for s in j.stages if s.ready or s.running]
    if not durs:
        durs = [s.expected_duration for j in jobs for s in j.stages if s.remaining]
    L = max(1.0, float(np.median(durs))) if durs else 1.0
    if steep > 0:
        L = min(L, max(1.0, _steepest_slot(jobs, steep)))
    return L


def _steepest_slot(jobs: list[JobView], fall: float) -> float:
    """The longest slot inside which no job's utility falls by more than ``fall`` of its
    range: a sigmoid p / (1 + e^(mu (t - d))) falls at most p mu / 4 per second, so a slot of
    4 fall / mu; a linear utility of slope s from value p, fall p / s."""
    best = math.inf
    for j in jobs:
        u = j.utility
        if type(u) is Sigmoid:
            if u.mu > 0:
                best = min(best, 4.0 * fall / u.mu)
            continue
        slope = getattr(u, "slope", 0.0)
        value = getattr(u, "value", None)
        if isinstance(slope, float) and slope > 0 and isinstance(value, float) and value > 0:
            best = min(best, fall * value / slope)
    return best


def _remaining(j: JobView, now: float, elapsed: bool) -> tuple[float, float, float]:
    """Job ``j``'s remaining work in slot-resource seconds, the containers it could hold at
    once, and the earliest time it could finish (its stages one after another).  With
    ``elapsed``, running tasks count only the part of their expected duration not yet run;
    without it they count whole (the snapshot's pessimistic bound)."""
    work = par = 0.0
    earliest = now
    for s in j.stages:
        left = s.total - s.done
        if not left:
            continue
        d = s.expected_duration
        par += left * s.slot_size
        if elapsed and s.running:
            ran = min(s.elapsed(now), s.running * d)
            work += (left * d - ran) * s.slot_size
            if left == s.running:  # only running tasks left: the mean of what they lack
                earliest += d - ran / s.running
                continue
        else:
            work += left * d * s.slot_size
        earliest += d
    return work, par, earliest


def slotted_instance(snapshot: ClusterSnapshot, *, slot: float = 0.0, spare: float = 1.0,
                     max_slots: int = 120, steep: float = 0.0,
                     elapsed: bool = False) -> Slotted | None:
    """The active jobs with work left as a slotted instance (None when there is none).

    ``steep`` > 0 shortens an automatic slot so that no utility falls by more than that
    fraction of its range inside one slot; ``elapsed`` counts running tasks by what they
    have left."""
    jobs = [j for j in snapshot.jobs if j.remaining > 0]
    if not jobs:
        return None
    q = container_size(jobs)
    capacity = math.floor(snapshot.total_slots / q + 1e-9)
    if capacity <= 0:
        return None
    L = _slot_length(jobs, slot, steep)
    now = snapshot.now
    rem = np.array([_remaining(j, now, elapsed) for j in jobs], dtype=float)
    work, par, earliest = rem[:, 0] / q, rem[:, 1] / q, rem[:, 2]
    demand = np.maximum(1, np.ceil(work / L - 1e-9)).astype(np.int64)
    cap = np.minimum(np.maximum(1, np.ceil(par - 1e-9)).astype(np.int64), capacity)
    need = slots_needed(np.array([capacity]), demand[:, None], cap[:, None])
    T = max(need, min(max_slots, math.ceil(need * (1.0 + spare))))
    ends = now + L * np.arange(1, T + 1)
    # a job cannot finish before its stages have run one after another (maps, then reduces):
    # finishing "in" an earlier slot is worth what finishing at that bound is
    times = np.maximum(ends[None, :], earliest[:, None])
    utility = utility_table(jobs, times)
    # non-increasing by construction; clip float noise so the instance validates
    utility = np.minimum.accumulate(utility, axis=1)
    inst = CoraInstance(capacity=np.full((1, T), capacity, dtype=np.int64),
                        demand=demand[:, None], utility=utility, cap=cap[:, None])
    return Slotted(inst, tuple(jobs), L, now, earliest, q)


def container_size(jobs: list[JobView]) -> float:
    """One container in the slot resource: 1 (a slot, a core), or the smallest task's slot
    demand when tasks ask for less, so that a cluster of fractional capacity (0.5 cpu) still
    counts whole containers."""
    sizes = [s.slot_size for j in jobs for s in j.stages if s.remaining]
    return min(1.0, min(sizes, default=1.0))


def grants_from(slotted: Slotted, sol: CoraSolution, front_load: bool = False
                ) -> tuple[Grant, ...]:
    """First slot's containers as task grants, earliest planned completion first (with
    ``front_load``, the order alone: no job is held to its first-slot count)."""
    first = sol.allocation[:, :, 0].sum(axis=1)
    order = sorted(range(len(slotted.jobs)),
                   key=lambda i: (int(sol.completion[i]), -float(sol.utility[i]), i))
    grants = []
    for i in order:
        j = slotted.jobs[i]
        tasks = math.ceil(first[i] * slotted.unit / max(j.slot_size, 1e-9) - 1e-9)
        # front-loaded: every job in planned-completion order takes what it can, so that a
        # job finishes as early as the plan allows instead of exactly in its planned slot
        grants.append(Grant(j.id) if front_load else Grant(j.id, slots=int(tasks)))
    return tuple(grants)


REPLAN = ("slot", "event")
ABOVE_MIN = ("leximin", "edf", "sum")
# above_min sum: the level the floors keep -- the run's first level, the present jobs' one,
# or none (the last two are ablations, docs/reproduction-cora.md)
FLOORS = ("run", "present", "none")
# triggers that leave a slotted plan standing: a task finishing inside the plan's first slot
# is what the plan expects (its x_i0 containers run tasks for the whole slot)
_ON_PLAN = frozenset({Trigger.TASK_FINISHED})


class _PlanLog:
    """What every CORA policy does with its plans.

    *Reuse* (``replan: slot``): a plan stands until its first slot ends (for ``cora-ct``:
    one median task duration) unless something it did not expect happens -- an arrival, a
    stage or job completion, a failure, a capacity change.  Task completions inside it are
    what the plan expects, and the core keeps applying its grants to the freed slots.
    ``replan: event`` re-solves at every event, as the paper does.

    *Plan vs execution*: the completion each job's last plan gave it against the realised one
    (``Policy.job_finished``), reported in ``policy_report``."""

    def _init_plan_log(self, replan: str) -> None:
        if replan not in REPLAN:
            raise ValueError(f"replan must be one of {', '.join(REPLAN)}, got {replan!r}")
        self.replan = replan
        # job -> (planned completion at the last decision, slot length of that plan)
        self._planned: dict[str, tuple[float, float]] = {}
        self.plan_log: list[tuple[str, float, float, float]] = []  # job, planned, real, L
        self.solves = 0  # decisions that planned (the others followed the standing plan)
        self._plan: tuple[Decision, float] | None = None  # the standing plan, valid until

    def _standing(self, snapshot: ClusterSnapshot) -> Decision | None:
        """The standing plan if this event leaves it valid, else None (and a solve is
        counted)."""
        plan = self._plan
        if (self.replan == "slot" and plan is not None and snapshot.triggers <= _ON_PLAN
                and snapshot.now < plan[1]):
            return plan[0]
        self.solves += 1
        return None

    def _stand(self, decision: Decision, until: float) -> Decision:
        # followed again, the plan costs no solver time
        self._plan = (dataclasses.replace(decision, solver_seconds=None), until)
        return decision

    def job_finished(self, job_id: str, now: float) -> None:
        plan = self._planned.pop(job_id, None)
        if plan is not None:
            self.plan_log.append((job_id, plan[0], now, plan[1]))

    def plan_error(self) -> dict[str, Any]:
        """Realised completion minus the completion the job's last plan gave it, in seconds
        and in slots of that plan (the grid step for ``cora-ct``)."""
        log = [r for r in self.plan_log if math.isfinite(r[1])]
        if not log:
            return {"jobs": 0}
        err = np.array([real - planned for _, planned, real, _ in log])
        slots = np.array([e / L for e, (_, _, _, L) in zip(err, log, strict=True)])
        q = np.abs(slots)
        return {
            "jobs": len(err),
            "median_abs_s": round(float(np.median(np.abs(err))), 3),
            "p90_abs_s": round(float(np.quantile(np.abs(err), 0.9)), 3),
            "mean_s": round(float(err.mean()), 3),
            "median_abs_slots": round(float(np.median(q)), 4),
            "p90_abs_slots": round(float(np.quantile(q, 0.9)), 4),
            "within_one_slot": round(float(np.mean(q <= 1.0)), 4),
            "late_share": round(float(np.mean(err > 1e-9)), 4),
        }


class _CoraBase(_PlanLog, Policy):
    paper = "Huang et al., Need for Speed: CORA Scheduler for Optimizing Completion-Times " \
            "in the Cloud, INFOCOM 2015"
    triggers = EVENT_TRIGGERS | {Trigger.TASK_FINISHED}  # the paper's three events, and more

    def __init__(self, slot: float = 0.0, spare: float = 1.0, max_slots: int = 120,
                 backfill: bool = True, node_limit: int = 20_000, steep: float = 0.0,
                 elapsed: bool = False, front_load: bool = False,
                 replan: str = "slot") -> None:
        if slot < 0:
            raise ValueError("slot must be >= 0 (0: automatic)")
        if spare < 0:
            raise ValueError("spare must be >= 0")
        if max_slots < 1:
            raise ValueError("max_slots must be >= 1")
        if not 0 <= steep < 1:
            raise ValueError("steep must be in [0, 1) (0: slots of one task wave)")
        self.slot = slot
        self.spare = spare
        self.max_slots = max_slots
        self.backfill = backfill
        self.node_limit = node_limit
        self.steep = steep
        self.elapsed = elapsed
        self.front_load = front_load
        self.inexact = 0  # decisions where the branch and bound hit node_limit
        self.last: tuple[Slotted, CoraSolution] | None = None  # for per-event analysis
        self._init_plan_log(replan)

    @abstractmethod
    def solve(self, inst: CoraInstance) -> CoraSolution:
        """The slotted instance's solution (exact, or the paper's LP)."""

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        standing = self._standing(snapshot)
        if standing is not None:
            return standing
        slotted = slotted_instance(snapshot, slot=self.slot, spare=self.spare,
                                   max_slots=self.max_slots, steep=self.steep,
                                   elapsed=self.elapsed)
        if slotted is None:
            self._plan = None
            return Decision(backfill=self.backfill)
        t0 = time.perf_counter()
        sol = self.solve(slotted.instance)
        took = time.perf_counter() - t0
        self.last = (slotted, sol)
        for i, j in enumerate(slotted.jobs):
            self._planned[j.id] = (slotted.planned_finish(i, int(sol.completion[i])),
                                   slotted.slot)
        return self._stand(Decision(grants=grants_from(slotted, sol, self.front_load),
                                    backfill=self.backfill, solver_seconds=took),
                           slotted.now + slotted.slot)

    def report(self) -> dict[str, Any]:
        return {"plan_error": self.plan_error(), "inexact_decisions": self.inexact,
                "solves": self.solves}


@register
class Cora(_CoraBase):
    """Exact lexicographic max-min of job utilities at their completion slots."""

    name = "cora"
    summary = "lexicographic max-min job utility over time slots, solved exactly"

    def solve(self, inst: CoraInstance) -> CoraSolution:
        # exact; only instances with many tied utilities need the branch and bound, and
        # node_limit keeps a simulation from stalling on one (the best found is used)
        sol = solve_exact(inst, node_limit=self.node_limit)
        if sol.info.get("optimal") is False:
            self.inexact += 1
        return sol


@register
class CoraLP(_CoraBase):
    """The paper's FINAL LP, as written, solved with HiGHS (see docs/cora-lp.md)."""

    name = "cora-lp"
    summary = "CORA's FINAL linear program as written in the paper (HiGHS)"

    def solve(self, inst: CoraInstance) -> CoraSolution:
        from utilon.policies.cora.lp import solve_final_lp

        return solve_final_lp(inst)


@register
class CoraContinuous(_PlanLog, Policy):
    """The same lexicographic max-min in continuous time (issue 21's variant; see
    ``cora.continuous`` and docs/policies.md#cora-ct)."""

    name = "cora-ct"
    summary = "CORA's lexicographic max-min over continuous completion times (fluid model)"
    paper = _CoraBase.paper
    triggers = _CoraBase.triggers

    def __init__(self, resolution: float = 1.0, margin: float = 1.0, elapsed: bool = True,
                 backfill: bool = True, replan: str = "slot", above_min: str = "leximin",
                 window: float = 2.0, floors: str = "run") -> None:
        if above_min not in ABOVE_MIN:
            raise ValueError(f"above_min must be one of {', '.join(ABOVE_MIN)}, "
                             f"not {above_min!r}")
        if not resolution > 0:
            raise ValueError("resolution must be > 0 seconds")
        if not 0 <= margin <= 10:
            raise ValueError("margin must be in [0, 10] task durations")
        if not 0 < window <= 10:
            raise ValueError("window must be in (0, 10] task durations")
        if floors not in FLOORS:
            raise ValueError(f"floors must be one of {', '.join(FLOORS)}, not {floors!r}")
        self.window = window
        self.floors = floors
        self.resolution = resolution
        self.margin = margin
        self.above_min = above_min
        self.elapsed = elapsed
        self.backfill = backfill
        self.stuck = 0
        self.overrides = 0  # above_min edf/sum: plans whose order is not EDF's
        self.repairs = 0  # above_min sum: plans where the floors changed the order
        self.moved_up: set[str] = set()
        self.last_plan: FluidPlan | None = None
        self._utility: dict[str, TimeUtility] = {}
        self._kept: dict[str, float] = {}  # job -> the level its last plan's floor kept
        self.broken: list[float] = []  # shortfalls of the jobs that ended below it
        self.run_min = math.inf  # the lowest utility a finished job got
        self._init_plan_log(replan)

    def job_finished(self, job_id: str, now: float) -> None:
        super().job_finished(job_id, now)
        u = self._utility.pop(job_id, None)
        kept = self._kept.pop(job_id, None)
        if u is not None:
            got = float(u.value(now))
            self.run_min = min(self.run_min, got)
            if kept is not None and got < kept - 1e-9:  # the fluid model broke its floor
                self.broken.append(kept - got)

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        standing = self._standing(snapshot)
        if standing is not None:
            return standing
        self._plan = None
        jobs = [j for j in snapshot.jobs if j.remaining > 0]
        if not jobs:
            return Decision(backfill=self.backfill)
        q = container_size(jobs)
        capacity = math.floor(snapshot.total_slots / q + 1e-9)
        if capacity <= 0:
            return Decision(backfill=self.backfill)
        t0 = time.perf_counter()
        c = float(capacity)
        rows = np.array([job_pieces(j, snapshot.now, c, q, self.elapsed) for j in jobs],
                        dtype=float)
        n = len(jobs)
        pieces = Pieces(work=np.maximum(np.concatenate([rows[:, 0], rows[:, 2]]), 0.0),
                        cap=np.maximum(np.concatenate([rows[:, 1], rows[:, 3]]), 1.0),
                        offset=np.concatenate([rows[:, 4], np.zeros(n)]))
        if self.above_min == "sum":  # remember the utilities that can set the run's minimum
            self._utility.update((j.id, j.utility) for j in jobs
                                 if j.utility.bounds[1] > j.utility.bounds[0])
        fp = plan_fluid(snapshot, jobs, c, pieces, rows[:, 5], self.resolution, self.margin,
                        self.above_min, self.run_min if self.floors == "run" else math.inf,
                        self.window, self.floors != "none")
        took = time.perf_counter() - t0
        self.last_plan = fp
        self.stuck += fp.stuck
        self.repairs += fp.repaired
        if fp.moved:
            self.overrides += 1
            self.moved_up.update(fp.moved)
        for i, j in enumerate(fp.jobs):
            self._planned[j.id] = (float(fp.finish[i]), fp.step)
        if self.above_min == "sum" and self.floors != "none":  # check it at each end
            kept = float(fp.level.min(initial=math.inf))
            kept = min(kept, self.run_min) if self.floors == "run" else kept
            self._kept.update((j.id, kept) for j in fp.jobs)
        # the plan's order stands for one task wave (``cora``'s automatic slot)
        return self._stand(Decision(grants=tuple(Grant(fp.jobs[i].id) for i in fp.order),
                                    backfill=self.backfill, solver_seconds=took),
                           snapshot.now + _slot_length(jobs, 0.0, 0.0))

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"plan_error": self.plan_error(), "stuck_rounds": self.stuck,
                               "solves": self.solves}
        if self.above_min != "leximin":  # how often, and for whom, the minimum overrode EDF
            out["edf_overrides"] = self.overrides
            out["moved_up"] = sorted(self.moved_up)
        if self.above_min == "sum":
            out["floor_repairs"] = self.repairs
            out["run_min"] = round(self.run_min, 6) if math.isfinite(self.run_min) else None
            if self.floors != "none":
                out["floors_broken"] = len(self.broken)
                out["worst_floor_shortfall"] = round(max(self.broken, default=0.0), 6)
        return out
