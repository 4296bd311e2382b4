"""``ras``: the Resource-aware Adaptive Scheduler (Polo et al., Middleware 2011, ``ras.txt``).

A control cycle every ``interval`` seconds (T, "of the order of tens of seconds", §3.2), and
at every job submission, capacity change and end of a stage (a job's map phase, or its last
stage, whose end frees its slots), so that a newcomer or a job entering its reduce phase does
not wait for the next tick:

1. **Job Status Updater / Completion Time Estimator** (§3.2): per job, the pending map
   tasks s_pend, the mean map-task length observed so far and its goal give s_req
   (``estimator.py``); r_pend is the reducers not yet started.
2. **Placement Algorithm** (§3.4, ``placement.py``): Algorithm 1 on the TaskTrackers'
   multi-resource capacities (every resource of the cluster, or ``resources``), starting
   from the map tasks that run (``start``), visiting TaskTrackers most-free first
   (``tt_order``); each job's map and reduce profiles are its
   stages' declared demands, its shuffle profile the ``shuffle`` entry of its job class.
3. **Task Scheduler** (§3.5): the placement becomes one grant per (job, TaskTracker, phase)
   -- "P(job, tt) job slots" -- listed lowest utility first.  The core starts a task only
   when the TaskTracker's free declared capacity holds it, so a new placement takes over
   only as the old tasks finish and resources free up, and no TaskTracker is ever
   overloaded (Eq. 6).  Between cycles the placement stands; freed job slots are refilled
   from it.

Readings of what the paper leaves open (also in docs/policies.md#ras):

* **s_pend** counts the map tasks not yet finished (ready + running): running maps hold
  their job slots in the placement, and u_M reaches 1 when every one of them has a slot.
* **Reducers** that already run are pinned where they run: their reduce profile is taken out
  of their TaskTracker's capacity, and only reducers not yet started are placed (r_pend).
  Reducers placed during the map phase reserve their shuffle profile; the simulator starts
  reduce tasks when the map phase ends (its reduce task is the reduce phase after a
  pipelined shuffle), on the TaskTrackers reserved for them.
* **"Map phase about to complete"** (lines 26–27): no map task is waiting for a slot; the
  job's reducers are then sized with the reduce profile.
* **The estimator is §3.2's**: s_req from the goal, the pending maps and their mean
  length, as if the job ended with its maps.  ``reduce_aware=True`` (a named variant,
  ``ras-reduce-aware`` in ``utilon reproduce ras``; the default before issue 44) also
  subtracts the reduce stage's expected length from the time left: the paper does not
  describe it, so it is off by default.
* ``unmeasured``, ``reduce_aware``, ``start``, ``tt_order``: the estimator's and Algorithm
  1's open corners, each with its alternative reading kept (docs/policies.md#ras, measured
  in docs/reproduction-ras.md and ``benchmarks/ras_swim.py``).
* A job with several non-reduce stages (a DAG) is placed one stage at a time: its current
  stage is the first non-reduce stage with tasks ready or running.  Gang stages (map-like or
  reduce) get one whole-stage grant (all or nothing), since a per-TaskTracker slot cannot
  hold a gang.
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import numpy as np

from utilon.core.decision import Decision, Grant
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView, StageView
from utilon.errors import ParameterError
from utilon.model.cluster import Cluster
from utilon.policies.base import EVENT_TRIGGERS, Policy, register
from utilon.policies.ras.estimator import UNMEASURED, required_map_slots
from utilon.policies.ras.placement import Placement, PlacementJob, place
from utilon.policies.ras.utility import order_key

REPLAN_ON = frozenset({Trigger.TICK, Trigger.ARRIVAL, Trigger.CAPACITY,
                       Trigger.STAGE_FINISHED})


class _Phases(NamedTuple):
    """A job's current map-like stage and its next reduce stage (either may be absent)."""

    map: StageView | None
    reduce: StageView | None


def job_phases(job: JobView) -> _Phases:
    mstage = next((s for s in job.stages if s.kind != "reduce" and (s.ready or s.running)),
                  None)
    rstage = next((s for s in job.stages if s.kind == "reduce" and s.remaining), None)
    return _Phases(mstage, rstage)


