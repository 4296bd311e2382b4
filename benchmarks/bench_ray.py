"""Scheduling overhead on Ray: utilon's RayBackend against the same tasks submitted to Ray.

Run ``.venv/bin/python benchmarks/bench_ray.py`` (or ``make bench-ray``); ``--tasks`` and
``--seconds`` change the workload, ``--help`` lists the options.

One local Ray instance (``--cpus``, default 2) serves both measurements, in the same process:

* **Raw Ray.**  ``--tasks`` calls of a remote function that sleeps ``--seconds`` (default
  10,000 x 10 ms), each asking for one CPU, all submitted at once; Ray queues them and runs as
  many at a time as there are CPUs.  Timed from the first submission to the last result.
* **utilon.**  The same tasks as ``--jobs`` jobs of one stage each, all submitted at t=0, run by
  ``LiveRun`` with the ``fifo`` policy on ``RayBackend``: the node becomes one machine with as
  many slots as CPUs, the dispatcher launches one task per free slot, each completion (seen
  through ``ray.wait``) goes through the scheduler core and frees the slot for the next launch.
  Each task runs ``utilon.jobs.builtin:sleep`` through utilon's task wrapper.  Timed by the live
  run's own clock from start to the last completion.

Both sides first run a warm-up of ``--warmup`` tasks so Ray's worker processes exist before
timing.  The result is the ratio of utilon's throughput to raw Ray's; the goal is >= 0.80.
Ray keeps its queue inside the raylet, so it can start the next task the moment one ends;
utilon must see the completion, decide, and submit, which is the overhead measured here.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import ray

from utilon.jobs.plan import JobPlan, StagePlan
from utilon.live import LiveRun, TaskCatalog
from utilon.live.ray_backend import RayBackend
from utilon.model.cluster import Cluster, Machine
from utilon.model.job import Job, Stage, Task
from utilon.model.resources import Resources
from utilon.policies import make_policy


@ray.remote(num_cpus=1)
def _raw_sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def raw_ray(tasks: int, seconds: float) -> float:
    t0 = time.perf_counter()
    ray.get([_raw_sleep.remote(seconds) for _ in range(tasks)])
    return time.perf_counter() - t0


def utilon_ray(tasks: int, seconds: float, jobs: int, run_dir: Path) -> tuple[float, dict]:
    per_job = [tasks // jobs + (1 if i < tasks % jobs else 0) for i in range(jobs)]
    demand = Resources(slots=1)
    job_list, plans = [], {}
    for i, n in enumerate(per_job):
        jid = f"job{i:03d}"
        job_list.append(Job(jid, 0.0, (Stage("sleep", tuple(Task(seconds, demand)
                                                          for _ in range(n)),
                                             estimate=seconds),)))
        plans[jid] = JobPlan("callable", (StagePlan("sleep", "task", n,
                                                    "utilon.jobs.builtin:sleep", seconds,
                                                    {"seconds": seconds}),))
    placeholder = Cluster((Machine("placeholder", Resources(slots=1)),))  # Ray's nodes replace it
    catalog = TaskCatalog(run_dir, job_list, plans)
    catalog.prepare()
    run = LiveRun(placeholder, job_list, make_policy("fifo", {}), RayBackend(), catalog,
                  max_wait=1.0)
    res = run.run()
    assert not res.stopped_early, res.stopped_early
    assert res.core.stats.completed == tasks, res.core.stats
    st = res.core.stats
    decide_ms = sorted(s * 1000 for s in st.decide_seconds)
    return res.end_time, {
        "decisions": st.decisions,
        "decide_ms_p50": decide_ms[len(decide_ms) // 2] if decide_ms else 0.0,
        "decide_ms_p95": decide_ms[int(len(decide_ms) * 0.95)] if decide_ms else 0.0,
        "peak_usage": res.peak_usage,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=0.01, help="task length")
    ap.add_argument("--jobs", type=int, default=10, help="utilon jobs the tasks are split into")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--json", type=Path, help="also write the result here")
    a = ap.parse_args(argv)
    ray.init(num_cpus=a.cpus, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        with tempfile.TemporaryDirectory(prefix="utilon-bench-ray-") as tmp:
            raw_ray(a.warmup, a.seconds)
            utilon_ray(a.warmup, a.seconds, 1, Path(tmp) / "warm")
            raw_s = raw_ray(a.tasks, a.seconds)
            ut_s, info = utilon_ray(a.tasks, a.seconds, a.jobs, Path(tmp) / "run")
    finally:
        ray.shutdown()
    ideal = a.tasks * a.seconds / a.cpus
    raw_tp, ut_tp = a.tasks / raw_s, a.tasks / ut_s
    result = {
        "tasks": a.tasks, "task_seconds": a.seconds, "cpus": a.cpus, "jobs": a.jobs,
        "ideal_s": round(ideal, 3),
        "raw_ray": {"seconds": round(raw_s, 3), "tasks_per_s": round(raw_tp, 1)},
        "utilon": {"seconds": round(ut_s, 3), "tasks_per_s": round(ut_tp, 1), **{
            k: (round(v, 4) if isinstance(v, float) else v) for k, v in info.items()}},
        "ratio": round(ut_tp / raw_tp, 3),
        "goal": 0.8,
    }
    print(f"{a.tasks} tasks of {a.seconds * 1000:g} ms on {a.cpus} CPUs "
          f"(ideal {ideal:.1f} s)")
    print(f"  raw Ray : {raw_s:8.2f} s  {raw_tp:8.1f} tasks/s")
    print(f"  utilon  : {ut_s:8.2f} s  {ut_tp:8.1f} tasks/s  "
          f"(decide p50 {info['decide_ms_p50']:.3f} ms, p95 {info['decide_ms_p95']:.3f} ms)")
    verdict = "meets" if result["ratio"] >= 0.8 else "does NOT meet"
    print(f"  ratio   : {result['ratio']:.3f} of raw Ray throughput ({verdict} the 0.80 goal)")
    if a.json:
        a.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
