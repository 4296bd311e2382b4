"""``coflow-fb2010``: the coflow-benchmark trace of Facebook's 2010 cluster -> map/reduce jobs.

The file (``FB2010-1Hr-150-0.txt``; see the README next to it) is one hour of MapReduce jobs
from a 3000-machine, 150-rack cluster, with all mappers (reducers) of a job in one rack merged
into one rack-level mapper (reducer).  Space-separated; the first line is
``<ports> <coflows>``, then one job per line::

    id arrival_ms M loc_1 .. loc_M R rloc_1:MB_1 .. rloc_R:MB_R

**Real** (from the data): each job's id and arrival time (ms, turned into seconds), how many
racks ran its mappers (M), and per reducer rack the megabytes it shuffled (to the nearest MB).
Rack locations are checked (integers in [0, ports)) but not used: the simulator has no network
or locality model.

**Assumed** (M and R count *racks*, not tasks, and the trace has no durations; every choice is
an option, written with its value into the scenario's ``metadata.assumed``):

* map tasks = M x ``maps_per_rack`` (default 4: a rack held 20 machines; 4 per mapper rack
  makes the hour's 10,753 mapper racks 43,012 map tasks, about the per-hour map task count of
  SWIM's FB-2010 day, the same cluster, under the ``swim`` importer's defaults: 42,900);
* map input = ``input_ratio`` x the job's shuffle bytes (the map output; the trace has no input
  sizes), split evenly: map task seconds = input / maps / ``map_rate`` + ``task_overhead``;
* a rack's reducer is split into ceil(bytes / ``reduce_bytes``) reduce tasks (default 1 GiB,
  at most ``max_reduces_per_rack``), each lasting its share of MB x 2**20 / ``reduce_rate`` +
  ``task_overhead`` (MB are 2**20 bytes, as in the coflow simulators); the trace merges a
  rack's reducers into one, and one task per rack would make a 232 GB reducer run 6.7 hours;
* every task needs one slot; the cluster is ``slots_per_machine``-slot machines, as many as
  give an offered load of 0.7 (``--load``), or ``--machines``; the header's fabric ports (150
  racks, each with many machines in the real cluster) are only reported;
* classes, priorities and utilities: the seeded :class:`~utilon.traces.base.ClassRule`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from utilon.limits import MAX_SECONDS, max_tasks
from utilon.traces.base import (
    Common,
    Importer,
    ImporterOptions,
    Provenance,
    Size,
    SkipLog,
    TraceError,
    TracePart,
    job_limit_problem,
    open_lines,
    register,
    standalone,
    work_of,
)

MB = 2**20
MAX_MB = 10**18 / MB
"""Most megabytes one reducer rack may shuffle (an exabyte, as for SWIM's byte counts)."""


class CoflowOptions(ImporterOptions):
    maps_per_rack: int = Field(
        4, ge=1, description="map tasks per rack-level mapper (the trace merges a job's "
        "mappers per rack); 4 gives about SWIM FB-2010's map tasks per hour")
    input_ratio: float = Field(
        1.0, ge=0, description="map input bytes / shuffle bytes (the trace has no input sizes)")
    map_rate: float = Field(20e6, gt=0, description="bytes/s one map task reads")
    reduce_rate: float = Field(10e6, gt=0, description="shuffle bytes/s one reduce task handles")
    reduce_bytes: Size | None = Field(
        "1GiB", validate_default=True, description="split a rack's reducer into tasks of at "
        "most this many shuffle bytes (null: one reduce task per reducer rack, as the trace "
        "records them -- a 232 GB rack reducer then runs for 6.7 hours)")
    max_reduces_per_rack: int = Field(
        40, ge=1, description="reduce tasks per reducer rack at most (with reduce_bytes)")
    task_overhead: float = Field(2.0, ge=0,
                                 description="seconds added to every task (JVM start, commit)")
    slots_per_machine: int = Field(8, ge=1, description="task slots of each proposed machine")


Coflow = tuple[str, int, int, list[float]]
"""``(id, arrival ms, mapper racks M, shuffle MB per reducer rack)``"""


@register
class CoflowImporter(Importer):
    kind = "coflow-fb2010"
    summary = ("coflow-benchmark FB2010 (Facebook 2010, 150 racks): arrival, mapper racks, "
               "shuffle MB per reducer rack -> map/reduce jobs")
    produces = "workload"
    sized_by_load = True
    Options = CoflowOptions

    def read(self, path: Path, common: Common, options: CoflowOptions,
             log: SkipLog) -> TracePart:
        o = options
        window = common.window
        lines = open_lines(path)
        ports, declared = _header(path, next(lines, None))
        rows: list[tuple[int, Coflow]] = []  # in the window, in file order
        seen: set[str] = set()
        for n, line in lines:
            if not line.strip():
                continue
            log.row()
            parsed = _parse(line, ports)
            if isinstance(parsed, str):
                log.bad(n, parsed)
                continue
            if parsed[0] in seen:
                log.bad(n, "duplicate coflow id")
                continue
            seen.add(parsed[0])
            t = parsed[1] / 1000
            if not window.contains(t):
                log.filter(n, "before --start" if t < window.start
                           else "after --start+--duration")
                continue
            rows.append((n, parsed))

        # --max-jobs keeps the first jobs by arrival (stable: file order at equal times).
        rows.sort(key=lambda r: r[1][1])
        if window.max_jobs is not None and len(rows) > window.max_jobs:
            for n, _ in sorted(rows[window.max_jobs:], key=lambda r: r[0]):
                log.filter(n, "beyond --max-jobs")
            rows = rows[:window.max_jobs]

        machines = common.machines or ports
        slots = machines * o.slots_per_machine
        rng = np.random.default_rng(common.seed)
        jobs: list[dict[str, Any]] = []
        stats: dict[str, Any] = {"ports": ports, "header_coflows": declared, "shuffle_mb": 0.0,
                                 "longest_reduce_s": 0.0}
        tasks, limit = 0, max_tasks()
        for n, (cid, arrival, racks, mbs) in rows:
            try:
                stages = _stages(racks, mbs, o, limit - tasks)
            except _TooManyTasks:
                stages = []
            tasks += len(stages[1]["durations"]) if stages else 0
            if not stages or tasks > limit:
                raise TraceError(f"the trace expands to more than {limit:,} reduce tasks",
                                 where=f"{path}:{n}",
                                 fix="raise reduce_bytes or lower max_reduces_per_rack, import "
                                 "a window (--start/--duration), or raise UTILON_MAX_TASKS")
            runtime = standalone(stages, slots)
            problem = job_limit_problem(stages, runtime, common.classes.slack)
            if problem is not None:
                log.bad(n, problem)
                continue
            log.use()
            stats["shuffle_mb"] += sum(mbs)
            stats["longest_reduce_s"] = max(stats["longest_reduce_s"], *stages[1]["durations"])
            job: dict[str, Any] = {"id": cid, "submit": window.job_time(arrival / 1000)}
            job.update(common.classes.assign(work_of(stages), runtime, rng))
            job["stages"] = stages
            jobs.append(job)
        log.finish("coflows")
        stats["shuffle_mb"] = round(stats["shuffle_mb"], 3)

        cluster = {"machines": [{"id": "rack", "count": machines,
                                 "capacity": {"slots": o.slots_per_machine}}]}
        return TracePart(jobs=jobs, cluster=cluster,
                         provenance=_provenance(o, common, machines, ports), stats=stats)


def _header(path: Path, first: tuple[int, str] | None) -> tuple[int, int]:
    """``(ports, coflows)`` of the first line; anything else is not this format."""
    if first is None:
        raise TraceError("empty file", where=str(path), fix="check the path")
    f = first[1].split()
    try:
        ports, count = (int(x) for x in f)
        if ports < 1 or count < 0:
            raise ValueError
    except ValueError:
        raise TraceError(f"header {first[1][:40]!r} is not `<ports> <coflows>` (two integers "
                         ">= 1 and >= 0)", where=f"{path}:1",
                         fix="is this a coflow-benchmark file? (see `utilon trace kinds`)"
                         ) from None
    return ports, count


def _parse(line: str, ports: int) -> Coflow | str:
    """A job line, or why it is malformed."""
    f = line.split()
    if len(f) < 5:
        return "too few fields"
    try:
        arrival, m = int(f[1]), int(f[2])
        if m < 1:
            return "no mapper racks (M < 1)"
        if len(f) < 5 + m:
            return "fewer fields than M mapper racks need"
        locs = [int(x) for x in f[3:3 + m]]
        r = int(f[3 + m])
    except ValueError:
        return "arrival, M, a mapper rack or R is not an integer"
    if arrival < 0:
        return "negative arrival time"
    if arrival > MAX_SECONDS * 1000:  # milliseconds
        return f"arrival time beyond {MAX_SECONDS:g} s"
    if r < 1:
        return "no reducer racks (R < 1)"
    entries = f[4 + m:]
    if len(entries) != r:
        return "R does not match the number of reducer entries"
    mbs: list[float] = []
    for e in entries:
        rack, _, mb = e.partition(":")
        try:
            locs.append(int(rack))
            mbs.append(float(mb))
        except ValueError:
            return "a reducer entry is not rack:MB"
        if not (math.isfinite(mbs[-1]) and mbs[-1] >= 0):
            return "shuffle MB is negative or not finite"
        if mbs[-1] > MAX_MB:
            return "a reducer's shuffle is beyond 1 EB"
    if not all(0 <= x < ports for x in locs):
        return "rack location outside [0, ports)"
    return f[0], arrival, m, mbs


def _seconds(x: float) -> float:
    """A task duration: 3 decimals, never 0 (the scenario format wants > 0)."""
    return max(round(x, 3), 0.001)


class _TooManyTasks(Exception):
    """A job's reduce tasks would pass the task limit (``limits.max_tasks``)."""


def _stages(racks: int, mbs: list[float], o: CoflowOptions, budget: int
            ) -> list[dict[str, Any]]:
    maps = racks * o.maps_per_rack
    shuffle = sum(mbs) * MB
    durations: list[float] = []
    for mb in mbs:
        b = mb * MB
        n = 1 if o.reduce_bytes is None else \
            min(max(1, math.ceil(b / o.reduce_bytes)), o.max_reduces_per_rack)
        if len(durations) + n > budget:  # checked before the list is allocated
            raise _TooManyTasks
        durations += [_seconds(b / n / o.reduce_rate + o.task_overhead)] * n
    return [
        {"name": "map", "kind": "map", "tasks": maps,
         "duration": _seconds(o.input_ratio * shuffle / maps / o.map_rate + o.task_overhead),
         "demand": {"slots": 1}},
        {"name": "reduce", "kind": "reduce", "durations": durations, "demand": {"slots": 1}},
    ]


def _provenance(o: CoflowOptions, common: Common, machines: int, ports: int) -> Provenance:
    split = ("one reduce task per reducer rack" if o.reduce_bytes is None else
             f"a reducer rack's shuffle split into ceil(bytes / reduce_bytes) tasks, "
             f"reduce_bytes = {o.reduce_bytes:g} B, at most {o.max_reduces_per_rack} per rack")
    return Provenance(
        real=[
            "coflow-benchmark (Chowdhury et al., Varys/Aalo): one hour of Facebook's 2010 "
            "3000-machine, 150-rack MapReduce cluster, mappers and reducers merged per rack",
            "coflow ids and arrival times (ms -> s)",
            "per job: the number of racks running its mappers (M); per reducer rack the "
            "shuffle megabytes (to the nearest MB)",
            "rack locations are checked but not used (no network or locality model)",
        ],
        assumed=[
            f"map tasks = M x maps_per_rack, maps_per_rack = {o.maps_per_rack}",
            f"map input = input_ratio x shuffle bytes, input_ratio = {o.input_ratio:g}; map "
            f"task seconds = input / maps / map_rate + task_overhead, map_rate = "
            f"{o.map_rate / 1e6:g} MB/s, task_overhead = {o.task_overhead:g} s",
            f"{split}; reduce task seconds = shuffle bytes / reduce_rate + task_overhead, "
            f"reduce_rate = {o.reduce_rate / 1e6:g} MB/s; 1 MB = 2**20 bytes",
            "every task needs 1 slot; all map tasks of a job last the same; reduces start "
            "when every map is done",
            f"cluster: {machines} machines x {o.slots_per_machine} slots"
            + (" (one per port of the fabric)" if machines == ports else ""),
            "tenants: none in the trace, every job in tenant 'default'",
            common.classes.describe(),
        ],
    )