@register
class Ras(Policy):
    name = "ras"
    summary = ("RAS: per-TaskTracker job slots on cpu/io/mem, max-min utility against "
               "completion-time goals")
    paper = "ras"
    triggers = EVENT_TRIGGERS | {Trigger.TICK}
    uses_placement = True
    uses_free_capacity = True  # for tt_order: free

    def __init__(self, interval: float = 30.0, rounds: int = 3, parallel_copies: int = 5,
                 shuffle: dict[str, dict[str, float]] | None = None,
                 resources: list[str] | None = None, unmeasured: str = "all",
                 reduce_aware: bool = False, tt_order: str = "free",
                 start: str = "running") -> None:
        if start not in ("running", "plan"):
            raise ValueError(f"start must be 'running' or 'plan', got {start!r}")
        if tt_order not in ("free", "index"):
            raise ValueError(f"tt_order must be 'free' or 'index', got {tt_order!r}")
        if unmeasured not in UNMEASURED:
            raise ValueError(f"unmeasured must be one of {', '.join(UNMEASURED)}, "
                             f"got {unmeasured!r}")
        if not (interval > 0 and math.isfinite(interval)):
            raise ValueError("interval must be > 0 seconds")
        if rounds < 1:
            raise ValueError("rounds must be >= 1")
        if parallel_copies < 0:
            raise ValueError("parallel_copies must be >= 0")
        for cls, prof in (shuffle or {}).items():
            if any(not (v >= 0 and math.isfinite(v)) for v in prof.values()):
                raise ValueError(f"shuffle[{cls!r}]: amounts per map must be numbers >= 0")
        if resources is not None and not resources:
            raise ValueError("resources must name at least one resource (or be omitted)")
        self.interval = float(interval)
        self.rounds = rounds
        self.parallel_copies = parallel_copies
        self.shuffle = dict(shuffle or {})
        self.resources = list(resources) if resources is not None else None
        self.unmeasured = unmeasured
        self.reduce_aware = bool(reduce_aware)
        self.tt_order = tt_order
        self.start = start
        self.tick = self.interval
        self._grants: tuple[Grant, ...] = ()
        self._maps: dict[str, dict[str, int]] = {}  # last placement: job -> TaskTracker -> maps
        self._planned = False
        self.cycles = 0
        self.utility_log: list[tuple[float, dict[str, float]]] = []
        """(cycle time, {job: utility of the new placement}) per control cycle (Fig. 5)."""

    # -- the policy interface -----------------------------------------------------------------
    def bind(self, cluster: Cluster) -> None:
        if self.resources is not None:
            known = cluster.resource_names
            unknown = [r for r in self.resources if r not in known]
            if unknown:
                raise ParameterError(f"policy 'ras': resources names {unknown[0]!r}, which no "
                                     f"machine has; use some of: {', '.join(known)}")

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        if not self._planned or snapshot.triggers & REPLAN_ON:
            return self._cycle(snapshot)
        active = {j.id for j in snapshot.jobs}
        if all(g.job in active for g in self._grants):
            return Decision(self._grants)
        self._grants = tuple(g for g in self._grants if g.job in active)
        return Decision(self._grants)

    def report(self) -> dict[str, Any]:
        mins = [min(u.values()) for _, u in self.utility_log if u]
        finite = [m for m in mins if math.isfinite(m)]
        return {"cycles": self.cycles,
                "cycles_with_starving_job": sum(1 for m in mins if not math.isfinite(m)),
                "mean_min_utility": round(float(np.mean(finite)), 6) if finite else None}

    # -- one control cycle ----------------------------------------------------------------------
    def _cycle(self, snapshot: ClusterSnapshot) -> Decision:
        t0 = time.perf_counter()
        self._planned = True
        self.cycles += 1
        now = snapshot.now
        names = tuple(self.resources) if self.resources is not None else \
            snapshot.resource_names
        up = [m for m in snapshot.machines if m.up]
        running = snapshot.placement or {}
        cap = _up_rows(snapshot, names)  # (a copy: the running reducers come off it below)
        col = {m.index: i for i, m in enumerate(up)}
        jobs: list[PlacementJob] = []
        views: list[tuple[JobView, _Phases]] = []
        gangs: list[Grant] = []
        for job in snapshot.jobs:
            ph = job_phases(job)
            # a per-TaskTracker job slot cannot hold a gang: it gets one whole-stage grant
            if ph.map is not None and ph.map.gang:
                gangs.append(Grant(job.id, stage=ph.map.name))
                ph = _Phases(None, ph.reduce)
            if ph.reduce is not None and ph.reduce.gang:
                gangs.append(Grant(job.id, stage=ph.reduce.name))
                ph = _Phases(ph.map, None)
            rdem = _vector(ph.reduce.demand, names) if ph.reduce is not None else \
                np.zeros(len(names))
            if ph.reduce is not None:  # pin the reducers that run: out of their TT's capacity
                for (si, mi), n in running.get(job.id, {}).items():
                    if si == ph.reduce.index and mi in col:
                        cap[col[mi]] -= n * rdem
            s_pend = (ph.map.ready + ph.map.running) if ph.map is not None else 0
            r_pend = (ph.reduce.ready + ph.reduce.waiting) if ph.reduce is not None else 0
            if not s_pend and not r_pend:
                continue
            s_req = required_map_slots(
                s_pend, ph.map.expected_duration, job.utility.goal, now,
                measured=ph.map.done > 0 or not snapshot.online_estimates,
                unmeasured=self.unmeasured,
                reduce_length=ph.reduce.expected_duration if ph.reduce is not None and
                self.reduce_aware else 0.0) if ph.map is not None else 0
            mdem = _vector(ph.map.demand, names) if ph.map is not None else np.zeros(len(names))
            shuffle = self.shuffle.get(job.job_class, self.shuffle.get("*", {}))
            jobs.append(PlacementJob(
                job.id, mdem, rdem, _vector(shuffle, names), s_pend, s_req, r_pend,
                reduce_phase=ph.map is None or ph.map.ready == 0,
                parallel_copies=self.parallel_copies))
            views.append((job, ph))
        start = self._start(jobs, views, up, running, col)
        order = self._free_first(snapshot, up, names) if self.tt_order == "free" else None
        result = place(jobs, np.maximum(cap, 0.0), rounds=self.rounds, start_map=start,
                       order=order)
        self._remember(jobs, up, result, now)
        grants = self._grants_from(views, jobs, up, result, running, col) + tuple(gangs)
        self._grants = grants
        return Decision(grants, solver_seconds=time.perf_counter() - t0)

    def _start(self, jobs: list[PlacementJob], views: list[tuple[JobView, _Phases]],
               up: list[Any], running: dict[str, dict[tuple[int, int], int]],
               col: dict[int, int]) -> np.ndarray:
        """Algorithm 1's input P^M: the map tasks that run now, per job and TaskTracker
        (``start="running"``), or the last cycle's placement (``start="plan"``)."""
        start = np.zeros((len(jobs), len(up)), dtype=np.int64)
        for j, (job, ph) in enumerate(views):
            if self.start == "plan":
                prev = self._maps.get(job.id, {})
                for i, m in enumerate(up):
                    start[j, i] = prev.get(m.id, 0)
            elif ph.map is not None:
                for (si, mi), n in running.get(job.id, {}).items():
                    if si == ph.map.index and mi in col:
                        start[j, col[mi]] += n
        return start

    @staticmethod
    def _free_first(snapshot: ClusterSnapshot, up: list[Any], names: tuple[str, ...]
                    ) -> list[int]:
        """TaskTrackers by free capacity now (the core's declared free capacity; the tightest
        resource's free share), most free first; ties by index."""
        assert snapshot.free is not None  # uses_free_capacity
        col = [snapshot.resource_names.index(r) for r in names]
        cap = _up_rows(snapshot, names)
        free = snapshot.free[[m.index for m in up]][:, col] if up else cap
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(cap > 0, free / cap, 1.0)
        # rounded: the core updates free capacity incrementally, and float noise must not
        # break ties between equally free TaskTrackers
        tightest = np.round(share.min(axis=1), 9) if len(names) else np.zeros(len(up))
        return np.lexsort((np.arange(len(up)), -tightest)).tolist()

    def _remember(self, jobs: list[PlacementJob], up: list[Any], result: Placement,
                  now: float) -> None:
        self._maps = {pj.id: {up[i].id: int(c) for i, c in enumerate(result.maps[j]) if c}
                      for j, pj in enumerate(jobs)}
        self.utility_log.append((now, {pj.id: float(result.utility[j])
                                       for j, pj in enumerate(jobs)}))

    def _grants_from(self, views: list[tuple[JobView, _Phases]], jobs: list[PlacementJob],
                     up: list[Any], result: Placement,
                     running: dict[str, dict[tuple[int, int], int]],
                     col: dict[int, int]) -> tuple[Grant, ...]:
        """Job slots as grants, lowest utility first (§3.5); ties keep arrival order."""
        keys = [order_key(float(result.utility[j]), pj.s_req) for j, pj in enumerate(jobs)]
        order = sorted(range(len(jobs)), key=lambda j: keys[j])
        grants: list[Grant] = []
        for j in order:
            job, ph = views[j]
            if ph.map is not None:
                for i in np.flatnonzero(result.maps[j]):
                    grants.append(Grant(job.id, int(result.maps[j, i]), ph.map.name,
                                        frozenset((up[i].id,))))
            if ph.reduce is not None:
                pinned = np.zeros(len(up), dtype=np.int64)
                for (si, mi), n in running.get(job.id, {}).items():
                    if si == ph.reduce.index and mi in col:
                        pinned[col[mi]] += n
                for i in np.flatnonzero(result.reducers[j]):
                    grants.append(Grant(job.id, int(result.reducers[j, i] + pinned[i]),
                                        ph.reduce.name, frozenset((up[i].id,))))
        return tuple(grants)


def _up_rows(snapshot: ClusterSnapshot, names: tuple[str, ...]) -> np.ndarray:
    """The up machines' declared capacities over ``names``, in machine order (a new array)."""
    rows = [i for i, m in enumerate(snapshot.machines) if m.up]
    return snapshot.capacity_matrix(names)[rows]


def _vector(amounts: Any, names: tuple[str, ...]) -> np.ndarray:
    """A demand (``Resources`` or a plain mapping) as a vector over ``names``."""
    get = amounts.get
    return np.array([float(get(r, 0.0)) for r in names], dtype=float)
