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

Timed (``time.perf_counter``, wall clock): ``solve_rhc(problem, solver=...)`` -- building the
sparse QP, the solver (Clarabel's interior point, the default; HiGHS's active-set QP for
comparison, on at most ``--highs-max`` instances at 1,000 jobs) and reading back the
solution -- after one untimed warm-up; the table shows the median and p95 over ``--repeats``
instances per size, how many were not proven optimal ("feasible: ..." -- the solver stopped
early, e.g. at solve_rhc's default 5 s time limit or on HiGHS's occasional "Solve error", and
its last point was kept), how many ended in the heuristic fallback, and the relative
objective difference between the two solvers on the same instances.  Goals (issue 22): the
default solver's median < 20 ms at 100 jobs and < 200 ms at 1,000 (printed as met / NOT met).
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

import clarabel
import highspy
import numpy as np

from utilon.policies.rds.optimizer import SOLVERS, RhcProblem, solve_rhc

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results-rds.json"
P = np.array([0.0107, 0.0096, 0.0132])
Q = np.array([0.0173, 0.0168, 0.0194])
GOALS = ((100, 20.0), (1000, 200.0))  # (jobs, median ms) for the default solver


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


def bench(jobs: int, repeats: int, seed: int, solvers: list[str],
          highs_max: int) -> dict[str, Any]:
    """Every solver on the same instances; the objective gap says whether they agree."""
    rng = np.random.default_rng(seed + jobs)
    instances = [make_instance(rng, jobs) for _ in range(repeats)]
    warm = make_instance(rng, jobs)
    row: dict[str, Any] = {"jobs": jobs, "repeats": repeats, "solvers": {}}
    objectives: dict[str, list[float]] = {}
    for solver in solvers:
        # HiGHS's active-set QP takes seconds at 1,000 jobs: fewer instances there
        todo = instances[:highs_max] if (solver == "highs" and jobs >= 1000) else instances
        solve_rhc(warm, solver=solver)  # warm-up (imports, initialisation)
        times, statuses, objs = [], [], []
        for pb in todo:
            t0 = time.perf_counter()
            sol = solve_rhc(pb, solver=solver)
            times.append((time.perf_counter() - t0) * 1e3)
            statuses.append(sol.status)
            objs.append(sol.objective)
        objectives[solver] = objs
        times.sort()
        p95 = times[min(len(times) - 1, math.ceil(0.95 * len(times)) - 1)]
        row["solvers"][solver] = {
            "instances": len(todo), "median_ms": statistics.median(times), "p95_ms": p95,
            "max_ms": times[-1], "not_optimal": sum(s != "optimal" for s in statuses),
            "fallbacks": sum(s.startswith("fallback") for s in statuses),
            "statuses": sorted(set(statuses))}
    if {"clarabel", "highs"} <= set(objectives):
        pairs = list(zip(objectives["clarabel"], objectives["highs"], strict=False))
        # relative objective difference, clarabel minus highs (negative: clarabel lower)
        row["objective_gap"] = {
            "max_rel": max((a - b) / max(abs(b), 1e-9) for a, b in pairs),
            "min_rel": min((a - b) / max(abs(b), 1e-9) for a, b in pairs)}
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="10,100,1000", help="comma-separated job counts")
    ap.add_argument("--repeats", type=int, default=20, help="instances per size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="5 repeats, at most 100 jobs")
    ap.add_argument("--solvers", default=",".join(SOLVERS),
                    help="comma-separated QP solvers to time (the first is the default one)")
    ap.add_argument("--highs-max", type=int, default=5,
                    help="instances for HiGHS at >= 1,000 jobs (seconds each)")
    ap.add_argument("--no-write", action="store_true", help=f"do not write {OUT.name}")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.jobs.split(",") if x.strip()]
    solvers = [x for x in args.solvers.split(",") if x.strip()]
    unknown = sorted(set(solvers) - set(SOLVERS))
    if unknown:
        ap.error(f"--solvers: unknown {', '.join(unknown)}; choose from {', '.join(SOLVERS)}")
    repeats = args.repeats
    if args.quick:
        sizes = [n for n in sizes if n <= 100] or [10]
        repeats = min(repeats, 5)
    rows = [bench(n, repeats, args.seed, solvers, args.highs_max) for n in sizes]
    print(f"{'jobs':>6} {'solver':>9} {'median ms':>10} {'p95 ms':>9} {'max ms':>9} "
          f"{'not optimal':>12} {'fallback':>9}")
    for r in rows:
        for name, x in r["solvers"].items():
            print(f"{r['jobs']:>6} {name:>9} {x['median_ms']:>10.2f} {x['p95_ms']:>9.2f} "
                  f"{x['max_ms']:>9.2f} {x['not_optimal']:>8}/{x['instances']:<3} "
                  f"{x['fallbacks']:>5}/{x['instances']}")
        if "objective_gap" in r:
            gap = r["objective_gap"]
            print(f"{'':>6} objective clarabel vs highs: {gap['min_rel']:+.2e} .. "
                  f"{gap['max_rel']:+.2e} (relative; negative = clarabel lower)")
    verdicts = []
    for jobs, ms in GOALS:
        row = next((r for r in rows if r["jobs"] == jobs), None)
        x = None if row is None else row["solvers"].get(SOLVERS[0])
        verdict = ("not measured" if x is None
                   else "met" if x["median_ms"] < ms else "NOT met")
        verdicts.append({"jobs": jobs, "median_ms": ms, "verdict": verdict})
        print(f"goal: {SOLVERS[0]} < {ms:g} ms at {jobs} jobs: {verdict}")
    if not args.no_write:
        OUT.write_text(json.dumps({
            "benchmark": "bench_rds.py", "horizon": 3, "control_horizon": 3,
            "seed": args.seed, "goals": verdicts,
            "results": rows,
            "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                        "cpus": os.cpu_count(), "highs": highspy.Highs().version(),
                        "clarabel": clarabel.__version__,
                        "numpy": np.__version__},
        }, indent=2) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
