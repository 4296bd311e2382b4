"""Cura benchmark: the VM-aware scheduler's time per arrival with a long queue, and the wall
time of the servers-required search for the paper's 11,500-job workload.

Run ``.venv/bin/python benchmarks/bench_cura.py`` (``--quick`` for a smoke run).  It writes
``benchmarks/results-cura.json`` unless ``--no-write``, and prints a Markdown table.

* **per arrival**: ``Q`` jobs (the §4.2 workload's job kinds and sizes, deadlines uniform on
  [1, 3] hours so they can wait) arrive at time 0 on a 100-server cloud and are queued and
  reserved by one decision (timed as "setup"); then 20 more jobs arrive one per second and each
  decision is timed (p50 / p95 / max).  The policy is ``vm-aware`` (``cura`` only adds a
  reconfiguration check per window).
* **search**: ``servers_required`` for ``cura`` (and ``vm-aware``) on 11,500 jobs in 100
  minutes (uniform deadlines, mean 400 s): every fleet tried and the total wall time.  Goal:
  under 5 minutes on the 2-core reference machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from utilon.cloud.metrics import servers_required
from utilon.cloud.model import CloudJob, CloudSpec
from utilon.cloud.packing import equal_pools
from utilon.cloud.profile import ProfileStore
from utilon.cloud.sim import CloudSim
from utilon.cloud.workload import DeadlineDist, generate, swim_profiles
from utilon.policies import make_cloud_policy
from utilon.repro.cura import SWIM

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results-cura.json"


def per_arrival(store: ProfileStore, queued: int, seed: int) -> dict[str, float]:
    w = generate(store, jobs=queued + 20, duration=1.0, swim_path=SWIM, seed=seed,
                 deadline=DeadlineDist("uniform", 3600.0))
    jobs = [CloudJob(j.id, j.customer, j.kind, j.size_mb, 0.0, 3600.0 + j.deadline - j.arrival)
            for j in w.jobs[:queued]]
    extra = [CloudJob(j.id, j.customer, j.kind, j.size_mb, float(i + 1),
                      float(i + 1) + 3600.0 + j.deadline - j.arrival)
             for i, j in enumerate(w.jobs[queued:])]
    pol = make_cloud_policy("vm-aware", store)
    sim = CloudSim(store, pol, jobs, 100)           # only for its pools and view
    sim._resize(0.0, list(equal_pools(store.cloud, 100)), boot=False)
    t0 = time.perf_counter()
    pol.decide(0.0, sim.view(), jobs, [])
    setup = time.perf_counter() - t0
    ms = []
    for j in extra:
        t0 = time.perf_counter()
        pol.decide(j.arrival, sim.view(), [j], [])
        ms.append((time.perf_counter() - t0) * 1e3)
    return {"queued": queued, "reserved": len(pol.reserved), "waiting": len(pol.waiting),
            "setup_s": round(setup, 3), "p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p95_ms": round(float(np.percentile(ms, 95)), 3), "max_ms": round(max(ms), 3)}


def search(store: ProfileStore, policy: str, jobs: int, seed: int) -> dict[str, object]:
    w = generate(store, jobs=jobs, duration=6000.0 * jobs / 11500, swim_path=SWIM, seed=seed,
                 deadline=DeadlineDist("uniform", 400.0))
    s = servers_required(store, lambda: make_cloud_policy(policy, store), w.jobs, seed=seed,
                         start=256)
    return {"policy": policy, "jobs": jobs, "servers": s.servers,
            "fleets_tried": list(s.tried), "wall_s": round(s.wall_s, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", default="100,1000,10000")
    ap.add_argument("--jobs", type=int, default=11500, help="jobs of the search workload")
    ap.add_argument("--policies", default="cura,vm-aware")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="queues 100,1000; 1,150 jobs")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.queues, args.jobs = "100,1000", 1150
    cloud = CloudSpec()
    store = ProfileStore(cloud, swim_profiles(SWIM, cloud))
    arrivals = [per_arrival(store, int(q), args.seed) for q in args.queues.split(",")]
    searches = [search(store, p, args.jobs, args.seed) for p in args.policies.split(",")]
    print("| queued jobs | setup decision s | per arrival p50 ms | p95 ms | max ms |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for a in arrivals:
        print(f"| {a['queued']:,} | {a['setup_s']} | {a['p50_ms']} | {a['p95_ms']} | "
              f"{a['max_ms']} |")
    print()
    print("| policy | jobs | servers required | fleets simulated | search wall s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for s in searches:
        print(f"| {s['policy']} | {s['jobs']:,} | {s['servers']} | "
              f"{len(s['fleets_tried'])} | {s['wall_s']} |")
    if not args.no_write:
        OUT.write_text(json.dumps({
            "benchmark": "bench_cura.py", "seed": args.seed, "per_arrival": arrivals,
            "search": searches,
            "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                        "cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in
                                                            os.getloadavg()]},
        }, indent=2) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
