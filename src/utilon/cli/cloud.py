"""The cloud world (Cura's services) under the same commands as the slot world.

``simulate``, ``compare``, ``validate`` and ``plan`` read a scenario of either world; when it
has a ``cloud:`` section they come here.  The outputs are the slot world's files (see
``utilon.cloud.outputs``), so ``report`` needs no cloud branch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from utilon.cli.common import out
from utilon.cloud.scenario import CloudWorkload
from utilon.errors import UtilonError
from utilon.policies import cloud_policy_class, make_cloud_policy

if TYPE_CHECKING:  # rich's tables load with the first table drawn, not for validate
    from rich.table import Table


def refuse_slot_options(workload: CloudWorkload, **given: Any) -> None:
    """Options that mean something only for tasks on machines are errors on a cloud
    scenario, not silently ignored."""
    for option, value in given.items():
        if value:
            raise UtilonError(f"{option} applies to slot scenarios (cluster:), not to a "
                              "cloud scenario", where=f"{workload.source}: {option}",
                              fix=f"drop {option}")


def simulate_cloud(workload: CloudWorkload, name: str, params: dict[str, Any],
                   target: Path) -> dict[str, Any]:
    cloud_policy_class(name)
    from utilon.runner import run_cloud_policy  # the simulator: only when a run is asked for

    res = run_cloud_policy(workload, name, params, out_dir=target)
    out.print(cloud_table([res.summary], f"{workload.name}: {len(workload.jobs)} jobs "
                                        f"(seed {workload.seed})"))
    out.print(f"outputs: {target}/jobs.csv, summary.json, provenance.json, allocation.csv, "
              "capacity.csv")
    return res.summary


def cloud_table(results: Sequence[dict[str, Any]], title: str) -> Table:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col in ("service", "servers", "misses", "dropped", "resp mean s", "resp p95 s",
                "eff. util", "server-h / job", "usage cost", "reconfigs",
                "decide p50/p95 ms"):
        t.add_column(col, justify="left" if col == "service" else "right")
    for s in results:
        tm = s["timing"]
        t.add_row(s["policy"], str(s["servers"]), f"{s['misses']} ({s['miss_rate']:.0%})",
                  str(s["dropped"]), f"{s['response_mean']:.0f}", f"{s['response_p95']:.0f}",
                  f"{s['utilisation']:.0%}", f"{s['per_job_server_hours']:.4f}",
                  f"{s['cost']:.0f}", str(s["reconfigurations"]),
                  f"{tm['decide_ms_p50']:.3f} / {tm['decide_ms_p95']:.3f}")
    return t


def validate_cloud(workload: CloudWorkload, scenario: Path) -> None:
    from utilon.scenario.params import scenario_params  # not the runner: starts fast

    spec = workload.spec
    for name, params in spec.policies.items():
        make_cloud_policy(name, workload.store, params, where=f"{scenario}: policies.{name}")
    if spec.policy is not None:
        make_cloud_policy(spec.policy.name, workload.store,
                          scenario_params(spec, spec.policy.name), where=f"{scenario}: policy")
    cloud = workload.store.cloud
    fleet = "no fleet size (plan finds one)" if workload.servers is None else (
        f"{workload.servers} servers of {cloud.server_cores} cores")
    out.print(f"ok: {scenario}: cloud scenario {workload.name!r}, {fleet}, {cloud.k} VM types, "
              f"{len(workload.store.profiles)} job profiles, {len(workload.jobs)} jobs")
