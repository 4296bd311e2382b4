"""Running policies on workloads: the API behind ``utilon simulate``, ``compare`` and ``run``.

Both worlds run through here: a slot workload (``Workload``) under a slot policy on the
scheduler core's simulator, a cloud workload (``CloudWorkload``) under a cloud service on the
cloud simulator (``utilon.cloud.sim``); ``run_policies`` runs either kind in parallel."""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from utilon.cloud.outputs import cloud_rows, cloud_summary, write_cloud_outputs
from utilon.cloud.policy import CloudPolicy
from utilon.cloud.scenario import CloudScenarioSpec, CloudWorkload
from utilon.cloud.sim import CloudResult, CloudSim
from utilon.core.feasibility import Unrunnable
from utilon.core.policy import Policy
from utilon.errors import ScenarioError, UnknownNameError
from utilon.live import LiveProgress, LiveResult, LiveRun, LocalBackend, TaskCatalog
from utilon.live.backend import Backend
from utilon.live.calibrate import check_priors
from utilon.metrics.outputs import job_rows, summarize, write_outputs
from utilon.model.cluster import Cluster
from utilon.parallel import run_all
from utilon.policies import (
    canonical,
    cloud_policy_class,
    make_cloud_policy,
    make_policy,
    policy_class,
    policy_names,
)
from utilon.scenario.build import Workload
from utilon.scenario.spec import ScenarioSpec
from utilon.sim.engine import SimResult, Simulation
from utilon.sim.estimates import Priors, priors

PolicyT = TypeVar("PolicyT")
ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class Output(Generic[PolicyT, ResultT]):
    """One simulated run: the policy object, the simulator's result, the ``jobs.csv`` rows and
    the summary (a slot run's or a cloud run's)."""

    policy: PolicyT
    """The policy object that ran, configured."""
    result: ResultT
    """The simulator's result (``SimResult`` for a slot run)."""
    rows: list[dict[str, Any]]
    """One dictionary per job: the columns of ``jobs.csv``."""
    summary: dict[str, Any]
    """The content of ``summary.json``."""


RunOutput = Output[Policy, SimResult]
"""What ``run_policy`` returns: a slot-world run."""
CloudRunOutput = Output[CloudPolicy, CloudResult]
"""What ``run_cloud_policy`` returns: a cloud service's run."""


def scenario_params(spec: ScenarioSpec | CloudScenarioSpec, name: str) -> dict[str, Any]:
    """What a scenario of either world sets for policy ``name``: ``policies.<name>``, then
    ``policy.params`` when ``policy.name`` is it."""
    params = dict(spec.policies.get(name, {}))
    if spec.policy is not None and spec.policy.name == name:
        params.update(spec.policy.params)
    return params


def policy_for(workload: Workload, name: str,
               overrides: Mapping[str, Any] | None = None) -> Policy:
    """The named policy with the scenario's parameters for it, then ``overrides``."""
    name = canonical(name)
    return _configured(lambda params, where: make_policy(name, params, where=where),
                       workload.spec, workload.source, name, overrides)


P = TypeVar("P")


def _configured(make: Callable[[dict[str, Any], str], P], spec: ScenarioSpec | CloudScenarioSpec,
                source: str, name: str, overrides: Mapping[str, Any] | None) -> P:
    """A policy made from the scenario's parameters (an error there blames the file), then
    again with ``overrides`` (an error there blames the command line)."""
    params = scenario_params(spec, name)
    policy = make(params, f"{source}: policies.{name}" if source else "")
    if not overrides:
        return policy
    return make({**params, **overrides}, "command line (--param)")


def provenance(workload: Workload) -> dict[str, Any]:
    return {
        "scenario": workload.name,
        "source": workload.source,
        "seed": workload.seed,
        "description": workload.spec.description,
        "derivations": list(workload.notes),
        "standalone_runtime": {k: round(v, 3) for k, v in workload.standalone.items()},
        "metadata": workload.spec.metadata,
    }


