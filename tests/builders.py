"""Small builders and run-level invariant checks shared by the test modules.

``make_cluster`` / ``make_job`` build model objects with terse defaults, ``run`` simulates them
under a registered policy with every runtime check switched on, and ``check_run_invariants``
re-derives the scheduling contract from the recorded attempts alone (so it does not trust the
core's own counters).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from utilon.core import ClusterSnapshot, Decision, Grant, Trigger
from utilon.core.scheduler import Attempt
from utilon.model import (
    CapacityAction,
    CapacityChange,
    Cluster,
    Constant,
    DeadlineStep,
    Job,
    Machine,
    Resources,
    Stage,
    Task,
    TimeUtility,
)
from utilon.policies import Policy, make_policy
from utilon.sim import SimResult, Simulation

EPS = 1e-6

BASELINES: tuple[str, ...] = ("fifo", "fair", "fair-slots", "edf-n", "edf-p")


# ----------------------------------------------------------------------------- model builders
def res(**amounts: float) -> Resources:
    return Resources(**amounts)


def make_cluster(
    n: int = 3,
    slots: float = 4,
    cpu: float = 4,
    mem: float = 16,
    *,
    timeline: Iterable[CapacityChange] = (),
    initially_down: Iterable[str] = (),
    capacities: Sequence[Mapping[str, float]] | None = None,
    **attrs: Any,
) -> Cluster:
    """``n`` identical machines ``m0..m{n-1}`` (or one per entry of ``capacities``)."""
    if capacities is None:
        caps: list[Mapping[str, float]] = [dict(slots=slots, cpu=cpu, mem=mem)] * n
    else:
        caps = list(capacities)
    machines = tuple(
        Machine(f"m{i}", Resources(dict(c)), tuple(sorted(attrs.items())))
        for i, c in enumerate(caps)
    )
    return Cluster(machines, tuple(timeline), frozenset(initially_down))


def change(time: float, machine: str, action: str, factor: float = 1.0) -> CapacityChange:
    return CapacityChange(time, machine, CapacityAction(action), factor)


def make_job(
    id: str,
    submit: float = 0,
    maps: int = 4,
    reduces: int = 1,
    dur: float = 10,
    deadline: float | None = None,
    *,
    reduce_dur: float | None = None,
    demand: Resources | None = None,
    reduce_demand: Resources | None = None,
    utility: TimeUtility | None = None,
    priority: int = 0,
    weight: float = 1.0,
    tenant: str = "default",
    gang: bool = False,
    phases: tuple = (),
) -> Job:
    """A MapReduce job: ``maps`` map tasks, then ``reduces`` reduce tasks (0 = map-only).

    The default demand is one slot, one cpu and one unit of memory per task.  ``deadline`` gives
    a ``DeadlineStep`` utility (else ``utility`` or a constant).  ``gang`` makes the map stage a
    gang; ``phases`` (UsagePhase tuple) is applied to every map task.
    """
    d = demand if demand is not None else Resources(slots=1, cpu=1, mem=1)
    rd = reduce_demand if reduce_demand is not None else d
    if utility is None:
        utility = DeadlineStep(deadline) if deadline is not None else Constant()
    stages = [Stage("map", tuple(Task(dur, d, phases) for _ in range(maps)), kind="map",
                    gang=gang)]
    if reduces:
        rdur = reduce_dur if reduce_dur is not None else dur
        stages.append(Stage("reduce", tuple(Task(rdur, rd) for _ in range(reduces)),
                            after=("map",), kind="reduce"))
    return Job(id, float(submit), tuple(stages), utility, tenant, weight, priority)


def single_stage_job(id: str, tasks: Sequence[tuple[float, Resources]], submit: float = 0,
                     *, gang: bool = False, **kw: Any) -> Job:
    """A job with one stage ``s`` made of explicit (duration, demand) tasks."""
    stage = Stage("s", tuple(Task(d, r) for d, r in tasks), gang=gang)
    return Job(id, float(submit), (stage,), **kw)


# ----------------------------------------------------------------------------- waiting
def wait_for(fn: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Poll ``fn`` every 50 ms until it is true; fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if fn():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# ----------------------------------------------------------------------------- running
def run(cluster: Cluster, jobs: Sequence[Job], policy: str | Policy = "fifo", *,
        horizon: float | None = None, on_decision: Any = None, **params: Any) -> SimResult:
    """Simulate ``jobs`` on ``cluster`` under ``policy`` (a registered name with ``params``, or
    a policy object) with ``validate=True`` and recorded attempts."""
    pol = policy if isinstance(policy, Policy) else make_policy(policy, params)
    sim = Simulation(cluster, jobs, pol, horizon=horizon, validate=True, record_attempts=True,
                     on_decision=on_decision)
    return sim.run()


def job_times(result: SimResult) -> list[tuple[str, float | None, float | None]]:
    return [(j.id, j.start, j.finish) for j in result.core.jobs.values()]


def attempts_of(result: SimResult, job: str | None = None,
                outcome: str | None = None) -> list[Attempt]:
    return [a for a in result.core.attempts
            if (job is None or a.task.job == job) and (outcome is None or a.outcome == outcome)]


def max_concurrency(attempts: Iterable[Attempt]) -> int:
    """Peak number of simultaneously running attempts (ends before starts at equal times)."""
    events = []
    for a in attempts:
        events.append((a.start, 1))
        events.append((a.end, -1))
    peak = cur = 0
    for _, d in sorted(events, key=lambda e: (e[0], e[1])):
        cur += d
        peak = max(peak, cur)
    return peak


def running_at(result: SimResult, t: float, job: str | None = None) -> int:
    """Attempts running at instant ``t`` (start <= t < end)."""
    return sum(1 for a in attempts_of(result, job) if a.start <= t < a.end)


# ----------------------------------------------------------------------------- invariants
# one definition, shared with `utilon check-policy` (utilon.checks)
from utilon.checks import check_run_invariants as check_run_invariants  # noqa: E402
from utilon.checks import up_intervals as up_intervals  # noqa: E402


# ----------------------------------------------------------------------------- test policies
def grant_all(snap: ClusterSnapshot) -> Decision:
    """Every active job, in arrival order, with no limit."""
    return Decision(grants=tuple(Grant(j.id) for j in snap.jobs))


class ScriptedPolicy(Policy):
    """A test-only policy (not registered): ``fn(snapshot) -> Decision``, optional triggers and
    tick; records every snapshot it is shown in ``calls``."""

    name = "test-scripted"
    summary = "test policy driven by a function"

    def __init__(self, fn: Callable[[ClusterSnapshot], Decision] = grant_all,
                 triggers: Iterable[Trigger] | None = None, tick: float | None = None,
                 uses_free: bool = False) -> None:
        self.fn = fn
        if triggers is not None:
            self.triggers = frozenset(triggers)  # type: ignore[misc]
        self.tick = tick
        self.uses_free_capacity = uses_free  # type: ignore[misc]
        self.calls: list[ClusterSnapshot] = []

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        self.calls.append(snapshot)
        return self.fn(snapshot)
