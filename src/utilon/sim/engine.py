"""The discrete-event simulator: the shared loop (``loop``) over a virtual clock, and the fluid
model.

The loop's queue holds the simulator's task events too: the fluid model pushes each running
attempt's next phase end, ``(time, 0, seq, 0, (attempt, version))``, and a changed attempt gets
a new version, so its old entry is stale when it comes due.  Time jumps from one queued event
to the next (``SimClock.wait``); all events at one instant are handed to the scheduler core as
one batch, so a policy sees the world after everything that happened at that instant (a task
end alone at its instant goes to ``SchedulerCore.finish_one``, ``handle`` for it without the
batch; the outputs are the same, ``tests/test_sim_fast_path.py``).  The core's launches become
fluid-model attempts (``SimWorld.apply``).
"""

from __future__ import annotations

import gc
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, Final

from mypy_extensions import mypyc_attr

from utilon.core.decision import Decision
from utilon.core.messages import Command, Launch, Stimulus, TaskRef
from utilon.core.policy import Policy
from utilon.core.scheduler import SchedulerCore
from utilon.core.snapshot import ClusterSnapshot
from utilon.model.cluster import CapacityAction, CapacityChange, Cluster
from utilon.model.job import Job
from utilon.sim.fluid import Exec, FluidModel
from utilon.sim.loop import INF, Entry, Loop, Phase, World
from utilon.sim.result import SimResult

log = logging.getLogger(__name__)

_phases: Final = attrgetter("phases")
_NOTHING: Final[list[Stimulus]] = []  # what the virtual clock reports: its events are queued

__all__ = ["Phase", "SimResult", "Simulation", "simulate"]


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class SimWorld(World):
    """The simulator as a loop's world: a virtual clock, and the fluid model the core's
    commands go to."""

    def __init__(self, sim: Simulation, total_jobs: int) -> None:
        self.sim = sim
        self.core = sim.core
        self.fluid = sim.fluid
        self.t = 0.0
        self.task_events = 0  # task entries that were not stale (a usage phase or an end)
        self.total_jobs = total_jobs
        self.finished_reported = 0
        self.wall0 = sim._timer()
        self.loop: Loop | None = None
        self.names = sim.core.names
        self.machine_index = {m.id: i for i, m in enumerate(sim.cluster.machines)}
        # some stage has colocate_speedup / some task has usage phases (read at its launch)
        self.colocating = any(st.colocate_speedup != 1.0 for j in sim.jobs for st in j.stages)
        self.phased = sim._phased

    def wait(self, until: float) -> list[Stimulus]:
        if until < INF:
            self.t = until  # virtual time: the next event happens at once
        return _NOTHING

    def now(self) -> float:
        return self.t

    def task_due(self, payload: Any, now: float) -> TaskRef | None:
        # the fluid model's entry: (the attempt, its version when pushed); typed, so that the
        # compiled check and comparison are native rather than generic item reads
        entry: tuple[Exec, int] = payload
        ex = entry[0]
        if entry[1] != ex.version:
            return None  # stale
        self.task_events += 1
        if not self.fluid.phase_end(ex, now):
            return None  # the next usage phase: nothing for the core
        return ex.ref

    def capacity(self, change: CapacityChange, now: float) -> None:
        mi = self.machine_index[change.machine]
        if change.action is CapacityAction.LEAVE:
            self.fluid.drop_machine(mi, now)
        elif change.action is CapacityAction.SCALE:
            self.fluid.set_scale(mi, change.factor, now)
        elif change.action is CapacityAction.SPEED:
            self.fluid.set_speed(mi, change.factor, now)

    def apply(self, now: float, cmds: list[Command]) -> None:
        fluid = self.fluid
        core = self.core
        if cmds and not fluid.metered and core.decision.slot_limit is not None:
            fluid.start_metering()  # static slots may over-commit declared capacity
        faster = self.sim._colocated(cmds) if self.colocating and cmds else None
        core_jobs = core.jobs
        names = self.names
        machine_index = self.machine_index
        phased = self.phased
        for c in cmds:
            if type(c) is Launch:
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

    def running(self) -> bool:
        return self.fluid.running > 0

    def expects(self) -> bool:
        return False  # every running attempt's next event is queued

    def limit(self, due: float, pending: bool) -> str:
        if due == INF:
            return ""  # (the queue is empty: the loop stops by itself)
        horizon = self.sim.horizon
        if horizon is not None and due > horizon:
            if pending:
                assert self.loop is not None
                self.loop.last = horizon
                return f"horizon {horizon:g} s reached"
            return "-"  # stop, with nothing left to say why
        wall_limit = self.sim.wall_limit
        if wall_limit is not None and self.sim._timer() - self.wall0 > wall_limit:
            if pending:
                return (f"wall-clock limit of {wall_limit:g} s reached at simulated time "
                        f"{due:.0f} s")
            return "-"
        return ""

    def after(self, now: float) -> str:
        sim = self.sim
        core = self.core
        if sim.stop_when is not None:
            why = sim.stop_when(now, core)
            if why:
                return why
        if sim._progress is not None:
            assert self.loop is not None
            done = self.total_jobs - len(core.active) - (self.total_jobs - self.loop.next_job)
            if done != self.finished_reported:
                self.finished_reported = done
                sim._progress(done, self.total_jobs)
        return ""


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
        # the loop's queue, shared with the fluid model, which pushes the task events
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

    def _schedule_exec(self, t: float, ex: Exec) -> None:
        heapq.heappush(self._heap, (t, 0, next(self._seq), 0, (ex, ex.version)))

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
        world = SimWorld(self, len(self.jobs))
        loop = Loop(core, world, self.jobs, self.cluster.timeline, self.policy.tick,
                    queue=self._heap, seq=self._seq,
                    limited=self.horizon is not None or self.wall_limit is not None,
                    watched=self.stop_when is not None or self._progress is not None,
                    on_batch=self.on_batch)
        world.loop = loop
        stopped = loop.run()
        if stopped == "-":  # a limit reached with nothing left to run: not an early stop
            stopped = ""
        last = loop.last
        end = max((j.finish for j in core.jobs.values() if j.finish is not None),
                  default=last)
        return SimResult(core, max(end, last) if stopped else end, loop.events,
                         world.task_events, self._timer() - wall0, stopped,
                         self.fluid.usage_trace())

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


def simulate(cluster: Cluster, jobs: Sequence[Job], policy: Policy, **kw: object) -> SimResult:
    """Convenience wrapper: build a ``Simulation`` and run it."""
    return Simulation(cluster, jobs, policy, **kw).run()  # type: ignore[arg-type]
