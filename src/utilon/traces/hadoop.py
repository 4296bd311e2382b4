"""``sls`` and ``synth``: the two input formats of Hadoop's YARN Scheduler Load Simulator.

Format source: the Apache Hadoop documentation page "YARN Scheduler Load Simulator (SLS)"
(``hadoop-tools/hadoop-sls/src/site/markdown/SchedulerLoadSimulator.md``, appendices "SLS JSON
input file format" and "SYNTH JSON input file format",
https://hadoop.apache.org/docs/current/hadoop-sls/SchedulerLoadSimulator.html); where the page
is silent, the field names and defaults the SLS reader uses (``SLSConfiguration``,
``TaskContainerDefinition``, ``SynthTraceJobProducer``, ``SynthJob``, ``SynthUtils`` in
``hadoop-tools/hadoop-sls``) were read and re-implemented here, not copied.

**SLS JSON** (``sls``): a stream of concatenated JSON objects (not an array; an array of job
objects is accepted too).  An optional object ``{"num.nodes": N, "num.racks": R}`` sizes the
cluster.  Each job object has ``job.start.ms`` (submit time, ms of simulated time),
``job.end.ms``, ``job.queue.name``, ``job.id``, ``job.user``, ``am.type``, ``job.count``
(copies of the job) and ``job.tasks``: containers with ``container.type`` (``map`` or
``reduce``, default ``map``), ``count`` (copies, default 1), a duration from
``container.duration.ms``, else ``duration.ms``, else ``container.end.ms - container.start.ms``,
and optional resources ``container.memory-mb`` (also read as ``container.memory``) and
``container.vcores``.  Real per job: submit time, queue (-> tenant), id, the number of map and
reduce containers and each container's duration and size.  Assumed: one slot per container;
memory/vcores demands only with ``resources`` (a task without them gets SLS's default container,
1024 MB and 1 vcore); a stage's demand is the largest of its containers'; reduce waits for all
maps (MapReduce); container priorities, hosts, start offsets and the AM container are not
modelled.  ``job.deadline.ms`` (absolute, like ``job.start.ms``) is a **utilon extension**, not
a Hadoop field: when present the job gets a deadline utility; otherwise ``--classes`` assigns
class and utility.  A job object without ``job.start.ms``, with a bad task type, a task
without a positive duration or with an end before its start is malformed (skipped, reported).

**SYNTH JSON** (``synth``): not a trace but a generator description (``num_nodes``,
``num_jobs``, ``rand_seed``, ``workloads`` with ``workload_weight``, ``queue_name``,
``job_classes`` and ``time_distribution``).  Both class formats are read: the documented flat
fields (``mtasks_avg``/``_stddev``, ``rtasks_*``, ``dur_*``, ``mtime_*``, ``rtime_*``,
``map_max_memory_*``, ``reduce_max_vcores_*``, ``chance_of_reservation``,
``deadline_factor_*``) and the newer ``tasks: [{type, count, time, max_memory, max_vcores}]``
with samples ``{val, std, dist: LOGNORM|NORM}`` or ``{discrete, weights}``.  As in Hadoop,
"avg/stddev" are the mean and standard deviation of a log-normal (normal with ``dist: NORM``),
a zero stddev means avg/6, times are seconds, memory is at least 1024 MB and vcores at least 1;
a workload and a class are picked by weight, the submit time by picking a
``time_distribution`` bucket by weight and a uniform second inside it, and a job has a deadline
(``submit + deadline_factor x job duration``) with probability ``chance_of_reservation``
(option ``deadline_jobs``).  Assumed: the sampling uses numpy seeded with ``--seed``;
``rand_seed`` is reported but Hadoop's exact job sequence is **not** reproduced.  Counts are
rounded and at least 1 (a class whose mean count is 0 has no such stage), durations at least
1 ms, a missing ``class_weight``/``workload_weight`` is 1 (Hadoop: 0).  Hadoop's own code
passes a task's sampled time to the container as milliseconds although the documented
comment says seconds; we follow the documentation (seconds).

The file is one JSON object; the ``//`` comments and trailing commas of the documented example
are tolerated.

Both: ``--start``/``--duration``/``--max-jobs``/``--arrival-scale`` apply to submit times as in
:class:`~utilon.traces.base.Window` (deadlines stay seconds after submit, unscaled); the
proposed cluster is ``--machines`` (else ``num.nodes``/``num_nodes``, else 20) machines of
``slots_per_machine`` slots (and
``mem_per_machine`` MB / ``vcores_per_machine`` vcores, SLS's NodeManager defaults, when those
resources are used; raised to fit the largest task).
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from utilon.limits import MAX_COUNT, MAX_MACHINES, MAX_SECONDS, finite_seconds, max_tasks
from utilon.traces.base import (
    Common,
    Importer,
    ImporterOptions,
    Provenance,
    SkipLog,
    TraceError,
    TracePart,
    job_limit_problem,
    open_lines,
    register,
    standalone,
    work_of,
)

DEFAULT_MACHINES = 20
SLS_CONTAINER = {"mem": 1024.0, "vcores": 1.0}  # yarn.sls.container.{memory.mb,vcores}
RESOURCE_KEYS = {"mem": ("container.memory-mb", "container.memory"),
                 "vcores": ("container.vcores",)}


Resource = Literal["slots", "mem", "vcores"]


def _names(v: Any) -> Any:
    return [s.strip() for s in v.split(",") if s.strip()] if isinstance(v, str) else v


class HadoopOptions(ImporterOptions):
    resources: Annotated[list[Resource], BeforeValidator(_names)] = \
        Field(default=["slots"], description="demands to keep: slots is "
              "always kept; add mem (MB) and/or vcores")
    slots_per_machine: int = Field(8, ge=1)
    mem_per_machine: float = Field(10240.0, gt=0, description="MB (yarn.sls.nm.memory.mb)")
    vcores_per_machine: float = Field(10.0, gt=0, description="yarn.sls.nm.vcores")


class SynthOptions(HadoopOptions):
    deadline_jobs: Literal["reservation", "all", "none"] = Field(
        "reservation", description="which jobs get a deadline utility: those drawn with "
        "chance_of_reservation (Hadoop), every job of a class with a deadline factor, none")


# -- shared pieces -------------------------------------------------------------------------
def _extra(opts: HadoopOptions) -> list[str]:
    return [r for r in ("mem", "vcores") if r in opts.resources]


def _cluster(n: int, opts: HadoopOptions, jobs: list[dict[str, Any]],
             prov: Provenance) -> dict[str, Any]:
    cap: dict[str, float] = {"slots": float(opts.slots_per_machine)}
    per = {"mem": opts.mem_per_machine, "vcores": opts.vcores_per_machine}
    for r in _extra(opts):
        biggest = max((st["demand"].get(r, 0.0) for j in jobs for st in j["stages"]),
                      default=0.0)
        cap[r] = max(per[r], biggest)
        if biggest > per[r]:
            prov.assumed.append(f"{r} per machine raised from {per[r]:g} to {biggest:g} so "
                                "that the largest task fits")
    prov.assumed.append(f"proposed cluster: {n} machines of {cap}")
    return {"machines": [{"id": "node", "count": n, "capacity": cap}]}


Raw = tuple[float, tuple[int, int], dict[str, Any], float | None]
"""(trace submit s, (row number, line), job without submit/class, deadline s after submit)"""


def _finish_jobs(raw: list[Raw], common: Common, log: SkipLog, slots: float
                 ) -> list[dict[str, Any]]:
    """Window, sort, cut at --max-jobs and give classes/utilities; a row (one job object,
    which ``job.count`` may turn into several jobs) is used if any of its jobs is kept."""
    w = common.window
    inside = []
    for t, (row, line), job, dl in raw:
        if t < w.start:
            log.filter(line, "before the window start")
        elif t >= w.end:
            log.filter(line, "after the window end")
        else:
            inside.append((t, (row, line), job, dl))
    inside.sort(key=lambda x: x[0])  # stable: file order at equal times
    if w.max_jobs is not None:
        for _, (_, line), _, _ in inside[w.max_jobs:]:
            log.filter(line, "beyond --max-jobs")
        inside = inside[:w.max_jobs]
    rng = np.random.default_rng(common.seed)
    jobs = []
    used_rows: set[int] = set()
    bad_rows: set[int] = set()
    for t, (row, line), job, dl in inside:
        stages = job["stages"]
        # an explicit deadline is checked where it is read; else the class rule's slack
        runtime = standalone(stages, slots)
        problem = job_limit_problem(stages, runtime, 0.0 if dl is not None
                                    else common.classes.slack)
        if problem is None and dl is not None and not finite_seconds(dl):
            problem = f"its deadline is beyond {MAX_SECONDS:g} s after submit"
        if problem is not None:
            if row not in bad_rows:
                bad_rows.add(row)
                log.bad(line, problem)
            continue
        fields = common.classes.assign(work_of(stages), runtime, rng)
        if dl is not None:
            u = fields["utility"]
            value = u.get("value", u.get("p", 1.0))
            fields["utility"] = {"kind": "deadline", "deadline": round(dl, 3), "value": value}
        jobs.append({"id": job["id"], "submit": w.job_time(t), **job["rest"], **fields,
                     "stages": stages})
        if row not in used_rows:
            used_rows.add(row)
            log.use()
    return jobs


# -- SLS: concatenated JSON objects, read as a stream --------------------------------------
def _json_stream(path: Path, log: SkipLog) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` of each top-level JSON value in a file of concatenated values.

    Lines are appended to a buffer and decoding is tried whenever a line ends a value
    (``}`` or ``]``) and at the end of the file.  A JSON token never spans lines, so a decoding
    error at the end of the buffer means "incomplete, read on"; anywhere else it is a malformed
    value: it is reported, and reading resumes at the next line starting with ``{`` in column 0
    (how both compact and pretty-printed SLS files start a job object).
    """
    dec = json.JSONDecoder()
    buf = ""
    at = 1  # line number of buf[0]
    skipping = False

    def drain(final: bool) -> Iterator[tuple[int, Any]]:
        nonlocal buf, at, skipping
        while True:
            stripped = buf.lstrip()
            at += buf.count("\n", 0, len(buf) - len(stripped))
            buf = stripped
            if not buf:
                return
            try:
                value, end = dec.raw_decode(buf)
            except json.JSONDecodeError as e:
                if e.pos >= len(buf.rstrip()) and not final:
                    return  # incomplete: read more lines
                bad_line = at + buf.count("\n", 0, e.pos)
                log.row()
                log.bad(bad_line, "not valid JSON" if e.pos < len(buf.rstrip())
                        else "unterminated JSON object")
                nxt = buf.find("\n{", e.pos)
                if nxt < 0:
                    buf, skipping = "", True
                    return
                at += buf.count("\n", 0, nxt + 1)
                buf = buf[nxt + 1:]
                continue
            yield at, value
            at += buf.count("\n", 0, end)
            buf = buf[end:]

    for n, line in open_lines(path):
        if skipping:
            if not line.startswith("{"):  # a top-level object starts at column 0
                continue
            skipping, at = False, n
        if not buf:
            at = n
        buf += line + "\n"
        if line.rstrip().endswith(("}", "]")):
            yield from drain(final=False)
    if buf.strip():
        yield from drain(final=True)