def run_policy(
    workload: Workload,
    name: str,
    overrides: Mapping[str, Any] | None = None,
    *,
    out_dir: Path | None = None,
    validate: bool = False,
    progress: Callable[[int, int], None] | None = None,
    wall_limit: float | None = None,
    cpu_limit: float | None = None,
) -> RunOutput:
    """Simulate the workload under one policy: the one ``name`` stands for (as
    ``utilon.policies.policy_class`` looks it up), configured with the scenario's parameters
    for it, then ``overrides``.

    ``out_dir`` writes the run's files there (``jobs.csv``, ``summary.json``,
    ``provenance.json`` and the timeline files: ``docs/outputs.md``).  Every decision is
    checked against the contract; ``validate`` also checks the core's invariants after every
    step (slow: for tests and for debugging a policy).  ``progress`` is called with (jobs
    finished, jobs); ``wall_limit`` stops the run after that many seconds of wall-clock time
    (its outputs then depend on the machine's speed); ``cpu_limit`` after that many seconds of
    this process's CPU time instead (the same on a busy machine as on an idle one; it takes
    the place of ``wall_limit``, and the decision latencies are then CPU times too).  The
    returned ``summary`` is
    ``summary.json``'s content and ``rows`` are ``jobs.csv``'s, one dictionary per job."""
    policy = policy_for(workload, name, overrides)
    known = priors(workload)  # policies see these estimates; the simulator runs the truth
    with _blamed_on(workload):
        sim = Simulation(workload.cluster, known.jobs, policy,
                         horizon=workload.spec.simulation.horizon, validate=validate,
                         record_attempts=False, progress=progress,
                         estimates=known.learning,
                         wall_limit=wall_limit if cpu_limit is None else cpu_limit,
                         timer=time.perf_counter if cpu_limit is None else time.process_time)
    result = sim.run()
    if cpu_limit is not None and result.stopped_early:  # the engine's clock is "wall-clock"
        result = dataclasses.replace(result, stopped_early=result.stopped_early.replace(
            "wall-clock limit", "CPU-time limit"))
    rows = job_rows(result, workload.jobs)
    summary = with_estimates(summarize(result, workload, policy, rows), known)
    if out_dir is not None:
        about = known.provenance()
        prov = provenance(workload) | ({"estimates": about} if about else {})
        summary = write_outputs(out_dir, rows, summary, prov, result)
    return RunOutput(policy, result, rows, summary)


def with_estimates(summary: dict[str, Any], known: Priors) -> dict[str, Any]:
    """The summary with ``estimates`` (the mode and how wrong its priors were) before its
    wall-clock ``timing``; unchanged under the default mode."""
    about = known.summary()
    if about is None:
        return summary
    timing = summary.get("timing")
    out = {k: v for k, v in summary.items() if k != "timing"} | {"estimates": about}
    if timing is not None:
        out["timing"] = timing
    return out


def cloud_policy_for(workload: CloudWorkload, name: str,
                     overrides: Mapping[str, Any] | None = None) -> CloudPolicy:
    """The named cloud service with the scenario's parameters for it, then ``overrides``."""
    return _configured(lambda params, where: make_cloud_policy(name, workload.store, params,
                                                               where=where),
                       workload.spec, workload.source, name, overrides)


def fleet_for(workload: CloudWorkload, policy: CloudPolicy) -> int:
    """The servers a cloud run uses: a service that sizes itself (dedicated clusters, sized
    for each customer's peak) uses its own fleet; every other one the scenario's."""
    own = policy.fixed_servers(workload.jobs)
    if own is not None:
        return own
    if workload.servers is None:
        raise ScenarioError("no fleet size: cloud.servers is not set",
                            where=f"{workload.source or '<scenario>'}: cloud.servers",
                            fix=f"set cloud.servers, or find the smallest fleet with `utilon "
                                f"plan {workload.source or 'SCENARIO'} --policy {policy.name} "
                                "--target 'misses<=0'`")
    return workload.servers


