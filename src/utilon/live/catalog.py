"""What each task of a live run executes: its call, arguments and job directory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utilon.core.messages import Command, Launch, TaskRef
from utilon.jobs.plan import JobPlan, TaskContext
from utilon.model.job import Job
from utilon.model.resources import Resources

SLEEP_CALL = "utilon.jobs.builtin:sleep"


@dataclass(frozen=True)
class TaskSpec:
    call: str
    args: Mapping[str, Any]
    job_dir: Path
    stage: str
    tasks: int
    demand: Resources

    def context(self, ref: TaskRef, attempt: int) -> TaskContext:
        return TaskContext(ref.job, self.stage, ref.index, self.tasks, attempt, self.job_dir,
                           dict(self.args))


@dataclass
class TaskCatalog:
    """Task specs for every job of a run.

    Jobs with a plan run their plan's calls.  Jobs without one (a simulation scenario run
    live) run ``sleep`` tasks of their declared duration, so any scenario can be run live.
    """

    run_dir: Path
    jobs: Sequence[Job]
    plans: Mapping[str, JobPlan] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._by_id = {j.id: j for j in self.jobs}
        self._cache: dict[tuple[str, int], TaskSpec] = {}

    def job_dir(self, job_id: str) -> Path:
        return self.run_dir / "jobs" / job_id

    def job(self, job_id: str) -> Job:
        return self._by_id[job_id]

    def task(self, ref: TaskRef) -> TaskSpec:
        plan = self.plans.get(ref.job)
        st = self._by_id[ref.job].stages[ref.stage]
        if plan is None:  # a plain scenario job: each task sleeps its declared duration
            task = st.tasks[ref.index]
            return TaskSpec(SLEEP_CALL, {"seconds": task.duration}, self.job_dir(ref.job),
                            st.name, len(st.tasks), task.demand)
        key = (ref.job, ref.stage)
        spec = self._cache.get(key)
        if spec is None:
            sp = plan.stages[ref.stage]
            spec = self._cache[key] = TaskSpec(sp.call, sp.args, self.job_dir(ref.job),
                                               sp.name, sp.tasks, st.tasks[0].demand)
        return spec

    def placement_args(self, commands: Sequence[Command]) -> dict[TaskRef, dict[str, Any]]:
        """Extra arguments for launches of stages with a co-location speedup (alsched's
        NBODY): ``colocated`` is true when every task of the stage starts in this batch on
        one machine -- the simulator's rule (``Simulation._colocated``) -- and the task gets
        the speedup ``f`` to emulate what a spread run pays."""
        groups: dict[tuple[str, int], list[Launch]] = {}
        for c in commands:
            if type(c) is Launch:
                st = self._by_id[c.task.job].stages[c.task.stage]
                if st.colocate_speedup != 1.0:
                    groups.setdefault((c.task.job, c.task.stage), []).append(c)
        out: dict[TaskRef, dict[str, Any]] = {}
        for (job, stage), launches in groups.items():
            st = self._by_id[job].stages[stage]
            together = (len(launches) == len(st.tasks)
                        and len({c.machine for c in launches}) == 1)
            for c in launches:
                out[c.task] = {"colocated": together, "colocate_speedup": st.colocate_speedup}
        return out

    def add(self, job: Job, plan: JobPlan | None = None) -> None:
        """A job that arrived after the start (a service's submission)."""
        self._by_id[job.id] = job
        if plan is not None:
            if not isinstance(self.plans, dict):
                self.plans = dict(self.plans)
            self.plans[job.id] = plan

    def prepare_job(self, job: Job) -> None:
        """Create one job's directory and generate its input (if its kind has one)."""
        d = self.job_dir(job.id)
        d.mkdir(parents=True, exist_ok=True)
        plan = self.plans.get(job.id)
        if plan is not None and plan.prepare is not None:
            plan.prepare(d)

    def prepare(self, progress: Any = None) -> None:
        """Create job directories and generate every planned job's input (before the clock
        starts, so data generation never counts against a job's completion time)."""
        for job in self.jobs:
            self.prepare_job(job)
            if progress is not None:
                progress(job.id)
