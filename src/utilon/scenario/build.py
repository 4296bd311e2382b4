"""Turning a validated ``ScenarioSpec`` into model objects: a cluster and a list of jobs.

All randomness comes from one ``numpy.random.Generator`` seeded with the scenario seed (or the
``--seed`` override) and is drawn in file order: explicit jobs first, then each generator.  The
same file and seed therefore give the same jobs, byte for byte.

Standalone runtime (what ``"<k>x"`` deadlines multiply): the job alone on the cluster at t=0,
each stage taking ``max(longest task, stage work / tasks of that stage that fit at once)``,
stages chained along the longest ``after`` path.  It is a lower bound on the real standalone
time (it ignores wave quantisation) and it is recorded in the run's outputs.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from utilon.errors import ModelError, ScenarioError
from utilon.limits import MAX_COUNT, MAX_SECONDS, max_tasks
from utilon.model.cluster import CapacityAction, CapacityChange, Cluster, Machine
from utilon.model.job import Job, Stage, Task, UsagePhase
from utilon.model.resources import Resources
from utilon.model.utility import (
    Constant,
    DeadlineStep,
    PiecewiseLinear,
    Sigmoid,
    SoftHard,
    TimeUtility,
    TruncatedLinear,
)
from utilon.scenario.sampling import sample, sample_many
from utilon.scenario.spec import (
    BatchArrival,
    ClusterSpec,
    ConstantSpec,
    DeadlineSpec,
    GeneratorSpec,
    JobSpec,
    PiecewiseSpec,
    PoissonArrival,
    ScenarioSpec,
    SigmoidSpec,
    SoftHardSpec,
    StageSpec,
    TemplateSpec,
    TimeSpec,
    TruncatedLinearSpec,
    UtilitySpec,
)

if TYPE_CHECKING:  # a real job's code: loaded when a scenario has one (`run:`)
    from utilon.jobs.plan import JobPlan

_SLACK = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*x\s*$")
_duration = attrgetter("duration")


@dataclass(frozen=True)
class Workload:
    """A built scenario: what the simulator runs, plus where it came from."""

    name: str
    """The scenario's name."""
    seed: int
    """The seed it was built with."""
    cluster: Cluster
    """The machines and their capacity timeline."""
    jobs: tuple[Job, ...]
    """The jobs in file order (explicit jobs, then each generator's), with their true task
    durations (policies see estimates of them: ``simulation.estimates``)."""
    spec: ScenarioSpec
    """The validated scenario (policy parameters, simulation settings, metadata)."""
    source: str = ""
    """The file it was read from, if any."""
    standalone: dict[str, float] = field(default_factory=dict)
    """Each job's standalone runtime: how long it takes alone on the cluster (the base of
    goals written as ``3x``)."""
    notes: tuple[str, ...] = ()
    """How derived values were derived, for ``provenance.json``."""
    plans: dict[str, JobPlan] = field(default_factory=dict)
    """Real jobs (``run:`` blocks): what their tasks execute when run live."""


@dataclass(frozen=True)
class _Sourced:
    """A capacity change and the index of the file event it came from."""

    source: int
    change: CapacityChange

    @property
    def time(self) -> float:
        return self.change.time

    @property
    def action(self) -> CapacityAction:
        return self.change.action

    @property
    def machine(self) -> str:
        return self.change.machine