def _num(obj: dict[str, Any], key: str) -> float | None:
    """A numeric field (numbers or numeric strings, as SLS's parseLong accepts); ``None`` if
    absent; raises ``ValueError`` if present but not a finite number."""
    if key not in obj or obj[key] is None:
        return None
    v = obj[key]
    if isinstance(v, bool):
        raise ValueError(key)
    try:
        x = float(v) if isinstance(v, int | float) else float(str(v).strip())
    except ValueError:
        raise ValueError(key) from None
    if not math.isfinite(x) or abs(x) > MAX_SECONDS * 1000:  # times are milliseconds
        raise ValueError(key)
    return x


class _Bad(Exception):
    """A malformed job object; the message is the reason."""


def _sls_tasks(job: dict[str, Any], extra: list[str]) -> list[dict[str, Any]]:
    tasks = job.get("job.tasks")
    if not isinstance(tasks, list) or not tasks:
        raise _Bad("no job.tasks")
    durs: dict[str, list[float]] = {"map": [], "reduce": []}
    demand: dict[str, dict[str, float]] = {"map": {"slots": 1.0}, "reduce": {"slots": 1.0}}
    for task in tasks:
        if not isinstance(task, dict):
            raise _Bad("a task is not a JSON object")
        kind = str(task.get("container.type", "map"))
        if kind not in durs:
            raise _Bad("bad container.type (not map or reduce)")
        try:
            count = _num(task, "count")
            dur = _num(task, "container.duration.ms")
            if dur is None:
                dur = _num(task, "duration.ms")
            start, end = _num(task, "container.start.ms"), _num(task, "container.end.ms")
            size = {r: next((x for k in RESOURCE_KEYS[r] if (x := _num(task, k)) is not None),
                            SLS_CONTAINER[r]) for r in extra}
        except ValueError as e:
            raise _Bad(f"{e} is not a number") from None
        if dur is None and start is not None and end is not None:
            if end < start:
                raise _Bad("container.end.ms before container.start.ms")
            dur = end - start
        if dur is None:
            raise _Bad("task without a duration")
        if dur <= 0:
            raise _Bad("task duration <= 0")
        if any(x <= 0 for x in size.values()):
            raise _Bad("task resources <= 0")
        n = max(1, int(count)) if count is not None else 1
        if n > MAX_COUNT:
            raise _Bad(f"count above {MAX_COUNT:,}")
        durs[kind].extend([round(dur / 1000.0, 3)] * n)
        for r, x in size.items():
            demand[kind][r] = max(demand[kind].get(r, 0.0), x)
    return [{"name": k, "kind": k, "durations": d, "demand": demand[k]}
            for k, d in durs.items() if d]


