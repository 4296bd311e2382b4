"""SchedulerCore: stimuli in, commands out — the functional core shared by every backend.

``handle(now, stimuli)``:

1. applies the stimuli as state transitions (``transitions``: one handler per stimulus, each
   move checked against its lifecycle table);
2. if any stimulus is a trigger the policy asked for, runs the decision pipeline (``_decide``):
   a frozen ``ClusterSnapshot`` (``views``), ``policy.decide`` (timed), ``validate_decision``,
   and the install into the grant table (``grants``), whose ``kill_excess`` grants imply
   kill-and-requeue preemptions;
3. dispatches (``dispatch``): offers free capacity to the installed grants in order, never
   over-committing a machine's declared resources, and returns ``Launch`` / ``Preempt``.

The accounts (busy time, capacity integral, cost, attempts, the timeline) are the ``ledger``'s,
fed by the transitions; ``liveness`` says when a run can stop.  ``finish_one`` is ``handle``
for a task completion alone at its instant, without building the batch: the simulator's hot
path, through the same ``Transitions.finished``.

Task durations reach policies as each stage's ``expected_duration``.  With
``estimates="declared"`` (the simulator's default) that is what the job declares: the stage's
``estimate`` or its tasks' mean duration, i.e. perfect knowledge.  With ``estimates="online"``
(live runs, and simulations that want to behave like them) the declared value is only a
prior: once a task of a stage completes, the stage's expected duration becomes the running mean
of the attempt times observed for that job and stage, as the papers' schedulers estimate it.

The core knows nothing about clocks, processes or event queues: the simulator and the live
backends drive it with the same stimuli.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final

from mypy_extensions import mypyc_attr

from utilon.core import liveness
from utilon.core.decision import Decision
from utilon.core.dispatch import Dispatcher
from utilon.core.feasibility import check_workload
from utilon.core.grants import GrantTable
from utilon.core.invariants import check_invariants
from utilon.core.ledger import KILLED, Ledger
from utilon.core.make import task_finished
from utilon.core.messages import (
    CapacityChanged,
    Command,
    JobCancelled,
    JobSubmitted,
    MachineAdded,
    Stimulus,
    TaskFailed,
    TaskFinished,
    TaskRef,
    Tick,
    Trigger,
)
from utilon.core.policy import Policy
from utilon.core.records import Attempt, FastPaths
from utilon.core.snapshot import ClusterSnapshot
from utilon.core.state import CoreStats, JobRT, MachineRT
from utilon.core.story import Story
from utilon.core.timeline import Timeline
from utilon.core.tolerance import EPS
from utilon.core.transitions import Transitions
from utilon.core.validate import validate_decision
from utilon.core.views import Views
from utilon.errors import IllegalTransition
from utilon.model.cluster import Cluster
from utilon.model.job import Job

# Triggers after which only the machines that freed up need offering (if no policy call).
_QUIET: Final = frozenset({Trigger.TASK_FINISHED, Trigger.TICK})
_JUST_FINISHED: Final = frozenset({Trigger.TASK_FINISHED})
_ARRIVAL_ONLY: Final = frozenset({Trigger.ARRIVAL})
ESTIMATE_MODES: Final = ("declared", "online")
MAX_IDLE_TICKS: Final = liveness.MAX_IDLE_TICKS


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class SchedulerCore:
    def __init__(
        self,
        cluster: Cluster,
        policy: Policy,
        *,
        record_attempts: bool = True,
        validate: bool = False,
        timer: Callable[[], float] = time.perf_counter,
        on_decision: Callable[[float, ClusterSnapshot, Decision], None] | None = None,
        estimates: str = "declared",
    ) -> None:
        if estimates not in ESTIMATE_MODES:
            raise ValueError(f"estimates must be one of {ESTIMATE_MODES}, got {estimates!r}")
        self.online = estimates == "online"
        self.cluster = cluster
        self.policy = policy
        self.names = cluster.resource_names
        self.slot_resource = cluster.slot_resource
        self.validate = validate
        self._timer = timer
        self._on_decision = on_decision
        # the policy's triggers are read once, here (and: is it called at every completion?)
        self._triggers: frozenset[Trigger] = policy.triggers
        self._on_finish = Trigger.TASK_FINISHED in self._triggers
        policy.bind(cluster)
        self.stats = CoreStats()
        self.fast = FastPaths()  # the shortcuts' switches and hit counts (not an output)
        machines = [MachineRT(i, m, self.names, m.id not in cluster.initially_down)
                    for i, m in enumerate(cluster.machines)]
        self.ledger = Ledger(self.names, self.names.index(self.slot_resource), record_attempts)
        self.ledger.timeline.machine_ids.extend(m.id for m in machines)
        self.ledger.capacity_changed(0.0, machines)
        self.grants = GrantTable(policy.order_key if policy.order_only else None, self.fast)
        self.dispatcher = Dispatcher(machines, self.grants, self.stats, self.names, validate)
        self.views = Views(self.names, self.slot_resource, policy.uses_free_capacity,
                           policy.uses_placement, self.online)
        self.story = Story()  # story: the per-job log (core/story.py)
        # finish_one's ``touched``: one list, refilled per completion (``dispatch`` only reads
        # it during the call), not a list allocated per task event
        self._freed: list[int] = [0]
        self.state = Transitions(machines, self.grants, self.dispatcher, self.ledger,
                                 self.views, self.stats, self.online, policy.job_finished,
                                 self.story)

    # -- the state, as the backends and the metrics read it -------------------------------
    @property
    def now(self) -> float:
        return self.state.now

    @property
    def jobs(self) -> dict[str, JobRT]:
        """Every job ever submitted, in arrival order."""
        return self.state.jobs

    @property
    def active(self) -> dict[str, JobRT]:
        """The jobs submitted and not finished (nor cancelled), in arrival order."""
        return self.state.active

    @property
    def machines(self) -> list[MachineRT]:
        return self.state.machines

    @property
    def decision(self) -> Decision:
        """The installed decision."""
        return self.grants.decision

    @property
    def infeasible(self) -> dict[str, str]:
        return self.grants.infeasible

    @property
    def warnings(self) -> list[str]:
        return self.dispatcher.warnings

    @property
    def record_attempts(self) -> bool:
        return self.ledger.record_attempts

    @property
    def attempts(self) -> list[Attempt]:
        return self.ledger.attempts

    @property
    def timeline(self) -> Timeline:
        return self.ledger.timeline

    @property
    def busy(self) -> list[float]:
        """Declared resource-seconds of every attempt so far, per resource."""
        return self.ledger.busy

    def capacity_integral(self, until: float) -> list[float]:
        """Integral of the up machines' declared capacity from 0 to ``until``."""
        return self.ledger.capacity_integral(until)

    def tasks_on(self, machine: int) -> list[TaskRef]:
        return self.state.tasks_on(machine)

    def check_workload(self, jobs: Sequence[Job]) -> None:
        """Refuse, before a run, a workload with a job that can never run on this cluster
        under this policy (``feasibility.Unrunnable``, naming the job, stage and why)."""
        check_workload(self.cluster, jobs, self.policy, vectors=self.state.stage_vectors)

    def stuck(self) -> bool:
        return liveness.stuck(self.state.active, self.state.machines)

    def after_tick(self, busy: bool, more: bool, idle_ticks: int) -> tuple[int, bool, str]:
        return liveness.after_tick(self.state.active, self.state.machines, busy, more,
                                   idle_ticks)

    def check_invariants(self) -> None:
        """Cross-check every counter against the underlying records (slow; for tests)."""
        check_invariants(self.state, self.dispatcher, self.grants)

    # -- stimuli in, commands out ---------------------------------------------------------
    def handle(self, now: float, stimuli: Sequence[Stimulus]) -> list[Command]:
        """Apply everything that happened at ``now``; return what the backend must do."""
        state = self.state
        if now < state.now - EPS:
            raise IllegalTransition(f"time went backwards: {now} after {state.now}")
        state.now = now
        cmds: list[Command] = []
        triggers: set[Trigger] = set()
        touched: list[int] = []
        state.arrived = []
        items: Sequence[object] = stimuli  # (anything else is refused below, by name)
        for s in items:
            if type(s) is TaskFinished:
                job = state.active.get(s.task.job)
                run = job.running.pop(s.task, None) if job is not None else None
                if job is None or run is None:
                    # it raced a kill or a machine loss: the core already re-queued it
                    self.stats.stale += 1
                    continue
                st = state.finished(job, s.task, run)
                self.fast.general_finishes += 1
                touched.append(run.machine)
                triggers.add(Trigger.TASK_FINISHED)
                if st.done == st.total:
                    state.stage_finished(job, st, triggers)
            elif type(s) is JobSubmitted:
                state.submitted(s.job)
                triggers.add(Trigger.ARRIVAL)
            elif type(s) is TaskFailed:
                if state.failed(s.task, s.reason, cmds):
                    triggers.add(Trigger.TASK_FAILED)
            elif type(s) is CapacityChanged:
                change = s.change
                state.capacity_changed(change.machine, change.action, change.factor, cmds)
                triggers.add(Trigger.CAPACITY)
            elif type(s) is Tick:
                triggers.add(Trigger.TICK)
            elif type(s) is MachineAdded:
                state.machine_added(s.machine)
                triggers.add(Trigger.CAPACITY)
            elif type(s) is JobCancelled:
                if state.cancelled(s.job, s.reason, cmds):
                    triggers.add(Trigger.JOB_FINISHED)
            else:
                raise IllegalTransition(f"unknown stimulus {s!r}")
        return self._respond(frozenset(triggers), touched, cmds)

    def finish_one(self, now: float, ref: TaskRef) -> list[Command]:
        """Exactly ``handle(now, [TaskFinished(ref)])``, without building the batch: the
        simulator's hot path, a task completion alone at its instant.  The completion is the
        same ``Transitions.finished``; a stage that finishes (a trigger more) or a check to
        make takes ``handle`` itself."""
        state = self.state
        job = state.active.get(ref.job)
        if job is None or self.validate or now < state.now - EPS:
            return self.handle(now, [task_finished(task=ref)])
        run = job.running.get(ref)  # (get and del: native operations; pop with a default is not)
        st = job.stages[ref.stage]
        if run is None or st.done + 1 == st.total:
            return self.handle(now, [task_finished(task=ref)])
        del job.running[ref]
        state.now = now
        state.finished(job, ref, run)
        freed = self._freed
        freed[0] = run.machine
        return self._respond(_JUST_FINISHED, freed, [])

    def _respond(self, triggers: frozenset[Trigger], touched: list[int],
                 cmds: list[Command]) -> list[Command]:
        """After the stimuli of one instant: decide if a trigger asks for it, dispatch."""
        grants = self.grants
        now = self.state.now
        if triggers is _JUST_FINISHED:  # (finish_one's: the two set tests, precomputed)
            decide = self._on_finish
            quiet = True
        else:
            decide = not triggers.isdisjoint(self._triggers)
            quiet = triggers <= _QUIET
        if decide and self.state.active:
            self._decide(triggers, cmds)
            self.dispatcher.dispatch(None, now, cmds)
        elif grants.widen or not quiet:
            self.dispatcher.dispatch(None, now, cmds)  # the ready set changed: anywhere
        elif touched and (grants.hungry or grants.backfill):
            self.dispatcher.dispatch(touched, now, cmds)  # (else a no-op)
        grants.widen = False
        if self.validate:
            self.check_invariants()
        return cmds

    # -- the decision pipeline ------------------------------------------------------------
    def snapshot(self, triggers: frozenset[Trigger] = frozenset()) -> ClusterSnapshot:
        state = self.state
        return self.views.snapshot(state.now, triggers, state.machines, state.active)

    def _decide(self, triggers: frozenset[Trigger], cmds: list[Command]) -> None:
        state = self.state
        grants = self.grants
        if (grants.in_order and state.arrived and not self.validate
                and self._on_decision is None  # a decision hook sees decide()'s every call
                and triggers & self._triggers == _ARRIVAL_ONLY):
            # an order-only policy's arrivals that join the end of its order: the decision
            # decide() would return, appended without calling it (timed and counted as one)
            t0 = self._timer()
            new = grants.extend_order(state.arrived, state.active, self.views.job_view)
            if new:
                self.stats.decide_seconds.append(self._timer() - t0)
                self.stats.decisions += 1
                self.story.extended(state.now, self.stats.decisions, grants.decision,  # story:
                                    new)
                return
        snap = self.snapshot(triggers)
        t0 = self._timer()
        decision = self.policy.decide(snap)
        self.stats.decide_seconds.append(self._timer() - t0)
        self.stats.decisions += 1
        validate_decision(decision, snap, self.policy.name, state.active)
        if decision.solver_seconds is not None:
            self.stats.solver_seconds.append(decision.solver_seconds)
        if self._on_decision is not None:
            self._on_decision(state.now, snap, decision)
        self.story.decided(state.now, self.stats.decisions, decision, state.active)  # story:
        self.dispatcher.set_slot_limit(decision.slot_limit)
        for job, ref in grants.install(decision, state.active, state.machine_index):
            state.requeue(job, ref, KILLED, cmds)
        grants.decided(decision)