def build_cluster(spec: ClusterSpec, where: str = "") -> Cluster:
    machines: list[Machine] = []
    down: set[str] = set()
    for gi, g in enumerate(spec.machines):
        ids = [g.id] if g.count == 1 else [f"{g.id}-{i}" for i in range(g.count)]
        for mid in ids:
            try:
                machines.append(Machine(mid, Resources(g.capacity),
                                        tuple(g.attributes.items()), g.price))
            except ModelError as e:
                raise ScenarioError(e.message, where=f"{where}cluster.machines[{gi}]") from None
            if g.down:
                down.add(mid)
    all_ids = [m.id for m in machines]
    if len(set(all_ids)) != len(all_ids):
        dup = next(i for i in all_ids if all_ids.count(i) > 1)
        raise ScenarioError(f"machine id {dup!r} is defined twice",
                            where=f"{where}cluster.machines",
                            fix="give each machine group a distinct id")
    changes: list[_Sourced] = []
    id_set = set(all_ids)
    for ei, ev in enumerate(spec.capacity):
        loc = f"{where}cluster.capacity[{ei}].machines"
        patterns = [ev.machines] if isinstance(ev.machines, str) else ev.machines
        chosen: list[str] = []
        seen: set[str] = set()  # a list membership test here was quadratic in machines
        for pat in patterns:
            if pat == "all":
                hits = all_ids
            elif not any(c in pat for c in "*?["):  # a plain id: a set lookup, not a scan
                hits = [pat] if pat in id_set else []
            else:
                hits = fnmatch.filter(all_ids, pat)
            if not hits:
                raise ScenarioError(f"{pat!r} matches no machine", where=loc,
                                    fix="use machine ids, a glob like 'small-*', or 'all'")
            for h in hits:
                if h not in seen:
                    seen.add(h)
                    chosen.append(h)
        for mid in chosen:
            changes.append(_Sourced(ei, CapacityChange(ev.at, mid, CapacityAction(ev.action),
                                                       ev.factor)))
    # Replay up/down along time so a mistake is reported at the event that makes it.
    up = set(all_ids) - down
    order = sorted(range(len(spec.capacity)), key=lambda i: spec.capacity[i].at)
    by_source: dict[int, list[_Sourced]] = {}
    for ch in changes:
        by_source.setdefault(ch.source, []).append(ch)
    for ei in order:
        ev = spec.capacity[ei]
        for ch in by_source.get(ei, ()):
            if ev.action == "join" and ch.machine in up:
                raise ScenarioError(f"machine {ch.machine!r} joins at t={ev.at:g} but is "
                                    "already up", where=f"{where}cluster.capacity[{ei}]",
                                    fix="mark it down: true at start, or make it leave first")
            if ev.action == "leave" and ch.machine not in up:
                raise ScenarioError(f"machine {ch.machine!r} leaves at t={ev.at:g} but is not "
                                    "up", where=f"{where}cluster.capacity[{ei}]")
            if ev.action == "join":
                up.add(ch.machine)
            elif ev.action == "leave":
                up.discard(ch.machine)
    names = {n for m in machines for n in m.capacity.names}
    for r in spec.thrashing:
        if r not in names:
            raise ScenarioError(f"thrashing names unknown resource {r!r}",
                                where=f"{where}cluster.thrashing",
                                fix=f"use a resource of the machines: {', '.join(sorted(names))}")
    try:
        return Cluster(tuple(machines), tuple(c.change for c in changes), frozenset(down),
                       tuple(spec.thrashing.items()))
    except ModelError as e:
        raise ScenarioError(e.message, where=f"{where}cluster") from None