@register
class SlsImporter(Importer):
    kind = "sls"
    summary = ("Hadoop YARN SLS JSON job trace (job.start.ms, job.queue.name, job.tasks with "
               "container durations) -> MapReduce jobs")
    produces = "workload"
    Options = HadoopOptions

    def read(self, path: Path, common: Common, options: Any, log: SkipLog) -> TracePart:
        opts: HadoopOptions = options
        extra = _extra(opts)
        raw: list[Raw] = []
        seen: set[str] = set()
        nodes: int | None = None
        am_types: Counter[str] = Counter()
        index = 0  # zero-based job index: SLS's default job id
        tasks, limit = 0, max_tasks()

        for line, value in _json_stream(path, log):
            for obj in (value if isinstance(value, list) else [value]):
                if isinstance(obj, dict) and "job.tasks" not in obj and "num.nodes" in obj:
                    try:
                        nodes = int(_num(obj, "num.nodes") or 0) or None
                    except ValueError:
                        raise TraceError("num.nodes is not a number",
                                         where=f"{path}:{line}") from None
                    if nodes is not None and not 0 < nodes <= MAX_MACHINES:
                        raise TraceError(f"num.nodes must be in 1..{MAX_MACHINES:,}",
                                         where=f"{path}:{line}",
                                         fix="give the cluster's node count") from None
                    continue
                log.row()
                try:
                    if not isinstance(obj, dict):
                        raise _Bad("not a JSON object")
                    try:
                        start = _num(obj, "job.start.ms")
                        end = _num(obj, "job.end.ms")
                        deadline = _num(obj, "job.deadline.ms")
                        copies = _num(obj, "job.count")
                    except ValueError as e:
                        raise _Bad(f"{e} is not a number") from None
                    if start is None:
                        raise _Bad("missing job.start.ms")
                    if start < 0:
                        raise _Bad("job.start.ms < 0")
                    if end is not None and end and end < start:
                        raise _Bad("job.end.ms before job.start.ms")
                    if deadline is not None and deadline <= start:
                        raise _Bad("job.deadline.ms not after job.start.ms")
                    stages = _sls_tasks(obj, extra)
                    n = max(1, int(copies)) if copies is not None else 1
                    if n > MAX_COUNT:
                        raise _Bad(f"job.count above {MAX_COUNT:,}")
                    base = str(obj["job.id"]) if obj.get("job.id") is not None and n == 1 \
                        else None
                    ids = [base] if base is not None else \
                        [f"job_{index + k}" for k in range(n)]
                    if any(i in seen for i in ids):
                        raise _Bad("duplicate job.id")
                except _Bad as e:
                    log.bad(line, str(e))
                    continue
                tasks += n * sum(len(st["durations"]) for st in stages)
                if tasks > limit:
                    raise TraceError(f"the trace expands to more than {limit:,} tasks",
                                     where=f"{path}:{line}", fix="import a window of it "
                                     "(--start/--duration), or raise UTILON_MAX_TASKS if "
                                     "this machine has the memory")
                index += n
                seen.update(ids)
                am_types[str(obj.get("am.type", "mapreduce"))] += 1
                rest = {"tenant": str(obj.get("job.queue.name") or "default")}
                dl = None if deadline is None else max(0.001, (deadline - start) / 1000.0)
                for k, jid in enumerate(ids):  # job.count copies get their own stages
                    raw.append((start / 1000.0, (log.rows, line),
                                {"id": jid, "rest": rest,
                                 "stages": copy.deepcopy(stages) if k else stages}, dl))

        n_machines = common.machines or nodes or DEFAULT_MACHINES
        slots = float(n_machines * opts.slots_per_machine)
        jobs = _finish_jobs(raw, common, log, slots)
        log.finish("job objects")
        prov = Provenance(
            real=[f"{path.name}: per job the submit time (job.start.ms), queue (-> tenant) and "
                  "id; per container its type (map/reduce), count and duration"
                  + (" and size (" + ", ".join(extra) + ")" if extra else "")],
            assumed=[
                "one slot per container; a stage's demand is its largest container's; reduce "
                "waits for all maps; container priority, host, start offset and the AM "
                "container are not modelled",
                f"kept demands: slots{''.join(', ' + r for r in extra)}"
                + ("; containers without a size get SLS's default 1024 MB / 1 vcore"
                   if extra else ""),
                "job.deadline.ms (a utilon extension) -> deadline utility; other jobs get "
                "class and utility from the class rule: " + common.classes.describe(),
                f"window: {common.window.describe()}",
            ])
        if nodes is None and common.machines is None:
            prov.assumed.append(f"no num.nodes object: {DEFAULT_MACHINES} machines")
        cluster = _cluster(n_machines, opts, jobs, prov)
        stats = {"am_types": dict(am_types), "with_deadline": sum(
            1 for j in jobs if j["utility"]["kind"] == "deadline")}
        return TracePart(jobs=jobs, cluster=cluster, provenance=prov, stats=stats)


