"""The discrete-event simulator: an event heap, a step loop, and the fluid model.

Heap entries are ``(time, phase, seq, kind, payload)``: one total order, where ``phase`` breaks
ties at equal times (task ends, then capacity changes, then arrivals, then control ticks) and
``seq`` keeps insertion order within a phase.  All events at one instant are handed to the
scheduler core as one batch of stimuli, so a policy sees the world after everything that
happened at that instant.  Arrivals and capacity changes are fed lazily from sorted lists so
the heap only ever holds one of each.

The hot path: a task event alone at its instant (the common case) goes to
``SchedulerCore.finish_one``, which is ``handle(now, [TaskFinished(ref)])`` fused into one frame,
without building the batch; the outputs are the same (``tests/test_sim_fast_path.py``).
"""

from __future__ import annotations

import gc
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from enum import IntEnum
from operator import attrgetter
from typing import Final

from utilon.core.decision import Decision
from utilon.core.make import task_finished
from utilon.core.messages import (
    CapacityChanged,
    Command,
    JobSubmitted,
    Launch,
    Stimulus,
    Tick,
)
from utilon.core.policy import Policy
from utilon.core.scheduler import SchedulerCore
from utilon.core.snapshot import ClusterSnapshot
from utilon.model.cluster import CapacityAction, CapacityChange, Cluster
from utilon.model.job import Job
from utilon.sim.fluid import Exec, FluidModel
from utilon.sim.result import SimResult

log = logging.getLogger(__name__)

_heappush: Final = heapq.heappush
Entry = tuple[float, int, int, int, tuple[Exec, int] | None]  # a heap entry (module doc)
_phases: Final = attrgetter("phases")



class Phase(IntEnum):
    """Order of events that happen at the same instant."""

    TASK = 0
    CAPACITY = 1
    ARRIVAL = 2
    TICK = 3