class _Builder:
    def __init__(self, spec: ScenarioSpec, cluster: Cluster, seed: int, where: str,
                 base_dir: Path = Path()) -> None:
        self.spec = spec
        self.seed = seed
        self.base_dir = base_dir
        self.plans: dict[str, JobPlan] = {}
        self.cluster = cluster
        self.rng = np.random.default_rng(seed)
        self.where = where
        self.names = set(cluster.resource_names)
        up = [m for m in cluster.machines if m.id not in cluster.initially_down]
        # Distinct machine sizes with their counts: a traced cluster has thousands of
        # machines but a handful of sizes, and standalone_runtime runs once per stage.
        self.capacities = Counter(m.capacity for m in (up or list(cluster.machines)))
        self.standalone: dict[str, float] = {}
        self.tasks = 0  # expanded so far: checked against limits.max_tasks() before allocating
        self.max_tasks = max_tasks()

    def count_tasks(self, n: int, loc: str) -> None:
        self.tasks += n
        if self.tasks > self.max_tasks:
            raise ScenarioError(
                f"the scenario expands to more than {self.max_tasks:,} tasks", where=loc,
                fix="use fewer, longer tasks, or raise UTILON_MAX_TASKS if this machine has "
                "the memory")

    # -- stages and tasks -------------------------------------------------------------------
    def stages(self, specs: list[StageSpec], loc: str) -> tuple[Stage, ...]:
        out: list[Stage] = []
        for si, s in enumerate(specs):
            sloc = f"{loc}.stages[{si}]"
            kind = s.kind or (s.name if s.name in ("map", "reduce") else "task")
            for rname in list(s.demand) + [r for p in (s.usage or []) for r in p.usage]:
                if rname not in self.names:
                    raise ScenarioError(
                        f"stage {s.name!r} uses resource {rname!r}, which no machine has",
                        where=sloc, fix=f"use one of: {', '.join(sorted(self.names))}")
            if s.durations is not None:
                self.count_tasks(len(s.durations), sloc)
                durations = np.asarray(s.durations, dtype=float)
            else:
                assert s.tasks is not None and s.duration is not None
                drawn = sample(s.tasks, self.rng)
                if not math.isfinite(drawn) or drawn > MAX_COUNT:
                    raise ScenarioError(
                        f"a stage may have at most {MAX_COUNT:,} tasks, got {drawn:g}",
                        where=f"{sloc}.tasks", fix="use fewer, longer tasks (or clip the "
                        "distribution with max:)")
                n = max(1, round(drawn))
                self.count_tasks(n, sloc)
                durations = sample_many(s.duration, self.rng, n)
            if not np.all(np.isfinite(durations)) or np.any(durations <= 0):
                raise ScenarioError("task durations must be positive",
                                    where=f"{sloc}.duration", fix="set a min: on the distribution")
            if np.any(durations > MAX_SECONDS):
                raise ScenarioError(
                    f"a task may last at most {MAX_SECONDS:g} s (about 31 years), got "
                    f"{float(durations.max()):g}", where=f"{sloc}.duration",
                    fix="give durations in seconds (or clip the distribution with max:)")
            demand = Resources(s.demand)
            if not any(demand.get(r) > 0 for r in self.names):
                # a task that takes nothing of the machines is never held back by capacity
                raise ScenarioError(
                    f"stage {s.name!r} demands none of the machines' resources "
                    f"({', '.join(sorted(self.names))}): its tasks would run without limit",
                    where=f"{sloc}.demand", fix="give a positive demand of one of them, e.g. "
                    "{slots: 1}")
            phases = tuple(UsagePhase(p.fraction, Resources(p.usage), p.name)
                           for p in (s.usage or []))
            if s.after is not None:
                after = tuple(s.after)
                earlier = {o.name for o in out}
                for dep in after:
                    if dep not in earlier:
                        raise ScenarioError(
                            f"stage {s.name!r} waits for {dep!r}, which is not a stage listed "
                            "before it", where=f"{sloc}.after",
                            fix=f"use one of: {', '.join(sorted(earlier)) or '(none)'}")
            else:
                after = tuple(o.name for o in out if o.kind == "map") if kind == "reduce" else ()
            try:
                tasks = Task.many(durations.tolist(), demand, phases)
                out.append(Stage(s.name, tasks, after, kind, s.gang, s.estimate,
                                 s.colocate_speedup, self.request(s, sloc)))
            except ModelError as e:
                raise ScenarioError(e.message, where=sloc) from None
        return tuple(out)

    @staticmethod
    def request(s: StageSpec, sloc: str) -> object:
        """The stage's alsched request, checked now so that a typo is a load-time error."""
        if s.request is None:
            return None
        from utilon.policies.alsched.lang import Request

        return Request.from_spec(s.request, where=f"{sloc}.request")

    def standalone_runtime(self, stages: tuple[Stage, ...], loc: str) -> float:
        finish: dict[str, float] = {}
        for st in stages:
            d = st.tasks[0].demand
            fit = 0.0
            for cap, count in self.capacities.items():
                per = min((cap[r] / x for r, x in d.items if x > 0), default=math.inf)
                fit += count * (math.floor(per + 1e-9) if math.isfinite(per) else len(st.tasks))
            if fit < 1:
                raise ScenarioError(
                    f"a task of stage {st.name!r} demands {d!r}, which fits no machine",
                    where=loc, fix="lower the demand or add a bigger machine")
            if st.gang and fit < len(st.tasks):
                raise ScenarioError(
                    f"gang stage {st.name!r} needs {len(st.tasks)} tasks at once but the "
                    f"cluster holds only {int(fit)} of them", where=loc,
                    fix="make the gang smaller or the cluster bigger")
            longest = max(map(_duration, st.tasks))
            t = max(longest, st.work / min(fit, len(st.tasks)))
            finish[st.name] = max((finish[a] for a in st.after), default=0.0) + t
        return max(finish.values())

    # -- utilities --------------------------------------------------------------------------
    def when(self, spec: TimeSpec, submit: float, standalone: float, loc: str) -> float:
        t = self._when(spec, submit, standalone, loc)
        if not math.isfinite(t) or abs(t - submit) > MAX_SECONDS:
            raise ScenarioError(f"a goal must be at most {MAX_SECONDS:g} s (about 31 years) after "
                                f"submit, got {t - submit:g}", where=loc,
                                fix="give goals in seconds after submit, or '<k>x'")
        return t

    def _when(self, spec: TimeSpec, submit: float, standalone: float, loc: str) -> float:
        if isinstance(spec, str):
            m = _SLACK.match(spec)
            if m:
                return submit + float(m.group(1)) * standalone
            try:
                return submit + float(spec)  # a quoted number of seconds
            except ValueError:
                raise ScenarioError(f"time {spec!r} is neither seconds nor '<k>x'", where=loc,
                                    fix="write e.g. 600 (seconds after submit) or '2.5x'"
                                    ) from None
        return submit + sample(spec, self.rng)

    def checked_goal(self, u: TimeUtility, submit: float, loc: str) -> TimeUtility:
        """Reject goals at or before submission: no schedule can meet them."""
        if u.goal is not None and u.goal <= submit:
            raise ScenarioError(
                f"the utility's goal (t={u.goal:g}) is not after the job's submit time "
                f"(t={submit:g}); no schedule can meet it", where=loc,
                fix="give a positive time after submit, e.g. 600 or '2.5x'")
        return u

    def utility(self, u: UtilitySpec, submit: float, standalone: float, loc: str) -> TimeUtility:
        rng = self.rng
        try:
            if isinstance(u, DeadlineSpec):
                return DeadlineStep(self.when(u.deadline, submit, standalone, loc),
                                    sample(u.value, rng), sample(u.late_value, rng))
            if isinstance(u, SoftHardSpec):
                return SoftHard(submit, self.when(u.soft, submit, standalone, loc),
                                self.when(u.hard, submit, standalone, loc), sample(u.value, rng))
            if isinstance(u, TruncatedLinearSpec):
                return TruncatedLinear(submit, self.when(u.deadline, submit, standalone, loc),
                                       sample(u.slope, rng), sample(u.value, rng),
                                       sample(u.late_value, rng))
            if isinstance(u, SigmoidSpec):
                d = self.when(u.deadline, submit, standalone, loc)
                return Sigmoid(sample(u.p, rng), sample(u.mu, rng), d)
            if isinstance(u, PiecewiseSpec):
                return PiecewiseLinear(tuple((self.when(t, submit, standalone, loc), v)
                                             for t, v in u.points))
            assert isinstance(u, ConstantSpec)
            return Constant(u.value)
        except ModelError as e:
            raise ScenarioError(e.message, where=loc) from None

    # -- jobs -------------------------------------------------------------------------------
    def planned_stages(self, js: JobSpec, index: int, loc: str) -> list[StageSpec]:
        """A real job's stages, from its kind's plan (task durations are the priors)."""
        assert js.run is not None
        seed = int(np.random.SeedSequence([self.seed, index]).generate_state(1)[0])
        from utilon.jobs.kinds import plan_job

        try:
            plan = plan_job(js.run, js.id, seed, self.base_dir)
        except ValueError as e:
            raise ScenarioError(str(e), where=f"{loc}.run") from None
        self.plans[js.id] = plan
        return [StageSpec(name=sp.name, kind=sp.kind, tasks=float(sp.tasks),
                          duration=sp.estimate, estimate=sp.estimate,
                          demand=dict(sp.demand) if sp.demand is not None else {"slots": 1.0},
                          after=list(sp.after) if sp.after is not None else None, gang=sp.gang,
                          usage=None, durations=None, colocate_speedup=sp.colocate_speedup,
                          request=None)
                for sp in plan.stages]

    def job(self, js: JobSpec, loc: str, index: int = 0) -> Job:
        specs = js.stages if js.run is None else self.planned_stages(js, index, loc)
        if js.request is not None:
            specs = [sp if sp.request is not None else sp.model_copy(update={"request": js.request})
                     for sp in specs]
        stages = self.stages(specs, loc)
        standalone = self.standalone_runtime(stages, loc)
        self.standalone[js.id] = standalone
        utility = self.checked_goal(
            self.utility(js.utility, js.submit, standalone, f"{loc}.utility"), js.submit,
            f"{loc}.utility")
        try:
            return Job(js.id, js.submit, stages, utility, js.tenant, js.weight, js.priority,
                       js.job_class)
        except ModelError as e:
            raise ScenarioError(e.message, where=loc) from None

    def generated(self, g: GeneratorSpec, loc: str) -> list[Job]:
        rng = self.rng
        n = g.count
        arr = g.arrival
        submits: np.ndarray
        if isinstance(arr, PoissonArrival):
            submits = arr.start + np.cumsum(rng.exponential(arr.mean_interarrival, n))
        elif isinstance(arr, BatchArrival):
            submits = np.full(n, arr.at)
        else:
            submits = arr.start + arr.interval * np.arange(n)
        shares = np.asarray([t.share for t in g.templates], dtype=float)
        picks = rng.choice(len(g.templates), size=n, p=shares / shares.sum())
        tenants = rng.choice(len(g.tenants), size=n)
        width = len(str(n - 1))
        jobs = []
        for i in range(n):
            tpl: TemplateSpec = g.templates[int(picks[i])]
            tloc = f"{loc}.templates[{int(picks[i])}]"
            jid = f"{g.id_prefix}{i:0{width}d}"
            submit = round(float(submits[i]), 6)
            stages = self.stages(tpl.stages, tloc)
            standalone = self.standalone_runtime(stages, tloc)
            self.standalone[jid] = standalone
            utility = self.checked_goal(
                self.utility(tpl.utility, submit, standalone, f"{tloc}.utility"), submit,
                f"{tloc}.utility")
            weight = sample(tpl.weight, rng)
            if not weight > 0:
                raise ScenarioError("job weight must be > 0", where=f"{tloc}.weight")
            try:
                jobs.append(Job(jid, submit, stages, utility, g.tenants[int(tenants[i])],
                                weight, round(sample(tpl.priority, rng)),
                                tpl.job_class or tpl.name))
            except ModelError as e:
                raise ScenarioError(e.message, where=tloc) from None
        return jobs


