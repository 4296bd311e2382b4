"""Simulator throughput benchmark: the full simulator against a bare ``heapq`` event loop.

Run ``.venv/bin/python benchmarks/bench_sim.py`` (or ``make bench``); ``--quick`` for a smoke
run of about 100k task completions, ``--help`` for the options.

Workload.  A synthetic MapReduce workload is built with the model API: 500 machines of
``Resources(slots=8, cpu=8, mem=32)`` (4,000 slots) and as many jobs as it takes to reach
``--tasks`` task completions (default 1,000,000: ~10,000 jobs of 50-110 maps and 10-30
reduces, ~100 tasks each).  Task durations are lognormal, drawn per task from a seeded
``numpy`` Generator (maps: median 15 s, reduces: median 30 s), so completions almost never
coincide and every completion is its own event and its own call into the scheduler core (the
worst case for the simulator; ``--durations per-job`` instead gives all tasks of a stage one
duration via ``mapreduce_job``, which batches completions).  Each task declares ``slots=1,
cpu=1, mem=2`` and no usage phases, so machines are never over-committed and the fluid model
runs unmetered (it keeps no usage: ``sim/fluid.py``).  Jobs arrive as a Poisson process
whose rate puts the expected offered load at ``--load`` (default 0.85) of the cluster's
slots, and carry a ``DeadlineStep`` utility
(deadline = submit + 4 x the job's critical path) so deadline policies have something to work
with.  The workload is built before any timing starts.

Full simulator (timed).  ``Simulation(cluster, jobs, policy, record_attempts=False,
validate=False)`` is constructed and ``run()`` to completion: event heap, fluid model, scheduler
core (state transitions, grant bookkeeping, dispatch) and every policy decision (snapshot,
``decide``, validation, install; or, for an order-only policy such as FIFO, the extension of
the installed order at an arrival that joins its end, which is the same decision).  ``events``
are all heap pops (task ends, arrivals, stale entries); task completions are
``core.stats.completed``.  The only instrumentation is a ``gc.callbacks`` hook that times
garbage-collector pauses (how many jobs were active at each arrival is counted after the run,
from the jobs' submit and finish times: a decision hook would make the core build snapshots it
otherwise skips).

Bare loop (timed, same process, same run).  A plain ``heapq`` loop with no model: it keeps one
pending finish event per busy slot -- as many slots as the simulator ran tasks on average
(busy slot-seconds / simulated time), so its heap is as deep as the simulator's on average --
pops the earliest, counts it as a task completion and pushes the finish of the next task on
that slot (``now + duration``), until it has popped exactly as many task-end events as the
simulator did.  Heap entries have the simulator's shape, ``(time, phase, seq, kind,
payload)`` with a two-tuple payload; durations are the workload's own task durations in job
order; it does one push and one pop per task, as the simulator's fast path does.  It does
*not* model jobs, stages, dependencies, arrivals, machines, resources, grants or policies, does
not allocate per-task objects and does not batch simultaneous events: it is the floor for any
event-driven simulator in pure Python, the cost of the event queue alone.  It is cheap, so it
runs ``--bare-repeats`` times (default 3) and the median run is used.

Repeats.  The simulator runs ``--repeats`` times (default 3) on the same workload, each run
followed at once by its own bare-loop runs, so that the two sides of each ratio are timed at
the same host speed (on a shared virtual machine it drifts by tens of per cent over minutes);
every run's ratio is printed and the run with the median ratio is reported.

Timing uses ``time.perf_counter`` (wall) and, alongside, ``time.process_time`` (CPU of this
process), which is less sensitive to other processes competing for the cores.  Goal (issue
28): the full simulator within 10x of the bare loop, 5x the aim (``ratio = simulator wall s /
bare wall s``); the script reports honestly whether each is met and exits 0 either way
(non-zero only if the run fails).

Compiled or not.  ``pip install`` compiles the simulator's hot modules with mypyc when a C
compiler is there (``setup.py``); the script says which build it measured (``compiled`` in the
JSON).  ``UTILON_PURE_PYTHON=1`` measures the pure-Python sources of the same install.  The bare
loop is pure Python either way: it is the yardstick, not a competitor.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import heapq
import json
import math
import os
import platform
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import utilon
from utilon.model import (
    Cluster,
    DeadlineStep,
    Job,
    Machine,
    Resources,
    Stage,
    Task,
    mapreduce_job,
)
from utilon.native import compiled
from utilon.policies import make_policy, policy_names
from utilon.sim import Simulation

BOUND_RATIO = 10.0  # issue 28: the simulator within 10x of the bare loop
AIM_RATIO = 5.0  # and 5x the aim
MACHINES = 500
SLOTS_PER_MACHINE = 8
MAPS = (50, 110)  # inclusive range of map tasks per job
REDUCES = (10, 30)  # inclusive range of reduce tasks per job
MAP_MU, MAP_SIGMA = math.log(15.0), 0.8  # lognormal: median 15 s, mean ~20.7 s
RED_MU, RED_SIGMA = math.log(30.0), 0.6  # lognormal: median 30 s, mean ~35.9 s
DEADLINE_SLACK = 4.0


@dataclass(frozen=True, slots=True)
class Workload:
    cluster: Cluster
    jobs: list[Job]
    durations: list[float]  # every task's duration, job order, maps before reduces
    build_seconds: float

    @property
    def n_tasks(self) -> int:
        return len(self.durations)

    @property
    def slots(self) -> int:
        return int(sum(m.capacity["slots"] for m in self.cluster.machines))


@dataclass(frozen=True, slots=True)
class Timing:
    tasks: int
    events: int
    seconds: float  # wall clock (perf_counter)
    cpu_seconds: float  # this process's CPU time (process_time)

    def as_dict(self) -> dict[str, float]:
        return {"tasks": self.tasks, "events": self.events, "seconds": self.seconds,
                "cpu_seconds": self.cpu_seconds, "events_per_s": self.events / self.seconds,
                "tasks_per_s": self.tasks / self.seconds}


def source_digest() -> str:
    """Short hash of the imported ``utilon`` sources, to tie figures to the code measured."""
    h = hashlib.sha256()
    root = Path(utilon.__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def build_workload(target_tasks: int, load: float, seed: int, per_job: bool) -> Workload:
    """Jobs until ``target_tasks`` tasks exist; Poisson arrivals at offered load ``load``."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    cap = Resources(slots=SLOTS_PER_MACHINE, cpu=SLOTS_PER_MACHINE, mem=4 * SLOTS_PER_MACHINE)
    cluster = Cluster(tuple(Machine(f"m{i:04d}", cap) for i in range(MACHINES)))
    demand = Resources(slots=1, cpu=1, mem=2)
    mean_maps, mean_reds = sum(MAPS) / 2, sum(REDUCES) / 2
    mean_work = (mean_maps * math.exp(MAP_MU + MAP_SIGMA**2 / 2)
                 + mean_reds * math.exp(RED_MU + RED_SIGMA**2 / 2))
    rate = load * MACHINES * SLOTS_PER_MACHINE / mean_work  # jobs per second
    jobs: list[Job] = []
    durations: list[float] = []
    submit = 0.0
    while len(durations) < target_tasks:
        submit += float(rng.exponential(1.0 / rate))
        n_map = int(rng.integers(MAPS[0], MAPS[1] + 1))
        n_red = int(rng.integers(REDUCES[0], REDUCES[1] + 1))
        job_id = f"j{len(jobs):06d}"
        if per_job:
            md = float(rng.lognormal(MAP_MU, MAP_SIGMA))
            rd = float(rng.lognormal(RED_MU, RED_SIGMA))
            maps, reds = [md] * n_map, [rd] * n_red
        else:
            maps = rng.lognormal(MAP_MU, MAP_SIGMA, n_map).tolist()
            reds = rng.lognormal(RED_MU, RED_SIGMA, n_red).tolist()
        utility = DeadlineStep(submit + DEADLINE_SLACK * (max(maps) + max(reds)))
        if per_job:
            job = mapreduce_job(job_id, submit=submit, maps=n_map, map_duration=maps[0],
                                reduces=n_red, reduce_duration=reds[0], demand=demand,
                                utility=utility)
        else:  # the stages mapreduce_job builds, but with a duration per task
            job = Job(job_id, submit, (
                Stage("map", tuple(Task(d, demand) for d in maps), kind="map"),
                Stage("reduce", tuple(Task(d, demand) for d in reds), after=("map",),
                      kind="reduce"),
            ), utility)
        jobs.append(job)
        durations.extend(maps)
        durations.extend(reds)
    return Workload(cluster, jobs, durations, time.perf_counter() - t0)


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else 0.0


