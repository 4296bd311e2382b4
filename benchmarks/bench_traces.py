"""Full-day trace replay benchmark: import + simulate the SWIM FB-2010 day under FIFO and Fair.

Run ``.venv/bin/python benchmarks/bench_traces.py`` (part of ``make bench``).  Steps, each timed
with ``time.perf_counter`` on this machine:

1. ``import``: ``utilon.traces.import_trace("swim", FB-2010_samples_24_times_1hr_0.tsv)`` with
   the importer's defaults (24,442 jobs) and ``write_scenario`` to a temporary YAML file;
2. ``load``: ``load_workload`` of that file (YAML parse, validation, building jobs and tasks);
3. ``simulate``: one ``Simulation`` per policy (``record_attempts=False``), to completion.

Reported per policy: wall seconds of each step, simulator events (heap pops) per second,
task completions, and the import + load + simulate total, against the goal of a full day under
FIFO in under 60 s.  Results go to stdout and, with ``--json FILE``, to a JSON file.  The
script reports what it measured and exits 0 whether or not the goal is met.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from utilon.policies import make_policy
from utilon.scenario.load import load_workload
from utilon.sim.engine import Simulation
from utilon.traces import Window, import_trace, write_scenario

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared" / "data" / "swim_facebook" / \
    "FB-2010_samples_24_times_1hr_0.tsv"
GOAL_S = 60.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--policies", default="fifo,fair")
    ap.add_argument("--duration", type=float, default=None,
                    help="replay only this many trace seconds (a quick check)")
    ap.add_argument("--json", type=Path, default=None, help="write results here")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    result = import_trace("swim", args.trace, window=Window(duration=args.duration))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_scenario(result, Path(tmp) / "fb2010.yaml")
        t_import = time.perf_counter() - t0
        size = path.stat().st_size
        t0 = time.perf_counter()
        workload = load_workload(path)
        t_load = time.perf_counter() - t0
    tasks = sum(j.n_tasks for j in workload.jobs)
    print(f"{args.trace.name}: {len(workload.jobs)} jobs, {tasks} tasks, "
          f"{len(workload.cluster.machines)} machines; scenario {size / 1e6:.1f} MB")
    print(f"import {t_import:.2f} s, load {t_load:.2f} s")
    runs = []
    for name in args.policies.split(","):
        policy = make_policy(name, {})
        sim = Simulation(workload.cluster, workload.jobs, policy, record_attempts=False)
        t0 = time.perf_counter()
        res = sim.run()
        t_sim = time.perf_counter() - t0
        done = len(res.core.jobs) - len(res.core.active)
        total = t_import + t_load + t_sim
        row = {"policy": name, "simulate_s": round(t_sim, 2), "events": res.events,
               "events_per_s": round(res.events / t_sim), "tasks_completed":
               res.core.stats.completed, "jobs_finished": done, "simulated_end_s":
               round(res.end_time, 1), "total_s": round(total, 2),
               "stopped_early": res.stopped_early}
        runs.append(row)
        goal = "" if name != "fifo" else (
            f"  goal < {GOAL_S:.0f} s: {'met' if total < GOAL_S else 'NOT met'}")
        print(f"{name:>6}: simulate {t_sim:6.2f} s, {res.events} events "
              f"({row['events_per_s']:,}/s), total {total:6.2f} s{goal}")
    report = {"trace": args.trace.name, "jobs": len(workload.jobs), "tasks": tasks,
              "machines": len(workload.cluster.machines), "scenario_mb": round(size / 1e6, 2),
              "import_s": round(t_import, 2), "load_s": round(t_load, 2), "runs": runs,
              "goal_fifo_total_s": GOAL_S, "python": sys.version.split()[0],
              "machine": platform.machine(), "cpus": __import__("os").cpu_count()}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
