"""alsched solver benchmark: greedy vs branch-and-bound vs MILP vs auto on §5.2's cluster.

Run ``.venv/bin/python benchmarks/bench_alsched.py`` (``--quick`` for a smoke run,
``--help`` for the options).  It writes ``benchmarks/results-alsched.json`` unless
``--no-write``, and prints a Markdown table.

Instances (seeded numpy Generator per variant and size; built before timing):

* the cluster of §5.2: 8 machines with 32 free units and 80 with 8 (896 units);
* N pending jobs, each with k ~ Binomial(64, 1/8) tasks (at least 1) and ``limit = k``;
* ``nbody``: every job is §3.4's n-body request, ``max(scale(1, barrier(k, max over the 8
  large machines m of nck({m}, k, k))), scale(0.5, barrier(k, lnck(all, k, k))))``;
* ``mixed``: a third each of that n-body request, PI = ``lnck(all, k, k)`` and LOCAL =
  ``max over the machines with >= k units of nck({m}, k, k)`` (the 8 large machines if k is
  above every machine's size: such a job can never run).

Timed (``time.perf_counter``, wall clock, the median over ``--repeats`` runs for greedy and
``--exact-repeats`` for bnb / milp / auto, each run the same instance) per size and solver:
total utility, status, proven bound, branch-and-bound nodes, and greedy's gap to the best
proven optimum -- or, when no exact solver proved one within ``--time-limit``, to the best
bound (printed as ``<= x% (bound)``).  ``auto`` runs as the policy runs it: its MILP gets the
policy's per-decision budget (``DEFAULT_BUDGET``), not ``--time-limit``, and is skipped above
``DEFAULT_MAX_SIZE`` (then its status is greedy's ``heuristic``).

Issue 24's targets are printed after the table, each with the measured numbers: optimality
proven by an exact solver at 100 jobs of each variant within 20 s, and the online solve of
the policy's default solver (``Alsched().solver``) under 100 ms at 500 pending jobs (the
``solve`` call the policy makes in ``decide``, timed the same way).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from utilon.policies.alsched.lang.ast import Barrier, Lit, LnCk, Max, NCk, Node, Scale
from utilon.policies.alsched.solvers import (
    DEFAULT_BUDGET,
    SOLVERS,
    Problem,
    Request,
    check,
    solve,
)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results-alsched.json"
BIG, SMALL, N_BIG, N_SMALL = 32, 8, 8, 80
CAPACITY = (BIG,) * N_BIG + (SMALL,) * N_SMALL
ALL = tuple(range(len(CAPACITY)))
VARIANTS = ("nbody", "mixed")


def _local(k: int, machines: tuple[int, ...]) -> tuple[Node, dict[str, tuple[int, ...]]]:
    return (Max(tuple(NCk(f"m{m}", Lit(k), Lit(k)) for m in machines)),
            {f"m{m}": (m,) for m in machines})


def nbody(job: str, k: int) -> Request:
    local, classes = _local(k, tuple(range(N_BIG)))
    expr = Max((Scale(1.0, Barrier(Lit(k), local)),
                Scale(0.5, Barrier(Lit(k), LnCk("all", Lit(k), Lit(k))))))
    return Request(job, expr, classes | {"all": ALL}, limit=k)


def pi(job: str, k: int) -> Request:
    return Request(job, LnCk("all", Lit(k), Lit(k)), {"all": ALL}, limit=k)


def local(job: str, k: int) -> Request:
    fits = tuple(m for m in ALL if CAPACITY[m] >= k) or tuple(range(N_BIG))
    expr, classes = _local(k, fits)
    return Request(job, expr, classes, limit=k)


def make_problem(variant: str, n: int, seed: int) -> Problem:
    rng = np.random.default_rng([seed, VARIANTS.index(variant), n])
    kinds = (nbody, pi, local)
    reqs = []
    for i in range(n):
        k = max(1, int(rng.binomial(64, 1 / 8)))
        make = nbody if variant == "nbody" else kinds[i % 3]
        reqs.append(make(f"j{i}", k))
    return Problem(CAPACITY, tuple(reqs))


def run(problem: Problem, solver: str, repeats: int, time_limit: float) -> dict[str, Any]:
    times, sol = [], None
    limit = DEFAULT_BUDGET if solver == "auto" else time_limit  # auto: the policy's budget
    for _ in range(repeats):
        t0 = time.perf_counter()
        sol = solve(problem, solver, time_limit=limit)
        times.append(time.perf_counter() - t0)
    assert sol is not None
    check(problem, sol)
    return {"solver": solver, "median_ms": statistics.median(times) * 1e3, "repeats": repeats,
            "total": sol.total, "bound": sol.bound, "status": sol.status, "nodes": sol.nodes,
            "allocated_jobs": len(sol.alloc),
            "units": sum(u for a in sol.alloc.values() for u in a.values())}


def greedy_gap(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Greedy's gap to the best proven optimum, else to the best (smallest) bound."""
    greedy = next((r for r in rows if r["solver"] == "greedy"), None)
    exact = [r for r in rows if r["solver"] != "greedy"]
    if greedy is None or not exact:
        return None
    proven = [r["total"] for r in exact if r["status"] == "optimal"]
    ref, kind = (max(proven), "optimum") if proven else (min(r["bound"] for r in exact), "bound")
    gap = (ref - greedy["total"]) / ref if ref > 0 else 0.0
    return {"versus": kind, "reference": ref, "gap": gap}


