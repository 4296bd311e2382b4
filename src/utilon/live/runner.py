"""LiveRun: the scheduler core driven by a backend on the backend's clock.

The loop is the simulator's (``sim.loop.Loop``) with the backend as its world: the clock is
the backend's, waited on at most ``max_wait`` at a time; everything that happened by ``now`` is
handed to the core as one batch, in the simulator's phase order (task completions and
failures, then capacity changes, then arrivals, then the control tick), and the core's commands
go to the backend.  Job submissions and the scenario's capacity timeline are released when the
backend's clock reaches their times; ticks follow the simulator's rule (first one a tick after
the first submission, the next one a tick after each).  On the fake backend this reproduces the
simulator's stimuli exactly, which is what the parity test checks.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from utilon.core.messages import Command, Stimulus, TaskFailed, TaskFinished, TaskRef
from utilon.core.policy import Policy
from utilon.core.scheduler import SchedulerCore
from utilon.core.tolerance import missed
from utilon.errors import UtilonError
from utilon.jobs.plan import Verification
from utilon.live.backend import Backend
from utilon.live.catalog import TaskCatalog
from utilon.model.cluster import CapacityChange, Cluster
from utilon.model.job import Job
from utilon.sim.loop import Loop, World

log = logging.getLogger(__name__)
INF = math.inf
_TASK = (TaskFinished, TaskFailed)


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
        wall0 = time.perf_counter()
        world = _LiveWorld(self, core, cluster)
        loop = Loop(core, world, self.jobs, cluster.timeline, self.policy.tick,
                    limited=self.timeout is not None, watched=self._progress is not None,
                    on_batch=self._on_batch)  # type: ignore[arg-type]
        world.loop = loop
        stopped = loop.run()
        end = max((j.finish for j in core.jobs.values() if j.finish is not None),
                  default=loop.last)
        if stopped:
            end = max(end, self.backend.now())
        return LiveResult(core, end, loop.events, world.task_events,
                          time.perf_counter() - wall0, stopped, self.backend.name, cluster)


class _LiveWorld(World):
    """A live run as the loop's world: the backend's clock, waited on ``max_wait`` at a time,
    and the backend its commands go to."""

    def __init__(self, run: LiveRun, core: SchedulerCore, cluster: Cluster) -> None:
        self.run = run
        self.core = core
        self.backend = run.backend
        self.timeout = run.timeout
        self.task_events = 0
        self.done_reported = -1
        self.loop: Loop | None = None

    def wait(self, until: float) -> list[Stimulus]:
        now = self.backend.now()
        if self.timeout is not None:
            until = min(until, self.timeout)
        batch = self.backend.wait_until(min(until, now + self.run.max_wait))
        self.task_events += sum(1 for s in batch if isinstance(s, _TASK))
        return batch

    def now(self) -> float:
        return self.backend.now()

    def task_due(self, payload: object, now: float) -> TaskRef | None:
        raise AssertionError("a live run queues no task events")  # (they are reported)

    def capacity(self, change: CapacityChange, now: float) -> None:
        self.backend.apply_capacity(change)

    def apply(self, now: float, cmds: list[Command]) -> None:
        self.backend.apply(cmds)

    def running(self) -> bool:
        return any(j.running for j in self.core.active.values())

    def expects(self) -> bool:
        return self.running()  # a running task will end, and say so

    def limit(self, due: float, pending: bool) -> str:
        if self.timeout is not None and self.backend.now() >= self.timeout:
            return f"timeout {self.timeout:g} s reached"
        return ""

    def after(self, now: float) -> str:
        progress = self.run._progress
        if progress is not None:
            core = self.core
            done = len(core.jobs) - len(core.active)
            if done != self.done_reported or self.task_events:
                self.done_reported = done
                progress(progress_of(core, now, len(self.run.jobs)))
        return ""


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
