"""Liveness and invariants of a policy, checked on random scenarios.

What ``utilon check-policy POLICY`` runs on any policy (a built-in, an installed plugin's, a
``module:Class``), and what ``tests/test_properties.py`` runs on every registered one.  Each
random scenario (``scenarios``: heterogeneous machines over several resources with or without
``slots``, tasks whose demands go up to a machine's whole capacity, gang stages, chains and
fans of stages, machines joining, leaving, scaled and slowed) is simulated with every runtime
check of the core switched on, and then:

* **liveness**: every job that can run (``runnable``: it fits the machines that are up once
  the timeline has ended) finishes, and the run does not stop early unless a job that cannot
  run is left;
* **invariants** (``check_run_invariants``, re-derived from the recorded attempts alone, not
  from the core's counters): no machine's declared capacity exceeded, each task done exactly
  once, stage order kept, nothing runs on a machine that is down, utilities in range;
* **determinism**: the same scenario gives the same schedule, attempt by attempt;
* **decisions**: every decision keeps the decision contract (the core's validator);
* **refusals**: a policy may refuse a job up front (``Policy.unrunnable``) only when an
  independent oracle confirms it cannot run under the policy's parameters (``REFUSALS``;
  ``fair-slots``' static slots) -- any other refusal of a runnable job is a liveness failure.

``check_policy`` drives the random search with hypothesis, which shrinks a failure to the
smallest scenario it can find; ``write_case`` saves that scenario as JSON, which
``read_case`` / ``replay`` (``utilon check-policy --replay FILE``) run again.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import le
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from utilon.core.feasibility import Unrunnable
from utilon.errors import InvalidDecision, UtilonError
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

if TYPE_CHECKING:  # the simulator is imported when a check runs
    from utilon.core.records import Attempt
    from utilon.sim import SimResult

__all__ = ["MODES", "REFUSALS", "CheckReport", "Failure", "PropertyFailure", "Scenario",
           "check_liveness", "check_policy", "check_run_invariants", "clusters", "describe",
           "fair_slots_can_run", "final_state", "read_case", "replay", "runnable", "scenarios",
           "simulate", "up_intervals", "write_case"]

EPS = 1e-6
MODES = ("declared", "realistic")
"""What policies know of task durations in ``check_policy``'s runs: the declared durations,
and priors off by the error measured on a real trace, learned online (``sim.estimates``)."""


class PropertyFailure(AssertionError):
    """A property does not hold; ``property`` names it (liveness, invariants, ...)."""

    def __init__(self, prop: str, message: str) -> None:
        super().__init__(message)
        self.property = prop


def _fail(prop: str, message: str) -> PropertyFailure:
    return PropertyFailure(prop, message)


# ------------------------------------------------------------------------ random scenarios
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


def _fits(demand: Resources, cap: Resources, eps: float = EPS) -> bool:
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
    """The oracle of "this job can run", independent of the core: every stage of ``job`` fits
    the machines up at the end of the timeline (each task on some machine, a gang stage all at
    once: exhaustive search on these small instances)."""
    caps = list(final_state(cluster).values())
    for stage in job.stages:
        if stage.gang:
            if not _gang_fits([t.demand for t in stage.tasks], caps):
                return False
        elif not all(any(_fits(t.demand, c) for c in caps) for t in stage.tasks):
            return False
    return True


def _change(time: float, machine: str, action: str, factor: float = 1.0) -> CapacityChange:
    return CapacityChange(time, machine, CapacityAction(action), factor)


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
            timeline.append(_change(t, m.id, "leave" if up else "join"))
            up = not up
    for _ in range(draw(st.integers(0, 2))):
        m = draw(st.sampled_from(machines))
        action = draw(st.sampled_from(["speed", "scale"]))
        factor = draw(st.sampled_from([0.5, 2.0] if action == "speed" else [0.5, 1.5]))
        t = draw(st.integers(0, 60))
        timeline.append(_change(t, m.id, action, factor))
        if action == "scale" and factor < 1 and m.id == machines[0].id:
            # the anchor is scaled back before the end: it stays big enough for every task
            timeline.append(_change(t + draw(st.integers(1, 40)), m.id, "scale", 1.0))
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
    """A random cluster and 1-``max_jobs`` jobs of 1-3 stages whose tasks all fit the anchor
    (the first machine, up at the end at a scale of at least 1), so every job can run."""
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


# ------------------------------------------------------------------------ run invariants
def up_intervals(cluster: Cluster, end: float) -> dict[str, list[tuple[float, float]]]:
    """For each machine, the closed intervals during which it is up (JOIN/LEAVE timeline)."""
    state = {m.id: m.id not in cluster.initially_down for m in cluster.machines}
    since = {m.id: 0.0 for m in cluster.machines}
    out: dict[str, list[tuple[float, float]]] = {m.id: [] for m in cluster.machines}
    for ch in cluster.timeline:
        if ch.action is CapacityAction.JOIN:
            if state[ch.machine]:
                raise _fail("invariants", f"JOIN of up machine {ch.machine} at {ch.time}")
            state[ch.machine] = True
            since[ch.machine] = ch.time
        elif ch.action is CapacityAction.LEAVE:
            if not state[ch.machine]:
                raise _fail("invariants", f"LEAVE of down machine {ch.machine} at {ch.time}")
            state[ch.machine] = False
            out[ch.machine].append((since[ch.machine], ch.time))
    for mid, up in state.items():
        if up:
            out[mid].append((since[mid], max(end, since[mid]) + 1e9))
    return out


def _slot_limit_of(result: SimResult) -> tuple[int, int | None] | None:
    pol: Any = result.core.policy
    if pol.name == "fair-slots":
        return (pol.k, pol.reduce_k)
    return None


def check_run_invariants(result: SimResult, cluster: Cluster, jobs: Sequence[Job]) -> None:
    """Re-derive the scheduling contract from ``result.core.attempts`` (a ``SimResult``
    recorded with ``record_attempts=True``); ``PropertyFailure("invariants", ...)`` if not."""
    core = result.core
    attempts = core.attempts
    by_id = {j.id: j for j in jobs}
    if not set(core.jobs) <= set(by_id):
        raise _fail("invariants", f"jobs {sorted(set(core.jobs) - set(by_id))} were never "
                                  "submitted")

    # -- attempts are well formed --------------------------------------------------------
    for a in attempts:
        if a.outcome not in {"done", "killed", "lost", "failed"} or a.start > a.end + EPS \
                or a.task.job not in by_id:
            raise _fail("invariants", f"malformed attempt {a}")
        job = by_id[a.task.job]
        if not (0 <= a.task.stage < len(job.stages)
                and 0 <= a.task.index < len(job.stages[a.task.stage].tasks)):
            raise _fail("invariants", f"attempt {a} of a task the job does not have")
        if a.start < job.submit - EPS:
            raise _fail("invariants", f"{a} starts before its job is submitted")

    per_task: dict[tuple[str, int, int], list[Attempt]] = defaultdict(list)
    for a in attempts:
        per_task[(a.task.job, a.task.stage, a.task.index)].append(a)

    # -- finished jobs: every task done exactly once, the rest re-run -------------------
    for jid, rt in core.jobs.items():
        job = by_id[jid]
        if rt.finish is None:
            continue
        last = -math.inf
        for si, st_ in enumerate(job.stages):
            for ti in range(len(st_.tasks)):
                tries = per_task.get((jid, si, ti), [])
                done = [a for a in tries if a.outcome == "done"]
                if len(done) != 1:
                    raise _fail("invariants", f"{jid}/{st_.name}/{ti}: {len(done)} done "
                                              "attempts")
                d = done[0]
                last = max(last, d.end)
                for other in tries:
                    if other is not d and other.end > d.start + EPS:
                        raise _fail("invariants", f"{jid}/{st_.name}/{ti}: attempt {other} "
                                                  f"overlaps the done one {d}")
        if abs(rt.finish - last) > EPS:
            raise _fail("invariants", f"{jid}: finish {rt.finish} != last task end {last}")
        first = min(a.start for a in attempts if a.task.job == jid)
        if rt.start is None or abs(rt.start - first) > EPS:
            raise _fail("invariants", f"{jid}: start {rt.start} != first attempt {first}")
        lo, hi = job.utility.bounds
        u = job.utility.value(rt.finish)
        if not lo - 1e-9 <= u <= hi + 1e-9:
            raise _fail("invariants", f"{jid}: utility {u} outside bounds {(lo, hi)}")
    for key, tries in per_task.items():  # a task never has two attempts at once
        tries = sorted(tries, key=lambda a: (a.start, a.end))
        for a, b in itertools.pairwise(tries):
            if a.end > b.start + EPS:
                raise _fail("invariants", f"{key}: overlapping attempts {a} and {b}")

    # -- stage order ---------------------------------------------------------------------
    for a in attempts:
        job = by_id[a.task.job]
        for dep in job.stages[a.task.stage].after:
            di = job.stage_index(dep)
            for ti in range(len(job.stages[di].tasks)):
                dones = [x for x in per_task.get((job.id, di, ti), []) if x.outcome == "done"]
                if not dones:
                    raise _fail("invariants", f"{a} started but {job.id}/{dep}/{ti} never "
                                              "finished")
                if dones[0].end > a.start + EPS:
                    raise _fail("invariants", f"{a} started at {a.start} before "
                                              f"{job.id}/{dep}/{ti} ended at {dones[0].end}")

    # -- machines: up while used, capacity (or slot count) never exceeded -----------------
    end = max([result.end_time, *(a.end for a in attempts)])
    ups = up_intervals(cluster, end)
    for a in attempts:
        if not any(s - EPS <= a.start and a.end <= e + EPS for s, e in ups[a.machine]):
            raise _fail("invariants", f"{a} runs while machine {a.machine} is down (up "
                                      f"intervals {ups[a.machine]})")
        if a.outcome == "lost" and not any(
                ch.time == a.end and ch.machine == a.machine
                and ch.action is CapacityAction.LEAVE for ch in cluster.timeline):
            raise _fail("invariants", f"{a} lost without its machine leaving")
    _check_capacity(result, cluster, by_id, attempts)


def _check_capacity(result: SimResult, cluster: Cluster, by_id: dict[str, Job],
                    attempts: Sequence[Attempt]) -> None:
    slot_limit = _slot_limit_of(result)
    scaled = any(ch.action is CapacityAction.SCALE for ch in cluster.timeline)
    names = cluster.resource_names
    by_machine: dict[str, list[Attempt]] = defaultdict(list)
    for a in attempts:
        by_machine[a.machine].append(a)
    for mid, atts in by_machine.items():
        cap = cluster.machine(mid).capacity.vector(names)
        events = []
        for a in atts:
            stage = by_id[a.task.job].stages[a.task.stage]
            v = stage.tasks[a.task.index].demand.vector(names)
            events.append((a.start, 1, v, stage.kind == "reduce"))
            events.append((a.end, -1, v, stage.kind == "reduce"))
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
                if (rk is None and ntasks > k) or (rk is not None and (
                        ntasks - nreduce > k or nreduce > rk)):
                    raise _fail("invariants", f"{mid} runs {ntasks - nreduce} maps / "
                                              f"{nreduce} reduces at t={t} (k={k}, "
                                              f"reduce_k={rk})")
            elif not scaled:
                for name, u, c in zip(names, used, cap, strict=True):
                    if u > c + EPS:
                        raise _fail("invariants", f"{mid}: declared {name} {u} exceeds "
                                                  f"capacity {c} at t={t}")


# ------------------------------------------------------------------------ liveness
def fair_slots_can_run(job: Job, sc: Scenario, k: int, reduce_k: int | None) -> bool:
    """Independent check of a ``fair-slots`` refusal: can every gang of ``job`` get a static
    slot per task, each on a final-state machine it fits (exhaustive on these sizes)?"""
    caps = list(final_state(sc.cluster).values())
    names = sc.cluster.resource_names
    for stage in job.stages:
        if not stage.gang:
            continue
        per = reduce_k if (reduce_k is not None and stage.kind == "reduce") else k
        homes = [[i for i, c in enumerate(caps)
                  if all(map(le, t.demand.vector(names), (x + EPS for x in c.vector(names))))]
                 for t in stage.tasks]
        if not any(all(layout.count(i) <= per for i in set(layout))
                   for layout in itertools.product(*homes)):
            return False
    return True


#: Policies that may refuse a job up front, and the independent oracle of whether the job
#: can run under the policy's parameters: ``can_run(job, scenario, params)``.
REFUSALS: dict[str, Callable[[Job, Scenario, dict[str, Any]], bool]] = {
    "fair-slots": lambda job, sc, p: fair_slots_can_run(job, sc, p.get("k", 4),
                                                        p.get("reduce_k")),
}


def simulate(sc: Scenario, name: str, params: dict[str, Any], estimates: str = "declared",
             seed: int = 0, wall_limit: float | None = None) -> SimResult:
    """The scenario under policy ``name`` with ``params``, validated after every event and
    with every attempt recorded, with the priors of ``estimates``: a ``SimResult``."""
    from utilon.policies import make_policy
    from utilon.sim import Simulation
    from utilon.sim.estimates import parse_mode, with_priors

    mode = parse_mode(estimates)
    jobs = with_priors(sc.jobs, mode, seed) if mode.errors is not None else sc.jobs
    learning = None if mode.learning == "declared" else mode.learning
    kw: dict[str, Any] = {} if learning is None else {"estimates": learning}
    return Simulation(sc.cluster, jobs, make_policy(name, params), validate=True,
                      record_attempts=True, wall_limit=wall_limit, **kw).run()


def check_liveness(sc: Scenario, name: str, params: dict[str, Any],
                   estimates: str = "declared", seed: int = 0,
                   wall_limit: float | None = None) -> None:
    """Every property of the module docstring on one scenario; ``PropertyFailure`` names
    the first that does not hold."""
    label = f"{name}{params or ''} estimates={estimates}"
    can_run = REFUSALS.get(name)
    try:
        first = _run(sc, name, params, estimates, seed, wall_limit, label)
    except Unrunnable as refused:
        job = next(j for j in sc.jobs if j.id == refused.job)
        if can_run is None or can_run(job, sc, params):
            raise _fail("liveness", f"{label} refused {refused.job}, which can run: "
                                    f"{refused.message}") from None
        return
    able = [j.id for j in sc.jobs
            if runnable(j, sc.cluster) and (can_run is None or can_run(j, sc, params))]
    unfinished = [j for j in able if first.core.jobs[j].finish is None]
    if unfinished:
        raise _fail("liveness", f"{label}: {', '.join(unfinished)} never finished, though "
                                f"they can run ({first.stopped_early or 'the run ended'})")
    if len(able) == len(sc.jobs) and first.stopped_early:
        raise _fail("liveness", f"{label}: stopped early: {first.stopped_early}")
    check_run_invariants(first, sc.cluster, sc.jobs)
    second = _run(sc, name, params, estimates, seed, wall_limit, label)
    if _times(second) != _times(first) or second.core.attempts != first.core.attempts:
        raise _fail("determinism", f"{label}: the same scenario gave another schedule")


def _run(sc: Scenario, name: str, params: dict[str, Any], estimates: str, seed: int,
         wall_limit: float | None, label: str) -> SimResult:
    try:
        return simulate(sc, name, params, estimates, seed, wall_limit)
    except InvalidDecision as e:
        raise _fail("decisions", f"{label}: {e.one_line()}") from None


def _times(result: SimResult) -> list[tuple[str, float | None, float | None]]:
    return [(j.id, j.start, j.finish) for j in result.core.jobs.values()]


# ------------------------------------------------------------------------ check_policy
@dataclass(frozen=True)
class Failure:
    """The smallest failing example found: which property, why, and how to re-run it."""

    property: str
    message: str
    scenario: Scenario
    estimates: str
    seed: int


@dataclass(frozen=True)
class CheckReport:
    policy: str
    params: dict[str, Any]
    examples: int
    """scenarios run (hypothesis' shrinking runs more)"""
    seed: int
    failure: Failure | None


def check_policy(name: str, params: dict[str, Any] | None = None, *, examples: int = 100,
                 seed: int = 0, estimates: Sequence[str] = MODES,
                 wall_limit: float | None = 60.0) -> CheckReport:
    """Run the properties over ``examples`` random scenarios (each with one of
    ``estimates``); a failure is shrunk to the smallest scenario hypothesis finds.  The same
    ``seed`` draws the same scenarios.  A crash of the policy is a failure (``crash``);
    ``wall_limit`` stops one simulation that runs longer (a liveness failure)."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as fix_seed

    from utilon.policies import make_policy

    params = dict(params or {})
    make_policy(name, params)  # a bad name or parameter is a UtilonError before any run
    found: list[Failure] = []
    ran = [0]

    @settings(max_examples=examples, database=None, deadline=None, derandomize=False,
              report_multiple_bugs=False, verbosity=Verbosity.quiet, print_blob=False,
              suppress_health_check=list(HealthCheck),
              # no "explain" phase: it re-runs the smallest case hundreds of times to say
              # which parts of it matter, minutes for a policy whose every run fails
              phases=(Phase.explicit, Phase.generate, Phase.target, Phase.shrink))
    @fix_seed(seed)
    @given(sc=scenarios(), mode=st.sampled_from(tuple(estimates)),
           run_seed=st.integers(0, 2**32 - 1))
    def holds(sc: Scenario, mode: str, run_seed: int) -> None:
        ran[0] += 1
        try:
            check_liveness(sc, name, params, mode, run_seed, wall_limit)
        except PropertyFailure as f:
            found.append(Failure(f.property, str(f), sc, mode, run_seed))
            raise
        except Exception as e:  # anything the policy raises is what a check must report
            text = e.one_line() if isinstance(e, UtilonError) else f"{type(e).__name__}: {e}"
            found.append(Failure("crash", f"{name}: {text}", sc, mode, run_seed))
            raise

    try:
        holds()
    except Exception:  # hypothesis re-raises the smallest example's failure (found[-1])
        if not found:
            raise
        return CheckReport(name, params, ran[0], seed, found[-1])
    return CheckReport(name, params, ran[0], seed, None)


def describe(sc: Scenario) -> list[str]:
    """A scenario in a few lines: machines, capacity changes, jobs with their tasks."""
    def res(r: Resources) -> str:
        return " ".join(f"{k}={v:g}" for k, v in r.as_dict().items())

    lines = [f"machine {m.id}: {res(m.capacity)}"
             + (" (down at the start)" if m.id in sc.cluster.initially_down else "")
             for m in sc.cluster.machines]
    lines += [f"at t={c.time:g}: {c.action.value} {c.machine}"
              + (f" x{c.factor:g}" if c.action in (CapacityAction.SCALE, CapacityAction.SPEED)
                 else "") for c in sc.cluster.timeline]
    for j in sc.jobs:
        stages = "; ".join(
            f"{st_.name}{' (gang)' if st_.gang else ''}"
            f"{' after ' + ','.join(st_.after) if st_.after else ''}: "
            + ", ".join(f"{t.duration:g} s of {res(t.demand)}" for t in st_.tasks)
            for st_ in j.stages)
        lines.append(f"job {j.id} submitted at t={j.submit:g}, {j.utility.kind} utility: "
                     f"{stages}")
    return lines


# ------------------------------------------------------------------------ case files
CASE_FORMAT = "utilon-check-case/1"
_UTILITIES: dict[str, type[TimeUtility]] = {
    c.kind: c for c in (DeadlineStep, SoftHard, TruncatedLinear, Sigmoid, PiecewiseLinear,
                        Constant)}


def write_case(path: Path, report: CheckReport) -> None:
    """Save ``report``'s failing scenario (JSON) so that ``replay`` runs it again."""
    f = report.failure
    if f is None:
        raise ValueError("the check found no failure to write")
    sc = f.scenario
    doc = {
        "format": CASE_FORMAT,
        "policy": report.policy, "params": report.params,
        "property": f.property, "message": f.message,
        "estimates": f.estimates, "seed": f.seed,
        "cluster": {
            "machines": [{"id": m.id, "capacity": m.capacity.as_dict()}
                         for m in sc.cluster.machines],
            "initially_down": sorted(sc.cluster.initially_down),
            "timeline": [{"time": c.time, "machine": c.machine, "action": c.action.value,
                          "factor": c.factor} for c in sc.cluster.timeline]},
        "jobs": [_job_doc(j) for j in sc.jobs],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def _job_doc(j: Job) -> dict[str, Any]:
    u = j.utility
    return {
        "id": j.id, "submit": j.submit, "weight": j.weight, "priority": j.priority,
        "utility": {"kind": u.kind} | {k.name: getattr(u, k.name)
                                       for k in dataclasses.fields(u)},  # type: ignore[arg-type]
        "stages": [{"name": s.name, "kind": s.kind, "gang": s.gang, "after": list(s.after),
                    "tasks": [{"duration": t.duration, "demand": t.demand.as_dict(),
                               "phases": [{"fraction": p.fraction, "usage": p.usage.as_dict()}
                                          for p in t.phases]} for t in s.tasks]}
                   for s in j.stages]}


def read_case(path: Path) -> tuple[str, dict[str, Any], Scenario, str, int]:
    """A case file written by ``write_case``: (policy, params, scenario, estimates, seed)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") != CASE_FORMAT:
            raise ValueError(f"not a {CASE_FORMAT} file")
        c = doc["cluster"]
        cluster = Cluster(
            tuple(Machine(m["id"], Resources(m["capacity"])) for m in c["machines"]),
            tuple(_change(e["time"], e["machine"], e["action"], e["factor"])
                  for e in c["timeline"]),
            frozenset(c["initially_down"]))
        jobs = tuple(_job(j) for j in doc["jobs"])
        return doc["policy"], doc["params"], Scenario(cluster, jobs), doc["estimates"], \
            doc["seed"]
    except (ValueError, KeyError, TypeError) as e:
        raise UtilonError(f"not a check-policy case file ({type(e).__name__}: {e})",
                          where=str(path), fix="give a file written by check-policy") from None


def _job(d: dict[str, Any]) -> Job:
    u = dict(d["utility"])
    cls = _UTILITIES[u.pop("kind")]
    if "points" in u:
        u["points"] = tuple(tuple(p) for p in u["points"])
    stages = tuple(
        Stage(s["name"], tuple(Task(t["duration"], Resources(t["demand"]), tuple(
            UsagePhase(p["fraction"], Resources(p["usage"])) for p in t["phases"]))
            for t in s["tasks"]), after=tuple(s["after"]), kind=s["kind"], gang=s["gang"])
        for s in d["stages"])
    return Job(d["id"], d["submit"], stages, cls(**u), weight=d["weight"],
               priority=d["priority"])


def replay(path: Path, name: str | None = None,
           params: dict[str, Any] | None = None) -> CheckReport:
    """Run a saved case again (under its own policy, or ``name`` with ``params``)."""
    policy, saved, sc, mode, seed = read_case(path)
    name = name or policy
    params = saved if params is None else params
    try:
        check_liveness(sc, name, params, mode, seed)
    except PropertyFailure as f:
        return CheckReport(name, params, 1, seed, Failure(f.property, str(f), sc, mode, seed))
    except Exception as e:
        text = e.one_line() if isinstance(e, UtilonError) else f"{type(e).__name__}: {e}"
        return CheckReport(name, params, 1, seed, Failure("crash", f"{name}: {text}", sc, mode,
                                                          seed))
    return CheckReport(name, params, 1, seed, None)
