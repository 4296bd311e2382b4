"""The loop (``sim.loop``) with a world of its own: a toy backend whose tasks report their own
ends, as a live backend's do, gives the simulator's schedule; and what a world reports goes to
the core in phase order with the queue's events."""

from __future__ import annotations

from typing import Any

from builders import change, make_cluster, make_job
from utilon.core.messages import (
    CapacityChanged,
    Command,
    JobSubmitted,
    Launch,
    Stimulus,
    TaskFinished,
    TaskRef,
    Tick,
)
from utilon.core.scheduler import SchedulerCore
from utilon.model.cluster import CapacityChange
from utilon.policies import make_policy
from utilon.sim import Simulation
from utilon.sim.loop import Loop, World


class ToyWorld(World):
    """Tasks take their declared duration and report their end, like a live backend; its
    clock jumps to the next end or queued event."""

    def __init__(self, core: SchedulerCore) -> None:
        self.core = core
        self.t = 0.0
        self.ends: dict[TaskRef, float] = {}

    def wait(self, until: float) -> list[Stimulus]:
        nxt = min(self.ends.values(), default=float("inf"))
        if nxt <= until:
            self.t = nxt
            done = sorted(ref for ref, t in self.ends.items() if t == nxt)
            for ref in done:
                del self.ends[ref]
            return [TaskFinished(ref) for ref in done]
        if until < float("inf"):
            self.t = until
        return []

    def now(self) -> float:
        return self.t

    def task_due(self, payload: Any, now: float) -> TaskRef | None:
        raise AssertionError("nothing of this world is queued")

    def capacity(self, change: CapacityChange, now: float) -> None:
        pass

    def apply(self, now: float, cmds: list[Command]) -> None:
        for c in cmds:
            if type(c) is Launch:
                st = self.core.jobs[c.task.job].stages[c.task.stage]
                self.ends[c.task] = now + st.durations[c.task.index]
            else:
                del self.ends[c.task]

    def running(self) -> bool:
        return bool(self.ends)

    def expects(self) -> bool:
        return bool(self.ends)

    def limit(self, due: float, pending: bool) -> str:
        return ""

    def after(self, now: float) -> str:
        return ""


def test_a_world_that_reports_its_task_ends_gives_the_simulators_schedule() -> None:
    cluster = make_cluster(2, slots=2, cpu=2, mem=8)
    jobs = [make_job(f"j{i}", submit=3.0 * i, maps=3, reduces=1, dur=5.0 + i)
            for i in range(4)]
    sim = Simulation(cluster, jobs, make_policy("fifo")).run()
    core = SchedulerCore(cluster, make_policy("fifo"), validate=True)
    loop = Loop(core, ToyWorld(core), jobs, cluster.timeline, None)
    assert loop.run() == ""
    assert {j: rt.finish for j, rt in core.jobs.items()} == {
        j: rt.finish for j, rt in sim.core.jobs.items()}
    # (simultaneous ends are recorded in the order each world reports them)
    assert sorted((a.task, a.start, a.end) for a in core.attempts) == sorted(
        (a.task, a.start, a.end) for a in sim.core.attempts)


def test_what_a_world_reports_goes_first_then_the_queue_in_phase_order() -> None:
    cluster = make_cluster(2, slots=2, cpu=2, mem=8, timeline=[change(5.0, "m1", "scale", 0.5)])
    jobs = [make_job("a", submit=0.0, maps=1, reduces=0, dur=5.0),
            make_job("b", submit=5.0, maps=1, reduces=0, dur=1.0)]
    policy = make_policy("fifo")
    batches: list[tuple[float, list[type]]] = []
    core = SchedulerCore(cluster, policy)
    loop = Loop(core, ToyWorld(core), jobs, cluster.timeline, 5.0,
                on_batch=lambda now, stimuli, cmds: batches.append(
                    (now, [type(s) for s in stimuli])))
    loop.run()
    # at 5 s: a's task end (reported), the scale-down, b's arrival and the tick (queued)
    assert (5.0, [TaskFinished, CapacityChanged, JobSubmitted, Tick]) in batches
