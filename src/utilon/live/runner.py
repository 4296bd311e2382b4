"""LiveRun: the scheduler core driven by a backend on the backend's clock.

The loop mirrors the simulator's: everything that happened by ``now`` is handed to the core as
one batch, in the simulator's phase order (task completions and failures, then capacity changes,
then arrivals, then the control tick), and the core's commands go to the backend.  Job
submissions and the scenario's capacity timeline are released when the backend's clock reaches
their times; ticks follow the simulator's rule (first one a tick after the first submission, the
next one a tick after each).  On the fake backend this reproduces the simulator's stimuli
exactly, which is what the parity test checks.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from utilon.core.messages import (
    CapacityChanged,
    JobSubmitted,
    MachineAdded,
    Stimulus,
    TaskFailed,
    TaskFinished,
    Tick,
)
from utilon.core.policy import Policy
from utilon.core.scheduler import SchedulerCore
from utilon.core.tolerance import missed
from utilon.errors import UtilonError
from utilon.jobs.plan import Verification
from utilon.live.backend import Backend
from utilon.live.catalog import TaskCatalog
from utilon.model.cluster import Cluster
from utilon.model.job import Job

log = logging.getLogger(__name__)
INF = math.inf
_TASK = (TaskFinished, TaskFailed)
_CAPACITY = (CapacityChanged, MachineAdded)


@dataclass(frozen=True)
class LiveProgress:
    now: float
    jobs: int
    submitted: int
    finished: int
    running_tasks: int
    misses: int  # finished late, or still running past their goal
    utility: float  # sum over finished jobs


@dataclass(frozen=True)
class LiveResult:
    core: SchedulerCore
    end_time: float
    events: int
    task_events: int
    wall_seconds: float
    stopped_early: str
    backend: str
    cluster: Cluster
    verification: dict[str, Verification] = field(default_factory=dict)
    peak_usage: dict[str, float] = field(default_factory=dict)


class LiveRun:
    def __init__(
        self,
        cluster: Cluster,
        jobs: Sequence[Job],
        policy: Policy,
        backend: Backend,
        catalog: TaskCatalog,
        *,
        estimates: str = "online",
        timeout: float | None = None,
        validate: bool = False,
        max_wait: float = 0.25,
        progress: Callable[[LiveProgress], None] | None = None,
        on_batch: Callable[[float, list[Stimulus], list[object]], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.jobs = sorted(jobs, key=lambda j: j.submit)  # stable, as in the simulator
        self.policy = policy
        self.backend = backend
        self.catalog = catalog
        self.estimates = estimates
        self.timeout = timeout
        self.validate = validate
        self.max_wait = max_wait
        self._progress = progress
        self._on_batch = on_batch
        self.core: SchedulerCore | None = None

    def run(self) -> LiveResult:
        backend = self.backend
        backend.strict_capacity = not self.policy.overcommits
        try:
            cluster = backend.start(self.cluster, self.catalog)
            check_resources(cluster, self.jobs, backend.name)
            self.core = SchedulerCore(cluster, self.policy, validate=self.validate,
                                      estimates=self.estimates)
            self.core.check_workload(self.jobs)
            result = self._loop(cluster)
        finally:
            backend.close()
        verification = verify_outputs(self.catalog, result.core)
        return LiveResult(result.core, result.end_time, result.events, result.task_events,
                          result.wall_seconds, result.stopped_early, backend.name, cluster,
                          verification, backend.peak_usage())

    def _loop(self, cluster: Cluster) -> LiveResult:
        core = self.core
        assert core is not None
        backend = self.backend
        wall0 = time.perf_counter()
        jobs = self.jobs
        timeline = cluster.timeline
        tick = self.policy.tick
        if tick is not None and tick <= 0:
            raise ValueError("policy tick must be > 0")
        next_tick = jobs[0].submit + tick if (tick is not None and jobs) else INF
        nj = nc = 0
        events = task_events = idle_ticks = 0
        stopped = ""
        last = 0.0
        done_reported = -1
        while True:
            if nj == len(jobs) and not core.active:
                break
            now = backend.now()
            if self.timeout is not None and now >= self.timeout:
                stopped = f"timeout {self.timeout:g} s reached"
                break
            t_arr = jobs[nj].submit if nj < len(jobs) else INF
            t_cap = timeline[nc].time if nc < len(timeline) else INF
            due = min(t_arr, t_cap, next_tick,
                      self.timeout if self.timeout is not None else INF)
            if due == INF and not any(j.running for j in core.active.values()):
                stopped = stopped or "no task can run and nothing will change"
                break
            batch = backend.wait_until(min(due, now + self.max_wait))
            now = backend.now()
            stimuli: list[Stimulus] = [s for s in batch if isinstance(s, _TASK)]
            task_events += len(stimuli)
            stimuli += [s for s in batch if isinstance(s, _CAPACITY)]
            while nc < len(timeline) and timeline[nc].time <= now:
                backend.apply_capacity(timeline[nc])
                stimuli.append(CapacityChanged(timeline[nc]))
                nc += 1
            while nj < len(jobs) and jobs[nj].submit <= now:
                stimuli.append(JobSubmitted(jobs[nj]))
                nj += 1
            ticked = next_tick <= now
            if ticked:
                stimuli.append(Tick())
            if not stimuli:
                continue
            events += len(stimuli)
            last = now
            cmds = core.handle(now, stimuli)
            backend.apply(cmds)
            if self._on_batch is not None:
                self._on_batch(now, stimuli, list(cmds))
            if ticked:
                running = any(j.running for j in core.active.values())
                more = nj < len(jobs) or nc < len(timeline)
                idle_ticks, keep, why = core.after_tick(bool(cmds or running), more,
                                                        idle_ticks)
                next_tick = now + tick if keep else INF  # type: ignore[operator]
                stopped = stopped or why
            if self._progress is not None:
                done = len(core.jobs) - len(core.active)
                if done != done_reported or task_events:
                    done_reported = done
                    self._progress(progress_of(core, now, len(jobs)))
        end = max((j.finish for j in core.jobs.values() if j.finish is not None), default=last)
        if stopped:
            end = max(end, backend.now())
        return LiveResult(core, end, events, task_events, time.perf_counter() - wall0,
                          stopped, backend.name, cluster)


def progress_of(core: SchedulerCore, now: float, total: int) -> LiveProgress:
    misses = 0
    utility = 0.0
    running = 0
    for j in core.jobs.values():
        goal = j.job.utility.goal
        if j.finish is not None:
            utility += j.job.utility.value(j.finish)
        else:
            running += len(j.running)
        # an unfinished job counts once it is past its goal
        misses += goal is not None and missed(j.finish if j.finish is not None else now, goal)
    return LiveProgress(now, total, len(core.jobs), len(core.jobs) - len(core.active),
                        running, misses, utility)


def check_resources(cluster: Cluster, jobs: Sequence[Job], backend: str) -> None:
    """Every resource a task demands must exist on the cluster the backend offers."""
    have = set(cluster.resource_names)
    for job in jobs:
        for st in job.stages:
            for name, amount in st.tasks[0].demand.items:
                if amount > 0 and name not in have:
                    raise UtilonError(
                        f"job {job.id} stage {st.name} demands resource {name!r}, which no "
                        f"machine of the {backend} cluster offers",
                        where=f"job {job.id}",
                        fix=f"demand only {', '.join(sorted(have))}, or give the machines "
                            f"a {name!r} resource")


def verify_outputs(catalog: TaskCatalog, core: SchedulerCore) -> dict[str, Verification]:
    """Check each finished job's output with its kind's verifier."""
    out: dict[str, Verification] = {}
    for job_id, plan in catalog.plans.items():
        rt = core.jobs.get(job_id)
        if rt is None or rt.finish is None:
            out[job_id] = Verification(False, "job did not finish")
        elif plan.verify is None:
            out[job_id] = Verification(None, "this job kind has no verifier")
        else:
            try:
                out[job_id] = plan.verify(catalog.job_dir(job_id))
            except Exception as e:  # a verifier crash is a failed verification, not a crash
                out[job_id] = Verification(False, f"verifier raised {type(e).__name__}: {e}")
    return out
