"""Random small scenarios under every baseline policy: the run-level invariants hold, every job
finishes, and a run is deterministic."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from builders import BASELINES, change, check_run_invariants, job_times, run
from utilon.model import (
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
from utilon.policies import policy_names

# (policy, params): every baseline with its defaults, plus fair-slots with a single slot
CONFIGS: tuple[tuple[str, dict[str, int]], ...] = (
    *((name, {}) for name in BASELINES),
    ("fair-slots", {"k": 1}),
    ("fair-slots", {"k": 2, "reduce_k": 1}),
)

halves = st.integers(1, 16).map(lambda x: x / 2)  # 0.5 .. 8 in steps of 0.5


@dataclass(frozen=True)
class Scenario:
    cluster: Cluster
    jobs: tuple[Job, ...]


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    n = draw(st.integers(1, 4))
    machines = []
    for i in range(n):
        cap = Resources(slots=draw(st.integers(1, 4)), cpu=draw(halves),
                        mem=draw(st.integers(1, 16)))
        machines.append(Machine(f"m{i}", cap))
    # m0 is always up; every other machine may start down and join / leave a few times
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
    if draw(st.booleans()):
        m = draw(st.sampled_from(machines))
        timeline.append(change(draw(st.integers(0, 60)), m.id, "speed",
                               draw(st.sampled_from([0.5, 2.0]))))
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
def scenarios(draw: st.DrawFn) -> Scenario:
    cluster = draw(clusters())
    home = cluster.machines[0].capacity  # never leaves: every task must fit it
    jobs = []
    for j in range(draw(st.integers(1, 6))):
        submit = float(draw(st.integers(0, 50)))
        stages = []
        for s in range(draw(st.integers(1, 2))):
            tasks = []
            for _ in range(draw(st.integers(1, 4))):
                demand = Resources(slots=1,
                                   cpu=min(home["cpu"], draw(halves)),
                                   mem=draw(st.integers(0, int(home["mem"]))))
                phases: tuple[UsagePhase, ...] = ()
                if draw(st.integers(0, 4)) == 0:  # actual usage differs from the declaration
                    phases = (UsagePhase(0.5, demand * 2), UsagePhase(0.5, demand * 0.5))
                tasks.append(Task(float(draw(st.integers(1, 20))), demand, phases))
            stages.append(Stage(f"s{s}", tuple(tasks), after=(f"s{s - 1}",) if s else (),
                                kind="reduce" if s else "map"))
        jobs.append(Job(f"j{j}", submit, tuple(stages), draw(utilities(submit)),
                        weight=float(draw(st.integers(1, 3))), priority=draw(st.integers(0, 2))))
    return Scenario(cluster, tuple(jobs))


def test_configs_cover_every_baseline() -> None:
    assert {name for name, _ in CONFIGS} == set(BASELINES)
    assert set(BASELINES) <= set(policy_names())


# at least 100 scenarios (about 5 s); more under HYPOTHESIS_PROFILE=thorough
@settings(max_examples=max(100, settings().max_examples))
@given(scenarios())
def test_random_scenarios_under_every_baseline(sc: Scenario) -> None:
    for name, params in CONFIGS:
        first = run(sc.cluster, sc.jobs, name, **params)
        label = f"{name}{params}"
        assert first.stopped_early == "", f"{label}: {first.stopped_early}"
        assert all(f is not None for _, _, f in job_times(first)), label
        assert len(first.core.jobs) == len(sc.jobs)
        check_run_invariants(first, sc.cluster, sc.jobs)
        assert first.end_time == max(f for _, _, f in job_times(first))  # type: ignore[type-var]
        # determinism: the same scenario gives the same schedule, attempt by attempt
        second = run(sc.cluster, sc.jobs, name, **params)
        assert job_times(second) == job_times(first), label
        assert second.core.attempts == first.core.attempts, label