def run_simulator(wl: Workload, policy_name: str) -> tuple[Timing, dict[str, Any]]:
    """Construct and run the full simulator; return its timing and run details."""
    policy = make_policy(policy_name)
    pauses: list[float] = []
    gc_start = [0.0]

    def on_gc(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            pauses.append(time.perf_counter() - gc_start[0])

    gc.callbacks.append(on_gc)
    c0, t0 = time.process_time(), time.perf_counter()
    sim = Simulation(wl.cluster, wl.jobs, policy, record_attempts=False, validate=False)
    t1 = time.perf_counter()
    result = sim.run()
    t2, c2 = time.perf_counter(), time.process_time()
    gc.callbacks.remove(on_gc)
    stats = result.core.stats
    if stats.completed != wl.n_tasks or result.stopped_early:
        raise RuntimeError(f"simulation incomplete: {stats.completed} of {wl.n_tasks} tasks "
                           f"completed; stopped early: {result.stopped_early!r}")
    decide = np.asarray(stats.decide_seconds, dtype=float)
    slot_idx = result.core.names.index("slots")
    # jobs active just after each arrival (submitted, not finished), counted after the run
    submits = np.sort([j.job.submit for j in result.core.jobs.values()])
    finishes = np.sort([j.finish for j in result.core.jobs.values()])
    active_jobs = (np.searchsorted(submits, submits, side="right")
                   - np.searchsorted(finishes, submits, side="right"))
    info = {
        "setup_seconds": t1 - t0,
        "run_seconds": t2 - t1,
        "task_events": result.task_events,
        "simulated_seconds": result.end_time,
        "mean_running_tasks": result.core.busy[slot_idx] / result.end_time,
        "decisions": stats.decisions,
        "active_jobs_mean": float(np.mean(active_jobs)) if active_jobs.size else 0.0,
        "active_jobs_max": int(active_jobs.max()) if active_jobs.size else 0,
        "gc_collections": len(pauses),
        "gc_seconds": sum(pauses),
        "gc_max_pause_s": max(pauses, default=0.0),
        "decide_total_seconds": float(decide.sum()),
        "decide_p50_s": _pct(decide, 50),
        "decide_p95_s": _pct(decide, 95),
        "decide_max_s": float(decide.max()) if decide.size else 0.0,
    }
    return Timing(stats.completed, result.events, t2 - t0, c2 - c0), info


def run_bare(durations: list[float], concurrency: int, n_events: int) -> Timing:
    """The bare heapq loop described in the module docstring."""
    heap: list[tuple[float, int, int, int, tuple[int, int]]] = []
    push, pop = heapq.heappush, heapq.heappop
    n = len(durations)
    c0, t0 = time.process_time(), time.perf_counter()
    seq = 0
    nxt = 0
    for s in range(min(concurrency, n_events)):
        seq += 1
        push(heap, (durations[nxt % n], 0, seq, 0, (s, 0)))
        nxt += 1
    done = 0
    while done < n_events:
        now, _, _, _, payload = pop(heap)
        done += 1
        if nxt < n_events:
            seq += 1
            push(heap, (now + durations[nxt % n], 0, seq, 0, (payload[0], 0)))
            nxt += 1
    return Timing(done, done, time.perf_counter() - t0, time.process_time() - c0)


def _median(runs: list[Timing]) -> Timing:
    return sorted(runs, key=lambda t: t.seconds)[len(runs) // 2]


def report(args: argparse.Namespace, wl: Workload, sim: Timing, info: dict[str, Any],
           bares: list[Timing], total_seconds: float) -> dict[str, Any]:
    """Print the results table and the verdict; return the JSON-ready results."""
    from rich.console import Console
    from rich.table import Table

    bare = _median(bares)
    ratio = sim.seconds / bare.seconds
    cpu_ratio = sim.cpu_seconds / bare.cpu_seconds
    met = ratio <= BOUND_RATIO
    aim = ratio <= AIM_RATIO
    console = Console(highlight=False, width=100)
    console.print(f"workload: {len(wl.jobs):,} jobs, {wl.n_tasks:,} tasks, {MACHINES} machines "
                  f"x {SLOTS_PER_MACHINE} slots, offered load {args.load:g}, durations "
                  f"{args.durations}, seed {args.seed}; built in {wl.build_seconds:.1f} s")
    console.print(f"policy {args.policy}; utilon sources {info['source_digest']}, "
                  f"{'compiled (mypyc)' if compiled() else 'pure Python'}; Python "
                  f"{platform.python_version()}; load average before the run "
                  f"{info['loadavg_before']:.2f} on {os.cpu_count()} CPUs")
    console.print(f"simulated {info['simulated_seconds']:,.0f} s, mean running tasks "
                  f"{info['mean_running_tasks']:,.0f} of {wl.slots:,} slots, active jobs at "
                  f"arrivals mean {info['active_jobs_mean']:,.0f} / max "
                  f"{info['active_jobs_max']:,}")
    table = Table(title="simulator throughput vs bare heapq loop")
    for col in ("", "tasks completed", "events", "wall s", "cpu s", "events/s", "tasks/s"):
        table.add_column(col, justify="right" if col else "left")
    for name, t in ((f"full simulator ({args.policy})", sim), ("bare heapq loop", bare)):
        table.add_row(name, f"{t.tasks:,}", f"{t.events:,}", f"{t.seconds:.2f}",
                      f"{t.cpu_seconds:.2f}", f"{t.events / t.seconds:,.0f}",
                      f"{t.tasks / t.seconds:,.0f}")
    console.print(table)
    walls = ", ".join(f"{t.seconds:.3f}" for t in bares)
    console.print(f"bare loop: {info['bare_concurrency']:,} concurrent slots (the simulator's "
                  f"mean running tasks); {len(bares)} runs, wall s {walls}; median shown")
    console.print(f"simulator: setup {info['setup_seconds']:.2f} s + run "
                  f"{info['run_seconds']:.2f} s; {sim.seconds / sim.tasks * 1e6:.1f} us per "
                  f"task vs {bare.seconds / bare.tasks * 1e6:.2f} us bare")
    console.print(f"policy decisions: {info['decisions']:,}, decision time total "
                  f"{info['decide_total_seconds']:.2f} s; latency p50 "
                  f"{info['decide_p50_s'] * 1e6:,.0f} us, p95 {info['decide_p95_s'] * 1e6:,.0f} "
                  f"us, max {info['decide_max_s'] * 1e6:,.0f} us")
    console.print(f"garbage collector during the simulator run: {info['gc_collections']:,} "
                  f"collections, {info['gc_seconds']:.2f} s, longest pause "
                  f"{info['gc_max_pause_s'] * 1e3:,.0f} ms (a pause inside a decision counts "
                  "in its latency)")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    console.print(f"peak RSS {peak_mib:,.0f} MiB; whole benchmark took {total_seconds:.1f} s")
    if len(info["ratios"]) > 1:
        console.print(f"{len(info['ratios'])} simulator runs, each with its own bare-loop runs; "
                      f"ratios {', '.join(f'{r:.1f}x' for r in info['ratios'])}; the median "
                      "run is shown")
    print(f"cpu-time ratio: {cpu_ratio:.1f}x")
    print(f"ratio: {ratio:.1f}x (bound <= {BOUND_RATIO:g}x: {'met' if met else 'not met'}; "
          f"aim <= {AIM_RATIO:g}x: {'met' if aim else 'not met'})")
    return {
        "workload": {"jobs": len(wl.jobs), "tasks": wl.n_tasks, "machines": MACHINES,
                     "slots": wl.slots, "load": args.load, "durations": args.durations,
                     "seed": args.seed, "build_seconds": wl.build_seconds},
        "policy": args.policy,
        "simulator": {**sim.as_dict(), **info},
        "bare": {**bare.as_dict(), "runs_seconds": [t.seconds for t in bares]},
        "ratio": ratio,
        "cpu_ratio": cpu_ratio,
        "goal_ratio": BOUND_RATIO,
        "goal_met": met,
        "aim_ratio": AIM_RATIO,
        "aim_met": aim,
        "compiled": compiled(),
        "peak_rss_mib": peak_mib,
        "total_seconds": total_seconds,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--policy", default="fifo", choices=policy_names())
    p.add_argument("--tasks", type=int, default=1_000_000,
                   help="target number of task completions (jobs are added until reached)")
    p.add_argument("--quick", action="store_true", help="smoke run: 100,000 tasks")
    p.add_argument("--load", type=float, default=0.85,
                   help="expected offered load as a fraction of the cluster's slots")
    p.add_argument("--durations", choices=("per-task", "per-job"), default="per-task",
                   help="lognormal duration per task, or one per stage (mapreduce_job)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3,
                   help="simulator runs, each followed by its bare-loop runs (median shown)")
    p.add_argument("--bare-repeats", type=int, default=3,
                   help="bare-loop runs after each simulator run (median used)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.tasks = 100_000
    if args.tasks < 1 or args.load <= 0 or args.bare_repeats < 1 or args.repeats < 1:
        p.error("--tasks, --load, --repeats and --bare-repeats must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    digest = source_digest()
    wl = build_workload(args.tasks, args.load, args.seed, args.durations == "per-job")
    loadavg = os.getloadavg()[0]
    # Each simulator run is followed at once by its bare-loop runs, so that both sides of a
    # ratio are timed at the same host speed (it drifts by tens of per cent over minutes here);
    # the run with the median ratio is reported, every run's ratio is listed.
    runs = []
    for _ in range(args.repeats):
        sim, info = run_simulator(wl, args.policy)
        info["bare_concurrency"] = concurrency = max(1, round(info["mean_running_tasks"]))
        bares = [run_bare(wl.durations, concurrency, info["task_events"])
                 for _ in range(args.bare_repeats)]
        runs.append((sim.seconds / _median(bares).seconds, sim, info, bares))
    ratios = [r[0] for r in runs]
    _, sim, info, bares = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    info["source_digest"] = digest
    info["loadavg_before"] = loadavg
    info["ratios"] = ratios
    results = report(args, wl, sim, info, bares, time.perf_counter() - t0)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