class Simulation:
    """Runs one policy over one workload on one cluster."""

    def __init__(
        self,
        cluster: Cluster,
        jobs: Sequence[Job],
        policy: Policy,
        *,
        horizon: float | None = None,
        record_attempts: bool = True,
        validate: bool = False,
        timer: Callable[[], float] = time.perf_counter,
        on_decision: Callable[[float, ClusterSnapshot, Decision], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
        estimates: str = "declared",
        record_usage: bool = False,
        wall_limit: float | None = None,
        stop_when: Callable[[float, SchedulerCore], str] | None = None,
        on_batch: Callable[[float, list[Stimulus], list[Command]], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.jobs = sorted(jobs, key=lambda j: j.submit)  # stable: file order at equal times
        self.policy = policy
        self.horizon = horizon
        # a budget of wall-clock seconds: the run stops (and says so) when it is spent, so
        # its outputs then depend on the machine's speed
        self.wall_limit = wall_limit
        # asked after every batch of events; a non-empty answer stops the run, as the reason
        # (capacity planning stops a run once its target has certainly failed)
        self.stop_when = stop_when
        # told every batch of stimuli the core handled and the commands it answered, as
        # ``LiveRun``'s ``on_batch`` is (a task completion alone at its instant is a batch of
        # one ``TaskFinished``)
        self.on_batch = on_batch
        self.core = SchedulerCore(cluster, policy, record_attempts=record_attempts,
                                  validate=validate, timer=timer, on_decision=on_decision,
                                  estimates=estimates)
        self.core.check_workload(self.jobs)  # a job that can never run is refused up front
        # (time, phase, seq, kind, payload): a task event's payload is (attempt, version)
        self._heap: list[Entry] = []
        self._seq = itertools.count(1)  # insertion order of heap entries
        # Usage is kept per machine only where it can matter (``fluid`` module docstring): a
        # task with usage phases may use other than it declared; else only a slot limit or a
        # scale or speed change can over-commit a machine, and those start the metering.
        phased = any(any(map(_phases, st.tasks)) for j in self.jobs for st in j.stages)
        self._phased = phased
        self.fluid = FluidModel(cluster, self.core.names, self._schedule_exec,
                                record=record_usage, heap=self._heap, seq=self._seq,
                                metered=phased)
        self._timer = timer
        self._progress = progress
        self._machine_index = {m.id: i for i, m in enumerate(cluster.machines)}
        self._colocating = any(st.colocate_speedup != 1.0 for j in jobs for st in j.stages)

    # -- scheduling helpers -----------------------------------------------------------------
    def _push(self, t: float, phase: Phase) -> None:
        heapq.heappush(self._heap, (t, phase, next(self._seq), phase, None))

    def _schedule_exec(self, t: float, ex: Exec) -> None:
        _heappush(self._heap, (t, 0, next(self._seq), 0, (ex, ex.version)))

    # -- the step loop ----------------------------------------------------------------------
    def run(self) -> SimResult:
        # The workload is millions of long-lived objects that the cyclic garbage collector
        # would otherwise rescan again and again (12% of a 10^6-task run, pauses of 0.4 s):
        # move them out of its sight and collect less often; restore the settings after.
        frozen = gc.get_freeze_count()
        threshold = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(50_000, 20, 100)
        try:
            return self._run()
        finally:
            gc.set_threshold(*threshold)
            if frozen == 0:
                gc.unfreeze()

    def _run(self) -> SimResult:
        wall0 = self._timer()
        core = self.core
        fluid = self.fluid
        heap = self._heap
        pop = heapq.heappop
        jobs = self.jobs
        timeline = self.cluster.timeline
        next_job = 0
        next_change = 0
        if jobs:
            self._push(jobs[0].submit, Phase.ARRIVAL)
        if timeline:
            self._push(timeline[0].time, Phase.CAPACITY)
        tick = self.policy.tick
        if tick is not None and tick <= 0:
            raise ValueError("policy tick must be > 0")
        if tick is not None and jobs:
            self._push(jobs[0].submit + tick, Phase.TICK)
        events = task_events = 0
        idle_ticks = 0
        stopped = ""
        total_jobs = len(jobs)
        finished_reported = 0
        now = last_batch = 0.0
        core_jobs = core.jobs
        names = core.names
        machine_index = self._machine_index
        colocating = self._colocating
        phased = self._phased  # (some task has usage phases: read them at its launch)
        fused = core.fast.fuse_finishes  # (switched off in tests: the general path throughout)
        on_batch = self.on_batch
        horizon = self.horizon  # fixed for the run: read once, not once per batch
        wall_limit = self.wall_limit
        stop_when = self.stop_when
        progress = self._progress
        limited = horizon is not None or wall_limit is not None
        watched = stop_when is not None or progress is not None or on_batch is not None
        while heap:
            if next_job == total_jobs and not core.active:
                break  # every job is done: later capacity changes and ticks change nothing
            if limited:  # (else the pop below says when)
                now = heap[0][0]
                if horizon is not None and now > horizon:
                    if core.active or next_job < total_jobs:
                        stopped = f"horizon {horizon:g} s reached"
                        last_batch = horizon
                    break
                if wall_limit is not None and self._timer() - wall0 > wall_limit:
                    if core.active or next_job < total_jobs:
                        stopped = (f"wall-clock limit of {wall_limit:g} s reached at "
                                   f"simulated time {now:.0f} s")
                    break
            now, _, _, kind, payload = pop(heap)
            events += 1
            if kind == 0 and (not heap or heap[0][0] != now):
                # The hot path: a task event alone at its instant.  Same as the batch below
                # with one stimulus, without building it (``finish_one`` is ``handle`` for it).
                assert payload is not None  # (a task event's)
                ex = payload[0]
                if payload[1] != ex.version:
                    continue  # stale
                task_events += 1
                if not fluid.phase_end(ex, now):
                    continue  # the next usage phase: nothing for the core
                cmds = (core.finish_one(now, ex.ref) if fused else
                        core.handle(now, [task_finished(task=ex.ref)]))
                last_batch = now
                if not cmds and not watched:
                    continue  # nothing to launch and no one to tell: the next event
                ticked = False
                if on_batch is not None:
                    on_batch(now, [task_finished(task=ex.ref)], cmds)
            else:
                ticked = False
                stimuli: list[Stimulus] = []
                while True:
                    if kind == 0:
                        assert payload is not None
                        ex = payload[0]
                        if payload[1] == ex.version:
                            task_events += 1
                            if fluid.phase_end(ex, now):
                                stimuli.append(task_finished(task=ex.ref))
                    elif kind == Phase.ARRIVAL:
                        stimuli.append(JobSubmitted(jobs[next_job]))
                        next_job += 1
                        if next_job < total_jobs:
                            self._push(jobs[next_job].submit, Phase.ARRIVAL)
                    elif kind == Phase.CAPACITY:
                        change = timeline[next_change]
                        next_change += 1
                        if next_change < len(timeline):
                            self._push(timeline[next_change].time, Phase.CAPACITY)
                        self._apply_capacity(change, now)
                        stimuli.append(CapacityChanged(change))
                    else:
                        ticked = True
                        stimuli.append(Tick())
                    if not heap or heap[0][0] != now:
                        break
                    _, _, _, kind, payload = pop(heap)
                    events += 1
                if not stimuli:
                    continue
                cmds = core.handle(now, stimuli)
                last_batch = now
                if on_batch is not None:
                    on_batch(now, stimuli, cmds)
            if cmds and not fluid.metered and core.decision.slot_limit is not None:
                fluid.start_metering()  # static slots may over-commit declared capacity
            faster = self._colocated(cmds) if colocating and cmds else None
            for c in cmds:
                if type(c) is Launch:
                    # _launch, inlined: one launch per task is the hot path
                    ref = c.task
                    st = core_jobs[ref.job].stages[ref.stage]
                    idx = ref.index
                    work = st.durations[idx]
                    if faster:
                        work /= faster.get((ref.job, ref.stage), 1.0)
                    task_phases = st.stage.tasks[idx].phases if phased else ()
                    if task_phases:
                        phases = tuple((p.fraction * work, p.usage.vector(names))
                                       for p in task_phases)
                    else:
                        phases = ((work, st.vectors[idx]),)
                    fluid.launch(ref, machine_index[c.machine], now, phases)
                else:  # a Preempt: (task, machine id, reason)
                    fluid.kill(c.task, machine_index[c.machine], now)
            if ticked:
                more = next_job < total_jobs or next_change < len(timeline)
                idle_ticks, keep, why = core.after_tick(bool(cmds or fluid.running), more,
                                                        idle_ticks)
                if keep:
                    self._push(now + tick, Phase.TICK)  # type: ignore[operator]
                stopped = stopped or why
            if stop_when is not None:
                why = stop_when(now, core)
                if why:
                    stopped = why
                    break
            if progress is not None:
                done = total_jobs - len(core.active) - (total_jobs - next_job)
                if done != finished_reported:
                    finished_reported = done
                    progress(done, total_jobs)
        if core.active and not stopped:
            stopped = "no task can run and nothing will change"
        end = max((j.finish for j in core.jobs.values() if j.finish is not None),
                  default=last_batch)
        return SimResult(core, max(end, last_batch) if stopped else end, events, task_events,
                         self._timer() - wall0, stopped, fluid.usage_trace())

    def _colocated(self, cmds: list[Command]) -> dict[tuple[str, int], float]:
        """Speedups earned in this batch: a stage with ``colocate_speedup`` whose every task
        starts now on one machine (alsched's NBODY, §5.1) -> that speedup."""
        seen: dict[tuple[str, int], tuple[set[str], int]] = {}
        jobs = self.core.jobs
        for c in cmds:
            if type(c) is Launch:
                key = (c.task.job, c.task.stage)
                if jobs[key[0]].stages[key[1]].stage.colocate_speedup != 1.0:
                    machines, n = seen.get(key, (set(), 0))
                    machines.add(c.machine)
                    seen[key] = (machines, n + 1)
        out: dict[tuple[str, int], float] = {}
        for key, (machines, n) in seen.items():
            stage = jobs[key[0]].stages[key[1]].stage
            if len(machines) == 1 and n == len(stage.tasks):
                out[key] = stage.colocate_speedup
        return out

    def _apply_capacity(self, change: CapacityChange, now: float) -> None:
        mi = self._machine_index[change.machine]
        if change.action is CapacityAction.LEAVE:
            self.fluid.drop_machine(mi, now)
        elif change.action is CapacityAction.SCALE:
            self.fluid.set_scale(mi, change.factor, now)
        elif change.action is CapacityAction.SPEED:
            self.fluid.set_speed(mi, change.factor, now)


def simulate(cluster: Cluster, jobs: Sequence[Job], policy: Policy, **kw: object) -> SimResult:
    """Convenience wrapper: build a ``Simulation`` and run it."""
    return Simulation(cluster, jobs, policy, **kw).run()  # type: ignore[arg-type]