def run_cloud_policy(workload: CloudWorkload, name: str,
                     overrides: Mapping[str, Any] | None = None, *,
                     out_dir: Path | None = None,
                     servers: int | None = None) -> CloudRunOutput:
    """One cloud service on the workload's fleet (or ``servers``)."""
    policy = cloud_policy_for(workload, name, overrides)
    fleet = servers if servers is not None else fleet_for(workload, policy)
    result = CloudSim(workload.store, policy, workload.jobs, fleet, seed=workload.seed).run()
    rows = cloud_rows(result, workload)
    summary = cloud_summary(result, workload, policy, rows)
    if out_dir is not None:
        write_cloud_outputs(out_dir, result, workload, rows, summary)
    return CloudRunOutput(policy, result, rows, summary)


def run_policies(
    workload: Workload | CloudWorkload,
    names: Sequence[str],
    overrides: Mapping[str, Any] | None = None,
    *,
    out_dir: Path | None = None,
    jobs: int | None = None,
    ray_address: str | None = None,
    on_progress: Callable[[int, int, int], None] | None = None,
    wall_limit: float | None = None,
) -> list[dict[str, Any]]:
    """Each policy on the same workload, in parallel (``utilon.parallel``): the summaries in
    the order of ``names``, and with ``out_dir`` each run's files in ``out_dir/<policy>/``,
    byte for byte what ``run_policy`` writes one after another (apart from ``timing``).

    With more than one job the runs happen in worker processes (or Ray tasks), which find
    each policy by its name: it must be importable there (built in, a
    ``package.module:Class`` reference, an installed plugin), not only registered in this
    process.  On Ray the runs write into a temporary directory on whichever node ran them
    and send the files back, so that a remote cluster needs no shared file system."""
    ship = ray_address is not None
    items = [(n, dict(overrides or {}), None if out_dir is None else out_dir / n, ship,
              wall_limit) for n in names]
    done = run_all(_run_one, workload, items, jobs=jobs, ray_address=ray_address,
                   on_progress=on_progress)
    for (_, _, target, _, _), (_, files) in zip(items, done, strict=True):
        if files:
            assert target is not None
            write_files(target, files)
    return [summary for summary, _ in done]


def read_files(directory: Path) -> dict[str, bytes]:
    """A run directory's files, to send them from the process that ran it to the caller."""
    return {f.name: f.read_bytes() for f in sorted(directory.iterdir()) if f.is_file()}


def write_files(directory: Path, files: Mapping[str, bytes]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)


def _run_one(workload: Workload | CloudWorkload,
             item: tuple[str, dict[str, Any], Path | None, bool, float | None],
             progress: Callable[[int, int], None] | None
             ) -> tuple[dict[str, Any], dict[str, bytes]]:
    """One policy of ``run_policies`` in a worker: its summary, and its files when they must
    travel back (a Ray node has no shared file system)."""
    name, overrides, target, ship, wall_limit = item

    def one(out_dir: Path | None) -> dict[str, Any]:
        if isinstance(workload, CloudWorkload):
            return run_cloud_policy(workload, name, overrides, out_dir=out_dir).summary
        return run_policy(workload, name, overrides, out_dir=out_dir, progress=progress,
                          wall_limit=wall_limit).summary

    if target is None or not ship:
        return one(target), {}
    return written(one)


T = TypeVar("T")


def written(write: Callable[[Path], T]) -> tuple[T, dict[str, bytes]]:
    """``write`` into a temporary directory, then what it returned and the files it wrote:
    how a run in another process (or on another Ray node) sends its run directory back."""
    with tempfile.TemporaryDirectory(prefix="utilon-") as tmp:
        value = write(Path(tmp))
        return value, read_files(Path(tmp))