def build_job(spec: ScenarioSpec, cluster: Cluster, js: JobSpec, *, seed: int, index: int,
              base_dir: Path = Path()) -> tuple[Job, JobPlan | None, float]:
    """One job of ``spec``'s format built on ``cluster`` (a job submitted on its own, as to
    the service): the job, its plan if it is a real job, and its standalone runtime."""
    b = _Builder(spec, cluster, seed, "", base_dir)
    job = b.job(js, "job", index)
    return job, b.plans.get(js.id), b.standalone[js.id]


def build_workload(spec: ScenarioSpec, *, seed: int | None = None, source: str = "") -> Workload:
    """Build cluster and jobs; ``seed`` overrides the scenario's own seed."""
    where = f"{source}: " if source else ""
    cluster = build_cluster(spec.cluster, where)
    use_seed = spec.seed if seed is None else seed
    base_dir = Path(source).parent if source else Path()
    b = _Builder(spec, cluster, use_seed, where, base_dir)
    jobs: list[Job] = []
    for ji, js in enumerate(spec.workload.jobs):
        jobs.append(b.job(js, f"{where}workload.jobs[{ji}]", ji))
    for gi, g in enumerate(spec.workload.generate):
        jobs.extend(b.generated(g, f"{where}workload.generate[{gi}]"))
    if not jobs:
        raise ScenarioError("the workload has no jobs", where=f"{where}workload",
                            fix="add workload.jobs or workload.generate")
    ids = [j.id for j in jobs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ScenarioError(f"job id {dup!r} is used twice", where=f"{where}workload",
                            fix="make ids unique (generators: set distinct id_prefix)")
    notes: tuple[str, ...] = (
        "utility times are seconds after submit; '<k>x' means k x standalone runtime",
        "standalone runtime = longest path over stages of max(longest task, stage work / "
        "tasks that fit the cluster at t=0)",
    )
    if b.plans:
        notes += tuple(f"job {jid} ({p.kind}): {n}" for jid, p in b.plans.items()
                       for n in p.notes)
        notes += ("real jobs: task durations in the scenario are priors (the kind's rate x "
                  "size); live runs measure them",)
    return Workload(spec.name, use_seed, cluster, tuple(jobs), spec, source, b.standalone, notes,
                    b.plans)