# -- SYNTH: a generator description --------------------------------------------------------
class _M(BaseModel):
    model_config = ConfigDict(extra="ignore")  # Hadoop ignores unknown properties too


class _Sample(_M):
    val: float | None = None
    std: float | None = Field(default=None, ge=0)
    dist: Literal["LOGNORM", "NORM"] | None = None
    discrete: list[float] | None = Field(default=None, min_length=1)
    weights: list[float] | None = None

    @model_validator(mode="after")
    def _mode(self) -> _Sample:
        if self.val is None and self.discrete is None:
            raise ValueError("a sample needs val (with an optional std) or discrete")
        w = self.weights
        if self.discrete is not None and w is not None and (
                len(w) != len(self.discrete) or min(w) < 0 or sum(w) <= 0):
            raise ValueError("weights must match discrete, be >= 0 and not all 0")
        return self

    def draw(self, rng: np.random.Generator) -> float:
        if self.val is None:
            assert self.discrete is not None
            w = np.asarray(self.weights or [1.0] * len(self.discrete), dtype=float)
            return float(self.discrete[_pick(w, rng)])
        if self.std is None:
            return self.val
        return _dist(self.val, self.std, self.dist or "LOGNORM", rng)


def _dist(mean: float, std: float, dist: str, rng: np.random.Generator) -> float:
    """Hadoop's SYNTH sampling: a log-normal (or normal) with this mean and stddev; a zero
    stddev means mean / 6."""
    if mean <= 0:
        return 0.0
    std = std or mean / 6.0
    if dist == "NORM":
        return float(rng.normal(mean, std))
    s2 = math.log1p((std / mean) ** 2)
    return float(rng.lognormal(math.log(mean) - s2 / 2.0, math.sqrt(s2)))


