"""The files a cloud run writes: the slot world's files, with the cloud's own columns added.

A run of a cloud service writes what a slot run writes, with the same names and the same
leading columns, so that ``utilon report`` reads both worlds (docs/outputs.md):

* ``jobs.csv``: ``id, tenant, class, submit, start, finish, goal, utility, delta, missed,
  penalty, cost`` -- tenant is the customer (``c<N>``), class the job's category (its kind
  when it has none), submit its arrival, start the instant its cluster started running
  (after a per-job cluster's boot), goal its deadline; utility is 1 when it met its deadline
  and 0 otherwise; a dropped job is unfinished and, as in the slot world, charged a penalty
  of at least 1; cost is its §3.1.1 resource usage (actual runtime × VMs × the VM's share of
  a server, in server-seconds).  Then the cloud's columns: ``customer, kind, size_mb,
  vm_type, vms, per_job_cluster, t_run, actual, dropped``.
* ``summary.json``: the slot world's keys where they mean the same thing (``misses``,
  ``miss_rate``, ``penalty``, ``response_mean``, ``utilisation`` as §4.1's effective
  utilization, ``servers``, ...) and the cloud's (``success_rate``, ``dropped``,
  ``per_job_server_hours``, ``mean_usage_cost``, ``reconfigurations``, ...); wall-clock
  numbers under ``timing`` only.
* ``allocation.csv``: cores each job held over ``[its VMs' allocation, its end)``;
  ``capacity.csv``: the fleet's cores.
* ``provenance.json``: the scenario, the seed, how the jobs were made, the cloud.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

from utilon.cloud.metrics import summarize
from utilon.cloud.policy import CloudPolicy
from utilon.cloud.scenario import CloudWorkload
from utilon.cloud.sim import CloudResult
from utilon.metrics.outputs import JOB_COLUMNS, write_jobs_csv, write_summary
from utilon.scenario.digest import scenario_digest

CLOUD_COLUMNS = ("customer", "kind", "size_mb", "vm_type", "vms", "per_job_cluster", "t_run",
                 "actual", "dropped")


def _r(x: float, nd: int = 6) -> float:
    return float(round(x, nd))


def cloud_rows(res: CloudResult, workload: CloudWorkload) -> list[dict[str, Any]]:
    cloud = workload.store.cloud
    end_of_run = max([r.end for r in res.records if r.end is not None]
                     + [r.job.deadline for r in res.records] + [0.0])
    rows = []
    for rec in res.records:
        j = rec.job
        allowed = max(j.deadline - j.arrival, 1.0)
        finished = rec.end is not None
        # a job that never ran is charged as finishing at the end of the run, and at least one
        # whole allowed time late (as in the slot world: it can never look on time)
        t = rec.end if rec.end is not None else max(end_of_run, j.deadline + allowed)
        late = t - j.deadline
        ran = rec.k >= 0
        rows.append({
            "id": j.id,
            "tenant": f"c{j.customer}",
            "class": j.category or j.kind,
            "submit": _r(j.arrival, 3),
            "start": _r(rec.run_start, 3) if rec.run_start is not None else None,
            "finish": _r(rec.end, 3) if rec.end is not None else None,
            "goal": _r(j.deadline, 3),
            "utility": 1.0 if rec.met else 0.0,
            "delta": _r(late, 3) if finished else None,
            "missed": not rec.met,
            "penalty": _r(max(0.0, late) / allowed),
            "cost": _r(rec.actual * rec.n * cloud.share(rec.k), 3) if ran else 0.0,
            "customer": j.customer,
            "kind": j.kind,
            "size_mb": _r(j.size_mb, 3),
            "vm_type": cloud.vm_types[rec.k].name if ran else "",
            "vms": rec.n if ran else 0,
            "per_job_cluster": rec.fresh if ran else "",
            "t_run": _r(rec.t_run, 3) if ran else None,
            "actual": _r(rec.actual, 3) if ran else None,
            "dropped": rec.dropped,
        })
    return rows


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else 0.0


def cloud_summary(res: CloudResult, workload: CloudWorkload, policy: CloudPolicy,
                  rows: list[dict[str, Any]], *, stopped_early: str = "") -> dict[str, Any]:
    cloud_keys = summarize(res, workload.store)
    finished = [r for r in rows if r["finish"] is not None]
    responses = [r["finish"] - r["submit"] for r in finished]
    utilities = [r["utility"] for r in rows]
    misses = sum(1 for r in rows if r["missed"])
    ms = list(res.decide_ms)
    report = policy.report()
    return {
        "scenario": workload.name,
        "scenario_digest": scenario_digest(workload.spec),
        "world": "cloud",
        "policy": policy.name,
        "params": dict(sorted(policy.params().items())),
        "seed": workload.seed,
        "jobs": len(rows),
        "finished": len(finished),
        "unfinished": len(rows) - len(finished),
        "unsubmitted": 0,
        "utility_min": min(utilities) if utilities else 0.0,
        "utility_sum": _r(sum(utilities)),
        "utility_mean": _r(sum(utilities) / len(utilities)) if utilities else 0.0,
        "misses": misses,
        "miss_rate": _r(misses / len(rows)) if rows else 0.0,
        "penalty": _r(sum(r["penalty"] for r in rows)),
        "makespan": _r(res.span, 3),
        "response_mean": _r(sum(responses) / len(responses), 3) if responses else 0.0,
        "response_p95": _r(_pct(responses, 95), 3),
        "utilisation": cloud_keys["effective_utilization"],
        "servers": res.servers,
        "cost": _r(sum(r["cost"] for r in rows), 3),
        "success_rate": cloud_keys["success_rate"],
        "dropped": cloud_keys["dropped"],
        "per_job_server_hours": cloud_keys["per_job_server_hours"],
        "mean_usage_cost": cloud_keys["mean_usage_cost"],
        "reconfigurations": res.reconfigurations,
        "reconfigured_vms": res.reconfigured_vms,
        **({"policy_report": report} if report else {}),
        "decisions": len(ms),
        "stopped_early": stopped_early,
        "warnings": [],
        "timing": {
            "decide_ms_p50": _r(_pct(ms, 50), 4),
            "decide_ms_p95": _r(_pct(ms, 95), 4),
            "decide_ms_max": _r(max(ms), 4) if ms else 0.0,
            "decide_ms_mean": _r(sum(ms) / len(ms), 4) if ms else 0.0,
            "wall_s": _r(res.wall_s, 4),
        },
    }


def cloud_provenance(workload: CloudWorkload) -> dict[str, Any]:
    c = workload.store.cloud
    return {
        "scenario": workload.name,
        "world": "cloud",
        "source": workload.source,
        "seed": workload.seed,
        "description": workload.spec.description,
        "derivations": list(workload.notes),
        "cloud": {"server_cores": c.server_cores,
                  "vm_types": {v.name: v.cores for v in c.vm_types},
                  "boot_time": c.boot_time, "hadoop_start": c.hadoop_start,
                  "load_mbps": c.load_mbps, "reconf_overhead": c.reconf_overhead,
                  "prediction_error": workload.store.error},
        "profiles": sorted(workload.store.profiles),
        "metadata": workload.spec.metadata,
    }


def write_cloud_outputs(out_dir: Path, res: CloudResult, workload: CloudWorkload,
                        rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_jobs_csv(out_dir / "jobs.csv", rows, JOB_COLUMNS + CLOUD_COLUMNS)
    write_summary(out_dir / "summary.json", summary)
    (out_dir / "provenance.json").write_text(
        json.dumps(cloud_provenance(workload), indent=2) + "\n", encoding="utf-8")
    cores = workload.store.cloud.cores
    with (out_dir / "allocation.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("start", "end", "job", "slots"))
        for rec in sorted((r for r in res.records if r.start is not None and r.end is not None),
                          key=lambda r: (r.start, r.job.id)):
            w.writerow((round(rec.start or 0.0, 4), round(rec.end or 0.0, 4), rec.job.id,
                        int(rec.n * cores[rec.k])))
    with (out_dir / "capacity.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("time", "machines", "cores", "effective"))
        total = res.servers * workload.store.cloud.server_cores
        w.writerow((0.0, res.servers, total, total))
