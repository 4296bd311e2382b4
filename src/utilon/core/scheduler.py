"""SchedulerCore: stimuli in, commands out — the functional core shared by every backend.

``handle(now, stimuli)``:

1. applies the stimuli as state transitions, each checked against its lifecycle table;
2. if any stimulus is a trigger the policy asked for, builds a frozen ``ClusterSnapshot``,
   calls ``policy.decide`` (timed), validates the decision and installs it (grants, and the
   kill-and-requeue preemptions that ``kill_excess`` grants imply);
3. dispatches: offers free capacity to the installed grants in order, never over-committing a
   machine's declared resources, and returns ``Launch`` / ``Preempt`` commands.

Task durations reach policies as each stage's ``expected_duration``.  With
``estimates="declared"`` (the simulator's default) that is what the job declares: the stage's
``estimate`` or its tasks' mean duration, i.e. perfect knowledge.  With ``estimates="online"``
(live runs, and simulations that want to behave like them) the declared value is only a
prior: once a task of a stage completes, the stage's expected duration becomes the running mean
of the attempt times observed for that job and stage, as the papers' schedulers estimate it.

The core knows nothing about clocks, processes or event queues: the simulator and the live
backends drive it with the same stimuli.  It keeps the per-job and per-attempt records that the
metrics are computed from, so outputs are the same whichever world produced them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from operator import attrgetter, le
from typing import Final

import numpy as np
from mypy_extensions import mypyc_attr

from utilon.core import vec_native
from utilon.core.decision import Decision, Grant, SlotLimit
from utilon.core.dispatch import NATIVE, Dispatcher
from utilon.core.feasibility import StageVectors, check_workload, demand_vectors, pack
from utilon.core.invariants import check_invariants
from utilon.core.make import grant, job_view, stage_view, task_finished
from utilon.core.messages import (
    CapacityChanged,
    Command,
    JobCancelled,
    JobSubmitted,
    MachineAdded,
    Preempt,
    Stimulus,
    TaskFailed,
    TaskFinished,
    TaskRef,
    Tick,
    Trigger,
)
from utilon.core.policy import Policy
from utilon.core.records import Attempt, FastPaths
from utilon.core.snapshot import ClusterSnapshot, JobView, MachineView
from utilon.core.state import (
    CoreStats,
    GrantState,
    JobRT,
    MachineRT,
    RunningCounts,
    StageRT,
)
from utilon.core.timeline import OUTCOME_CODE, PENDING_ROWS, Timeline
from utilon.core.tolerance import EPS
from utilon.core.validate import validate_decision
from utilon.core.vec import hot_ops
from utilon.errors import IllegalTransition
from utilon.model.cluster import CapacityAction, Cluster, Machine
from utilon.model.job import Job
from utilon.model.lifecycle import JobState, MachineState, TaskState, check_move

log = logging.getLogger(__name__)

INF: Final = float("inf")
_RUNNING: Final = TaskState.RUNNING
_READY: Final = TaskState.READY
_DONE: Final = TaskState.DONE
_TASK_FINISHED: Final = Trigger.TASK_FINISHED
_UP: Final = MachineState.UP
# Triggers after which only the machines that freed up need offering (if no policy call).
_QUIET: Final = frozenset({Trigger.TASK_FINISHED, Trigger.TICK})
_JUST_FINISHED: Final = frozenset({Trigger.TASK_FINISHED})
_DONE_CODE: Final = OUTCOME_CODE["done"]
_PENDING_ROWS: Final = PENDING_ROWS
_ARRIVAL_ONLY: Final = frozenset({Trigger.ARRIVAL})
_NONE: Final = {None}
_slots: Final = attrgetter("slots")
ESTIMATE_MODES: Final = ("declared", "online")
# A tick-driven policy may hold work back on purpose, but not forever: after this many ticks
# with nothing running, nothing launched and no arrival or capacity change ahead, a run stops.
MAX_IDLE_TICKS: Final = 1000


def _scoped(g: Grant) -> bool:
    """Not a plain whole-job grant: a stage, machines, kill_excess or gang."""
    return g.stage is not None or g.machines is not None or g.kill_excess or g.gang


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class SchedulerCore(Dispatcher):
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
        self._slot_idx = self.names.index(self.slot_resource)
        # element-wise vector operations written out for this many resources (``vec``)
        self._vadd, self._vsub, self._vle, _ = hot_ops(len(self.names))
        self.validate = validate
        self._timer = timer
        self._on_decision = on_decision
        self.now = 0.0
        self.machines = [
            MachineRT(i, m, self.names, m.id not in cluster.initially_down)
            for i, m in enumerate(cluster.machines)
        ]
        self._machine_index = {m.id: m.index for m in self.machines}
        self.jobs: dict[str, JobRT] = {}  # every job ever submitted, arrival order
        self.active: dict[str, JobRT] = {}  # submitted and not finished, arrival order
        self.decision = Decision()
        self._backfill = False  # self.decision.backfill, as a native field (finish_one)
        # the policy's triggers are read once, here (and: is it called at every completion?)
        self._triggers: frozenset[Trigger] = policy.triggers
        self._on_finish = _TASK_FINISHED in self._triggers
        policy.bind(cluster)
        self._grants: list[GrantState] = []
        # every installed grant is whole-job (no stage, machines, kill_excess or gang): a
        # decision that only extends them can be installed incrementally
        self._all_whole = True
        # An order-only policy (``Policy.order_only``): while the installed grants are its order
        # of the jobs they name (``_in_order``), jobs that arrive after all of them may be
        # appended without a call to ``decide`` (``_extend_order``).
        self._order_key = policy.order_key if policy.order_only else None
        self._in_order = False
        # while ``_in_order``: the installed grants of the jobs still active, by job, in order
        # (a job that finishes or is cancelled leaves it), so that an extension does not
        # filter every grant at every arrival
        self._ordered: dict[str, Grant] = {}
        self._arrived: list[JobRT] = []  # the jobs submitted in the batch being handled
        self._hungry: set[int] = set()  # see _touch
        self._widen = False  # a grant became hungry: offer it every open machine
        self._with_ready: set[int] = set()
        self._slot_limit: SlotLimit | None = None
        self._min_demand: tuple[float, ...] | None = None
        self._placeable: set[tuple[float, ...]] = set()  # demand vectors known to fit
        self._stage_vectors: StageVectors = {}  # computed by check_workload, taken at submission
        # machine index -> up with room for the smallest demand (dispatch tries only these)
        self._open: list[bool] = [False] * len(self.machines)
        self._n_open = 0
        self._machine_views: tuple[MachineView, ...] | None = None
        # per machine: (cap, free, its row of the snapshot's free matrix); a row is rebuilt
        # only when either list changed (every change replaces the list)
        self._free_rows: list[tuple[tuple[float, ...], list[float], list[float]] | None] = []
        self.stats = CoreStats()
        self.fast = FastPaths()  # the shortcuts' switches and hit counts (not an output)
        self.record_attempts = record_attempts
        self.attempts: list[Attempt] = []
        self.timeline = Timeline(len(self.names))  # always on: compact, feeds the reports
        self.timeline.machine_ids.extend(m.id for m in self.machines)
        self._attempt_rows = self.timeline.pending
        # Attempt seconds per distinct demand vector, indexed by its key (``StageRT.vkeys``):
        # -1.0 until an attempt with it ends; summed in the order they first did (``busy``).
        self._vkeys: dict[tuple[float, ...], int] = {}
        self._busy_vecs: list[tuple[float, ...]] = []
        self._busy_dt: list[float] = []
        self._busy_order: list[int] = []
        self._cap_total = self._capacity_total()
        self._cap_integral = [0.0] * len(self.names)
        self._cap_since = 0.0
        self._record_capacity()
        self.infeasible: dict[str, str] = {}
        self.warnings: list[str] = []
        for m in self.machines:
            self._refresh_open(m)

    def check_workload(self, jobs: Sequence[Job]) -> None:
        """Refuse, before a run, a workload with a job that can never run on this cluster
        under this policy (``feasibility.Unrunnable``, naming the job, stage and why)."""
        check_workload(self.cluster, jobs, self.policy, vectors=self._stage_vectors)

    def stuck(self) -> bool:
        """Nothing makes progress (no task runs, or only on machines scaled or slowed to
        zero) and no ready task fits any up machine, even empty (a gang: all its ready tasks
        at once): without a capacity change or an arrival nothing can start or finish."""
        machines = self.machines
        for job in self.active.values():
            for ref, run in job.running.items():
                m = machines[run.machine]
                # a task on a machine scaled or slowed to zero makes no progress
                demand = job.stages[ref.stage].vectors[ref.index]
                if m.speed > 0 and (m.scale > 0 or not any(demand)):
                    return False
        caps = [m.capx for m in self.machines if m.state is _UP]
        for job in self.active.values():
            for st in job.stages:
                if not st.ready:
                    continue
                if st.gang:
                    if pack([st.vectors[i] for i in st.ready], caps).placement is not None:
                        return False
                elif any(all(map(le, st.vectors[i], c)) for i in set(st.ready) for c in caps):
                    return False
        return True

    def after_tick(self, busy: bool, more: bool, idle_ticks: int) -> tuple[int, bool, str]:
        """After a control tick, for the backend's loop: the count of ticks in a row with
        nothing running or launched, whether to keep ticking, and why the run stops when
        active jobs are left.  A tick-driven policy may hold work back, but not forever."""
        idle_ticks = 0 if busy else idle_ticks + 1
        if more:
            return idle_ticks, True, ""
        if not self.active:
            return idle_ticks, False, ""
        if self.stuck():
            return idle_ticks, False, "no task can run and nothing will change"
        if idle_ticks < MAX_IDLE_TICKS:
            return idle_ticks, True, ""
        return idle_ticks, False, (f"nothing ran for {MAX_IDLE_TICKS} control ticks and "
                                   "nothing will change")

    # ------------------------------------------------------------------ public entry point
    def handle(self, now: float, stimuli: Sequence[Stimulus]) -> list[Command]:
        """Apply everything that happened at ``now``; return what the backend must do."""
        if now < self.now - EPS:
            raise IllegalTransition(f"time went backwards: {now} after {self.now}")
        self.now = now
        cmds: list[Command] = []
        triggers: set[Trigger] = set()
        touched: list[int] = []
        self._arrived = []
        items: Sequence[object] = stimuli  # (anything else is refused below, by name)
        for s in items:
            if type(s) is TaskFinished:
                self._on_finished(s.task, triggers, touched)
            elif type(s) is JobSubmitted:
                self._on_submitted(s.job)
                triggers.add(Trigger.ARRIVAL)
            elif type(s) is TaskFailed:
                self._on_failed(s, triggers, cmds)
            elif type(s) is CapacityChanged:
                self._on_capacity(s.change.machine, s.change.action, s.change.factor, cmds)
                triggers.add(Trigger.CAPACITY)
            elif type(s) is Tick:
                triggers.add(Trigger.TICK)
            elif type(s) is MachineAdded:
                self._on_machine_added(s.machine)
                triggers.add(Trigger.CAPACITY)
            elif type(s) is JobCancelled:
                if self._on_cancelled(s.job, s.reason, cmds):
                    triggers.add(Trigger.JOB_FINISHED)
            else:
                raise IllegalTransition(f"unknown stimulus {s!r}")
        return self._respond(triggers, touched, cmds)

    def _respond(self, triggers: set[Trigger], touched: list[int],
                 cmds: list[Command]) -> list[Command]:
        """After the stimuli of one instant: decide if a trigger asks for it, dispatch."""
        if self.active and not triggers.isdisjoint(self._triggers):
            self._decide(frozenset(triggers), cmds)
            self._dispatch(None, cmds)
        elif self._widen or not triggers <= _QUIET:
            self._dispatch(None, cmds)  # the ready set changed: anything may fit anywhere
        elif touched and (self._hungry or self.decision.backfill):
            self._dispatch(touched, cmds)  # (with no grant hungry and no backfill, a no-op)
        self._widen = False
        if self.validate:
            self.check_invariants()
        return cmds

    def finish_one(self, now: float, ref: TaskRef) -> list[Command]:
        """Exactly ``handle(now, [TaskFinished(ref)])``: the simulator's hot path, a task
        completion alone at its instant, fused into one frame.

        The common case (the task's stage goes on, one whole-job grant or none, no online
        estimates, no validation) is inlined: the same state changes in the same order as
        ``_on_finished`` and ``_release``, and the same tail as ``handle`` for the trigger set
        ``{TASK_FINISHED}``.  Anything else takes the general path.  The inlined copies are
        deliberate: calling ``_release`` instead measured 6% more CPU on the 10^5-task
        benchmark; ``tests/test_sim_fast_path.py`` holds both paths to the same outputs.
        """
        job = self.active.get(ref.job)
        if job is None or self.validate or self.online or now < self.now - EPS:
            return self.handle(now, [task_finished(task=ref)])
        st = job.stages[ref.stage]
        if st.done + 1 == st.total:  # the stage finishes: the general path
            return self.handle(now, [task_finished(task=ref)])
        gstates = job.gstates
        if gstates:
            gs = gstates[0]
            if len(gstates) > 1 or gs.stage is not None or gs.mask is not None:
                return self.handle(now, [task_finished(task=ref)])
        # _on_finished, inlined (the last check: a stale completion changed nothing above)
        running = job.running
        run = running.get(ref)  # (get and del: native operations; pop with a default is not)
        if run is None:  # it raced a kill or a machine loss: the general path counts it
            return self.handle(now, [task_finished(task=ref)])
        del running[ref]
        self.now = now
        mi = run.machine
        start = run.start
        idx = ref.index
        states = st.states
        if states[idx] is not _RUNNING:
            check_move(f"task {ref}", states[idx], _DONE)
        states[idx] = _DONE
        st.running -= 1
        st.started_sum = st.started_sum - start if st.running else 0.0
        st.done += 1
        st.view = None
        m = self.machines[mi]
        # _release(job, st, ref, m, start, "done"), inlined
        v = st.vectors[idx]
        m.ntasks -= 1
        if st.is_reduce:
            m.nreduce -= 1
        if m.ntasks:
            m.free = vec_native.add(m.free, v) if NATIVE else self._vadd(m.free, v)
        else:
            m.reset_free()
        job.dirty = True
        if gstates:
            gs.running -= 1
            # _touch(job) for its one grant, inlined; with no ready task it is a no-op: the
            # launch that took the last ready task removed the grant from both indexes
            if job.n_ready > 0:
                o = gs.order
                self._with_ready.add(o)
                if gs.running < gs.limit:
                    if o not in self._hungry:
                        self._hungry.add(o)
                        self._widen = True
                else:
                    self._hungry.discard(o)
        dt = now - start
        busy = self._busy_dt  # _add_busy, inlined
        k = st.vkeys[idx]
        b = busy[k]
        if b < 0.0:
            self._busy_order.append(k)
            b = 0.0
        busy[k] = b + dt
        if m.price:
            share = max((x / c for x, c in zip(v, m.base, strict=True) if c > 0), default=0.0)
            job.cost += dt * m.price / 3600.0 * share
        if self.record_attempts:
            self.attempts.append(Attempt(ref, m.id, start, now, "done"))
        rows = self._attempt_rows  # Timeline.attempt(..., "done"), inlined
        rows.append((job.seq, ref.stage, idx, mi, start, now, v[self._slot_idx], _DONE_CODE))
        if len(rows) >= _PENDING_ROWS:
            self.timeline.flush()
        if not self._open[mi] and m.state is _UP:
            # _refresh_open(m), inlined: a release can only open the machine
            if self._slot_limit is None:
                md = self._min_demand
                room = md is None or (vec_native.le(md, m.free) if NATIVE else
                                      self._vle(md, m.free))
            else:
                room = self._has_room(m)
            if room:
                self._open[mi] = True
                self._n_open += 1
        self.stats.completed += 1
        # handle's tail for the triggers {TASK_FINISHED} and the machine that freed up
        cmds: list[Command] = []
        if self._on_finish:  # (self.active holds this job)
            self._decide(_JUST_FINISHED, cmds)
            self._dispatch(None, cmds)
        elif self._widen:
            self._dispatch(None, cmds)
        elif self._hungry or self._backfill:
            self._dispatch([mi], cmds)
        self._widen = False
        return cmds

    # ------------------------------------------------------------------ stimuli
    def _on_submitted(self, job: Job) -> None:
        if job.id in self.jobs:
            raise IllegalTransition(f"job {job.id!r} submitted twice")
        stages = []
        names = self.names
        for i, st in enumerate(job.stages):
            known = self._stage_vectors.pop(id(st), None)  # (check_workload's, if it ran)
            vecs = known[1] if known is not None and known[0] is st else demand_vectors(st, names)
            stages.append(StageRT(i, st, vecs, self._keys_of(vecs)))
            self._note_demands(job, vecs)
        index = {st.name: i for i, st in enumerate(job.stages)}
        for i, st in enumerate(job.stages):
            for dep in st.after:
                stages[index[dep]].dependents.append(i)
        rt = JobRT(job, stages, self.timeline.add_job(job.id))
        self.jobs[job.id] = rt
        self._arrived.append(rt)
        self.active[job.id] = rt

    def _keys_of(self, vecs: list[tuple[float, ...]]) -> list[int]:
        """Each vector's key (``StageRT.vkeys``); a new vector gets the next one.  Tasks
        usually share their vector objects, so each object is looked up once."""
        if vecs and all(v is vecs[0] for v in vecs):
            return [self._vkey(vecs[0])] * len(vecs)
        by_object: dict[int, int] = {}
        out = []
        for v in vecs:
            k = by_object.get(id(v))
            if k is None:
                k = by_object[id(v)] = self._vkey(v)
            out.append(k)
        return out

    def _vkey(self, v: tuple[float, ...]) -> int:
        k = self._vkeys.get(v)
        if k is None:
            k = self._vkeys[v] = len(self._busy_vecs)
            self._busy_vecs.append(v)
            self._busy_dt.append(-1.0)
        return k

    def _note_demands(self, job: Job, vecs: list[tuple[float, ...]]) -> None:
        lowered = False
        v0 = vecs[0] if vecs else None
        # the distinct vectors (the tasks of a stage usually share one object: no hashing)
        distinct = [v0] if v0 is not None and all(v is v0 for v in vecs) else set(vecs)
        for v in distinct:
            if v in self._placeable:
                continue
            md = self._min_demand
            if md is None:
                self._min_demand = tuple(v)
                lowered = True
            else:  # the element-wise minimum (a tuple: ``le`` reads it typed)
                low = tuple([x if x < y else y for x, y in zip(v, md, strict=True)])
                if low != md:
                    self._min_demand = low
                    lowered = True
            if any(all(x <= c + EPS for x, c in zip(v, m.base, strict=True))
                   for m in self.machines):
                self._placeable.add(v)
            else:
                msg = (f"job {job.id}: a task demands {dict(zip(self.names, v, strict=True))}, "
                       "which fits no machine of the cluster; it can never run")
                self.warnings.append(msg)
                log.warning(msg)
        if lowered:  # a smaller demand may make nearly-full machines useful again
            for m in self.machines:
                self._refresh_open(m)

    def _on_finished(self, ref: TaskRef, triggers: set[Trigger], touched: list[int]) -> None:
        job = self.active.get(ref.job)
        run = job.running.pop(ref, None) if job is not None else None
        if job is None or run is None:
            # A completion that raced a kill or a machine loss: the core already re-queued it.
            self.stats.stale += 1
            log.debug("ignoring completion of %s: not running", ref)
            return
        st = job.stages[ref.stage]
        if st.states[ref.index] is not _RUNNING:  # the table check, inlined: this is the hot path
            check_move(f"task {ref}", st.states[ref.index], _DONE)
        st.states[ref.index] = _DONE
        st.running -= 1
        st.started_sum = st.started_sum - run.start if st.running else 0.0
        st.done += 1
        st.view = None
        m = self.machines[run.machine]
        if self.online:  # the stage's estimate becomes the mean of what was measured
            st.observed += 1
            st.observed_sum += self.now - run.start
            st.expected = max(st.observed_sum / st.observed, EPS)
        self._release(job, st, ref, m, run.start, "done")
        self.stats.completed += 1
        self.fast.general_finishes += 1
        touched.append(m.index)
        triggers.add(_TASK_FINISHED)
        if st.done == st.total:
            triggers.add(Trigger.STAGE_FINISHED)
            for di in st.dependents:
                self._unlock(job, job.stages[di])
            if all(s.done == s.total for s in job.stages):
                check_move(f"job {job.id}", job.state, JobState.DONE)
                job.state = JobState.DONE
                job.finish = self.now
                del self.active[job.id]
                self._ordered.pop(job.id, None)
                triggers.add(Trigger.JOB_FINISHED)
                self.policy.job_finished(job.id, self.now)

    def _on_cancelled(self, job_id: str, reason: str, cmds: list[Command]) -> bool:
        """Kill the job's running tasks and drop it from the active set; False when it is
        unknown or already over (a cancel that raced its last task is a no-op)."""
        job = self.active.get(job_id)
        if job is None:
            self.stats.stale += 1
            return False
        for ref in list(job.running):
            self._requeue(job, ref, "killed", cmds, reason=f"job {reason}")
        for st in job.stages:  # nothing of it may be dispatched again
            st.ready.clear()
            st.view = None
        job.n_ready = 0
        self._touch(job)
        check_move(f"job {job.id}", job.state, JobState.CANCELLED)
        job.state = JobState.CANCELLED
        del self.active[job.id]
        self._ordered.pop(job.id, None)
        return True

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
        self._touch(job)

    def _on_failed(self, s: TaskFailed, triggers: set[Trigger], cmds: list[Command]) -> None:
        ref = s.task
        job = self.active.get(ref.job)
        if job is None or ref not in job.running:
            self.stats.stale += 1
            return
        st = job.stages[ref.stage]
        self._requeue(job, ref, "failed", None)
        triggers.add(Trigger.TASK_FAILED)
        self._requeue_gang(job, st.index, cmds, "gang member failed")

    def _requeue_gang(self, job: JobRT, stage: int, cmds: list[Command], reason: str) -> None:
        """A gang runs whole or not at all: when one member stops, kill the others too."""
        if job.stages[stage].gang:
            for other in [r for r in job.running if r.stage == stage]:
                self._requeue(job, other, "killed", cmds, reason=reason)

    def _on_capacity(self, machine_id: str, action: CapacityAction, factor: float,
                     cmds: list[Command]) -> None:
        m = self.machines[self._machine_index[machine_id]]
        self._advance_capacity_integral()
        if action is CapacityAction.JOIN:
            check_move(f"machine {m.id}", m.state, _UP)
            m.state = _UP
        elif action is CapacityAction.LEAVE:
            check_move(f"machine {m.id}", m.state, MachineState.DOWN)
            for ref in self.tasks_on(m.index):
                job = self.active[ref.job]
                if ref not in job.running:
                    continue  # a gang sibling already brought back below
                self._requeue(job, ref, "lost", None)
                self._requeue_gang(job, ref.stage, cmds, "gang member lost")
            m.state = MachineState.DOWN
        elif action is CapacityAction.SCALE:
            used = m.used
            m.scale = factor
            m.cap = tuple(b * factor for b in m.base)
            m.capx = [c + EPS for c in m.cap]
            m.free = [c + EPS - u for c, u in zip(m.cap, used)]
        else:
            m.speed = factor
        m.view = None
        self._machine_views = None
        self._cap_total = self._capacity_total()
        self._record_capacity()
        self._refresh_open(m)

    def _on_machine_added(self, machine: Machine) -> None:
        if machine.id in self._machine_index:
            raise IllegalTransition(f"machine {machine.id!r} added twice; a known machine "
                                    "rejoins with a CapacityChanged JOIN")
        self._advance_capacity_integral()
        m = MachineRT(len(self.machines), machine, self.names, True)
        self.machines.append(m)
        self._open.append(False)
        self._machine_index[m.id] = m.index
        self.timeline.machine_ids.append(m.id)
        self._machine_views = None
        self._cap_total = self._capacity_total()
        self._record_capacity()
        for v in {v for j in self.active.values() for st in j.stages for v in st.vectors}:
            if v not in self._placeable and all(x <= c + EPS for x, c in zip(v, m.base)):
                self._placeable.add(v)
        self._refresh_open(m)

    # ------------------------------------------------------------------ machine bookkeeping
    def _capacity_total(self) -> list[float]:
        tot = [0.0] * len(self.names)
        for m in self.machines:
            if m.state is _UP:
                for r, c in enumerate(m.cap):
                    tot[r] += c
        return tot

    def _record_capacity(self) -> None:
        up = [m for m in self.machines if m.state is _UP]
        si = self._slot_idx
        self.timeline.capacity(self.now, len(up), self._cap_total,
                               sum(m.cap[si] * m.speed for m in up))

    def _advance_capacity_integral(self) -> None:
        dt = self.now - self._cap_since
        if dt > 0:
            for r, c in enumerate(self._cap_total):
                self._cap_integral[r] += c * dt
        self._cap_since = self.now

    @property
    def busy(self) -> list[float]:
        """Declared resource-seconds of every attempt so far, per resource."""
        tot = [0.0] * len(self.names)
        for k in self._busy_order:
            dt = self._busy_dt[k]
            for r, x in enumerate(self._busy_vecs[k]):
                tot[r] += x * dt
        return tot

    def capacity_integral(self, until: float) -> list[float]:
        """Integral of the up machines' declared capacity from 0 to ``until``."""
        dt = max(0.0, until - self._cap_since)
        return [i + c * dt for i, c in zip(self._cap_integral, self._cap_total, strict=True)]

    # ------------------------------------------------------------------ launching and releasing
    def _release(self, job: JobRT, st: StageRT, ref: TaskRef, m: MachineRT, start: float,
                 outcome: str) -> None:
        v = st.vectors[ref.index]
        m.ntasks -= 1
        if st.is_reduce:
            m.nreduce -= 1
        if m.ntasks:
            m.free = self._vadd(m.free, v)
        else:
            m.reset_free()  # no task left: recomputed, which drops float noise
        job.dirty = True
        gstates = job.gstates
        if gstates:
            first = gstates[0]
            gs: GrantState | None = first
            if len(gstates) > 1 or first.stage is not None or first.mask is not None:
                gs = self._grant_for(job, ref.stage, m.index)
            if gs is not None:
                gs.running -= 1
            self._touch(job)
        dt = self.now - start
        self._add_busy(st.vkeys[ref.index], dt)
        if m.price:
            share = max((x / c for x, c in zip(v, m.base, strict=True) if c > 0), default=0.0)
            job.cost += dt * m.price / 3600.0 * share
        if self.record_attempts:
            self.attempts.append(Attempt(ref, m.id, start, self.now, outcome))
        self.timeline.attempt(job.seq, ref.stage, ref.index, m.index, start, self.now,
                              v[self._slot_idx], outcome)
        if not self._open[m.index]:
            self._refresh_open(m)

    def _add_busy(self, k: int, dt: float) -> None:
        busy = self._busy_dt
        b = busy[k]
        if b < 0.0:  # the first attempt with this demand to end
            self._busy_order.append(k)
            b = 0.0
        busy[k] = b + dt

    def _requeue(self, job: JobRT, ref: TaskRef, outcome: str, cmds: list[Command] | None,
                 reason: str = "preempted") -> None:
        """RUNNING -> READY: killed (emit Preempt), lost with a machine, or failed."""
        run = job.running.pop(ref)
        mi = run.machine
        start = run.start
        st = job.stages[ref.stage]
        check_move(f"task {ref}", st.states[ref.index], _READY)
        st.states[ref.index] = _READY
        st.running -= 1
        st.started_sum = st.started_sum - start if st.running else 0.0
        st.ready.appendleft(ref.index)
        st.view = None
        job.n_ready += 1
        m = self.machines[mi]
        self._release(job, st, ref, m, start, outcome)
        setattr(self.stats, outcome, getattr(self.stats, outcome) + 1)
        if cmds is not None:
            cmds.append(Preempt(ref, m.id, reason))

    def tasks_on(self, machine: int) -> list[TaskRef]:
        """The tasks running on machine ``machine`` (an index), in launch order.  Gathered
        from the jobs' running records (a machine keeps only counts, so that a launch and a
        release update no per-machine record of tasks); for a machine that leaves, and tests."""
        found = sorted((run.launch, ref) for job in self.active.values()
                       for ref, run in job.running.items() if run.machine == machine)
        return [ref for _, ref in found]

    def _grant_for(self, job: JobRT, stage: int, machine: int) -> GrantState | None:
        for gs in job.gstates:
            if gs.covers(stage, machine):
                return gs
        return None

    # ------------------------------------------------------------------ deciding
    def snapshot(self, triggers: frozenset[Trigger] = frozenset()) -> ClusterSnapshot:
        if self._machine_views is None:
            self._machine_views = tuple(self._machine_view(m) for m in self.machines)
        free = None
        if self.policy.uses_free_capacity:
            rows = self._free_rows
            if len(rows) != len(self.machines):
                rows = self._free_rows = [None] * len(self.machines)
            matrix: list[list[float]] = []
            for i, m in enumerate(self.machines):
                row = rows[i]
                if row is not None and row[0] is m.cap and row[1] is m.free:
                    matrix.append(row[2])
                    continue
                values = [c - u for c, u in zip(m.cap, m.used, strict=True)]
                rows[i] = (m.cap, m.free, values)
                matrix.append(values)
            free = np.array(matrix, dtype=float)
            free.setflags(write=False)
        placement = None
        if self.policy.uses_placement:
            placement = {}
            for j in self.active.values():
                where: dict[tuple[int, int], int] = {}
                for ref, run in j.running.items():
                    key = (ref.stage, run.machine)
                    where[key] = where.get(key, 0) + 1
                placement[j.id] = where
        job_view = self._job_view  # called for changed jobs only; the rest reuse their view
        return ClusterSnapshot(
            now=self.now,
            triggers=triggers,
            machines=self._machine_views,
            jobs=tuple([j.view if not j.dirty and j.view is not None else job_view(j)
                        for j in self.active.values()]),
            resource_names=self.names,
            slot_resource=self.slot_resource,
            free=free,
            placement=placement,
            online_estimates=self.online,
        )

    def _machine_view(self, m: MachineRT) -> MachineView:
        if m.view is None:
            from utilon.model.resources import Resources

            m.view = MachineView(m.id, m.index, Resources.from_vector(self.names, m.cap),
                                 m.machine.attributes, m.state is _UP, m.speed, m.price)
        return m.view

    def _job_view(self, j: JobRT) -> JobView:
        if j.dirty or j.view is None:
            # Built by the ``make`` builders (no NamedTuple __new__): hundreds of views per
            # decision, thousands of decisions.
            stages = []
            si = self._slot_idx
            for st in j.stages:
                view = st.view  # None since the stage changed (every change resets it)
                if view is None:
                    ready = st.ready
                    head = ready[0] if ready else 0
                    size = st.vectors[head][si]
                    stage = st.stage
                    st.view = view = stage_view(
                        name=stage.name, index=st.index, kind=stage.kind, total=st.total,
                        waiting=st.total if st.locked else 0, ready=len(ready),
                        running=st.running, done=st.done, expected_duration=st.expected,
                        demand=stage.tasks[head].demand, slot_size=size if size > 0 else 1.0,
                        gang=st.gang, request=stage.request, started_sum=st.started_sum)
                stages.append(view)
            job = j.job
            j.view = job_view(id=job.id, tenant=job.tenant, submit=job.submit,
                              weight=job.weight, priority=job.priority, job_class=job.job_class,
                              utility=job.utility, state=j.state, started=j.start,
                              stages=tuple(stages))
            j.dirty = False
        return j.view

    def _decide(self, triggers: frozenset[Trigger], cmds: list[Command]) -> None:
        if (self._in_order and self._arrived and not self.validate
                and self._on_decision is None  # a decision hook sees decide()'s every call
                and triggers & self._triggers == _ARRIVAL_ONLY
                and self._extend_order(cmds)):
            return
        snap = self.snapshot(triggers)
        t0 = self._timer()
        decision = self.policy.decide(snap)
        self.stats.decide_seconds.append(self._timer() - t0)
        self.stats.decisions += 1
        validate_decision(decision, snap, self.policy.name, self.active)
        if decision.solver_seconds is not None:
            self.stats.solver_seconds.append(decision.solver_seconds)
        if self._on_decision is not None:
            self._on_decision(self.now, snap, decision)
        self._install(decision, cmds)
        grants = decision.grants
        self._in_order = (self._order_key is not None and self._all_whole
                          and set(map(_slots, grants)) <= _NONE and not decision.backfill
                          and decision.slot_limit is None and not decision.infeasible
                          and decision.solver_seconds is None)  # (a solver's time: its own)
        if self._in_order:
            self._ordered = {g.job: g for g in grants}  # (every granted job is active now)
            self._in_order = len(self._ordered) == len(grants)  # and named once

    def _extend_order(self, cmds: list[Command]) -> bool:
        """Jobs that arrived under an order-only policy (``Policy.order_only``) and all sort
        after the installed order: append them, which is the decision ``decide`` would return
        (its sort is stable, so the jobs already granted keep their order and equal keys stay
        in arrival order), with no snapshot, call to ``decide`` or validation of the whole
        order.  It counts and is timed as a decision (never taken with a decision hook, which
        is promised the snapshot and ``decide``'s answer).  False, having changed nothing,
        when they do not all sort after it (the caller then decides in full)."""
        t0 = self._timer()
        active = self.active
        key = self._order_key
        assert key is not None
        job_view = self._job_view
        new = sorted([job_view(j) for j in self._arrived if j.id in active], key=key)
        if not new:
            return False
        kept = self._ordered
        if kept and key(job_view(active[next(reversed(kept))])) > key(new[0]):
            return False  # a new job goes before the last granted job still active
        if len(kept) + len(new) != len(active):
            return False
        tail = tuple([grant(job=v.id) for v in new])
        # _install for this decision: nothing infeasible, no slot limit before or after, and
        # the kept grants are the installed ones (_install_extension's test holds by design)
        self.decision = Decision(grants=(*kept.values(), *tail))
        self._backfill = False
        for g in tail:
            kept[g.job] = g
        self._append_grants(tail)
        self.stats.decide_seconds.append(self._timer() - t0)
        self.stats.decisions += 1
        self.fast.order_extensions += 1
        return True

    def _install(self, decision: Decision, cmds: list[Command]) -> None:
        previous = self.decision
        self.decision = decision
        self._backfill = decision.backfill
        for item in decision.infeasible:
            self.infeasible[item.job] = item.reason
        if decision.slot_limit != self._slot_limit:
            self._slot_limit = decision.slot_limit
            for m in self.machines:
                self._refresh_open(m)
        if (self._all_whole and self.fast.extend_installs
                and self._install_extension(previous.grants, decision.grants)):
            return
        self._all_whole = not any(map(_scoped, decision.grants))
        # A job's single whole-job grant is carried over and re-ranked rather than rebuilt:
        # its running count is kept up to date incrementally, so nothing needs recounting.
        reusable: dict[str, GrantState] = {}
        for gs in self._grants:  # only jobs that held grants have any to drop
            job = gs.job
            if gs.stage is None and gs.mask is None and not gs.gang and len(job.gstates) == 1:
                reusable[job.id] = gs
            job.gstates = []
        grants: list[GrantState] = []
        active = self.active
        take = reusable.pop
        self._hungry = set()
        self._with_ready = set()
        to_touch: dict[str, JobRT] = {}  # jobs with a ready task, touched once at the end
        counts: dict[str, RunningCounts] = {}  # running tasks by scope, for scoped grants
        for order, g in enumerate(decision.grants):
            job_id, slots, stage_name, machines, _, gang = g  # one unpack, not five lookups
            job = active[job_id]
            limit = INF if slots is None else slots
            if stage_name is None and machines is None and not gang:
                kept = take(job_id, None)
                if kept is None:
                    gs = GrantState(order, job, None, None, limit)
                    gs.running = len(job.running)
                else:
                    gs = kept
                    gs.order = order
                    gs.limit = limit
            else:
                stage = job.job.stage_index(g.stage) if g.stage is not None else None
                mask = (frozenset(self._machine_index[x] for x in g.machines)
                        if g.machines is not None else None)
                gs = GrantState(order, job, stage, mask, limit, g.gang)
                held = counts.get(job_id)
                if held is None:
                    held = counts[job_id] = RunningCounts(job)
                gs.running = held.covered(stage, mask)
            job.gstates.append(gs)
            grants.append(gs)
            if job.n_ready:
                to_touch[job_id] = job
        self._grants = grants
        touch = self._touch
        for job in to_touch.values():  # (the index sets and the widen flag do not depend on
            touch(job)                  # the order, and a touch indexes all the job's grants)
        if not any(g.kill_excess for g in decision.grants):
            return
        for g, gs in zip(decision.grants, grants, strict=True):
            if g.kill_excess and gs.running > gs.limit:
                excess = int(gs.running - gs.limit)
                # the most recently started first
                victims = [r for r, run in reversed(gs.job.running.items())
                           if gs.covers(r.stage, run.machine)][:excess]
                for ref in victims:
                    self._requeue(gs.job, ref, "killed", cmds)

    def _install_extension(self, before: tuple[Grant, ...], grants: tuple[Grant, ...]) -> bool:
        """Install ``grants`` incrementally when they are the installed whole-job grants of
        the jobs still active, in the same order, followed by new whole-job grants (FIFO at an
        arrival: the new job joins the end); False, having changed nothing, otherwise.

        The result is the one the full install gives: the kept grants are the very objects it
        would carry over (a whole-job grant keeps its running count), renumbered in order; the
        dispatch index sets hold the same grants, since they are kept in step with every
        grant's job (``_touch``) between decisions; the new grants are built as it builds them.
        """
        active = self.active
        kept = [g for g in before if g.job in active]
        k = len(kept)
        if len(grants) < k or grants[:k] != tuple(kept):
            return False
        tail = grants[k:]
        if any(map(_scoped, tail)):
            return False
        self._append_grants(tail)
        self.fast.install_extensions += 1
        return True

    def _append_grants(self, tail: tuple[Grant, ...]) -> None:
        """The installed grants stay, in order; the whole-job grants ``tail`` are built after
        them.  The grants of jobs that finished stay too, idle (a finished job has no ready
        task, so they are in neither dispatch index), until they outnumber the active jobs:
        then they are dropped and the rest renumbered, in O(1) per job amortised rather than
        O(active jobs) at every arrival."""
        active = self.active
        old = self._grants
        if len(old) > 2 * len(active) + 64:
            remap: dict[int, int] = {}
            new_grants: list[GrantState] = []
            for gs in old:
                if gs.job.id in active:
                    remap[gs.order] = len(new_grants)
                    gs.order = len(new_grants)
                    new_grants.append(gs)
                else:
                    gs.job.gstates = []
            self._hungry = {remap[o] for o in self._hungry if o in remap}
            self._with_ready = {remap[o] for o in self._with_ready if o in remap}
            self._grants = old = new_grants
        touch = self._touch
        for order, g in enumerate(tail, len(old)):
            job = active[g.job]
            slots = g.slots
            gs = GrantState(order, job, None, None, INF if slots is None else slots)
            gs.running = len(job.running)
            job.gstates.append(gs)
            old.append(gs)
            if job.n_ready:
                touch(job)

    # ------------------------------------------------------------------ invariants
    def check_invariants(self) -> None:
        """Cross-check every counter against the underlying records (slow; for tests)."""
        check_invariants(self)