def _pick(weights: Any, rng: np.random.Generator) -> int:
    w = np.asarray(weights, dtype=float)
    i = int(np.searchsorted(np.cumsum(w) / w.sum(), rng.random(), side="right"))
    return min(i, len(w) - 1)  # guard against a last cumulative share of 0.999...


class _Task(_M):
    type: str = Field(min_length=1)
    count: _Sample
    time: _Sample
    max_memory: _Sample | None = None
    max_vcores: _Sample | None = None


class _Class(_M):
    class_name: str = "class"
    class_weight: float = Field(1.0, ge=0)
    user_name: str | None = None
    tasks: list[_Task] | None = None
    duration: _Sample | None = None
    deadline_factor: _Sample | None = None
    reservation: _Sample | None = None
    # the documented flat format
    mtasks_avg: float = Field(0.0, ge=0)
    mtasks_stddev: float = Field(0.0, ge=0)
    rtasks_avg: float = Field(0.0, ge=0)
    rtasks_stddev: float = Field(0.0, ge=0)
    dur_avg: float = Field(0.0, ge=0)
    dur_stddev: float = Field(0.0, ge=0)
    mtime_avg: float = Field(0.0, ge=0)
    mtime_stddev: float = Field(0.0, ge=0)
    rtime_avg: float = Field(0.0, ge=0)
    rtime_stddev: float = Field(0.0, ge=0)
    map_max_memory_avg: float = Field(0.0, ge=0)
    map_max_memory_stddev: float = Field(0.0, ge=0)
    reduce_max_memory_avg: float = Field(0.0, ge=0)
    reduce_max_memory_stddev: float = Field(0.0, ge=0)
    map_max_vcores_avg: float = Field(0.0, ge=0)
    map_max_vcores_stddev: float = Field(0.0, ge=0)
    reduce_max_vcores_avg: float = Field(0.0, ge=0)
    reduce_max_vcores_stddev: float = Field(0.0, ge=0)
    chance_of_reservation: float = Field(0.0, ge=0, le=1)
    deadline_factor_avg: float = Field(0.0, ge=0)
    deadline_factor_stddev: float = Field(0.0, ge=0)

    def normalised(self) -> _Class:
        """The flat format as ``tasks``/``duration``/``deadline_factor``/``reservation``."""
        if self.tasks is not None:
            return self
        s = _Sample

        def task(kind: str, p: str) -> _Task:
            def g(name: str) -> float:
                return float(getattr(self, name))

            return _Task(type=kind, count=s(val=g(f"{p}tasks_avg"), std=g(f"{p}tasks_stddev")),
                         time=s(val=g(f"{p}time_avg"), std=g(f"{p}time_stddev")),
                         max_memory=s(val=g(f"{kind}_max_memory_avg"),
                                      std=g(f"{kind}_max_memory_stddev")),
                         max_vcores=s(val=g(f"{kind}_max_vcores_avg"),
                                      std=g(f"{kind}_max_vcores_stddev")))

        tasks = [task(k, k[0]) for k in ("map", "reduce")
                 if getattr(self, f"{k[0]}tasks_avg") > 0]
        return self.model_copy(update={
            "tasks": tasks,
            "duration": s(val=self.dur_avg, std=self.dur_stddev),
            "deadline_factor": (s(val=self.deadline_factor_avg,
                                  std=self.deadline_factor_stddev)
                                if self.deadline_factor_avg > 0 else None),
            "reservation": s(val=self.chance_of_reservation)})


