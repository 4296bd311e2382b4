"""Per-job rows (``jobs.csv``) and the run summary (``summary.json``).

Definitions (also in docs/outputs.md):

* ``goal``: the utility function's target completion time (deadline, soft bound, sigmoid
  midpoint, ...), empty when it has none; ``delta = finish - goal``; ``missed`` when the job
  finished after its goal or did not finish.
* ``penalty``: RDS eq. (1), ``weight * max(0, (finish - goal) / (goal - submit))``: lateness
  relative to the time the owner allowed (the denominator is at least 1 s).
* **Unfinished jobs** (the run stopped early, hit ``--timeout`` or its horizon) are never
  free: each is missed, and is charged as if it finished at ``max(end of run, goal + allowed
  time)`` -- its lateness counts up to the end of the run, and is at least one whole allowed
  time (a penalty of at least ``weight``), so a job that never ran cannot look on time.  Its
  utility is its utility at that instant (a deadline's late value, a sigmoid's tail); a job
  without a goal (constant utility) keeps its value and has no penalty, but is counted.  Jobs
  whose submission lies beyond a run's horizon are listed too, unfinished, and counted as
  ``unsubmitted``; ``unfinished`` counts every job that did not finish.
* ``cost``: machine price per hour x attempt time x the task's dominant share of the machine,
  summed over every attempt (killed and lost work is paid for too, and so is work still running
  when the run stops: up to the end of the run).
* ``utilisation``: declared busy resource-seconds of the slot resource over the up capacity
  integrated from t=0 to the end of the run, counting attempts still running at the end up to
  it (a run stopped by its horizon or ``--max-wall`` kept those machines busy).
* ``servers``: machines that were up at some point of the run.

Everything except the ``timing`` key is a pure function of the scenario, the seed and the
policy, so two runs give byte-identical files apart from ``timing``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from utilon.core.ledger import attempt_cost
from utilon.core.policy import Policy
from utilon.core.scheduler import SchedulerCore
from utilon.core.tolerance import missed
from utilon.metrics.timeline import write_timeline
from utilon.model.cluster import CapacityAction
from utilon.model.job import Job
from utilon.model.utility import SoftHard
from utilon.scenario.admission import impossible_goals
from utilon.scenario.build import Workload
from utilon.scenario.digest import scenario_digest


class RunRecord(Protocol):
    """What a finished run (simulated or live) offers the metrics."""

    @property
    def core(self) -> SchedulerCore: ...
    @property
    def end_time(self) -> float: ...
    @property
    def events(self) -> int: ...
    @property
    def wall_seconds(self) -> float: ...
    @property
    def stopped_early(self) -> str: ...

JOB_COLUMNS = ("id", "tenant", "class", "submit", "start", "finish", "goal", "utility",
               "delta", "missed", "penalty", "cost")


def _r(x: float, nd: int = 6) -> float:
    return float(round(x, nd))


def job_rows(result: RunRecord, jobs: Sequence[Job] = ()) -> list[dict[str, Any]]:
    """One row per job: every job the core saw, then any of ``jobs`` it never saw (a run
    stopped by its horizon before they were submitted) as unfinished rows."""
    rows = []
    end = result.end_time
    seen = result.core.jobs
    _, running_cost = in_flight(result.core, end)
    records: list[tuple[Job, float | None, float | None, float]] = [
        (jr.job, jr.start, jr.finish, jr.cost + running_cost.get(jr.id, 0.0))
        for jr in seen.values()]
    records += [(j, None, None, 0.0) for j in jobs if j.id not in seen]
    for job, start, finish, cost in records:
        rows.append(job_row(job, start, finish, cost, end))
    return rows


def in_flight(core: SchedulerCore, end: float) -> tuple[list[float], dict[str, float]]:
    """Declared busy resource-seconds (per resource) and cost (per job) of the attempts still
    running at ``end``, from their start to ``end``: the core books an attempt when it ends, so
    a run stopped by its horizon or a wall-clock limit would otherwise leave them out."""
    busy = [0.0] * len(core.names)
    cost: dict[str, float] = {}
    for jr in core.jobs.values():
        for ref, run in jr.running.items():
            mi, start = run.machine, run.start
            dt = end - start
            if dt <= 0:
                continue
            v = jr.stages[ref[1]].vectors[ref[2]]
            for r, x in enumerate(v):
                busy[r] += x * dt
            m = core.machines[mi]
            if m.price:
                cost[jr.id] = cost.get(jr.id, 0.0) + attempt_cost(v, m.base, m.price, dt)
    return busy, cost


def job_row(job: Job, start: float | None, finish: float | None, cost: float,
            end: float) -> dict[str, Any]:
    """One ``jobs.csv`` row; an unfinished job is charged as of ``end`` (the module
    docstring says how)."""
    u = job.utility
    goal = u.goal
    finished = finish is not None
    t = finish if finish is not None else charged_time(job, end)
    utility = u.value(t)
    late = (t - goal) if goal is not None else None
    penalty = 0.0
    if goal is not None and late is not None and late > 0:
        # lateness relative to the time allowed; a goal at submit counts lateness in s
        penalty = job.weight * late / max(goal - job.submit, 1.0)
    return {
        "id": job.id,
        "tenant": job.tenant,
        "class": job.job_class,
        "submit": _r(job.submit, 3),
        "start": _r(start, 3) if start is not None else None,
        "finish": _r(finish, 3) if finish is not None else None,
        "goal": _r(goal, 3) if goal is not None else None,
        "utility": _r(utility),
        "delta": _r(late, 3) if (late is not None and finished) else None,
        "missed": missed(finish, goal),
        "penalty": _r(penalty),
        "cost": _r(cost),
    }


def charged_time(job: Job, end: float) -> float:
    """When an unfinished job is charged as finishing: the end of the run, but at least one
    whole allowed time (goal - submit, at least 1 s) after its goal (see the module
    docstring)."""
    goal = job.utility.goal
    if goal is None:
        return end
    return max(end, goal + max(goal - job.submit, 1.0))


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else 0.0


def summarize(result: RunRecord, workload: Workload, policy: Policy,
              rows: list[dict[str, Any]]) -> dict[str, Any]:
    core = result.core
    finished = [r for r in rows if r["finish"] is not None]
    utilities = [r["utility"] for r in rows]
    responses = [r["finish"] - r["submit"] for r in finished]
    first_submit = min((j.submit for j in workload.jobs), default=0.0)
    end = result.end_time
    slot = core.slot_resource
    si = core.names.index(slot)
    cap_int = core.capacity_integral(end)
    running_busy, _ = in_flight(core, end)
    util_by = {n: _r((b + rb) / c) if c > 0 else 0.0
               for n, b, rb, c in zip(core.names, core.busy, running_busy, cap_int, strict=True)}
    cluster = workload.cluster
    up = {m.id for m in cluster.machines if m.id not in cluster.initially_down}
    up |= {c.machine for c in cluster.timeline
           if c.action is CapacityAction.JOIN and c.time <= end}
    misses = sum(1 for r in rows if r["missed"])
    extra: dict[str, Any] = {}
    hard = {j.id: float(j.utility.hard) for j in workload.jobs
            if isinstance(j.utility, SoftHard)}
    if hard:  # soft/hard bounds (RDS Eq. 4): a hard miss finishes after, or never
        extra["hard_misses"] = sum(
            1 for r in rows if r["id"] in hard
            and missed(r["finish"], hard[r["id"]]))
    if workload.spec.admission == "accept":  # refused otherwise, before the run
        impossible = len(impossible_goals(workload))
        if impossible:
            extra["impossible_goals"] = impossible
    report = policy.report()
    if report:
        extra["policy_report"] = report
    st = core.stats
    decide_ms = [s * 1000.0 for s in st.decide_seconds]
    solver_ms = [s * 1000.0 for s in st.solver_seconds]
    return {
        "scenario": workload.name,
        "scenario_digest": scenario_digest(workload.spec),
        "policy": policy.name,
        "params": {k: v for k, v in sorted(policy.params().items())},
        "seed": workload.seed,
        "jobs": len(rows),
        "finished": len(finished),
        "unfinished": len(rows) - len(finished),
        "unsubmitted": len(rows) - len(core.jobs),
        "utility_min": _r(min(utilities)) if utilities else 0.0,
        "utility_sum": _r(sum(utilities)),
        "utility_mean": _r(sum(utilities) / len(utilities)) if utilities else 0.0,
        "misses": misses,
        "miss_rate": _r(misses / len(rows)) if rows else 0.0,
        "penalty": _r(sum(r["penalty"] for r in rows)),
        **extra,
        "makespan": _r(end - first_submit, 3),
        "response_mean": _r(sum(responses) / len(responses), 3) if responses else 0.0,
        "response_p95": _r(_pct(responses, 95), 3),
        "utilisation": util_by[slot] if cap_int[si] > 0 else 0.0,
        "utilisation_by_resource": util_by,
        "servers": len(up),
        "cost": _r(sum(r["cost"] for r in rows)),
        "tasks": {"launched": st.launched, "completed": st.completed, "killed": st.killed,
                  "lost": st.lost, "failed": st.failed},
        "decisions": st.decisions,
        "infeasible": len(core.infeasible),
        "stopped_early": result.stopped_early,
        "warnings": list(core.warnings[:20]),
        "timing": {
            "decide_ms_p50": _r(_pct(decide_ms, 50), 4),
            "decide_ms_p95": _r(_pct(decide_ms, 95), 4),
            "decide_ms_max": _r(max(decide_ms), 4) if decide_ms else 0.0,
            "decide_ms_mean": _r(sum(decide_ms) / len(decide_ms), 4) if decide_ms else 0.0,
            **({"solver_ms_p50": _r(_pct(solver_ms, 50), 4),
                "solver_ms_p95": _r(_pct(solver_ms, 95), 4),
                "solver_ms_max": _r(max(solver_ms), 4),
                "solver_calls": len(solver_ms)} if solver_ms else {}),
            "wall_s": _r(result.wall_seconds, 4),
            "events_per_s": _r(result.events / result.wall_seconds, 1)
            if result.wall_seconds > 0 else 0.0,
        },
    }


def write_jobs_csv(path: Path, rows: list[dict[str, Any]],
                   columns: Sequence[str] = JOB_COLUMNS) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r[c] is None else (str(r[c]).lower() if isinstance(r[c], bool)
                                                 else r[c]) for c in columns])


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    path.write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def write_outputs(out_dir: Path, rows: list[dict[str, Any]], summary: dict[str, Any],
                  provenance: dict[str, Any], result: RunRecord | None = None) -> dict[str, Any]:
    """Write jobs.csv, summary.json, provenance.json and, given the run, its timeline files
    (allocation.csv, capacity.csv, attempts.csv) and story.jsonl.  Returns the summary as
    written: with the run, it gains a ``timeline`` key saying how the timeline files were
    bounded."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_jobs_csv(out_dir / "jobs.csv", rows)
    if result is not None:
        about = write_timeline(out_dir, result.core, result.end_time)
        result.core.story.write(out_dir / "story.jsonl")  # per-job stories (docs/explain.md)
        timing = summary.get("timing")
        summary = {k: v for k, v in summary.items() if k != "timing"} | {"timeline": about}
        if timing is not None:
            summary["timing"] = timing  # wall-clock numbers stay last
    write_summary(out_dir / "summary.json", summary)
    (out_dir / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n",
                                             encoding="utf-8")
    return summary
