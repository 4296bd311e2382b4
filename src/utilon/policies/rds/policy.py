"""``rds``: RDS, resource- and deadline-aware scheduling with receding-horizon control.

Paper: D. Cheng, X. Zhou, Y. Xu, L. Liu, C. Jiang, "Deadline-Aware MapReduce Job Scheduling
with Dynamic Resource Availability", IEEE TPDS 30(4), 2019 (``rds.txt``).  One control step
every ``interval`` seconds (10 minutes, §5.2):

1. **Measure** (§3.2.2): each job's progress in the last interval (the fraction of its
   task-seconds completed) and the capacity it held (slots × speed, sampled at every policy
   call); one RLS step of its kind's fuzzy model (``progress.py``).
2. **Predict capacity** (§4): the predictor observes the mean effective capacity of the last
   interval and forecasts the next H_p (``predict.py``); ``oracle`` reads the cluster's
   timeline (the "ideal scheduler" of §2.2).
3. **Optimize** (§3.1, Eq. 3): every active job becomes a row of the receding-horizon QP
   (``optimizer.py``): its fuzzy model linearized at its operating point gives progress per
   unit of map and reduce allocation; its reference is the uniform per-interval trajectory from
   its progress now to 1 at its deadline (§6.6: "the per-interval deadline is the ratio of the
   overall deadline and the number of control intervals"), recomputed each step, and Eq. 3
   compares each interval's progress with that trajectory's increment over the interval
   (``tracking: interval``; ``cumulative`` compares cumulative progress, our reading before
   issue 22); its weight is ω_j × δ_j (Eq. 4, the job's utility relative to its value on
   time — for a ``soft_hard`` utility with hard = 2 × soft that is exactly δ).  Eq. 4 is a
   function of the job's *finish time* y_j, which a controller can only predict: δ is read at
   the earliest finish the job can still reach (all the forecast capacity, at its model's
   speed; ``order.remaining_time``), or at the step's start if that is later (``decay:
   finish``, issue 44).  Before issue 44 it was read at the step's start alone (``decay:
   step``), as if any job could still finish at once: a job that could no longer meet its
   soft bound kept the full weight, and the QP spread the shortfall over it too (10-15% more
   penalty on 5 solar days in both modes, docs/reproduction-rds.md).  Once the soft
   bound has passed the reference aims at the hard bound, after that at "as soon as possible"
   (with δ = 0 such a job only gets capacity nobody else wants). The first step is applied.
4. **Job management and Algorithm 1** (§4.3, ``slots.py``).

Between control steps the policy is called at arrivals (fast path; and a re-plan when the
cluster would otherwise idle — no plan covers a newcomer on an idle cluster), at task
completions (Algorithm 1's heartbeat) and at capacity changes (targets are re-expressed in
the new slot size r_slot = r_a / slots).

Choices the paper leaves open are listed in docs/policies.md#rds: progress is measured in
task-seconds at task granularity, done tasks whole and running ones by how long they have
run times the current speed (Hadoop's progress score counts running tasks' fraction; before
issue 22 they counted half); the job's "input size" d_j is its total declared task-seconds;
the fuzzy model is trusted within [½, 2] × the ideal fluid law u·Δ/d_j (gains, and no free
progress), so that one bad fit cannot starve or flood a job; the NARX lag is folded into the
offset at the operating point (its coefficient is not identifiable from steady runs); the
reference ends a critical path before the bound; δ has a floor ``late_weight``;
``progress_error`` injects the model error of Fig. 10b as a multiplicative N(0, σ)
perturbation of each job's gain at each step.

``objective`` selects Eq. 3 as written (``paper``, the default) or one of two named variants
of issue 22 (not in the paper; docs/policies.md#rds and docs/reproduction-rds.md):
``deadline`` (references as soon as possible, weights by deadline rank, Algorithm 1 by soft
bound, a job the plan finishes within the interval runs as wide as it can) and
``tardiness`` (no QP: a sequence in weighted-modified-due-date order over the remaining time
the progress model and the capacity forecast predict, ``order.py``).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from utilon.core.decision import Decision
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView
from utilon.errors import ParameterError
from utilon.model.cluster import Cluster
from utilon.policies.base import EVENT_TRIGGERS, Policy, register
from utilon.policies.rds.accuracy import JobHistory, record_finish
from utilon.policies.rds.capacity import CapacityProfile, effective_capacity
from utilon.policies.rds.optimizer import TRACKING, RhcProblem, solve_rhc
from utilon.policies.rds.order import remaining_time, wmdd_key
from utilon.policies.rds.predict import PredictionLog, Predictor, make_predictor, predictor_names
from utilon.policies.rds.progress import (
    FLUID_BAND,
    CompletionLog,
    ProgressModel,
    ProgressSample,
    bounded_progress,
)
from utilon.policies.rds.slots import dynamic_slot_grants

PAPER_P = (0.0107, 0.0096, 0.0132)  # §5.2, map-allocation change penalties per control step
PAPER_Q = (0.0173, 0.0168, 0.0194)  # §5.2, reduce
OFFSET_BAND = 0.05  # progress at zero allocation: in [-0.05, 0], never free progress
# Eq. 3 as written; the deadline-aware variant (EDF order); the tardiness-aware one (WMDD)
OBJECTIVES = ("paper", "deadline", "tardiness")
MODELS = ("kind", "job")  # RLS adapts the kind's shared model, or each job's own copy
# where Eq. 4's δ is read: at the job's earliest predicted finish (issue 44), or at the start
# of each horizon step (the reading before issue 44)
DECAYS = ("finish", "step")


def job_work(job: JobView, now: float, speed: float) -> tuple[float, float]:
    """(total, done) task-seconds of a job, measured at task granularity.

    Like Hadoop's progress score, running tasks count for the part they have done, so that
    progress does not jump by a whole task at each completion: how long they have run
    (``StageView.elapsed``) times ``speed``, the work one slot-second delivers now (each
    stage's running tasks capped at 99% of their expected work).  Before issue 22 running
    tasks counted half their expected work whatever their age (scale-up: one-interval
    progress error of the fluid law 5.9% -> 1.8%, docs/reproduction-rds.md)."""
    total = done = 0.0
    for s in job.stages:
        total += s.total * s.expected_duration
        running = min(s.elapsed(now) * speed, 0.99 * s.running * s.expected_duration)
        done += s.done * s.expected_duration + running
    return total, done


class PhaseCounts(NamedTuple):
    """Task counts of a job's map-like stages and of its reduce stages."""

    running_map: int
    running_reduce: int
    done_map: int
    done_reduce: int
    remaining_map: int
    remaining_reduce: int


def phase_counts(job: JobView) -> PhaseCounts:
    c = [0] * 6
    for s in job.stages:
        r = 1 if s.kind == "reduce" else 0
        c[r] += s.running
        c[2 + r] += s.done
        c[4 + r] += s.remaining
    return PhaseCounts(*c)


@dataclass
class _Track:
    """What RDS remembers about one job between control steps."""

    kind: str
    size: float
    progress: float = 0.0  # cumulative progress at the last control step
    last_step: float = 0.0  # progress made in the interval before it (y(t - 1))
    since: float = 0.0  # time of the last control step that measured this job
    acc_map: float = 0.0  # ∫ map allocation (slots × speed) dt since then
    acc_reduce: float = 0.0
    target_map: float = 0.0
    target_reduce: float = 0.0
    total_map: int = 0
    total_reduce: int = 0
    hist: JobHistory | None = None  # for the completion-time accuracy (accuracy.py)
    model: ProgressModel | None = None  # the job's own model (``models: job``)
    done_map: int = 0  # done tasks at the previous policy call
    done_reduce: int = 0
    # the fluid law's gain over the progress model's (map, reduce) at the last control step
    slowdown: tuple[float, float] = (1.0, 1.0)


@register
class Rds(Policy):
    name = "rds"
    summary = ("RDS: receding-horizon QP over predicted capacity and fuzzy job-progress "
               "models, dynamic slots (Cheng et al., TPDS 2019)")
    paper = "rds"
    triggers = EVENT_TRIGGERS | {Trigger.TICK, Trigger.TASK_FINISHED}

    def __init__(self, interval: float = 600.0, horizon: int = 3, control_horizon: int = 0,
                 predictor: str = "arima", P: tuple[float, ...] = PAPER_P,
                 Q: tuple[float, ...] = PAPER_Q, miss_weight: float = 1.0,
                 fast_path: bool = True, work_conserving: bool = True,
                 progress_error: float = 0.0, seed: int = 0, profile: str = "",
                 history: float = 7 * 86400.0, late_weight: float = 0.1,
                 tracking: str = "interval", objective: str = "paper",
                 urgency: float = 4.0, models: str = "kind", decay: str = "finish") -> None:
        if decay not in DECAYS:
            raise ValueError(f"decay must be one of {', '.join(DECAYS)}, got {decay!r}")
        self.decay = decay
        if models not in MODELS:
            raise ValueError(f"models must be one of {', '.join(MODELS)}, got {models!r}")
        self.models = models
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, "
                             f"got {objective!r}")
        if not urgency >= 1:
            raise ValueError("urgency must be >= 1 (the weight ratio between deadline ranks)")
        self.objective = objective
        self.urgency = urgency
        if tracking not in TRACKING:
            raise ValueError(f"tracking must be one of {', '.join(TRACKING)}, got {tracking!r}")
        if not interval > 0:
            raise ValueError("interval must be > 0 seconds")
        if horizon < 1:
            raise ValueError("horizon (H_p) must be >= 1")
        if control_horizon < 0 or control_horizon > horizon:
            raise ValueError("control_horizon (H_c) must be between 1 and horizon (0: = H_p)")
        if predictor not in predictor_names():
            raise ValueError(f"unknown predictor {predictor!r}; valid: "
                             f"{', '.join(predictor_names())}")
        if not P or not Q or min(*P, *Q) < 0:
            raise ValueError("P and Q must be non-empty lists of weights >= 0")
        if min(progress_error, miss_weight, history, late_weight) < 0:
            raise ValueError("progress_error, miss_weight, history and late_weight must be "
                             ">= 0")
        self.interval = float(interval)
        self.horizon = horizon
        self.control_horizon = control_horizon
        self.predictor = predictor
        self.P = tuple(P)
        self.Q = tuple(Q)
        self.miss_weight = miss_weight
        self.fast_path = fast_path
        self.work_conserving = work_conserving
        self.progress_error = progress_error
        self.seed = seed
        self.profile = profile
        self.history = float(history)
        self.late_weight = late_weight
        self.tracking = tracking
        self.tick = self.interval
        self._hc = control_horizon or horizon
        self._models: dict[str, ProgressModel] = _load_profile(profile) if profile else {}
        self._rng = np.random.default_rng(seed)
        self._predictor: Predictor | None = (None if predictor == "oracle"
                                             else make_predictor(predictor))
        self._truth: CapacityProfile | None = None
        self._tracks: dict[str, _Track] = {}
        self._fast: list[str] = []
        self._planned = False
        self._last_call: float | None = None
        self._last_rslot = 1.0
        self._cap_acc = 0.0
        self._cap_since: float | None = None
        self._observed = 0
        self._last_cap = 0.0
        self._plan_cap: float | None = None  # mean forecast capacity of the last plan
        self.capacity_log = PredictionLog(self.interval)
        self.completion_log = CompletionLog()
        self.planned_log = CompletionLog()  # the same forecasts under the planned allocation
        self.solver_calls = 0
        self.fallbacks = 0  # the solver failed: a heuristic allocation was used
        self.not_proven = 0  # HiGHS stopped early with a feasible point (kept)
        self.step_log: list[tuple[float, float]] = []  # (predicted, measured) progress

    # -- the core tells us the cluster (for the oracle) ----------------------------------------
    def bind(self, cluster: Cluster) -> None:
        self._truth = CapacityProfile.from_cluster(cluster)

    # -- the decision ----------------------------------------------------------------------------
    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        now = snapshot.now
        r_a, slots = effective_capacity(snapshot.machines, snapshot.slot_resource)
        r_slot = r_a / slots if slots > 0 else self._last_rslot
        self._integrate(snapshot, now)
        live = {j.id for j in snapshot.jobs}
        for gone in [k for k in self._tracks if k not in live]:
            self._finished(gone, now)
        self._fast = [i for i in self._fast if i in live]
        for j in snapshot.jobs:
            if j.id not in self._tracks:
                self._admit(j, now)
        solver_s: float | None = None
        if Trigger.TICK in snapshot.triggers or not self._planned or self._idle(snapshot, r_a):
            solver_s = self._control(snapshot, now, r_a, r_slot,
                                     measure=Trigger.TICK in snapshot.triggers)
        targets = {k: t.target_map + t.target_reduce for k, t in self._tracks.items()}
        priority = None
        if self.objective == "deadline":
            priority = {j.id: j.goal for j in snapshot.jobs}
        elif self.objective == "tardiness":
            priority = self._wmdd(snapshot.jobs, now, r_a, r_slot)
            # one sequence over every active job, a newcomer between control steps included
            targets = {j.id: math.inf for j in snapshot.jobs}
        decision = dynamic_slot_grants(snapshot.jobs, targets, self._fast, r_slot,
                                       work_conserving=self.work_conserving,
                                       priority=priority,
                                       capped=self.objective != "tardiness")
        self._last_rslot = r_slot
        self._last_cap = r_a
        if solver_s is None:
            return decision
        return Decision(grants=decision.grants, backfill=decision.backfill,
                        solver_seconds=solver_s)

    def _wmdd(self, jobs: tuple[JobView, ...] | list[JobView], now: float, r_a: float,
              r_slot: float) -> dict[str, float]:
        """The ``tardiness`` order (``order.py``), recomputed at every call as EDF-P's is:
        each job's remaining time at the capacity the last plan forecast, slowed down or
        sped up as its progress model says."""
        cap = self._plan_cap if self._plan_cap is not None else r_a
        return {j.id: wmdd_key(j, now, remaining_time(j, cap, r_slot,
                                                      self._tracks[j.id].slowdown))
                for j in jobs}

    def _integrate(self, snapshot: ClusterSnapshot, now: float) -> None:
        """Accumulate each job's allocation and the capacity since the previous call.

        The policy is called at every task completion and capacity change, and tasks start
        only right after a call; so between two calls a job ran exactly the tasks running
        now plus those that finished now (a snapshot alone would miss a wave of tasks that
        all end at this instant)."""
        first = self._last_call is None
        dt = 0.0 if first else now - self._last_call  # type: ignore[operator]
        self._cap_acc += dt * self._last_cap
        seen = set()
        for j in snapshot.jobs:
            t = self._tracks.get(j.id)
            if t is None:
                continue
            seen.add(j.id)
            rm, rr, dm, dr, _, _ = phase_counts(j)
            if dt > 0:
                t.acc_map += dt * self._last_rslot * (rm + dm - t.done_map)
                t.acc_reduce += dt * self._last_rslot * (rr + dr - t.done_reduce)
            t.done_map, t.done_reduce = dm, dr
        for jid, t in self._tracks.items():  # finished now: its last tasks ran until now
            if jid not in seen and dt > 0:
                t.acc_map += dt * self._last_rslot * (t.total_map - t.done_map)
                t.acc_reduce += dt * self._last_rslot * (t.total_reduce - t.done_reduce)
        self._last_call = now
        if first:
            self._cap_since = now
            self._warm(now)
    def _warm(self, now: float) -> None:
        """Feed the predictor the capacity measured before the first decision (up to
        ``history`` seconds of it): a real scheduler starts on a cluster with a past."""
        if self._predictor is None or self._truth is None:
            return
        k = min(int(self.history // self.interval), int(now // self.interval))
        if k <= 0:
            return
        ends = now - self.interval * np.arange(k - 1, -1, -1, dtype=float)
        for t, v in zip(ends, self._truth.means(float(ends[0]) - self.interval,
                                                 self.interval, k), strict=True):
            self._predictor.observe(float(t), float(v))
        self._observed += k

    def _admit(self, job: JobView, now: float) -> None:
        total = sum(s.total * s.expected_duration for s in job.stages)
        *_, rem_m, rem_r = phase_counts(job)
        size = max(total, 1e-9)
        self._tracks[job.id] = _Track(kind=job.job_class or "default", size=size, since=now,
                                      total_map=rem_m, total_reduce=rem_r,
                                      hist=JobHistory(size, job.submit))
        if self.fast_path and job.goal < self._next_control(now):
            self._fast.append(job.id)

    def _next_control(self, now: float) -> float:
        if self._cap_since is None:
            return now + self.interval
        k = math.floor((now - self._cap_since) / self.interval) + 1
        return self._cap_since + k * self.interval

    def _idle(self, snapshot: ClusterSnapshot, r_a: float) -> bool:
        """A newcomer arrived and the running queue cannot fill the cluster."""
        if Trigger.ARRIVAL not in snapshot.triggers:
            return False
        usable = 0.0
        for j in snapshot.jobs:
            t = self._tracks[j.id]
            if t.target_map + t.target_reduce > 1e-12 or j.running:
                usable += j.runnable
        return usable * self._last_rslot < r_a - 1e-9

    # -- one control step ------------------------------------------------------------------------
    def _forecast(self, now: float, r_a: float, measure: bool) -> np.ndarray:
        h = self.horizon
        if measure and self._cap_since is not None and now > self._cap_since:
            observed = self._cap_acc / (now - self._cap_since)
            self.capacity_log.actual(now, observed)
            if self._predictor is not None:
                self._predictor.observe(now, observed)
                self._observed += 1
            self._cap_acc, self._cap_since = 0.0, now
        if self._predictor is None and self._truth is not None:
            forecast = self._truth.means(now, self.interval, h)
        elif self._predictor is not None and self._observed:
            forecast = np.asarray(self._predictor.forecast(h), dtype=float)
        else:  # no history yet (or an off-tick plan): the capacity now
            forecast = np.full(h, r_a)
        if measure:
            self.capacity_log.predict(now, forecast)
        return np.maximum(forecast, 0.0)

    def _model(self, kind: str, size: float, r_a: float) -> ProgressModel:
        m = self._models.get(kind)
        if m is None:
            m = ProgressModel.prior([size], self.interval, max_alloc=max(r_a, 1.0))
            self._models[kind] = m
        return m

    def _model_of(self, t: _Track, r_a: float) -> ProgressModel:
        """The model that predicts ``t``'s progress: its kind's, or (``models: job``) the
        job's own copy of it, which RLS adapts to this job's measurements alone."""
        if self.models == "kind":
            return self._model(t.kind, t.size, r_a)
        if t.model is None:
            t.model = self._model(t.kind, t.size, r_a).copy()
        return t.model

    def _control(self, snapshot: ClusterSnapshot, now: float, r_a: float, r_slot: float,
                 *, measure: bool) -> float | None:
        self._planned = True
        capacity = self._forecast(now, r_a, measure)
        jobs = [j for j in snapshot.jobs if j.id not in self._fast]
        n, hp, hc = len(jobs), self.horizon, self._hc
        arr = {k: np.zeros(n) for k in ("progress", "last", "a", "bm", "br", "ar", "capm",
                                        "curm", "curr")}
        cap_reduce = np.zeros((n, hc))
        reference = np.zeros((n, hp))
        weight = np.zeros((n, hp))
        deadline_step = np.full(n, -1, dtype=np.int64)
        steps = np.arange(1, hp + 1)
        for row, j in enumerate(jobs):
            t = self._tracks[j.id]
            total, done = job_work(j, now, r_slot)
            prog = done / total if total > 0 else 1.0
            if measure:
                self._measure(t, prog, now, r_a)
            model = self._model_of(t, r_a)
            run_m, run_r, _, _, rem_m, rem_r = phase_counts(j)
            u_m, u_r = run_m * r_slot, run_r * r_slot
            a, bm, br, ar = model.linearize(u_m, u_r, t.size, t.last_step)
            # The lag's coefficient is not identifiable from runs at steady allocation
            # (y(t-1) and u(t) move together), and across the horizon it would promise
            # progress that carries on without allocation; fold it into the offset at the
            # operating point instead of chaining it through the QP.
            a, ar = a + ar * t.last_step, 0.0
            # the learned model refines the fluid law within a band, so that one bad fit
            # cannot starve a job (gain ~ 0) or promise free progress (large offset)
            fluid = self.interval / t.size
            bm = min(max(bm, FLUID_BAND[0] * fluid), FLUID_BAND[1] * fluid)
            br = min(max(br, FLUID_BAND[0] * fluid), FLUID_BAND[1] * fluid)
            a = min(max(a, -OFFSET_BAND), 0.0)
            t.slowdown = (fluid / bm, fluid / br)
            if self.progress_error > 0:
                noise = max(0.1, 1.0 + self._rng.normal(0.0, self.progress_error))
                bm, br = bm * noise, br * noise
            arr["progress"][row], arr["last"][row] = prog, t.last_step
            arr["a"][row], arr["bm"][row], arr["br"][row] = a, bm, br
            arr["ar"][row] = min(max(ar, -0.9), 0.9)
            arr["capm"][row] = rem_m * r_slot
            # Reduces run only after the maps: while maps remain, the plan has no reduce
            # allocation at any step (map progress stands in for the job's; the next control
            # step re-plans once the reduces are runnable).  Else the QP would "wait" for the
            # reduce phase whenever its model gain looks cheaper.
            if rem_m == 0:
                cap_reduce[row, :] = rem_r * r_slot
                cap_reduce[row, 0] = (run_r + sum(s.ready for s in j.stages
                                                  if s.kind == "reduce")) * r_slot
            arr["curm"][row], arr["curr"][row] = u_m, u_r
            _, steps_left = self._target(j, now)
            reference[row] = np.minimum(1.0, prog + (1.0 - prog) * steps / steps_left)
            if steps_left <= hp:
                deadline_step[row] = steps_left - 1
            # δ of a step (Eq. 4 is a function of the job's finish time y_j): at the earliest
            # finish the job can still reach -- the whole forecast capacity at its model's
            # speed -- or, if later, the step's start (``decay: step``: the start alone)
            at = now + self.interval * (steps - 1)
            if self.decay == "finish":
                cap = float(np.mean(capacity)) if capacity.size else r_a
                at = np.maximum(at, now + remaining_time(j, cap, r_slot, t.slowdown))
            weight[row] = j.weight * np.maximum(_delta(j, at), self.late_weight)
            if self.objective != "paper":
                # as soon as the job can: the progress of a whole interval at the most
                # allocation it can use now; lateness is priced by the deadline order below
                rate = bm * arr["capm"][row] if rem_m else br * cap_reduce[row, 0]
                reference[row] = np.minimum(1.0, prog + max(rate, 1e-9) * steps)
                weight[row] = j.weight
        if self.objective != "paper" and n:
            # deadline: the k-th earliest soft bound weighs urgency^-k, so the QP serves jobs
            # in deadline order where they compete, and still plans with the forecast
            self._plan_cap = float(np.mean(capacity)) if capacity.size else r_a
            if self.objective == "tardiness":
                # A sequence: every job may use all it can, Algorithm 1 serves them in WMDD
                # order (``_wmdd``, recomputed at every call).  No plan splits the cluster:
                # for a regular objective such as Eq. 1 a split is dominated by a sequence
                # (docs/reproduction-rds.md measures the QP's split at 28-30% more penalty).
                for row, j in enumerate(jobs):
                    t = self._tracks[j.id]
                    t.target_map, t.target_reduce = float(arr["capm"][row]), float(
                        cap_reduce[row, 0])
                    if measure and t.since == now and t.hist is not None:
                        t.hist.forecast_point(now, t.progress, t.last_step,
                                              self._model_of(t, r_a))
                return None
            rank = np.argsort(np.argsort([j.goal for j in jobs], kind="stable"),
                              kind="stable")
            weight *= (self.urgency ** -rank.astype(float))[:, None]
        problem = RhcProblem(
            progress=arr["progress"], last_step=arr["last"], reference=reference,
            weight=weight, offset=arr["a"], gain_map=arr["bm"], gain_reduce=arr["br"],
            gain_prev=arr["ar"], cap_map=arr["capm"], cap_reduce=cap_reduce,
            current_map=arr["curm"], current_reduce=arr["curr"], capacity=capacity,
            P=_per_step(self.P, hc), Q=_per_step(self.Q, hc), deadline_step=deadline_step,
            scale=max(r_a, float(capacity.max()), 1.0), miss_weight=self.miss_weight,
            tracking=self.tracking)
        start = time.perf_counter()
        sol = solve_rhc(problem)
        seconds = time.perf_counter() - start
        self.solver_calls += 1
        if sol.status.startswith("fallback"):
            self.fallbacks += 1
        elif sol.status != "optimal":
            self.not_proven += 1
        for row, j in enumerate(jobs):
            t = self._tracks[j.id]
            t.target_map = float(sol.u_map[row, 0])
            t.target_reduce = float(sol.u_reduce[row, 0])
            if self.objective != "paper" and sol.progress[row, 0] >= 1.0 - 1e-6:
                # The plan finishes the job within this interval: let it run as wide as it
                # can (it is capped at what it can use) instead of spreading the same work
                # over the interval.  It finishes sooner and hands its slots on in the
                # variant's order; the jobs after it get no less capacity by the interval's
                # end.  (Eq. 3 is blind to when in the interval progress is made.)
                t.target_map = max(t.target_map, float(arr["capm"][row]))
                t.target_reduce = max(t.target_reduce, float(cap_reduce[row, 0]))
            if measure and t.since == now and t.hist is not None:
                t.hist.forecast_point(now, t.progress, t.last_step, self._model_of(t, r_a),
                                      plan=(sol.u_map[row], sol.u_reduce[row]))
        return seconds

    def _measure(self, t: _Track, prog: float, now: float, r_a: float) -> None:
        """Progress of the interval that just ended, and one RLS step of the kind's model."""
        elapsed = now - t.since
        if elapsed < 0.5 * self.interval:
            return
        scale = self.interval / elapsed  # per-interval units
        y = (prog - t.progress) * scale
        u_m, u_r = t.acc_map / elapsed, t.acc_reduce / elapsed
        if t.hist is not None:
            t.hist.intervals.append((u_m, u_r, elapsed))
        if y > 0 or u_m + u_r > 0:
            model = self._model_of(t, r_a)
            predicted = bounded_progress(model, u_m, u_r, t.size, t.last_step, self.interval)
            self.step_log.append((predicted, y))
            model.update(ProgressSample(u_map=u_m, u_reduce=u_r, size=t.size,
                                        y_prev=t.last_step, y=y))
        t.progress, t.last_step, t.since = prog, y, now
        t.acc_map = t.acc_reduce = 0.0

    def _finished(self, job: str, now: float) -> None:
        """A job left the snapshot: score the model's completion-time forecasts for it."""
        t = self._tracks.pop(job)
        elapsed = now - t.since
        if t.hist is None or not t.hist.forecasts:
            return
        if elapsed > 0:
            t.hist.intervals.append((t.acc_map / elapsed, t.acc_reduce / elapsed, elapsed))
        record_finish(self.completion_log, job, t.model or self._models[t.kind], t.hist, now,
                      self.interval, planned=self.planned_log)

    def _target(self, job: JobView, now: float) -> tuple[float, int]:
        """The bound the reference aims at and the whole control steps left until it.

        The reference must reach 1 a critical path before the bound: once the work is done
        the last task of each remaining stage still takes its time, and no allocation can
        shorten that (our addition; the paper's uniform per-interval deadline ignores it)."""
        tail = sum(s.expected_duration for s in job.stages if s.remaining)
        soft = job.goal
        hard = getattr(job.utility, "hard", None)
        if now < soft - tail:
            goal = soft - tail
        elif hard is not None and now < hard - tail:
            goal = float(hard) - tail
        else:
            return now, 1
        if not math.isfinite(goal):
            return goal, 10**6
        return goal, max(1, math.ceil((goal - now) / self.interval - 1e-9))

    # -- outputs -----------------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        by_step = self.capacity_log.nrmse_by_step()
        return {
            # optimizer wall time goes to summary["timing"] (solver_ms_*), not here
            "optimizer": {"calls": self.solver_calls, "fallbacks": self.fallbacks,
                          "not_proven_optimal": self.not_proven},
            "capacity_prediction": {
                "predictor": self.predictor,
                "nrmse_by_step": {str(k): _round(v) for k, v in by_step.items()},
            },
            "completion_prediction": {
                "nrmse": _round(self.completion_log.nrmse()),
                "nrmse_completion": _round(self.completion_log.nrmse_completion()),
                "predictions": len(self.completion_log.pairs()[0]),
            },
            # the same forecasts replayed with the allocation the QP planned (H_c steps, the
            # last held) instead of the one the job received (accuracy.replay_planned);
            # None for ``objective: tardiness``, which plans no allocation
            "completion_prediction_planned": {
                "nrmse": _round(self.planned_log.nrmse()),
                "nrmse_completion": _round(self.planned_log.nrmse_completion()),
                "predictions": len(self.planned_log.pairs()[0]),
                "never_finish": self.planned_log.unfinished(),
            },
            "progress_model": {
                "kinds": sorted(self._models), "updates": len(self.step_log),
                # one-interval-ahead progress error, before each RLS update
                "step_nrmse": _round(_step_nrmse(self.step_log)),
                "rules": {k: m.rules for k, m in sorted(self._models.items())},
            },
        }


def _round(x: float) -> float | None:
    return None if not math.isfinite(x) else round(float(x), 6)


def _step_nrmse(log: list[tuple[float, float]]) -> float:
    """RMSE of predicted vs measured progress per interval over the mean measured one."""
    if not log:
        return math.nan
    pred, act = np.asarray(log).T
    mean = float(np.mean(act))
    return float(np.sqrt(np.mean((pred - act) ** 2)) / mean) if mean > 0 else math.nan


def _per_step(weights: tuple[float, ...], hc: int) -> np.ndarray:
    """The paper's P and Q have one weight per control step; repeat the last beyond them."""
    w = list(weights[:hc]) + [weights[-1]] * max(0, hc - len(weights))
    return np.asarray(w, dtype=float)


def _delta(job: JobView, times: np.ndarray) -> np.ndarray:
    """Eq. 4's decay: the job's utility at each time relative to its on-time value."""
    on_time = float(job.utility.value(job.submit))
    if on_time <= 0:
        return np.ones(len(times))
    return np.asarray([job.utility.value(float(t)) for t in times]) / on_time


def _load_profile(path: str) -> dict[str, ProgressModel]:
    """Fuzzy models per job kind from a profile file (``utilon.policies.rds.profile``)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return {k: ProgressModel.from_dict(v) for k, v in data["models"].items()}
    except FileNotFoundError:
        raise ParameterError(f"rds: profile file {path} not found; write one with "
                             "utilon.policies.rds.profile (profile_samples, fit_profile, "
                             "write_profile), take one from `utilon reproduce rds` "
                             "(runs/reproduce/rds/profiles/), or drop the parameter") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ParameterError(f"rds: profile file {path} is not a progress-model profile "
                             f"({exc}); regenerate it") from None
