"""Cura's metrics (§4.1) and the servers-required search.

* **servers required**: the smallest fleet on which every job meets its deadline.  Found by
  doubling then bisecting over repeated simulations, each stopped at its first failure (success
  is taken to be monotone in the fleet size; the search reports every size it tried).  A
  dedicated service sizes itself (``fixed_servers``) and is not searched.
* **mean response time**: finish − arrival of the jobs that finished.
* **per-job infrastructure cost**: the fleet's server-hours over the workload's span, per job
  (what fewer servers save); the mean §3.1.1 resource-usage cost of the configurations used is
  reported beside it.
* **effective utilization**: core-seconds of job execution over the fleet's core-seconds in the
  span; VM creation and boot are not useful work (§4.1).
* **success rate**: the share of jobs that met their deadline on a given fleet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from utilon.cloud.model import CloudJob
from utilon.cloud.profile import ProfileStore
from utilon.cloud.sim import CloudResult, CloudSim
from utilon.errors import ModelError


def summarize(res: CloudResult, store: ProfileStore) -> dict[str, Any]:
    done = [r for r in res.records if r.end is not None]
    resp = [r.end - r.job.arrival for r in done if r.end is not None]
    span = max(res.span, 1e-9)
    cores = res.servers * store.cloud.server_cores
    usage_cost = [r.t_run * r.n * store.cloud.share(r.k) for r in done]
    return {
        "policy": res.policy,
        "servers": res.servers,
        "jobs": len(res.records),
        "success_rate": round(res.success_rate, 6),
        "dropped": sum(bool(r.dropped) for r in res.records),
        "mean_response_s": round(float(np.mean(resp)), 3) if resp else None,
        "per_job_server_hours": round(res.servers * span / 3600 / max(1, len(res.records)), 6),
        "mean_usage_cost": round(float(np.mean(usage_cost)), 3) if usage_cost else None,
        "effective_utilization": round(res.usage / (cores * span), 6) if cores else 0.0,
        "reconfigurations": res.reconfigurations,
        "reconfigured_vms": res.reconfigured_vms,
    }


def decide_timing(res: CloudResult) -> dict[str, float]:
    ms = np.asarray(res.decide_ms) if res.decide_ms else np.zeros(1)
    return {"decide_ms_p50": round(float(np.percentile(ms, 50)), 4),
            "decide_ms_p95": round(float(np.percentile(ms, 95)), 4),
            "wall_s": round(res.wall_s, 3)}


@dataclass
class Search:
    servers: int
    tried: dict[int, bool] = field(default_factory=dict)
    wall_s: float = 0.0


def servers_required(store: ProfileStore, make: Callable[[], Any], jobs: tuple[CloudJob, ...],
                     *, seed: int = 0, start: int = 8, limit: int = 100_000) -> Search:
    """The smallest fleet on which every job of ``jobs`` meets its deadline under the policy
    ``make()`` builds (a fresh one per simulation)."""
    t0 = time.perf_counter()
    fixed = make().fixed_servers(jobs)
    if fixed is not None:
        return Search(fixed, {}, time.perf_counter() - t0)
    tried: dict[int, bool] = {}

    def ok(s: int) -> bool:
        if s not in tried:
            sim = CloudSim(store, make(), jobs, s, seed=seed, stop_on_failure=True)
            res = sim.run()
            tried[s] = not sim.failed and res.all_met
        return tried[s]

    hi = max(1, start)
    while not ok(hi):
        if hi >= limit:
            raise ModelError(f"no fleet of up to {limit} servers meets every deadline",
                             fix="check for jobs no configuration can serve")
        hi *= 2
    lo = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return Search(hi, dict(sorted(tried.items())), time.perf_counter() - t0)
