"""RAS placement benchmark: one control cycle of Algorithm 1 (``place``), cold and warm, for
20 TaskTrackers x 9 jobs (the paper's testbed) and 1,000 TaskTrackers x 500 jobs.

Run ``.venv/bin/python benchmarks/bench_ras.py`` (``--quick`` for a smoke run, ``--help``
for the options).  It writes ``benchmarks/results-ras.json`` unless ``--no-write``.

Instances (seeded; one per repeat, all built before timing), shaped like the paper's
workload (§4, Table 2):

* every TaskTracker has capacity 1.0 of each resource (cpu, io, mem);
* each job is a Sort, Combine or Select job (uniformly) with Table 2's profiles: maps
  cpu/io/mem .30/.45/.25, .25/.10/.10, .15/.20/.10; reducers .20/.50/.60, .10/.10/.25,
  .10/.10/.25; shuffle I/O per map placed .0015, .00015, .00015 up to ``parallel_copies`` = 5
  maps;
* s_pend ~ U{100..999} pending maps, s_req ~ U{1..s_pend} required map slots, r_pend ~
  U{1..20} pending reducers, and 20% of the jobs are in their reduce phase (reducers sized
  with the reduce profile);
* **cold**: the first cycle, from an empty placement; **warm**: the next cycle, from the
  cold cycle's maps as ``start_map`` -- meanwhile each placed map finished with probability
  1/2 (s_pend drops by as many; s_req is redrawn in 1..s_pend), and the reducers placed
  started (r_pend drops by as many).

Timed (``time.perf_counter``, wall clock): ``place(jobs, capacity, rounds=3[, start_map])``
after one untimed warm-up per size; the table shows the median and p95 over ``--repeats``
instances, with the rounds run and the map / reducer slots placed.  ``--reference`` also
times the implementation the incremental one replaced (``tests/_ras_placement_reference.py``,
kept as the test oracle) on the same instances and checks both give the same placement.
Goal: median < 1 s per cycle at 1,000 x 500 (printed as met / NOT met, cold and warm).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from utilon.policies.ras.placement import Placement, PlacementJob, place
from utilon.policies.ras.profiles import SHUFFLE, TABLE2

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results-ras.json"
REFERENCE = ROOT / "tests" / "_ras_placement_reference.py"
GOAL_SIZE, GOAL_S = (1000, 500), 1.0
RESOURCES = ("cpu", "io", "mem")
# Table 2: (map, reduce, shuffle I/O per map) per job type
PROFILES = {app: (tuple(m[r] for r in RESOURCES), tuple(red[r] for r in RESOURCES),
                  SHUFFLE[app]["io"]) for app, (m, red) in TABLE2.items()}
PARALLEL_COPIES = 5
REDUCE_PHASE = 0.2
ROUNDS = 3

Place = Callable[..., Placement]


def make_jobs(rng: np.random.Generator, n: int) -> list[PlacementJob]:
    kinds = list(PROFILES)
    jobs = []
    for i in range(n):
        mdem, rdem, shuffle = PROFILES[kinds[int(rng.integers(len(kinds)))]]
        s_pend = int(rng.integers(100, 1000))
        jobs.append(PlacementJob(
            f"j{i}", np.array(mdem), np.array(rdem), np.array([0.0, shuffle, 0.0]),
            s_pend=s_pend, s_req=int(rng.integers(1, s_pend + 1)),
            r_pend=int(rng.integers(1, 21)), reduce_phase=bool(rng.random() < REDUCE_PHASE),
            parallel_copies=PARALLEL_COPIES))
    return jobs


def next_cycle(rng: np.random.Generator, jobs: list[PlacementJob],
               prev: Placement) -> list[PlacementJob]:
    """The jobs one control cycle later: half the placed maps done, placed reducers
    started."""
    out = []
    for j, job in enumerate(jobs):
        done = int(rng.binomial(int(prev.maps[j].sum()), 0.5))
        s_pend = max(job.s_pend - done, 0)
        out.append(PlacementJob(
            job.id, job.map_demand, job.reduce_demand, job.shuffle_per_map, s_pend=s_pend,
            s_req=int(rng.integers(1, s_pend + 1)) if s_pend else 0,
            r_pend=max(job.r_pend - int(prev.reducers[j].sum()), 0),
            reduce_phase=job.reduce_phase, parallel_copies=job.parallel_copies))
    return out


def load_reference() -> Place:
    spec = importlib.util.spec_from_file_location("_ras_placement_reference", REFERENCE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    fn: Place = mod.place
    return fn


def _stats(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    p95 = times[min(len(times) - 1, math.ceil(0.95 * len(times)) - 1)]
    return {"median_ms": statistics.median(times), "p95_ms": p95, "max_ms": times[-1]}


def _timed(fn: Place, *args: Any, **kw: Any) -> tuple[Placement, float]:
    t0 = time.perf_counter()
    p = fn(*args, **kw)
    return p, (time.perf_counter() - t0) * 1e3


def bench(tts: int, n: int, repeats: int, seed: int,
          reference: Place | None) -> dict[str, Any]:
    rng = np.random.default_rng([seed, tts, n])
    cap = np.ones((tts, len(RESOURCES)))
    instances = []
    for _ in range(repeats):  # both cycles of every instance, built before timing
        jobs = make_jobs(rng, n)
        cold = place(jobs, cap, rounds=ROUNDS)
        instances.append((jobs, next_cycle(rng, jobs, cold), cold.maps))
    place(make_jobs(rng, n), cap, rounds=ROUNDS)  # warm-up
    row: dict[str, Any] = {"tasktrackers": tts, "jobs": n, "repeats": repeats}
    impls = [("place", place)] + ([("reference", reference)] if reference else [])
    for name, fn in impls:
        cold_ms, warm_ms, cold_rounds, warm_rounds, maps, reducers = [], [], [], [], [], []
        for jobs, jobs2, start in instances:
            p, ms = _timed(fn, jobs, cap, rounds=ROUNDS)
            cold_ms.append(ms)
            cold_rounds.append(p.rounds)
            maps.append(int(p.maps.sum()))
            reducers.append(int(p.reducers.sum()))
            q, ms = _timed(fn, jobs2, cap, rounds=ROUNDS, start_map=start)
            warm_ms.append(ms)
            warm_rounds.append(q.rounds)
            if name == "reference":  # the same placements as the optimised place()
                for js, kw in ((jobs, {}), (jobs2, {"start_map": start})):
                    a, b = place(js, cap, rounds=ROUNDS, **kw), p if not kw else q
                    if not (np.array_equal(a.maps, b.maps)
                            and np.array_equal(a.reducers, b.reducers)
                            and np.array_equal(a.utility, b.utility) and a.rounds == b.rounds):
                        raise SystemExit(f"{tts}x{n}: place() differs from the reference")
        row[name] = {"cold": _stats(cold_ms), "warm": _stats(warm_ms),
                     "rounds_cold": sorted(set(cold_rounds)),
                     "rounds_warm": sorted(set(warm_rounds)),
                     "map_slots_median": statistics.median(maps),
                     "reducers_median": statistics.median(reducers)}
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20x9,1000x500",
                    help="comma-separated TaskTrackersxjobs")
    ap.add_argument("--repeats", type=int, default=10, help="instances per size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="3 repeats")
    ap.add_argument("--reference", action="store_true",
                    help=f"also time {REFERENCE.relative_to(ROOT)} and compare placements")
    ap.add_argument("--no-write", action="store_true", help=f"do not write {OUT.name}")
    args = ap.parse_args(argv)
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",") if s.strip()]
    repeats = min(args.repeats, 3) if args.quick else args.repeats
    reference = load_reference() if args.reference else None
    rows = [bench(tts, n, repeats, args.seed, reference) for tts, n in sizes]
    print(f"{'TTs x jobs':>11} {'impl':>9} {'cycle':>5} {'median ms':>10} {'p95 ms':>9} "
          f"{'max ms':>9} {'rounds':>7} {'maps':>6} {'reducers':>8}")
    for r in rows:
        for name in ("place", "reference"):
            if name not in r:
                continue
            m = r[name]
            for cycle in ("cold", "warm"):
                s = m[cycle]
                rounds = ",".join(map(str, m[f"rounds_{cycle}"]))
                slots = (f"{m['map_slots_median']:>6g} {m['reducers_median']:>8g}"
                         if cycle == "cold" else "")
                print(f"{r['tasktrackers']:>5} x {r['jobs']:<3} {name:>9} {cycle:>5} "
                      f"{s['median_ms']:>10.1f} {s['p95_ms']:>9.1f} {s['max_ms']:>9.1f} "
                      f"{rounds:>7} {slots}")
    goal = next((r for r in rows if (r["tasktrackers"], r["jobs"]) == GOAL_SIZE), None)
    verdict = ("not measured" if goal is None else "met" if max(
        goal["place"]["cold"]["median_ms"], goal["place"]["warm"]["median_ms"]) < GOAL_S * 1e3
        else "NOT met")
    print(f"goal: < {GOAL_S:g} s per cycle at {GOAL_SIZE[0]} TaskTrackers x {GOAL_SIZE[1]} "
          f"jobs (cold and warm median): {verdict}")
    if not args.no_write:
        OUT.write_text(json.dumps({
            "benchmark": "bench_ras.py", "rounds": ROUNDS, "seed": args.seed,
            "resources": list(RESOURCES), "parallel_copies": PARALLEL_COPIES,
            "reduce_phase_fraction": REDUCE_PHASE,
            "goal": {"tasktrackers": GOAL_SIZE[0], "jobs": GOAL_SIZE[1],
                     "median_s": GOAL_S, "verdict": verdict},
            "results": rows,
            "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                        "cpus": os.cpu_count(), "numpy": np.__version__,
                        "loadavg": [round(x, 2) for x in os.getloadavg()]},
        }, indent=2) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
