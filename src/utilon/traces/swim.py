"""``swim``: SWIM's Facebook 2009/2010 MapReduce workloads -> map/reduce jobs.

The files (``FB-2009_samples_24_times_1hr_0.tsv``, ``FB-2010_...``; see the README next to them)
hold one job per line, tab-separated, no header::

    job id | submit s | gap s | map input bytes | shuffle bytes | reduce output bytes

**Real** (from the data): each job's id, its submit time, its three data sizes, and whether it
is map-only (shuffle = 0).  The gap column is the difference of consecutive submit times; it is
redundant and ignored (a gap that disagrees with the submit times is not an error).

**Assumed** (there are no task counts or durations in the public data; every choice below is an
option, written with its value into the scenario's ``metadata.assumed``):

* map tasks = max(1, ceil(input / ``block_size``)), at most ``max_maps``: a bigger input gets
  bigger splits (as raising Hadoop's minimum split size would), so the work is conserved.
  ``block_size`` defaults to 256 MiB because Facebook's warehouse ran with large HDFS blocks,
  and because a full FB-2010 day at 128 MiB without a cap would be 8 M map tasks;
* every byte the job moves is charged once: a map task reads input / maps bytes at
  ``map_rate``; a reduce task handles (shuffle + output) / reduces bytes at ``reduce_rate``;
* a map-only job's maps also write its output (there is no reduce stage to charge it to);
* a stage is split by the larger of what it reads and what it writes: 74 FB-2010 map-only jobs
  write over ten times their input (job7103 writes 5 TB from none) and job15394 reduces 65 GB
  of shuffle into 85 TB of output, which a few tasks would take days to do.  So for a map-only
  job maps = max(1, ceil(max(input, output) / ``block_size``)) (at most ``max_maps``), and
  reduce tasks = clamp(ceil(max(shuffle, output) / ``reduce_bytes``), 1, ``max_reduces``);
* every task takes ``task_overhead`` seconds more (JVM start, commit), needs one slot, and all
  tasks of a stage last the same (no skew, no stragglers, no data locality);
* the cluster: ``slots_per_machine``-slot machines, as many as give an offered load of 0.7
  (``--load``), or ``--machines``;
* ``profiles: ras-table2`` (for multi-resource schedulers such as RAS): instead of one slot,
  every task declares the cpu / io / mem share of the RAS paper's Table 2 for the Gridmix
  application its job resembles by its data (``policies.ras.profiles.app_of``: shuffle ≥ half
  the input is Sort-like, a map-only job or shuffle < 5% of the input is Select-like, the rest
  Combine-like), machines have capacity 1 of each, and a job's standalone runtime (for its
  deadline) runs as many maps per machine as its profile fits;
* classes, priorities and utilities: the seeded :class:`~utilon.traces.base.ClassRule`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from utilon.limits import MAX_SECONDS
from utilon.policies.ras.profiles import TABLE2, app_of, concurrency
from utilon.traces.base import (
    Common,
    Importer,
    ImporterOptions,
    Provenance,
    Size,
    SkipLog,
    TracePart,
    job_limit_problem,
    open_lines,
    register,
    standalone,
    work_of,
)


class SwimOptions(ImporterOptions):
    block_size: Size = Field(
        "256MiB", validate_default=True,
        description="input bytes per map task (HDFS split); large because Facebook's warehouse "
        "used large blocks and a full FB-2010 day at 128 MiB would be 8 M map tasks")
    max_maps: int = Field(
        500, ge=1, description="map tasks per job at most; bigger inputs get bigger splits "
        "(work is conserved)")
    map_rate: float = Field(20e6, gt=0, description="bytes/s one map task reads (and, for a "
                            "map-only job, writes)")
    reduce_bytes: Size = Field(
        "1GiB", validate_default=True,
        description="bytes per reduce task (of shuffle or output, whichever is larger)")
    max_reduces: int = Field(200, ge=1, description="reduce tasks per job at most")
    reduce_rate: float = Field(10e6, gt=0,
                               description="bytes/s of shuffle + output one reduce task handles")
    task_overhead: float = Field(2.0, ge=0,
                                 description="seconds added to every task (JVM start, commit)")
    slots_per_machine: int = Field(8, ge=1, description="task slots of each proposed machine")
    machines: int = Field(100, ge=1,
                          description="machines of the proposed cluster unless --machines")
    profiles: Literal["slots", "ras-table2"] = Field(
        "slots", description="what a task declares: one slot, or the cpu/io/mem profile of "
        "the RAS paper's Table 2 application its job resembles (on machines of capacity 1 "
        "of each)")


_FIELDS = 6


@register
class SwimImporter(Importer):
    kind = "swim"
    summary = ("SWIM Facebook 2009/2010 MapReduce jobs (TSV: id, submit s, gap s, input, "
               "shuffle, output bytes) -> map/reduce jobs")
    produces = "workload"
    sized_by_load = True
    Options = SwimOptions

    def read(self, path: Path, common: Common, options: SwimOptions, log: SkipLog) -> TracePart:
        o = options
        window = common.window
        rows: list[tuple[int, str, int, int, int, int]] = []  # in the window, in file order
        for row in read_rows(path, log):
            if not window.contains(row.submit):
                log.filter(row.line, "before --start" if row.submit < window.start
                           else "after --start+--duration")
                continue
            rows.append((row.line, row.id, row.submit, row.input, row.shuffle, row.output))

        # --max-jobs keeps the first jobs by submit time (the files are sorted; a stable sort
        # keeps file order at equal times and makes an unsorted file work too).
        rows.sort(key=lambda r: r[2])
        if window.max_jobs is not None and len(rows) > window.max_jobs:
            for r in sorted(rows[window.max_jobs:]):
                log.filter(r[0], "beyond --max-jobs")
            rows = rows[:window.max_jobs]

        machines = common.machines or o.machines
        rng = np.random.default_rng(common.seed)
        jobs: list[dict[str, Any]] = []
        stats = {"map_only_jobs": 0, "capped_map_jobs": 0, "capped_reduce_jobs": 0}
        for n, job_id, submit, inp, shuffle, out in rows:
            row_stats = dict.fromkeys(stats, 0)
            stages = _stages(inp, shuffle, out, o, row_stats)
            per_machine = o.slots_per_machine
            if o.profiles == "ras-table2":
                app = app_of(inp, shuffle)
                stats[f"{app}_like_jobs"] = stats.get(f"{app}_like_jobs", 0) + 1
                for st, profile in zip(stages, TABLE2[app], strict=False):
                    st["demand"] = dict(profile)
                per_machine = concurrency(app)
            runtime = standalone(stages, machines * per_machine)
            problem = job_limit_problem(stages, runtime, common.classes.slack)
            if problem is not None:
                log.bad(n, problem)
                continue
            log.use()
            for k, v in row_stats.items():
                stats[k] += v
            job: dict[str, Any] = {"id": job_id, "submit": window.job_time(submit)}
            job.update(common.classes.assign(work_of(stages), runtime, rng))
            job["stages"] = stages
            jobs.append(job)
        log.finish("jobs")

        capacity: dict[str, float] = {"slots": o.slots_per_machine}
        if o.profiles == "ras-table2":
            capacity = {"cpu": 1, "io": 1, "mem": 1}
        cluster = {"machines": [{"id": "node", "count": machines, "capacity": capacity}]}
        return TracePart(jobs=jobs, cluster=cluster, provenance=_provenance(o, common, machines),
                         stats=stats)


@dataclass(frozen=True)
class SwimRow:
    """One well-formed SWIM job row (``line`` is its 1-based line number)."""

    line: int
    id: str
    submit: int
    input: int
    shuffle: int
    output: int


def read_rows(path: Path, log: SkipLog | None = None) -> list[SwimRow]:
    """Every well-formed job row in file order; malformed lines and duplicate ids go to
    ``log`` (a fresh one that raises on a file with no good rows when none is given)."""
    own = log is None
    log = log if log is not None else SkipLog(Path(path))
    rows: list[SwimRow] = []
    seen: set[str] = set()
    for n, line in open_lines(path):
        if not line.strip():
            continue
        log.row()
        parsed = _parse(line)
        if isinstance(parsed, str):
            log.bad(n, parsed)
            continue
        job_id, submit, inp, shuffle, out = parsed
        if job_id in seen:
            log.bad(n, "duplicate job id")
            continue
        seen.add(job_id)
        rows.append(SwimRow(n, job_id, submit, inp, shuffle, out))
    if own:
        log.used = len(rows)
        log.finish("jobs")
    return rows


MAX_BYTES = 10**18
"""Largest byte count of a row (an exabyte): past it, task durations pass any time limit."""


def _parse(line: str) -> tuple[str, int, int, int, int] | str:
    """``(id, submit, input, shuffle, output)`` of a row, or why it is malformed."""
    f = line.split()  # tabs in the real files; any whitespace is accepted
    if len(f) != _FIELDS:
        return f"wrong field count (need {_FIELDS})"
    try:
        submit, _gap, inp, shuffle, out = (int(x) for x in f[1:])
    except ValueError:
        return "a time or byte count is not an integer"
    if submit < 0:
        return "negative submit time"
    if submit > MAX_SECONDS:
        return f"submit time beyond {MAX_SECONDS:g} s"
    if inp < 0 or shuffle < 0 or out < 0:
        return "negative byte count"
    if max(inp, shuffle, out) > MAX_BYTES:
        return "a byte count beyond 1 EB"
    return f[0], submit, inp, shuffle, out


def _seconds(x: float) -> float:
    """A task duration: 3 decimals, never 0 (the scenario format wants > 0)."""
    return max(round(x, 3), 0.001)


def _stages(inp: int, shuffle: int, out: int, o: SwimOptions,
            stats: dict[str, int]) -> list[dict[str, Any]]:
    # A map-only job's maps also write its output, and are as many as the larger of input and
    # output needs: some write terabytes from (almost) no input, which one task cannot do.
    written = out if shuffle == 0 else 0
    maps = max(1, math.ceil(max(inp, written) / o.block_size))
    if maps > o.max_maps:
        maps = o.max_maps
        stats["capped_map_jobs"] += 1
    map_bytes = inp + written
    stages = [{"name": "map", "kind": "map", "tasks": maps,
               "duration": _seconds(map_bytes / maps / o.map_rate + o.task_overhead),
               "demand": {"slots": 1}}]
    if shuffle == 0:
        stats["map_only_jobs"] += 1
        return stages
    reduces = max(1, math.ceil(max(shuffle, out) / o.reduce_bytes))  # as for map-only maps
    if reduces > o.max_reduces:
        reduces = o.max_reduces
        stats["capped_reduce_jobs"] += 1
    stages.append({"name": "reduce", "kind": "reduce", "tasks": reduces,
                   "duration": _seconds((shuffle + out) / reduces / o.reduce_rate
                                        + o.task_overhead),
                   "demand": {"slots": 1}})
    return stages


_SAME_TASKS = ("all tasks of a stage last the same (no skew, no stragglers, no data locality); "
               "reduces start when every map is done")


def _resource_assumptions(o: SwimOptions, machines: int) -> list[str]:
    if o.profiles == "ras-table2":
        return [_SAME_TASKS[0].upper() + _SAME_TASKS[1:],
                "every task declares the cpu/io/mem share of the RAS paper's Table 2 "
                "(Polo et al., Middleware 2011) for the Gridmix application its job resembles: "
                "shuffle >= 50% of input -> Sort, map-only or shuffle < 5% of input -> Select, "
                "else Combine (map profile for maps, reduce profile for reduces)",
                f"cluster: {machines} machines with capacity 1 of cpu, io and mem; a job's "
                "standalone runtime runs as many maps per machine as its profile fits"]
    return [f"every task needs 1 slot; {_SAME_TASKS}",
            f"cluster: {machines} machines x {o.slots_per_machine} slots"]


def _size(b: float) -> str:
    for unit, k in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= k and b % k == 0:
            return f"{b / k:g} {unit}"
    return f"{b:g} B"


def _provenance(o: SwimOptions, common: Common, machines: int) -> Provenance:
    return Provenance(
        real=[
            "SWIM (UC Berkeley) synthesis of Facebook Hadoop job histories: 24 random 1-hour "
            "samples of the production trace, back to back (FB-2009: 600 machines, FB-2010: "
            "3000 machines)",
            "job ids and submit times (columns new_unique_job_id, submit_time_seconds; the "
            "inter-job gap column is not used)",
            "per job: map input, shuffle and reduce output bytes (map_input_bytes, "
            "shuffle_bytes, reduce_output_bytes)",
            "map-only jobs: shuffle bytes = 0 -> no reduce stage",
        ],
        assumed=[
            f"map tasks = max(1, ceil(input / block_size)), block_size = {_size(o.block_size)}, "
            f"at most max_maps = {o.max_maps} per job (bigger inputs get bigger splits; work "
            "is conserved)",
            f"map task seconds = input / maps / map_rate + task_overhead, map_rate = "
            f"{o.map_rate / 1e6:g} MB/s, task_overhead = {o.task_overhead:g} s",
            "map-only jobs: the maps also write the output, (input + output) / maps bytes each, "
            "and are split by max(input, output) / block_size",
            f"reduce tasks = clamp(ceil(max(shuffle, output) / reduce_bytes), 1, max_reduces), "
            f"reduce_bytes = {_size(o.reduce_bytes)}, max_reduces = {o.max_reduces}",
            f"reduce task seconds = (shuffle + output) / reduces / reduce_rate + task_overhead, "
            f"reduce_rate = {o.reduce_rate / 1e6:g} MB/s",
            *_resource_assumptions(o, machines),
            "tenants: none in the trace, every job in tenant 'default'",
            common.classes.describe(),
        ],
    )
