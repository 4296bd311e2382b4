"""Hypothesis strategies for random clusters and workloads, and the oracle of which jobs *can*
run on a cluster.

``scenarios()`` draws what the liveness property is about: heterogeneous machines with several
resources (with or without a ``slots`` resource), tasks whose demands go up to a machine's
whole capacity, gang stages, chains and fans of stages, and capacity timelines with joins,
leaves, scale and speed changes.  Every machine listed in ``anchors`` is up at the end of the
timeline at a scale of at least 1, and every task fits one of them, so every job can run.

``runnable(job, cluster)`` is the test's own, independent statement of "this job can run": at
the end of the timeline (when nothing changes any more), every stage fits the machines that
are up -- each task on some machine, a gang stage all at once (exhaustive search on these
small instances).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import strategies as st

from builders import change
from utilon.model import (
    CapacityAction,
    CapacityChange,
    Cluster,
    Constant,
    DeadlineStep,
    Job,
    Machine,
    PiecewiseLinear,
    Resources,
    Sigmoid,
    SoftHard,
    Stage,
    Task,
    TimeUtility,
    TruncatedLinear,
    UsagePhase,
)

halves = st.integers(1, 16).map(lambda x: x / 2)  # 0.5 .. 8 in steps of 0.5


@dataclass(frozen=True)
class Scenario:
    cluster: Cluster
    jobs: tuple[Job, ...]


def final_state(cluster: Cluster) -> dict[str, Resources]:
    """Machines up at the end of the timeline -> their capacity then (scale applied)."""
    up = {m.id: m.id not in cluster.initially_down for m in cluster.machines}
    scale = {m.id: 1.0 for m in cluster.machines}
    for ch in cluster.timeline:
        if ch.action is CapacityAction.JOIN:
            up[ch.machine] = True
        elif ch.action is CapacityAction.LEAVE:
            up[ch.machine] = False
        elif ch.action is CapacityAction.SCALE:
            scale[ch.machine] = ch.factor
    return {m.id: m.capacity * scale[m.id] for m in cluster.machines if up[m.id]}


def _fits(demand: Resources, cap: Resources, eps: float = 1e-6) -> bool:
    return all(demand[r] <= cap[r] + eps for r in demand.names)


def _gang_fits(demands: list[Resources], caps: list[Resources]) -> bool:
    """Can every demand be placed at once on ``caps`` (exhaustive, small instances)?"""
    if not demands:
        return True
    if len(demands) > 8 or len(caps) > 4:  # keep the oracle cheap: the strategies stay below
        raise ValueError("gang too large for the exhaustive oracle")
    order = sorted(range(len(demands)), key=lambda i: -sum(demands[i].as_dict().values()))

    def place(k: int, free: list[Resources]) -> bool:
        if k == len(order):
            return True
        d = demands[order[k]]
        tried: set[tuple[float, ...]] = set()
        for i, f in enumerate(free):
            key = tuple(f.vector(sorted(f.names)))
            if key in tried or not _fits(d, f):
                continue
            tried.add(key)
            if place(k + 1, [*free[:i], f - d, *free[i + 1:]]):
                return True
        return False

    return place(0, list(caps))


def runnable(job: Job, cluster: Cluster) -> bool:
    """Every stage of ``job`` fits the machines up at the end of the timeline."""
    caps = list(final_state(cluster).values())
    for stage in job.stages:
        if stage.gang:
            if not _gang_fits([t.demand for t in stage.tasks], caps):
                return False
        elif not all(any(_fits(t.demand, c) for c in caps) for t in stage.tasks):
            return False
    return True


@st.composite
def clusters(draw: st.DrawFn, *, slots: bool | None = None) -> Cluster:
    """1-4 machines over cpu/mem (and ``slots``, unless the draw or ``slots`` says not); the
    first is an anchor, up throughout; the others may start down, join, leave, be scaled or
    slowed."""
    with_slots = draw(st.booleans()) if slots is None else slots
    n = draw(st.integers(1, 4))
    machines = []
    for i in range(n):
        amounts = {"cpu": draw(halves), "mem": float(draw(st.integers(1, 16)))}
        if with_slots:
            amounts["slots"] = float(draw(st.integers(1, 4)))
        if draw(st.integers(0, 3)) == 0:
            amounts["io"] = float(draw(st.integers(1, 4)))
        machines.append(Machine(f"m{i}", Resources(amounts)))
    timeline: list[CapacityChange] = []
    down: set[str] = set()
    for m in machines[1:]:
        up = draw(st.booleans())
        if not up:
            down.add(m.id)
        times = sorted(draw(st.sets(st.integers(0, 60), max_size=3)))
        for t in times:
            timeline.append(change(t, m.id, "leave" if up else "join"))
            up = not up
    for _ in range(draw(st.integers(0, 2))):
        m = draw(st.sampled_from(machines))
        action = draw(st.sampled_from(["speed", "scale"]))
        factor = draw(st.sampled_from([0.5, 2.0] if action == "speed" else [0.5, 1.5]))
        t = draw(st.integers(0, 60))
        timeline.append(change(t, m.id, action, factor))
        if action == "scale" and factor < 1 and m.id == machines[0].id:
            # the anchor is scaled back before the end: it stays big enough for every task
            timeline.append(change(t + draw(st.integers(1, 40)), m.id, "scale", 1.0))
    timeline.sort(key=lambda c: c.time)
    return Cluster(tuple(machines), tuple(timeline), frozenset(down))


@st.composite
def utilities(draw: st.DrawFn, submit: float) -> TimeUtility:
    kind = draw(st.sampled_from(["constant", "deadline", "soft_hard", "truncated", "sigmoid",
                                 "piecewise"]))
    goal = submit + draw(st.integers(1, 200))
    if kind == "deadline":
        return DeadlineStep(goal, 2.0, -1.0)
    if kind == "soft_hard":
        return SoftHard(submit, goal, goal + draw(st.integers(0, 100)))
    if kind == "truncated":
        return TruncatedLinear(submit, goal, 0.01)
    if kind == "sigmoid":
        return Sigmoid(3.0, 0.1, goal)
    if kind == "piecewise":
        return PiecewiseLinear(((submit, 5.0), (goal, 5.0), (goal + 50, 0.0)))
    return Constant(draw(st.floats(-5, 5)))


@st.composite
def demands(draw: st.DrawFn, home: Resources) -> Resources:
    """A demand that fits ``home``: sometimes all of it, else a random part of each resource."""
    if draw(st.integers(0, 5)) == 0:
        return home
    amounts = {}
    for r in home.names:
        cap = home[r]
        if r == "slots":
            amounts[r] = float(draw(st.integers(1, max(1, int(cap)))))
        else:
            amounts[r] = min(cap, draw(st.integers(0, 8)) * cap / 8)
    if "slots" not in amounts and amounts.get("cpu", 0) == 0:
        amounts["cpu"] = home["cpu"] / 2  # a slot-less task always takes some cpu
    return Resources(amounts)


@st.composite
def scenarios(draw: st.DrawFn, *, max_jobs: int = 6, slots: bool | None = None) -> Scenario:
    cluster = draw(clusters(slots=slots))
    home = cluster.machines[0].capacity  # the anchor: every task fits it
    jobs = []
    for j in range(draw(st.integers(1, max_jobs))):
        submit = float(draw(st.integers(0, 50)))
        stages: list[Stage] = []
        n_stages = draw(st.integers(1, 3))
        for s in range(n_stages):
            gang = draw(st.integers(0, 5)) == 0
            tasks = []
            for _ in range(draw(st.integers(1, 4))):
                demand = draw(demands(home))
                phases: tuple[UsagePhase, ...] = ()
                if draw(st.integers(0, 4)) == 0:  # actual usage differs from the declaration
                    phases = (UsagePhase(0.5, demand * 2), UsagePhase(0.5, demand * 0.5))
                tasks.append(Task(float(draw(st.integers(1, 20))), demand, phases))
            if gang:  # a gang's tasks must fit the anchor together
                tasks = [Task(t.duration, home * (1 / len(tasks)), t.phases) for t in tasks]
            # a chain, or a fan-in: the last of three stages waits for both earlier ones
            after: tuple[str, ...] = ()
            if s:
                fan = n_stages == 3 and s == 2 and draw(st.booleans())
                after = ("s0", "s1") if fan else (f"s{s - 1}",)
            kind = "reduce" if s == n_stages - 1 and s else "map"
            stages.append(Stage(f"s{s}", tuple(tasks), after=after, kind=kind, gang=gang))
        jobs.append(Job(f"j{j}", submit, tuple(stages), draw(utilities(submit)),
                        weight=float(draw(st.integers(1, 3))), priority=draw(st.integers(0, 2))))
    return Scenario(cluster, tuple(jobs))


def all_gang_layouts(n: int, machines: int) -> list[tuple[int, ...]]:
    """Every way to put ``n`` gang members on ``machines`` machines (tests of the oracle)."""
    return list(itertools.product(range(machines), repeat=n))
