"""Cura, issue 44: why per-job clusters needed more servers than dedicated clusters.

Dedicated clusters are sized for each customer's peak (§4.2.1); per-job clusters share one
fleet but hold every job's VMs through a boot.  Which needs more depends on how many job
lengths the run spans: a customer's peak is far above its mean only when its jobs are spread
over many job lengths (the paper's 11,500 jobs of 50 customers over 100 minutes), and equals
nearly all its jobs when the run lasts about one job length (300 jobs at 11,500 per 100
minutes arrive in 157 s, and a job runs about 120 s).

For each arrival rate and job count: the span, the servers per-job clusters need (searched)
and dedicated clusters lease (sized), their ratio, and the two demand bounds behind them (the
fleet at the global peak of cores with every job at its optimal configuration from arrival,
and the sum of every customer's per-type peaks), on the reproduction's Fig. 5 workload
(uniform deadlines, mean 200 s).

With ``--boot``, instead: the per-job cluster's VM creation and boot time (unstated in the
paper; 60 s by default) against Fig. 5's two baseline targets, per-job < dedicated in servers
and "up to 65%" lower response time for Cura and dedicated clusters, on the reproduction's
``--quick`` workload (300 jobs at λ = 0.5 per s, mean deadlines 200 and 800 s).

Run ``.venv/bin/python benchmarks/cura_regime.py [--seeds 1,5] [--boot]``; writes
``benchmarks/results-cura-regime.json`` (``results-cura-boot.json``) and prints a Markdown
table.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from functools import partial
from pathlib import Path

from utilon.cloud.metrics import servers_required
from utilon.cloud.model import CloudJob
from utilon.cloud.profile import ProfileStore
from utilon.cloud.workload import DeadlineDist, generate
from utilon.policies import make_cloud_policy
from utilon.repro.cura import SWIM, _store

OUT = Path(__file__).resolve().parent / "results-cura-regime.json"
PAPER_RATE = 11500 / 6000  # "11,500 jobs arriving within a period of 100 minutes"
#: (jobs per second, jobs)
CASES = ((PAPER_RATE, 300), (PAPER_RATE, 1000), (0.5, 300), (0.5, 500), (0.5, 3000))


def _peaks(store: ProfileStore, jobs: tuple[CloudJob, ...], delay: float
           ) -> tuple[float, float]:
    """Servers' worth of cores at the global peak and summed over customers' per-type peaks,
    every job on its optimal configuration from arrival (``delay``: a per-job boot)."""
    glob: list[tuple[float, int, int]] = []
    cust: dict[tuple[int, int], list[tuple[float, int, int]]] = defaultdict(list)
    for j in jobs:
        t = store.configs(j)
        i = t.optimal(j.deadline - j.arrival - delay)
        assert i is not None  # the workload's deadline floor leaves every job a configuration
        k, n, d = int(t.k[i]), int(t.n[i]), float(t.t_run[i])
        c = n * store.cloud.vm_types[k].cores
        ev = [(j.arrival, 1, c), (j.arrival + d + delay, 0, -c)]
        glob += ev
        cust[j.customer, k] += ev

    def peak(ev: list[tuple[float, int, int]]) -> int:
        use = top = 0
        for _, _, c in sorted(ev):
            use += c
            top = max(top, use)
        return top

    cores = store.cloud.server_cores
    return peak(glob) / cores, sum(peak(v) for v in cust.values()) / cores


def boot(seeds: list[int]) -> None:
    from dataclasses import replace

    from utilon.cloud.metrics import summarize
    from utilon.cloud.sim import CloudSim
    from utilon.repro.cura import ARRIVAL_RATE, QUICK_JOBS, _params

    base = _store()
    rows = []
    for b in (60.0, 120.0, 240.0, 480.0):
        store = ProfileStore(replace(base.cloud, boot_time=b), base.profiles)
        for seed in seeds:
            for mean in (200.0, 800.0):
                w = generate(store, jobs=QUICK_JOBS, duration=QUICK_JOBS / ARRIVAL_RATE,
                             swim_path=SWIM, seed=seed, deadline=DeadlineDist("uniform", mean))
                row: dict[str, float] = {"boot_s": b, "seed": seed, "mean_deadline": mean}
                for svc in ("per-job-cluster", "dedicated", "cura"):
                    make = partial(make_cloud_policy, svc, store, _params(svc, w.jobs))
                    n = servers_required(store, make, w.jobs, seed=seed, start=64).servers
                    m = summarize(CloudSim(store, make(), w.jobs, n, seed=seed).run(), store)
                    row[f"{svc}_servers"] = n
                    row[f"{svc}_response_s"] = m["mean_response_s"]
                rows.append(row)
                print(row, flush=True)
    (OUT.parent / "results-cura-boot.json").write_text(json.dumps(rows, indent=1))
    print("| boot s | seed | mean deadline | servers per-job / dedicated / cura | response "
          "per-job / dedicated / cura s | cura's response below per-job's |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['boot_s']:g} | {r['seed']} | {r['mean_deadline']:g} | "
              f"{r['per-job-cluster_servers']:g} / {r['dedicated_servers']:g} / "
              f"{r['cura_servers']:g} | {r['per-job-cluster_response_s']:.0f} / "
              f"{r['dedicated_response_s']:.0f} / {r['cura_response_s']:.0f} | "
              f"{1 - r['cura_response_s'] / r['per-job-cluster_response_s']:.0%} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1,5")
    ap.add_argument("--boot", action="store_true")
    args = ap.parse_args()
    if args.boot:
        boot([int(s) for s in args.seeds.split(",")])
        return
    store = _store()
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for rate, n in CASES:
            w = generate(store, jobs=n, duration=n / rate, swim_path=SWIM, seed=seed,
                         deadline=DeadlineDist("uniform", 200.0))
            t0 = time.process_time()
            pj = servers_required(store, lambda: make_cloud_policy("per-job-cluster", store),
                                  w.jobs, seed=seed, start=64).servers
            ded = servers_required(store, lambda: make_cloud_policy("dedicated", store),
                                   w.jobs, seed=seed).servers
            g0, c0 = _peaks(store, w.jobs, 0.0)
            g1, _ = _peaks(store, w.jobs, store.cloud.boot_time)
            mean_run = sum(float(store.configs(j).t_run[store.configs(j).optimal(
                j.deadline - j.arrival)]) for j in w.jobs) / n
            rows.append({"seed": seed, "rate": round(rate, 3), "jobs": n, "span_s": round(n / rate),
                         "mean_run_s": round(mean_run, 1),
                         "span_in_runs": round(n / rate / mean_run, 1),
                         "per_job": pj, "dedicated": ded, "dedicated_over_per_job":
                         round(ded / pj, 2), "peak_no_boot": round(g0), "peak_with_boot":
                         round(g1), "sum_customer_peaks": round(c0),
                         "cpu_s": round(time.process_time() - t0, 1)})
            print(rows[-1], flush=True)
    OUT.write_text(json.dumps(rows, indent=1))
    print("| seed | jobs/s | jobs | span s | span / mean run | per-job | dedicated | ratio | "
          "global peak (boot) | sum of customer peaks |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['seed']} | {r['rate']} | {r['jobs']} | {r['span_s']} | "
              f"{r['span_in_runs']} | {r['per_job']} | {r['dedicated']} | "
              f"{r['dedicated_over_per_job']} | {r['peak_no_boot']} ({r['peak_with_boot']}) | "
              f"{r['sum_customer_peaks']} |")


if __name__ == "__main__":
    main()
