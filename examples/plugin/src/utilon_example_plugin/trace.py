"""``simple-csv``: a CSV file of jobs -> a scenario.

One job per row, with a header::

    job,submit,tasks,seconds,deadline
    etl-1,0,8,30,600
    report,45,2,120,

``submit`` and ``seconds`` (of work per task) are seconds; ``deadline`` is seconds after
submit, or empty to let ``--slack`` / ``--utility`` decide (utilon's seeded class rule).
Every job is one stage of ``tasks`` one-slot tasks.  The cluster is ``machines`` machines of
``slots`` slots (``--set machines=8``), or ``--machines N``.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from utilon.traces import Common, Importer, ImporterOptions, Provenance, SkipLog, TracePart
from utilon.traces.base import open_lines

HEADER = ["job", "submit", "tasks", "seconds", "deadline"]


class SimpleCsvOptions(ImporterOptions):
    machines: int = Field(3, ge=1, description="machines of the cluster unless --machines")
    slots: int = Field(4, ge=1, description="task slots per machine")


class SimpleCsv(Importer):
    kind = "simple-csv"
    summary = "a CSV of jobs (job, submit, tasks, seconds, deadline) -> one-stage jobs"
    produces = "workload"
    Options = SimpleCsvOptions

    def read(self, path: Path, common: Common, options: SimpleCsvOptions,
             log: SkipLog) -> TracePart:
        rng = np.random.default_rng(common.seed)
        machines = common.machines or options.machines
        jobs: list[dict[str, Any]] = []
        seen: set[str] = set()
        for n, line in open_lines(path):
            if n == 1 or not line.strip():
                continue  # the header, blank lines
            log.row()
            row = next(csv.reader([line]))
            parsed = _parse(row)
            if isinstance(parsed, str) or parsed[0] in seen:
                log.bad(n, parsed if isinstance(parsed, str) else "duplicate job id")
                continue
            job_id, submit, tasks, seconds, deadline = parsed
            if not common.window.contains(submit):
                log.filter(n, "outside the --start/--duration window")
                continue
            if common.window.max_jobs is not None and len(jobs) >= common.window.max_jobs:
                log.filter(n, "beyond --max-jobs")
                continue
            seen.add(job_id)
            log.use()
            stages = [{"name": "work", "kind": "task", "tasks": tasks, "duration": seconds,
                       "demand": {"slots": 1}}]
            job: dict[str, Any] = {"id": job_id, "submit": common.window.job_time(submit)}
            runtime = seconds * -(-tasks // (machines * options.slots))
            job.update(common.classes.assign(seconds * tasks, runtime, rng))
            if deadline is not None:
                job["utility"] = {"kind": "deadline", "deadline": deadline}
            job["stages"] = stages
            jobs.append(job)
        log.finish("jobs")
        cluster = {"machines": [{"id": "node", "count": machines,
                                 "capacity": {"slots": options.slots}}]}
        return TracePart(jobs=jobs, cluster=cluster, provenance=Provenance(
            real=["job ids, submit times, task counts, task seconds and deadlines (CSV)"],
            assumed=["every job is one stage of one-slot tasks of equal length",
                     f"cluster: {machines} machines x {options.slots} slots",
                     common.classes.describe()]))


def _parse(row: list[str]) -> tuple[str, float, int, float, float | None] | str:
    """A row's values, or why it is malformed."""
    if len(row) != len(HEADER):
        return f"wrong field count (need {len(HEADER)}: {', '.join(HEADER)})"
    try:
        submit, tasks, seconds = float(row[1]), int(row[2]), float(row[3])
        deadline = float(row[4]) if row[4].strip() else None
    except ValueError:
        return "a number does not parse"
    if not row[0].strip() or submit < 0 or tasks < 1 or seconds <= 0 or (
            deadline is not None and deadline <= 0):
        return "empty id, negative submit, no tasks, or a non-positive time"
    return row[0].strip(), submit, tasks, seconds, deadline