class _TimeSample(_M):
    time: float = Field(ge=0)
    weight: float = Field(0.0, ge=0)


class _Workload(_M):
    workload_name: str = "workload"
    workload_weight: float = Field(1.0, ge=0)
    queue_name: str = "default"
    job_classes: list[_Class] = Field(min_length=1)
    time_distribution: list[_TimeSample] = Field(min_length=1)


class _Trace(_M):
    description: str = ""
    num_nodes: int | None = Field(default=None, ge=1, le=MAX_MACHINES)
    nodes_per_rack: int | None = None
    num_jobs: int = Field(ge=1, le=MAX_COUNT)
    rand_seed: int | None = None
    workloads: list[_Workload] = Field(min_length=1)


_COMMENT_OR_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|,(?=\s*[}\]])')


def _lenient_json(text: str) -> str:
    """Drop ``//`` comments and trailing commas (the documented example has both), keeping
    strings and line numbers intact."""
    return _COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "",
                                  text)


def _read_synth(path: Path) -> _Trace:
    text = "\n".join(line for _, line in open_lines(path))
    try:
        data = json.loads(_lenient_json(text))
    except json.JSONDecodeError as e:
        raise TraceError(f"not JSON: {e.msg}", where=f"{path}:{e.lineno}",
                         fix="a SYNTH file is one JSON object (see `utilon trace kinds`)"
                         ) from None
    if not isinstance(data, dict):
        raise TraceError("a SYNTH file is one JSON object", where=f"{path}:1")
    try:
        trace = _Trace.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        raise TraceError(err["msg"], where=f"{path}: {loc.lstrip('.') or '(top level)'}"
                         ) from None
    for wi, w in enumerate(trace.workloads):
        where = f"{path}: workloads[{wi}]"
        if not any(t.weight > 0 for t in w.time_distribution):
            raise TraceError("time_distribution has no positive weight", where=where)
        if not any(c.class_weight > 0 for c in w.job_classes):
            raise TraceError("no job class has a positive class_weight", where=where)
        w.job_classes = [c.normalised() for c in w.job_classes]
        for ci, c in enumerate(w.job_classes):
            if not c.tasks:
                raise TraceError("the class has no tasks (mtasks_avg and rtasks_avg are 0)",
                                 where=f"{where}.job_classes[{ci}]")
    if not any(w.workload_weight > 0 for w in trace.workloads):
        raise TraceError("no workload has a positive workload_weight", where=str(path))
    return trace


