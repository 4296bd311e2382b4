"""Alibaba cluster-trace-v2017: batch tasks -> jobs, machine events -> a cluster.

Two importers read the two tables of the 2017 release that are public (see
``shared/data/alibaba_v2017/README.md``; schema from ``alibaba/clusterdata``
``cluster-trace-v2017/trace_201708.md``).

``alibaba-2017`` (``batch_task.csv``, 8 columns, header optional)
    A job is the tasks with one ``job_id`` (submitted at its earliest task creation); each task
    is a stage ``t<task_id>`` whose tasks are the task's instances.
    *Real*: task create and end times, job and task ids, instance counts, statuses, the CPU
    and memory each instance requests.  *Assumed*, because the 2017 release does not have it:

    * instance durations.  ``batch_instance.csv`` (real per-instance start/end) has no public
      copy, so every instance of a task lasts the task's ``end - create``.  That includes
      queueing, the waves in which Fuxi ran the instances and, since the tasks of a job are
      mostly created together, the wait for its predecessors: the work is overstated;
    * precedence.  DAG edges were first published in 2018; a task is taken to wait for every
      earlier task of its job that had ended by the time it was created (``infer_dag``;
      written as a transitive reduction).  In this trace 90% of the jobs create all their
      tasks in the same second, so only ~190 edges are found: most jobs are bags of
      independent tasks;
    * units: ``plan_cpu`` in hundredths of a core (``cpu_unit``), ``plan_mem`` as a fraction
      of the largest machine (as in ``server_event.csv``, where most machines have 0.69);
    * only ``Terminated`` tasks by default (``statuses``); Waiting rows have no request and
      are filtered; tasks created before the trace (negative time) are filtered; tasks with
      end == create last ``min_duration``;
    * instance bundling: 11.9 M instances would make a simulation crawl, so a task with more
      than ``max_tasks_per_stage`` instances becomes tasks that each carry ceil(n / K)
      instances (demand x instances carried, same duration) - but never more than one
      proposed machine holds, so a huge task may keep more than K tasks.  Total demand x time
      is preserved exactly (instances are spread evenly over the bundles, so a bundle may
      carry a fractional number of them);
    * the proposed cluster: identical machines of 64 cores and 0.69 memory.  The real 1,313
      machines also ran online services, so the batch share is unknown: without
      ``--machines`` the API sizes the cluster for an offered load (default 0.7; memory is
      the bound resource, about 3,700 machines for the whole file);
    * classes and utilities: the seeded :class:`~utilon.traces.base.ClassRule`, with a job's
      size in instance-seconds (unbundled).

``alibaba-2017-servers`` (``server_event.csv``, 7 columns, no header)
    *Real*: the machines, their CPU cores, normalized memory and disk, and the time of every
    soft/hard error.  *Assumed*: an error takes the machine away (``leave``) and, since the
    trace has no recovery events, it comes back ``recovery`` seconds after the last error
    that it reported; in the model the tasks on a leaving machine are lost and re-run, which
    is pessimistic (the trace documentation says existing work may continue, only new work
    is not placed).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from utilon.limits import MAX_COUNT, MAX_SECONDS
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
    timeline_stats,
    work_of,
)

REAL_MACHINES = 1313  # machines in the 2017 trace (shared by batch and online services)
STATUSES = ("Ready", "Waiting", "Running", "Terminated", "Failed", "Cancelled")


def _int(text: str) -> int:
    """An integer field; ``" 12"`` and ``"12.0"`` are accepted, ``"1.5"`` is not."""
    try:
        return int(text)  # int() itself ignores surrounding spaces
    except ValueError:
        x = float(text)
        if not x.is_integer():
            raise ValueError(f"not an integer: {text!r}") from None
        return int(x)


def _num(x: float) -> float:
    """A float short enough for a scenario file (9 significant digits)."""
    return float(f"{x:.9g}")


# ================================================================================ batch tasks
class AlibabaOptions(ImporterOptions):
    statuses: tuple[str, ...] = Field(("Terminated",), min_length=1,
                                      description="task statuses to replay")
    cpu_unit: float = Field(100.0, gt=0, description="plan_cpu per core (100 = hundredths)")
    infer_dag: bool = True
    max_tasks_per_stage: int | None = Field(64, ge=1,
                                            description="bundle instances above this; null: no")
    min_duration: float = Field(1.0, gt=0, description="seconds for tasks with end == create")
    machine_cpu: float = Field(64.0, gt=0, description="cores of a proposed machine")
    machine_mem: float = Field(0.69, gt=0, description="normalized memory of a machine")


@dataclass(slots=True)
class _Task:
    create: int
    end: int
    task_id: int
    instances: int
    cpu: float  # cores per instance
    mem: float  # normalized memory per instance
    line: int


@register
class Alibaba2017(Importer):
    kind: ClassVar[str] = "alibaba-2017"
    summary: ClassVar[str] = "Alibaba 2017 batch_task.csv: jobs of tasks of instances"
    produces: ClassVar[Literal["workload", "cluster"]] = "workload"
    Options: ClassVar[type[ImporterOptions]] = AlibabaOptions
    sized_by_load = True  # the batch share of the real 1,313 machines is unknown

    def read(self, path: Path, common: Common, options: Any, log: SkipLog) -> TracePart:
        opts: AlibabaOptions = options
        for s in opts.statuses:
            if s not in STATUSES:
                raise TraceError(f"unknown status {s!r}", where="--set statuses",
                                 fix=f"use some of: {', '.join(STATUSES)}")
        wanted = set(opts.statuses)
        jobs: dict[int, list[_Task]] = defaultdict(list)
        seen: set[tuple[int, int]] = set()
        for n, line in open_lines(path):
            if not line.strip():
                continue
            f = line.split(",")
            if n == 1 and not f[0].strip().lstrip("-").replace(".", "").isdigit():
                continue  # a header line (the public copy has one, the original does not)
            log.row()
            if len(f) != 8:
                log.bad(n, f"expected 8 fields, got {len(f)}")
                continue
            try:
                try:  # the common case first: plain integers
                    create, end, job, task, inst = (int(f[0]), int(f[1]), int(f[2]),
                                                    int(f[3]), int(f[4]))
                except ValueError:
                    create, end, job, task, inst = (_int(x) for x in f[:5])
            except ValueError:
                log.bad(n, "time, id or instance count is not an integer")
                continue
            status = f[5].strip()
            if status not in STATUSES:
                log.bad(n, "unknown status")
                continue
            if inst < 0 or job < 0 or task < 0:
                log.bad(n, "negative id or instance count")
                continue
            if max(abs(create), abs(end)) > MAX_SECONDS or inst > MAX_COUNT:
                log.bad(n, "time or instance count beyond utilon's limits")
                continue
            if status not in wanted:
                log.filter(n, f"status {status}")
                continue
            c_txt, m_txt = f[6].strip(), f[7].strip()
            if not c_txt or not m_txt:
                log.filter(n, "no cpu/mem request")
                continue
            try:
                cpu, mem = float(c_txt) / opts.cpu_unit, float(m_txt)
            except ValueError:
                log.bad(n, "cpu or memory request is not a number")
                continue
            if not (math.isfinite(cpu) and math.isfinite(mem)) or cpu < 0 or mem < 0:
                log.bad(n, "negative cpu or memory request")
                continue
            if inst == 0:
                log.filter(n, "no instances")
                continue
            if cpu > opts.machine_cpu or mem > opts.machine_mem:
                log.filter(n, "an instance fits no machine")
                continue
            if create < 0:
                log.filter(n, "created before the trace")
                continue
            if end < create:
                log.filter(n, "ends before it is created")
                continue
            if (job, task) in seen:
                log.filter(n, "duplicate task id (first kept)")
                continue
            seen.add((job, task))
            jobs[job].append(_Task(create, end, task, inst, cpu, mem, n))

        # Jobs in submit order (earliest task creation), ties by job id; then the window.
        first = {j: min(t.create for t in tasks) for j, tasks in jobs.items()}
        order = sorted(jobs, key=lambda j: (first[j], j))
        win = common.window
        kept: list[int] = []
        for j in order:
            tasks = jobs[j]
            submit = first[j]
            if not win.contains(submit):
                reason = "job submitted outside the window"
            elif win.max_jobs is not None and len(kept) >= win.max_jobs:
                reason = "beyond max_jobs"
            else:
                kept.append(j)
                continue
            for t in tasks:
                log.filter(t.line, reason)
        if not kept:
            log.finish("task rows")  # raises: nothing usable

        m_cap = {"cpu": opts.machine_cpu, "mem": opts.machine_mem}
        # Without --machines the API sizes the cluster for an offered load (reading twice);
        # the first read, and a --with cluster, use the real cluster's size.
        machines = common.machines or REAL_MACHINES
        rng = np.random.default_rng(common.seed)
        out: list[dict[str, Any]] = []
        bundled = instances = edges = zero = 0
        for j in kept:
            tasks = sorted(jobs[j], key=lambda t: (t.create, t.end, t.task_id))
            submit = tasks[0].create
            stages: list[dict[str, Any]] = []
            plain: list[dict[str, Any]] = []  # one task per instance: the work for classes
            fit = math.inf  # tasks of the job's biggest stage demand one machine holds
            earliest_end = math.inf
            for i, t in enumerate(tasks):
                dur = float(t.end - t.create) or opts.min_duration
                zero += t.end == t.create
                n_tasks, per = _bundle(t, opts.max_tasks_per_stage, m_cap)
                bundled += per > 1
                instances += t.instances
                cpu, mem = _num(t.cpu * per), _num(t.mem * per)
                fit = min(fit, _fits2(cpu, mem, opts.machine_cpu, opts.machine_mem))
                st: dict[str, Any] = {"name": f"t{t.task_id}", "kind": "task", "tasks": n_tasks,
                                      "duration": dur, "demand": {"cpu": cpu, "mem": mem}}
                if opts.infer_dag and earliest_end <= t.create:
                    after = _predecessors(tasks, i)
                    st["after"] = [f"t{tasks[a].task_id}" for a in after]
                    edges += len(after)
                if t.end < earliest_end:
                    earliest_end = t.end
                stages.append(st)
                plain.append({"tasks": t.instances, "duration": dur})
            slots = fit * machines
            runtime = standalone(stages, slots)
            problem = job_limit_problem(stages, runtime, common.classes.slack)
            if problem is not None:  # every row of the job is malformed
                for t in tasks:
                    log.bad(t.line, problem)
                continue
            for _ in tasks:
                log.use()
            doc: dict[str, Any] = {"id": f"j{j}", "submit": win.job_time(submit)}
            doc.update(common.classes.assign(work_of(plain), runtime, rng))
            doc["stages"] = stages
            out.append(doc)
        log.finish("task rows")

        k = opts.max_tasks_per_stage
        prov = Provenance(
            real=["task create/end times, job and task ids, instance counts, statuses, "
                  "cpu and memory requested per instance (batch_task.csv)"],
            assumed=[
                "instance duration = task end - create (batch_instance.csv is not public); "
                "this includes queueing and waves, so work is overstated",
                f"plan_cpu / {opts.cpu_unit:g} = cores; plan_mem = fraction of the largest "
                "machine",
                (f"precedence inferred: a task waits for every earlier task of its job that "
                 f"ended by its creation ({edges} edges after transitive reduction; most "
                 "jobs create all their tasks in the same second, so most tasks are "
                 "independent); creation offsets inside a job are not replayed"
                 if opts.infer_dag else "no precedence: all tasks of a job independent"),
                f"statuses replayed: {', '.join(opts.statuses)}; tasks with end == create "
                f"last {opts.min_duration:g} s ({zero} tasks)",
                (f"instances bundled: a task with more than {k} instances becomes bundles of "
                 f"ceil(n/{k}) instances (at most what one machine holds), demand x "
                 f"instances carried, same duration, total work preserved ({bundled} tasks "
                 "bundled)" if k else "no bundling: one simulated task per instance"),
                f"proposed cluster: {machines} machines of {opts.machine_cpu:g} cores, "
                f"{opts.machine_mem:g} memory (the real cluster has {REAL_MACHINES:,}, shared "
                "with online services, so the batch share is unknown)",
                common.classes.describe() + "; a job's size is its instance-seconds",
            ])
        cluster = {"machines": [{"id": "m", "count": machines, "capacity": m_cap}]}
        stats = {"trace_tasks": sum(len(jobs[j]) for j in kept), "instances": instances,
                 "bundled_trace_tasks": bundled, "inferred_edges": edges,
                 "zero_duration_tasks": zero, "machines": machines}
        return TracePart(jobs=out, cluster=cluster, provenance=prov, stats=stats)


def _fits2(cpu: float, mem: float, m_cpu: float, m_mem: float) -> int:
    """How many tasks demanding ``cpu`` and ``mem`` one machine holds (at least 1)."""
    per = min(m_cpu / cpu if cpu > 0 else math.inf, m_mem / mem if mem > 0 else math.inf)
    return max(1, math.floor(per + 1e-9)) if math.isfinite(per) else 1 << 20


def _bundle(t: _Task, k: int | None, cap: dict[str, float]) -> tuple[int, float]:
    """(simulated tasks, instances each carries) for a trace task.  A bundle stays 0.01%
    below a whole machine, so it also fits the real machines of server_event.csv (memory
    0.68997, a hair under the proposed 0.69)."""
    n = t.instances
    if k is None or n <= k:
        return n, 1.0
    room = 1 - 1e-4
    g = min(math.ceil(n / k), _fits2(t.cpu, t.mem, cap["cpu"] * room, cap["mem"] * room))
    if g <= 1:
        return n, 1.0
    tasks = math.ceil(n / g)
    return tasks, n / tasks  # spread evenly: <= g instances each, exact total


def _predecessors(tasks: list[_Task], i: int) -> list[int]:
    """Earlier tasks (in create order) that ended by task ``i``'s creation, minus those
    implied through another predecessor (transitive reduction)."""
    c = tasks[i].create
    deps = [a for a in range(i) if tasks[a].end <= c]
    if len(deps) < 2:
        return deps
    # Tasks are in create order, so the last predecessor was created last: every other one
    # that ended by then is already waited for through it.  Any chain a -> x -> i has x
    # among the predecessors too, so what remains is the transitive reduction.
    last = tasks[deps[-1]].create
    return [a for a in deps[:-1] if tasks[a].end > last] + [deps[-1]]


# ============================================================================= machine events
class ServersOptions(ImporterOptions):
    recovery: float = Field(1800.0, gt=0, description="seconds a machine is away after an error")
    prefer_events: bool = Field(True, description="sample machines with errors first")


@register
class Alibaba2017Servers(Importer):
    kind: ClassVar[str] = "alibaba-2017-servers"
    summary: ClassVar[str] = "Alibaba 2017 server_event.csv: machines and their errors"
    produces: ClassVar[Literal["workload", "cluster"]] = "cluster"
    Options: ClassVar[type[ImporterOptions]] = ServersOptions

    def read(self, path: Path, common: Common, options: Any, log: SkipLog) -> TracePart:
        opts: ServersOptions = options
        added: dict[int, tuple[float, dict[str, float], float, int]] = {}  # t, cap, disk, line
        errors: list[tuple[float, int, int, str]] = []  # time, machine, line, kind
        for n, line in open_lines(path):
            if not line.strip():
                continue
            f = [x.strip() for x in line.split(",")]
            log.row()
            if len(f) != 7:
                log.bad(n, f"expected 7 fields, got {len(f)}")
                continue
            try:
                t, mid = float(f[0]), _int(f[1])
                cpu, mem, disk = (float(x) if x else 0.0 for x in f[4:7])
            except ValueError:
                log.bad(n, "time, machine id or capacity is not a number")
                continue
            if not all(math.isfinite(x) and x >= 0 for x in (t, cpu, mem, disk)):
                log.bad(n, "negative time or capacity")
                continue
            if t > MAX_SECONDS:
                log.bad(n, f"time beyond {MAX_SECONDS:g} s")
                continue
            kind = f[2]
            if kind == "add":
                if mid in added:
                    log.filter(n, "second add of a machine (first kept)")
                elif cpu <= 0:
                    log.filter(n, "machine added without cpus")
                else:
                    added[mid] = (t, {"cpu": cpu, "mem": mem}, disk, n)
                    log.use()
            elif kind in ("softerror", "harderror"):
                errors.append((t, mid, n, kind))
            else:
                log.bad(n, "unknown event type")
        log.finish("machine events")

        # Down intervals per machine: [error, last error of a burst + recovery).
        down: dict[int, list[list[float]]] = defaultdict(list)
        n_err: Counter[str] = Counter()
        for t, mid, n, kind in sorted(errors):
            if mid not in added or t < added[mid][0]:
                log.filter(n, "error of a machine not added yet")
                continue
            log.use()
            n_err[kind] += 1
            iv = down[mid]
            if iv and t < iv[-1][1]:
                iv[-1][1] = t + opts.recovery  # an error while down extends the downtime
            else:
                iv.append([t, t + opts.recovery])
        win = common.window
        ws, we = win.start, win.end

        # Machines present in the window, and the changes that fall in it.
        state0: dict[int, bool] = {}
        changes: dict[int, list[tuple[float, str]]] = {}
        for mid, (ta, _, _, at_line) in added.items():
            if ta >= we:
                log.filter(at_line, "machine added after the window")
                continue
            ev: list[tuple[float, str]] = []
            up = ta <= ws
            if not up:
                ev.append((ta - ws, "join"))
            for a, b in down.get(mid, ()):  # errors come after the add, in time order
                if a <= ws < b:  # down at the window start
                    up = False
                    ev.append((b - ws, "join"))
                elif ws < a < we:
                    ev.append((a - ws, "leave"))
                    ev.append((b - ws, "join"))  # rejoins even after the window's end
            state0[mid] = up
            changes[mid] = ev

        ids = sorted(state0)
        if not ids:
            raise TraceError("no machine is added before the window ends", where=str(path),
                             fix="move --start earlier")
        chosen = _sample(ids, common.machines, common.seed,
                         [m for m in ids if any(a == "leave" or not state0[m]
                                                for _, a in changes[m])]
                         if opts.prefer_events else [])
        machines: list[dict[str, Any]] = []
        events: list[tuple[float, int, str]] = []
        for mid in chosen:
            _, cap, disk, _ = added[mid]
            m: dict[str, Any] = {"id": f"m{mid}", "capacity": cap, "attributes": {"disk": disk}}
            if not state0[mid]:
                m["down"] = True
            machines.append(m)
            events.extend((t, mid, a) for t, a in changes[mid])
        # Stable by time: a machine's own changes are in order (a join and a leave at one
        # instant stay in the order they happen).
        events.sort(key=lambda e: e[0])
        timeline = [{"at": round(t, 6), "action": a, "machines": f"m{mid}"}
                    for t, mid, a in events]
        for mid in sorted(set(ids) - set(chosen)):
            log.filter(added[mid][3], "machine not in the sample")

        prov = Provenance(
            real=["machines with cpu cores, normalized memory and disk; time of each soft/hard "
                  "error (server_event.csv)"],
            assumed=[
                f"an error makes the machine leave; it rejoins {opts.recovery:g} s after the "
                "last error it reported (the trace has no recovery events); an error while "
                "down extends the downtime",
                "tasks on a leaving machine are lost and re-run (pessimistic: the trace "
                "documentation says running work may continue, only new work is not placed)",
                "a machine that leaves inside the window rejoins even if that falls after it; "
                "times shifted by the window start, not scaled",
                f"{len(chosen)} of {len(ids)} machines"
                + (f" sampled (seed {common.seed}"
                   + (", machines with errors first)" if opts.prefer_events else ")")
                   if len(chosen) < len(ids) else ""),
            ])
        cluster = {"machines": machines, "capacity": timeline}
        stats = timeline_stats(machines, timeline)
        stats["errors"] = dict(n_err)
        stats["machines_in_trace"] = len(ids)
        return TracePart(cluster=cluster, provenance=prov, stats=stats)


def _sample(ids: list[int], n: int | None, seed: int, first: list[int]) -> list[int]:
    """``n`` of ``ids`` (sorted, seeded): those in ``first`` before the others."""
    if n is None or n >= len(ids):
        return ids
    rng = np.random.default_rng(seed)
    pref = sorted(first)
    rest = sorted(set(ids) - set(pref))
    if n <= len(pref):
        pick = [pref[i] for i in rng.choice(len(pref), size=n, replace=False)]
    else:
        pick = pref + [rest[i] for i in rng.choice(len(rest), size=n - len(pref), replace=False)]
    return sorted(pick)
