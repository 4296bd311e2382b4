"""RDS receding-horizon QP benchmark: ``solve_rhc`` end to end for 10 / 100 / 1,000 jobs.

Run ``.venv/bin/python benchmarks/bench_rds.py`` (``--quick`` for a smoke run, ``--help``
for the options).  It writes ``benchmarks/results-rds.json`` unless ``--no-write``.

Instances (seeded; one per repeat, all built before timing), with the paper's horizons
H_p = H_c = 3 and its P / Q weights (§6.6):

* nominal capacity ``40 * ceil(J / 20)`` slots (the paper's 40-slot cluster scaled with the
  number of jobs, about two slots per job so that jobs compete); the predicted capacity of
  step i is the nominal one times a speed factor ~ U[0.5, 1] (dynamic availability);
  ``scale`` = the nominal capacity.
* job sizes log-uniform in [10, 300] slot-intervals (a 30x spread); map gain
  ``bm = U[0.8, 1.2] / size`` and, for the 40% of jobs in their reduce phase, reduce gain
  ``br = U[0.5, 1] / size`` (else 0); ``ar = 0`` (as the ``rds`` policy passes it: it
  folds the lag into the offset), offset 0; progress now
  ~ U[0, 0.9]; the current allocation is a random share of the nominal capacity and the last
  step's progress is what the model gives for it.
* deadline 1..8 intervals away (uniform); the reference is linear from the current progress
  to 1 at the deadline and 1 after it; ``deadline_step`` = deadline − 1 when inside the
  horizon; weights ω ~ {1, 2, 4} with δ = 1.
* per-job caps: map U[1, 40] slots, reduce U[0, 10] slots per step.

Timed (``time.perf_counter``, wall clock): ``solve_rhc(problem)`` -- building the sparse QP,
HiGHS (active-set QP solver) and reading back the solution -- after one untimed warm-up; the
table shows the median and p95 over ``--repeats`` instances per size, how many were not
proven optimal ("feasible: ..." -- HiGHS stopped early, e.g. at solve_rhc's default 5 s time
limit or on its occasional "Solve error", and its last point was kept) and how many ended in
the heuristic fallback.  Goal: median < 50 ms at 100 jobs (printed as met / NOT met).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import highspy
import numpy as np

from utilon.policies.rds.optimizer import RhcProblem, solve_rhc

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results-rds.json"
P = np.array([0.0107, 0.0096, 0.0132])
Q = np.array([0.0173, 0.0168, 0.0194])
GOAL_JOBS, GOAL_MS = 100, 50.0


def make_instance(rng: np.random.Generator, jobs: int, hp: int = 3) -> RhcProblem:
    nominal = 40.0 * math.ceil(jobs / 20)
    size = np.exp(rng.uniform(math.log(10), math.log(300), jobs))
    bm = rng.uniform(0.8, 1.2, jobs) / size
    br = np.where(rng.random(jobs) < 0.4, rng.uniform(0.5, 1.0, jobs) / size, 0.0)
    ar = np.zeros(jobs)  # the rds policy folds the NARX lag into the offset
    progress = rng.uniform(0, 0.9, jobs)
    share = rng.dirichlet(np.ones(jobs)) * nominal
    cur_r = np.where(br > 0, share * rng.uniform(0, 0.5, jobs), 0.0)
    cur_m = share - cur_r
    last = bm * cur_m + br * cur_r
    deadline = rng.integers(1, 9, jobs)  # intervals from now
    steps = np.arange(1, hp + 1)
    reference = np.minimum(progress[:, None] + (1 - progress)[:, None]
                           * steps / deadline[:, None], 1.0)
    omega = rng.choice([1.0, 2.0, 4.0], jobs)
    return RhcProblem(
        progress=progress, last_step=last, reference=reference,
        weight=np.repeat(omega[:, None], hp, axis=1), offset=np.zeros(jobs), gain_map=bm,
        gain_reduce=br, gain_prev=ar, cap_map=rng.uniform(1, 40, jobs),
        cap_reduce=rng.uniform(0, 10, (jobs, hp)) * (br > 0)[:, None], current_map=cur_m,
        current_reduce=cur_r, capacity=nominal * rng.uniform(0.5, 1.0, hp), P=P[:hp],
        Q=Q[:hp], deadline_step=np.where(deadline <= hp, deadline - 1, -1), scale=nominal)


def bench(jobs: int, repeats: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed + jobs)
    instances = [make_instance(rng, jobs) for _ in range(repeats)]
    solve_rhc(make_instance(rng, jobs))  # warm-up (imports, HiGHS initialisation)
    times, statuses, solver_s = [], [], []
    for pb in instances:
        t0 = time.perf_counter()
        sol = solve_rhc(pb)
        times.append((time.perf_counter() - t0) * 1e3)
        solver_s.append(sol.seconds * 1e3)
        statuses.append(sol.status)
    times.sort()
    p95 = times[min(len(times) - 1, math.ceil(0.95 * len(times)) - 1)]
    return {"jobs": jobs, "repeats": repeats, "median_ms": statistics.median(times),
            "p95_ms": p95, "max_ms": times[-1],
            "not_optimal": sum(s != "optimal" for s in statuses),
            "fallbacks": sum(s.startswith("fallback") for s in statuses),
            "statuses": sorted(set(statuses))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="10,100,1000", help="comma-separated job counts")
    ap.add_argument("--repeats", type=int, default=20, help="instances per size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="5 repeats, at most 100 jobs")
    ap.add_argument("--no-write", action="store_true", help=f"do not write {OUT.name}")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.jobs.split(",") if x.strip()]
    repeats = args.repeats
    if args.quick:
        sizes = [n for n in sizes if n <= 100] or [10]
        repeats = min(repeats, 5)
    rows = [bench(n, repeats, args.seed) for n in sizes]
    print(f"{'jobs':>6} {'median ms':>10} {'p95 ms':>9} {'max ms':>9} {'not optimal':>12} "
          f"{'fallback':>9}")
    for r in rows:
        print(f"{r['jobs']:>6} {r['median_ms']:>10.2f} {r['p95_ms']:>9.2f} "
              f"{r['max_ms']:>9.2f} {r['not_optimal']:>8}/{r['repeats']:<3} "
              f"{r['fallbacks']:>5}/{r['repeats']}")
    goal = next((r for r in rows if r["jobs"] == GOAL_JOBS), None)
    verdict = ("not measured" if goal is None
               else "met" if goal["median_ms"] < GOAL_MS else "NOT met")
    print(f"goal: < {GOAL_MS:g} ms at {GOAL_JOBS} jobs: {verdict}")
    if not args.no_write:
        OUT.write_text(json.dumps({
            "benchmark": "bench_rds.py", "horizon": 3, "control_horizon": 3,
            "seed": args.seed, "goal": {"jobs": GOAL_JOBS, "median_ms": GOAL_MS,
                                        "verdict": verdict},
            "results": rows,
            "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                        "cpus": os.cpu_count(), "highs": highspy.Highs().version(),
                        "numpy": np.__version__},
        }, indent=2) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
