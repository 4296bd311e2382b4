"""Small builders and run-level invariant checks shared by the test modules.

``make_cluster`` / ``make_job`` build model objects with terse defaults, ``run`` simulates them
under a registered policy with every runtime check switched on, and ``check_run_invariants``
re-derives the scheduling contract from the recorded attempts alone (so it does not trust the
core's own counters).
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
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
def up_intervals(cluster: Cluster, end: float) -> dict[str, list[tuple[float, float]]]:
    """For each machine, the closed intervals during which it is up (JOIN/LEAVE timeline)."""
    state = {m.id: m.id not in cluster.initially_down for m in cluster.machines}
    since = {m.id: 0.0 for m in cluster.machines}
    out: dict[str, list[tuple[float, float]]] = {m.id: [] for m in cluster.machines}
    for ch in cluster.timeline:
        if ch.action is CapacityAction.JOIN:
            assert not state[ch.machine], f"JOIN of up machine {ch.machine} at {ch.time}"
            state[ch.machine] = True
            since[ch.machine] = ch.time
        elif ch.action is CapacityAction.LEAVE:
            assert state[ch.machine], f"LEAVE of down machine {ch.machine} at {ch.time}"
            state[ch.machine] = False
            out[ch.machine].append((since[ch.machine], ch.time))
    for mid, up in state.items():
        if up:
            out[mid].append((since[mid], max(end, since[mid]) + 1e9))
    return out


def _slot_limit_of(result: SimResult) -> tuple[int, int | None] | None:
    pol = result.core.policy
    if pol.name == "fair-slots":
        return (pol.k, pol.reduce_k)  # type: ignore[attr-defined]
    return None


def check_run_invariants(result: SimResult, cluster: Cluster, jobs: Sequence[Job]) -> None:
    """Re-derive the scheduling contract from ``result.core.attempts``."""
    core = result.core
    attempts = core.attempts
    by_id = {j.id: j for j in jobs}
    assert set(core.jobs) <= set(by_id)

    # -- attempts are well formed --------------------------------------------------------
    for a in attempts:
        assert a.outcome in {"done", "killed", "lost", "failed"}, a
        assert a.start <= a.end + EPS, a
        assert a.task.job in by_id, a
        job = by_id[a.task.job]
        assert 0 <= a.task.stage < len(job.stages), a
        assert 0 <= a.task.index < len(job.stages[a.task.stage].tasks), a
        assert a.start >= job.submit - EPS, f"{a} starts before its job is submitted"

    per_task: dict[tuple[str, int, int], list[Attempt]] = defaultdict(list)
    for a in attempts:
        per_task[tuple(a.task)].append(a)

    # -- finished jobs: every task done exactly once, the rest re-run -------------------
    done_end: dict[tuple[str, int, int], float] = {}
    for jid, rt in core.jobs.items():
        job = by_id[jid]
        if rt.finish is None:
            continue
        last = -math.inf
        for si, st in enumerate(job.stages):
            for ti in range(len(st.tasks)):
                tries = per_task.get((jid, si, ti), [])
                done = [a for a in tries if a.outcome == "done"]
                assert len(done) == 1, f"{jid}/{st.name}/{ti}: {len(done)} done attempts"
                d = done[0]
                done_end[(jid, si, ti)] = d.end
                last = max(last, d.end)
                for other in tries:
                    if other is not d:
                        assert other.end <= d.start + EPS, (
                            f"{jid}/{st.name}/{ti}: attempt {other} overlaps the done one {d}")
        assert abs(rt.finish - last) <= EPS, f"{jid}: finish {rt.finish} != last task end {last}"
        first = min(a.start for a in attempts if a.task.job == jid)
        assert rt.start is not None and abs(rt.start - first) <= EPS, (
            f"{jid}: start {rt.start} != first attempt {first}")
        # utility of a finished job lies within its bounds
        lo, hi = job.utility.bounds
        u = job.utility.value(rt.finish)
        assert lo - 1e-9 <= u <= hi + 1e-9, f"{jid}: utility {u} outside bounds {(lo, hi)}"
    # a task never has two attempts at once
    for key, tries in per_task.items():
        tries = sorted(tries, key=lambda a: (a.start, a.end))
        for a, b in itertools.pairwise(tries):
            assert a.end <= b.start + EPS, f"{key}: overlapping attempts {a} and {b}"

    # -- stage order ---------------------------------------------------------------------
    for a in attempts:
        job = by_id[a.task.job]
        stage = job.stages[a.task.stage]
        for dep in stage.after:
            di = job.stage_index(dep)
            for ti in range(len(job.stages[di].tasks)):
                dones = [x for x in per_task.get((job.id, di, ti), []) if x.outcome == "done"]
                assert dones, f"{a} started but {job.id}/{dep}/{ti} never finished"
                assert dones[0].end <= a.start + EPS, (
                    f"{a} started at {a.start} before {job.id}/{dep}/{ti} ended at "
                    f"{dones[0].end}")

    # -- machines: up while used, capacity (or slot count) never exceeded -----------------
    end = max([result.end_time, *(a.end for a in attempts)])
    ups = up_intervals(cluster, end)
    for a in attempts:
        assert any(s - EPS <= a.start and a.end <= e + EPS for s, e in ups[a.machine]), (
            f"{a} runs while machine {a.machine} is down (up intervals {ups[a.machine]})")
        if a.outcome == "lost":
            assert any(ch.time == a.end and ch.machine == a.machine
                       and ch.action is CapacityAction.LEAVE for ch in cluster.timeline), (
                f"{a} lost without its machine leaving")

    slot_limit = _slot_limit_of(result)
    scaled = any(ch.action is CapacityAction.SCALE for ch in cluster.timeline)
    names = cluster.resource_names
    by_machine: dict[str, list[Attempt]] = defaultdict(list)
    for a in attempts:
        by_machine[a.machine].append(a)
    for mid, atts in by_machine.items():
        machine = cluster.machine(mid)
        cap = machine.capacity.vector(names)
        events = []
        for a in atts:
            task = by_id[a.task.job].stages[a.task.stage].tasks[a.task.index]
            is_reduce = by_id[a.task.job].stages[a.task.stage].kind == "reduce"
            v = task.demand.vector(names)
            events.append((a.start, 1, v, is_reduce))
            events.append((a.end, -1, v, is_reduce))
        events.sort(key=lambda e: (e[0], e[1]))  # ends before starts at equal times
        used = [0.0] * len(names)
        ntasks = nreduce = 0
        for t, sign, v, is_reduce in events:
            used = [u + sign * x for u, x in zip(used, v, strict=True)]
            ntasks += sign
            nreduce += sign if is_reduce else 0
            if sign < 0:
                continue
            if slot_limit is not None:
                k, rk = slot_limit
                if rk is None:
                    assert ntasks <= k, f"{mid} runs {ntasks} > k={k} tasks at t={t}"
                else:
                    assert ntasks - nreduce <= k and nreduce <= rk, (
                        f"{mid} runs {ntasks - nreduce} maps / {nreduce} reduces at t={t}")
            elif not scaled:
                for name, u, c in zip(names, used, cap, strict=True):
                    assert u <= c + EPS, (
                        f"{mid}: declared {name} {u} exceeds capacity {c} at t={t}")


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
