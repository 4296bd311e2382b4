"""Running policies on workloads: the API behind ``utilon simulate`` and ``utilon compare``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utilon.metrics.outputs import job_rows, summarize, write_outputs
from utilon.policies import make_policy, policy_class, policy_names
from utilon.policies.base import Policy
from utilon.scenario.build import Workload
from utilon.sim.engine import SimResult, Simulation


@dataclass(frozen=True)
class RunOutput:
    policy: Policy
    result: SimResult
    rows: list[dict[str, Any]]
    summary: dict[str, Any]


def policy_for(workload: Workload, name: str,
               overrides: Mapping[str, Any] | None = None) -> Policy:
    """The named policy with the scenario's parameters for it, then ``overrides``."""
    params = dict(workload.spec.policies.get(name, {}))
    if workload.spec.policy is not None and workload.spec.policy.name == name:
        params.update(workload.spec.policy.params)
    where = f"{workload.source}: policies.{name}" if workload.source else ""
    policy = make_policy(name, params, where=where)  # the file's part, blamed on the file
    if not overrides:
        return policy
    return make_policy(name, {**params, **overrides}, where="command line (--param)")


def provenance(workload: Workload) -> dict[str, Any]:
    return {
        "scenario": workload.name,
        "source": workload.source,
        "seed": workload.seed,
        "description": workload.spec.description,
        "derivations": list(workload.notes),
        "standalone_runtime": {k: round(v, 3) for k, v in workload.standalone.items()},
    }


def run_policy(
    workload: Workload,
    name: str,
    overrides: Mapping[str, Any] | None = None,
    *,
    out_dir: Path | None = None,
    validate: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> RunOutput:
    policy = policy_for(workload, name, overrides)
    sim = Simulation(workload.cluster, workload.jobs, policy,
                     horizon=workload.spec.simulation.horizon, validate=validate,
                     record_attempts=False, progress=progress)
    result = sim.run()
    rows = job_rows(result, workload.jobs)
    summary = summarize(result, workload, policy, rows)
    if out_dir is not None:
        write_outputs(out_dir, rows, summary, provenance(workload))
    return RunOutput(policy, result, rows, summary)


def resolve_policies(spec: str) -> list[str]:
    """``"all"`` or a comma-separated list -> validated policy names (registry order)."""
    if spec.strip() == "all":
        return policy_names()
    names = [n.strip() for n in spec.split(",") if n.strip()]
    for n in names:
        policy_class(n)  # an unknown name fails here, before any run starts
    return names