def bench(variant: str, n: int, solvers: list[str], args: argparse.Namespace) -> dict[str, Any]:
    problem = make_problem(variant, n, args.seed)
    rows = []
    for s in solvers:
        reps = args.repeats if s == "greedy" else args.exact_repeats
        rows.append(run(problem, s, reps, args.time_limit))
    demand = sum(r.limit or 0 for r in problem.requests)
    return {"variant": variant, "jobs": n, "demand_units": demand, "rows": rows,
            "greedy_gap": greedy_gap(rows)}


def _gap_text(g: dict[str, Any] | None) -> str:
    if g is None:
        return "-"
    pct = f"{100 * g['gap']:.2f}%"
    return pct if g["versus"] == "optimum" else f"<= {pct} (bound)"


def table(results: list[dict[str, Any]], time_limit: float) -> str:
    lines = ["| variant | jobs | units asked | solver | median ms | total | bound | status "
             "| nodes | greedy gap |",
             "|---|---:|---:|---|---:|---:|---:|---|---:|---|"]
    for res in results:
        for r in res["rows"]:
            gap = _gap_text(res["greedy_gap"]) if r["solver"] == "greedy" else ""
            nodes = str(r["nodes"]) if r["solver"] == "bnb" else ""
            lines.append(f"| {res['variant']} | {res['jobs']} | {res['demand_units']} "
                         f"| {r['solver']} | {r['median_ms']:.1f} | {r['total']:g} "
                         f"| {r['bound']:.6g} | {r['status']} | {nodes} | {gap} |")
    lines.append(f"\ncluster: {N_BIG} x {BIG} + {N_SMALL} x {SMALL} units "
                 f"({sum(CAPACITY)}); time limit {time_limit:g} s per bnb / milp solve")
    return "\n".join(lines)


PROVE_JOBS, PROVE_S, ONLINE_JOBS, ONLINE_MS = 100, 20.0, 500, 100.0


def targets(results: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Issue 24's targets against the measured rows (only those the run measured)."""
    from utilon.policies.alsched.policy import Alsched

    online = Alsched().solver
    lines, out = ["", "targets (issue 24):"], []
    for res in results:
        v, n = res["variant"], res["jobs"]
        if n == PROVE_JOBS:
            proven = [r for r in res["rows"] if r["status"] == "optimal" and r["solver"] != "greedy"
                      and r["median_ms"] <= PROVE_S * 1e3]
            best = min(proven, key=lambda r: r["median_ms"]) if proven else None
            what = (f"{best['solver']} in {best['median_ms']:.0f} ms" if best
                    else "no exact solver proved it")
            out.append({"target": f"optimum proven at {n} {v} jobs within {PROVE_S:g} s",
                        "met": best is not None, "measured": what})
        row = next((r for r in res["rows"] if r["solver"] == online), None)
        if n == ONLINE_JOBS and row is not None:
            out.append({"target": f"online solve ({online}) at {n} pending {v} jobs "
                                  f"under {ONLINE_MS:g} ms",
                        "met": row["median_ms"] < ONLINE_MS,
                        "measured": f"{row['median_ms']:.1f} ms"})
    for t in out:
        lines.append(f"- {t['target']}: {'met' if t['met'] else 'NOT met'} ({t['measured']})")
    if not out:
        lines.append(f"- (run sizes {PROVE_JOBS} and {ONLINE_JOBS} to check them)")
    return "\n".join(lines), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,50,100,200,500", help="comma-separated job counts")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="nbody, mixed")
    ap.add_argument("--solvers", default=",".join(SOLVERS), help="greedy, bnb, milp, auto")
    ap.add_argument("--repeats", type=int, default=5, help="greedy runs per instance")
    ap.add_argument("--exact-repeats", type=int, default=1, help="bnb / milp / auto runs")
    ap.add_argument("--time-limit", type=float, default=20.0,
                    help="seconds per bnb / milp solve")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help="sizes 10,50,100, time limit 2 s, 3 greedy runs")
    ap.add_argument("--no-write", action="store_true", help=f"do not write {OUT.name}")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.time_limit, args.repeats = "10,50,100", min(args.time_limit, 2.0), 3
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    variants = [v for v in args.variants.split(",") if v.strip()]
    solvers = [s for s in args.solvers.split(",") if s.strip()]
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit(f"unknown variant {v!r}; valid: {', '.join(VARIANTS)}")
    results = [bench(v, n, solvers, args) for v in variants for n in sizes]
    print(table(results, args.time_limit))
    text, met = targets(results)
    print(text)
    if not args.no_write:
        OUT.write_text(json.dumps({
            "benchmark": "bench_alsched.py", "seed": args.seed, "time_limit_s": args.time_limit,
            "cluster": {"large": [N_BIG, BIG], "small": [N_SMALL, SMALL]},
            "results": results, "targets": met,
            "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                        "cpus": os.cpu_count(), "numpy": np.__version__,
                        "loadavg": [round(x, 2) for x in os.getloadavg()]},
        }, indent=2) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