@contextmanager
def _blamed_on(workload: Workload) -> Iterator[None]:
    """A job refused as never runnable is the scenario file's problem: name the file."""
    try:
        yield
    except Unrunnable as e:
        if not e.where and workload.source:
            e.where = f"{workload.source}: workload"
        raise


def resolve_policies(spec: str, world: str = "slot") -> list[str]:
    """``"all"`` or a comma-separated list -> validated policy names of ``world`` (sorted)."""
    if spec.strip() == "all":
        return policy_names(world)
    names = [n.strip() for n in spec.split(",") if n.strip()]
    check = policy_class if world == "slot" else cloud_policy_class
    for n in names:
        check(n)  # an unknown name fails here, before any run starts
    return names


# ------------------------------------------------------------------------------ live runs
BACKENDS = ("local", "ray")


def make_backend(kind: str, *, ray_address: str | None = None,
                 ray_cpus: int | None = None) -> Backend:
    """A backend by name: ``local`` (worker processes here) or ``ray``."""
    if kind == "local":
        return LocalBackend()
    if kind == "ray":
        from utilon.live.ray_backend import RayBackend

        return RayBackend(ray_address, num_cpus=ray_cpus)
    raise UnknownNameError("backend", kind, BACKENDS, where="--backend")


@dataclass(frozen=True)
class LiveOutput:
    policy: Policy
    result: LiveResult
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    run_dir: Path


def run_live(
    workload: Workload,
    name: str,
    backend: Backend,
    overrides: Mapping[str, Any] | None = None,
    *,
    out_dir: Path | None = None,
    timeout: float | None = None,
    validate: bool = False,
    progress: Callable[[LiveProgress], None] | None = None,
    on_prepare: Callable[[str], None] | None = None,
) -> LiveOutput:
    """Run the workload's jobs for real under one policy on ``backend``.

    Inputs are generated into ``out_dir/jobs/<job>/`` before the clock starts; the outputs
    are the simulator's (jobs.csv, summary.json, provenance.json, with measured times) plus
    attempts.csv (every task attempt) and verification.json (each real job's output check).
    """
    policy = policy_for(workload, name, overrides)
    run_dir = out_dir if out_dir is not None else Path(tempfile.mkdtemp(prefix="utilon-run-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    catalog = TaskCatalog(run_dir.resolve(), workload.jobs, workload.plans)
    catalog.prepare(on_prepare)
    with _blamed_on(workload):
        result = LiveRun(workload.cluster, workload.jobs, policy, backend, catalog,
                         timeout=timeout, validate=validate, progress=progress).run()
    # machines a Ray cluster added during the run count as servers too
    ran_on = Cluster(tuple(m.machine for m in result.core.machines), result.cluster.timeline,
                     result.cluster.initially_down)
    seen = dataclasses.replace(workload, cluster=ran_on)
    rows = job_rows(result, workload.jobs)
    summary = summarize(result, seen, policy, rows)
    checks = result.verification
    summary["mode"] = "live"
    summary["backend"] = result.backend
    summary["priors"] = check_priors(result.core, workload)
    summary["verified"] = {
        "ok": sum(1 for v in checks.values() if v.ok is True),
        "failed": sum(1 for v in checks.values() if v.ok is False),
        "unverifiable": sum(1 for v in checks.values() if v.ok is None),
        "plain": len(workload.jobs) - len(checks),
    }
    summary["peak_usage"] = {k: round(v, 4) for k, v in sorted(result.peak_usage.items())}
    summary = write_outputs(run_dir, rows, summary, provenance(workload) | {
        "mode": "live", "backend": result.backend,
        "machines": {m.id: m.capacity.as_dict() for m in ran_on.machines}}, result)
    (run_dir / "verification.json").write_text(json.dumps(
        {k: {"ok": v.ok, "detail": v.detail} for k, v in sorted(checks.items())},
        indent=2) + "\n", encoding="utf-8")
    return LiveOutput(policy, result, rows, summary, run_dir)
