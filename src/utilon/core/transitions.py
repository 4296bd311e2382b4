"""The core's state machine: the jobs, tasks and machines, and one handler per stimulus.

Every state change goes through the tables of ``model.lifecycle`` (``check_move``): a task
WAITING -> READY when its stage unlocks, READY -> RUNNING at a launch (``Dispatcher.launch``),
RUNNING -> DONE at a completion (``finished``, the one definition of what a completion does)
and RUNNING -> READY when it is killed, lost with its machine or failed (``requeue``); a job
QUEUED -> RUNNING -> DONE, or CANCELLED; a machine UP <-> DOWN.  Every end of an attempt goes
through ``_release``: the machine (``Dispatcher.give``), the job's grants
(``GrantTable.released``) and the accounts (``Ledger.attempt_ended``) each hear of it once.

The handlers return what the stimulus changed as ``Trigger``s, so that the caller
(``SchedulerCore.handle``) decides whether to call the policy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from mypy_extensions import mypyc_attr

from utilon.core.dispatch import Dispatcher
from utilon.core.feasibility import StageVectors, demand_vectors
from utilon.core.grants import GrantTable
from utilon.core.ledger import DONE, FAILED, KILLED, LOST, Ledger
from utilon.core.make import preempt
from utilon.core.messages import Command, TaskRef, Trigger
from utilon.core.state import CoreStats, JobRT, MachineRT, Running, StageRT
from utilon.core.story import Story
from utilon.core.timeline import OUTCOMES
from utilon.core.tolerance import EPS
from utilon.core.views import Views
from utilon.errors import IllegalTransition
from utilon.model.cluster import CapacityAction, Machine
from utilon.model.job import Job
from utilon.model.lifecycle import JobState, MachineState, TaskState, check_move

_RUNNING: Final = TaskState.RUNNING
_READY: Final = TaskState.READY
_DONE: Final = TaskState.DONE
_UP: Final = MachineState.UP


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class Transitions:
    def __init__(self, machines: list[MachineRT], grants: GrantTable, dispatcher: Dispatcher,
                 ledger: Ledger, views: Views, stats: CoreStats, online: bool,
                 job_finished: Callable[[str, float], None], story: Story) -> None:
        self.now = 0.0
        self.machines = machines
        self.machine_index = {m.id: m.index for m in machines}
        self.jobs: dict[str, JobRT] = {}  # every job ever submitted, arrival order
        self.active: dict[str, JobRT] = {}  # submitted and not finished, arrival order
        self.arrived: list[JobRT] = []  # the jobs submitted in the batch being handled
        self.grants = grants
        self.dispatcher = dispatcher
        self.ledger = ledger
        self.views = views
        self.stats = stats
        self.online = online  # stage estimates: the mean of the measured attempts
        self.job_finished = job_finished  # the policy's hook
        self.story = story  # the per-job log (core/story.py); its hooks are marked ``# story:``
        self.stage_vectors: StageVectors = {}  # computed by check_workload, taken at submission

    # -- jobs ------------------------------------------------------------------------------
    def submitted(self, job: Job) -> None:
        if job.id in self.jobs:
            raise IllegalTransition(f"job {job.id!r} submitted twice")
        stages = []
        for i, st in enumerate(job.stages):
            known = self.stage_vectors.pop(id(st), None)  # (check_workload's, if it ran)
            vecs = (known[1] if known is not None and known[0] is st
                    else demand_vectors(st, self.dispatcher.names))
            stages.append(StageRT(i, st, vecs, self.ledger.keys_of(vecs)))
            self.dispatcher.note_demands(job.id, vecs)
        index = {st.name: i for i, st in enumerate(job.stages)}
        for i, st in enumerate(job.stages):
            for dep in st.after:
                stages[index[dep]].dependents.append(i)
        rt = JobRT(job, stages, self.ledger.timeline.add_job(job.id))
        self.jobs[job.id] = rt
        self.arrived.append(rt)
        self.active[job.id] = rt
        self.story.submitted(self.now, job)  # story:

    def cancelled(self, job_id: str, reason: str, cmds: list[Command]) -> bool:
        """Kill the job's running tasks and drop it from the active set; False when it is
        unknown or already over (a cancel that raced its last task is a no-op)."""
        job = self.active.get(job_id)
        if job is None:
            self.stats.stale += 1
            return False
        self.story.cancelled(self.now, job_id, reason)  # story:
        for ref in list(job.running):
            self.requeue(job, ref, KILLED, cmds, reason=f"job {reason}")
        for st in job.stages:  # nothing of it may be dispatched again
            st.ready.clear()
            st.view = None
        job.n_ready = 0
        self.grants.touch(job)
        check_move(f"job {job.id}", job.state, JobState.CANCELLED)
        job.state = JobState.CANCELLED
        self._leave(job)
        return True

    def _leave(self, job: JobRT) -> None:
        del self.active[job.id]
        self.grants.job_left(job.id)

    # -- tasks -----------------------------------------------------------------------------
    def finished(self, job: JobRT, ref: TaskRef, run: Running) -> StageRT:
        """RUNNING -> DONE: ``ref`` (already out of ``job.running``) completed at ``now``.
        The one definition of a completion; the caller handles a stage that finished."""
        st = job.stages[ref.stage]
        states = st.states
        idx = ref.index
        if states[idx] is not _RUNNING:  # the table check, inlined: this is the hot path
            check_move(f"task {ref}", states[idx], _DONE)
        states[idx] = _DONE
        st.running -= 1
        st.started_sum = st.started_sum - run.start if st.running else 0.0
        st.done += 1
        st.view = None
        if self.online:  # the stage's estimate becomes the mean of what was measured
            st.observed += 1
            st.observed_sum += self.now - run.start
            st.expected = max(st.observed_sum / st.observed, EPS)
        self._release(job, st, ref, self.machines[run.machine], run.start, DONE)
        self.stats.completed += 1
        return st

    def stage_finished(self, job: JobRT, st: StageRT, triggers: set[Trigger]) -> None:
        """``st``'s last task completed: unlock the stages after it, or finish the job."""
        triggers.add(Trigger.STAGE_FINISHED)
        self.story.stage_done(self.now, job.id, st.stage.name)  # story:
        for di in st.dependents:
            self._unlock(job, job.stages[di])
        if all(s.done == s.total for s in job.stages):
            check_move(f"job {job.id}", job.state, JobState.DONE)
            job.state = JobState.DONE
            job.finish = self.now
            self.story.finished(self.now, job)  # story:
            self._leave(job)
            triggers.add(Trigger.JOB_FINISHED)
            self.job_finished(job.id, self.now)

    def failed(self, ref: TaskRef, reason: str, cmds: list[Command]) -> bool:
        """RUNNING -> READY: a task failed (its gang with it); False if it was not running."""
        job = self.active.get(ref.job)
        if job is None or ref not in job.running:
            self.stats.stale += 1
            return False
        self.story.failed(self.now, ref, reason)  # story:
        self.requeue(job, ref, FAILED, None)
        self._requeue_gang(job, ref.stage, cmds, "gang member failed")
        return True

    def requeue(self, job: JobRT, ref: TaskRef, outcome: int, cmds: list[Command] | None,
                reason: str = "preempted") -> None:
        """RUNNING -> READY: killed (emit Preempt), lost with a machine, or failed."""
        run = job.running.pop(ref)
        st = job.stages[ref.stage]
        check_move(f"task {ref}", st.states[ref.index], _READY)
        st.states[ref.index] = _READY
        st.running -= 1
        st.started_sum = st.started_sum - run.start if st.running else 0.0
        st.ready.appendleft(ref.index)
        st.view = None
        job.n_ready += 1
        m = self.machines[run.machine]
        self._release(job, st, ref, m, run.start, outcome)
        self.story.requeued(self.now, ref, st.stage.name, m.id, OUTCOMES[outcome],  # story:
                            reason)
        if outcome == KILLED:
            self.stats.killed += 1
        elif outcome == LOST:
            self.stats.lost += 1
        else:
            self.stats.failed += 1
        if cmds is not None:
            cmds.append(preempt(task=ref, machine=m.id, reason=reason))

    def _requeue_gang(self, job: JobRT, stage: int, cmds: list[Command], reason: str) -> None:
        """A gang runs whole or not at all: when one member stops, kill the others too."""
        if job.stages[stage].gang:
            for other in [r for r in job.running if r.stage == stage]:
                self.requeue(job, other, KILLED, cmds, reason=reason)

    def _release(self, job: JobRT, st: StageRT, ref: TaskRef, m: MachineRT, start: float,
                 outcome: int) -> None:
        """An attempt of ``ref`` on ``m`` ended: every record that counts it hears of it."""
        self.dispatcher.give(m, st, st.vectors[ref.index])
        job.dirty = True
        self.grants.released(job, ref.stage, m.index)
        self.ledger.attempt_ended(job, st, ref, m, start, self.now, outcome)

    def _unlock(self, job: JobRT, st: StageRT) -> None:
        st.deps_left -= 1
        if st.deps_left:
            return
        st.locked = False
        if any(x is not TaskState.WAITING for x in st.states):
            bad = next(i for i, x in enumerate(st.states) if x is not TaskState.WAITING)
            check_move(f"task {job.id}/{st.stage.name}/{bad}", st.states[bad], _READY)
        st.states = [_READY] * st.total
        st.ready.extend(range(st.total))
        st.view = None
        job.n_ready += st.total
        job.dirty = True
        self.grants.touch(job)

    def tasks_on(self, machine: int) -> list[TaskRef]:
        """The tasks running on machine ``machine`` (an index), in launch order.  Gathered
        from the jobs' running records (a machine keeps only counts, so that a launch and a
        release update no per-machine record of tasks); for a machine that leaves, and tests."""
        found = sorted((run.launch, ref) for job in self.active.values()
                       for ref, run in job.running.items() if run.machine == machine)
        return [ref for _, ref in found]

    # -- machines --------------------------------------------------------------------------
    def capacity_changed(self, machine_id: str, action: CapacityAction, factor: float,
                         cmds: list[Command]) -> None:
        m = self.machines[self.machine_index[machine_id]]
        self.story.capacity(self.now, machine_id, action.value, factor)  # story:
        if action is CapacityAction.JOIN:
            check_move(f"machine {m.id}", m.state, _UP)
            m.state = _UP
        elif action is CapacityAction.LEAVE:
            check_move(f"machine {m.id}", m.state, MachineState.DOWN)
            for ref in self.tasks_on(m.index):
                job = self.active[ref.job]
                if ref not in job.running:
                    continue  # a gang sibling already brought back below
                self.requeue(job, ref, LOST, None)
                self._requeue_gang(job, ref.stage, cmds, "gang member lost")
            m.state = MachineState.DOWN
        elif action is CapacityAction.SCALE:
            used = m.used
            m.scale = factor
            m.cap = tuple(b * factor for b in m.base)
            m.capx = [c + EPS for c in m.cap]
            m.free = [c + EPS - u for c, u in zip(m.cap, used, strict=True)]
        else:
            m.speed = factor
        self.views.machines_changed(m)
        self.ledger.capacity_changed(self.now, self.machines)
        self.dispatcher.refresh_open(m)

    def machine_added(self, machine: Machine) -> None:
        if machine.id in self.machine_index:
            raise IllegalTransition(f"machine {machine.id!r} added twice; a known machine "
                                    "rejoins with a CapacityChanged JOIN")
        self.story.capacity(self.now, machine.id, "add", 1.0)  # story:
        m = MachineRT(len(self.machines), machine, self.dispatcher.names, True)
        self.machines.append(m)
        self.machine_index[m.id] = m.index
        self.ledger.timeline.machine_ids.append(m.id)
        self.views.machines_changed(None)
        self.ledger.capacity_changed(self.now, self.machines)
        self.dispatcher.machine_added(
            m, {v for j in self.active.values() for st in j.stages for v in st.vectors})