def _synth_job(i: int, w: _Workload, c: _Class, rng: np.random.Generator,
               extra: list[str], deadline_jobs: str
               ) -> tuple[float, dict[str, Any], float | None]:
    """One sampled job: (submit s, job, deadline s after submit or None)."""
    ts = w.time_distribution
    b = _pick([t.weight for t in ts], rng)
    lo, hi = ts[b].time, ts[min(b + 1, len(ts) - 1)].time
    submit = lo + (float(rng.integers(0, int(hi - lo))) if hi - lo >= 1 else 0.0)
    dur = c.duration.draw(rng) if c.duration is not None else 0.0
    reserve = rng.random() <= (c.reservation.draw(rng) if c.reservation is not None else 0.0)
    factor = c.deadline_factor.draw(rng) if c.deadline_factor is not None else 0.0
    stages = []
    names: Counter[str] = Counter()
    assert c.tasks is not None
    for t in c.tasks:
        if t.count.val is not None and t.count.val <= 0:
            continue  # mean count 0: the class has no such stage
        n = round(t.count.draw(rng))
        if n <= 0 and t.count.discrete is not None:
            continue  # an explicit 0 drawn from a discrete list
        n = max(1, n)
        if n > MAX_COUNT:
            raise ValueError(f"job class {c.class_name!r} draws {n:,} tasks of type "
                             f"{t.type!r} (at most {MAX_COUNT:,})")
        demand = {"slots": 1.0}
        mem = max(1024.0, float(round(t.max_memory.draw(rng)))) if t.max_memory else 1024.0
        vcores = max(1.0, float(round(t.max_vcores.draw(rng)))) if t.max_vcores else 1.0
        for r, x in (("mem", mem), ("vcores", vcores)):
            if r in extra:
                demand[r] = x
        durs = [round(max(0.001, t.time.draw(rng)), 3) for _ in range(n)]
        names[t.type] += 1
        name = t.type if names[t.type] == 1 else f"{t.type}-{names[t.type]}"
        kind = t.type if t.type in ("map", "reduce") else "task"
        stages.append({"name": name, "kind": kind, "durations": durs, "demand": demand})
    if not stages:  # every stage drew 0 tasks: keep one task of the first type
        t = c.tasks[0]
        stages.append({"name": t.type, "kind": t.type if t.type in ("map", "reduce") else
                       "task", "durations": [round(max(0.001, t.time.draw(rng)), 3)],
                       "demand": {"slots": 1.0}})
    has_deadline = factor > 0 and dur > 0 and (
        deadline_jobs == "all" or (deadline_jobs == "reservation" and reserve))
    job = {"id": f"{c.class_name}_{i:06d}",
           "rest": {"tenant": w.queue_name}, "stages": stages}
    return submit, job, (factor * dur if has_deadline else None)


@register
class SynthImporter(Importer):
    kind = "synth"
    summary = ("Hadoop YARN SLS SYNTH generator description (workloads, job classes, time "
               "distribution) -> sampled MapReduce jobs")
    produces = "workload"
    Options = SynthOptions

    def read(self, path: Path, common: Common, options: Any, log: SkipLog) -> TracePart:
        opts: SynthOptions = options
        trace = _read_synth(path)
        extra = _extra(opts)
        rng = np.random.default_rng([common.seed, 1])  # the class rule has its own stream
        wl_weights = [w.workload_weight for w in trace.workloads]
        raw: list[Raw] = []
        per_workload: Counter[str] = Counter()
        tasks, limit = 0, max_tasks()
        for i in range(trace.num_jobs):
            log.row()
            w = trace.workloads[_pick(wl_weights, rng)]
            c = w.job_classes[_pick([k.class_weight for k in w.job_classes], rng)]
            submit, job, dl = _synth_job(i, w, c, rng, extra, opts.deadline_jobs)
            tasks += sum(len(st["durations"]) for st in job["stages"])
            if tasks > limit:
                raise TraceError(f"the description generates more than {limit:,} tasks",
                                 where=str(path), fix="lower num_jobs or the task counts, "
                                 "or raise UTILON_MAX_TASKS if this machine has the memory")
            per_workload[w.workload_name] += 1
            raw.append((submit, (i, i + 1), job, dl))  # "line" = job number (1-based)
        n_machines = common.machines or trace.num_nodes or DEFAULT_MACHINES
        jobs = _finish_jobs(raw, common, log, float(n_machines * opts.slots_per_machine))
        log.finish("generated jobs")
        prov = Provenance(
            real=[f"{path.name}: the SYNTH description ({trace.description or 'no description'}"
                  f"): {trace.num_jobs} jobs over {len(trace.workloads)} workloads, their "
                  "weights, queues, job classes and time distribution"],
            assumed=[
                f"jobs sampled with numpy seeded by --seed {common.seed}; the file's rand_seed "
                f"({trace.rand_seed}) is reported only: Hadoop's job sequence is not reproduced",
                "avg/stddev are mean/stddev of a log-normal (NORM: normal), stddev 0 -> avg/6; "
                "counts rounded, >= 1; task times in seconds (as documented), >= 1 ms; memory "
                ">= 1024 MB, vcores >= 1",
                f"deadlines ({opts.deadline_jobs}): submit + deadline_factor x sampled job "
                "duration; other jobs: " + common.classes.describe(),
                f"one slot per task; kept demands: slots{''.join(', ' + r for r in extra)}; "
                "reduce waits for all maps",
                f"window: {common.window.describe()}",
            ])
        if trace.num_nodes is None and common.machines is None:
            prov.assumed.append(f"no num_nodes: {DEFAULT_MACHINES} machines")
        cluster = _cluster(n_machines, opts, jobs, prov)
        stats = {"rand_seed": trace.rand_seed, "per_workload": dict(per_workload),
                 "with_deadline": sum(1 for j in jobs if j["utility"]["kind"] == "deadline")}
        return TracePart(jobs=jobs, cluster=cluster, provenance=prov, stats=stats)
