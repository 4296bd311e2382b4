"""Per-tenant quotas and limits: what one tenant may ask of a shared service.

A tenant's ``limits`` (the tenants file: a top-level ``limits:`` for every tenant, and a
tenant's own ``limits:`` over it) bound what it may submit and hold:

* per request and per job, checked before anything is built (``check_payload``,
  ``check_declared``) or right after the job is built (``check_job``): the body's size (the
  API's middleware, 413), every string's length, every number finite and in range, every
  demand > 0, tasks per stage and per job, the input's size;
* over its open jobs, checked as a submission is accepted (``Usage.admit``, 429 with its
  current use): how many jobs it has queued or running, how many tasks they have (what they
  hold of the server's memory: the scheduler keeps every task of an open job), and how many
  bytes of input they write into the state folder;
* while it runs: the slot resource its running tasks hold (``max_running_slots`` and
  ``max_running_share``), which the scheduler enforces (``service.capping``).

Every refusal is a ``RequestError`` naming the limit, its value and the tenant's use.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from utilon.limits import MAX_SECONDS, MAX_WEIGHT
from utilon.service.errors import RequestError

if TYPE_CHECKING:
    from utilon.model.job import Job

MB = 1_000_000
FIX = "see docs/service.md#quotas-and-limits (the tenants file's limits:)"
_UTILITY_VALUES = frozenset({"value", "late_value", "p", "slope", "mu"})
"""utility fields that are amounts of utility (bounded like weights), not times"""


class Limits(BaseModel):
    """One tenant's limits; every field has the default the table in docs/service.md lists."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_queued_jobs: int = Field(
        default=1000, ge=1, le=10**7,
        description="jobs accepted and not over (queued, preparing or running) at once")
    # the next two bound the server memory a tenant's open jobs hold: with max_queued_jobs,
    # at most ~180 MB at the costs benchmarks/bench_service.py measured (docs/service.md)
    max_queued_tasks: int = Field(
        default=800_000, ge=1, le=10**9,
        description="tasks of its open jobs together (the scheduler holds each in memory)")
    max_queued_stages: int = Field(
        default=10_000, ge=1, le=10**9,
        description="stages of its open jobs together (a stage costs the scheduler's memory "
        "what ~30 tasks do)")
    max_tasks_per_job: int = Field(default=20_000, ge=1, le=10**7,
                                   description="tasks of one job")
    max_tasks_per_stage: int = Field(default=10_000, ge=1, le=10**7,
                                     description="tasks of one stage")
    max_running_slots: float | None = Field(
        default=None, gt=0, le=1e9,
        description="slot resource its running tasks may hold at once (None: no limit)")
    max_running_share: float = Field(
        default=1.0, gt=0, le=1,
        description="share of the up capacity its running tasks may hold")
    max_input_mb: float = Field(
        default=1000.0, gt=0, le=1e9,
        description="MB (10**6 bytes) of input of one job: generated (generate_mb, records, "
        "bodies) or read (input files)")
    max_input_total_mb: float = Field(
        default=5000.0, gt=0, le=1e12,
        description="MB of generated input its open jobs hold in the state folder together")
    max_body_kb: int = Field(default=1024, ge=1, le=10**6,
                             description="KB (1024 bytes) of one request's body")
    max_string_chars: int = Field(default=4096, ge=1, le=10**7,
                                  description="characters of any one string of a job")

    def running_cap(self, capacity: float) -> float:
        """The slot resource its running tasks may hold on a cluster of ``capacity``."""
        share = self.max_running_share * capacity if self.max_running_share < 1 else math.inf
        own = self.max_running_slots if self.max_running_slots is not None else math.inf
        return min(share, own)

    @property
    def caps_running(self) -> bool:
        return self.max_running_slots is not None or self.max_running_share < 1


DEFAULT_LIMITS = Limits()


# -- one request ------------------------------------------------------------------------------
def _walk(data: Any, where: str = "") -> Iterator[tuple[str, str, Any]]:
    """(where, key, value) for every value in ``data`` and every mapping key, depth first;
    ``key`` is the mapping key the value sits under (a list's items inherit it).  Not
    recursive: a deeply nested document must not exhaust the stack."""
    stack: list[tuple[str, str, Any]] = [(where, "", data)]
    while stack:
        w, key, v = stack.pop()
        yield w, key, v
        if isinstance(v, Mapping):
            for k, x in v.items():
                stack.append((f"{w}.{k}" if w else str(k), str(k), x))
                yield (f"{w}.{k}" if w else str(k)), "", str(k)  # keys are strings too
        elif isinstance(v, list | tuple):
            for i, x in enumerate(v):
                stack.append((f"{w}[{i}]", key, x))


def check_payload(data: Mapping[str, Any], limits: Limits) -> None:
    """Refuse a job whose strings are too long, whose numbers are not finite or out of range,
    or that demands zero (or less) of a resource -- before it is parsed or built."""
    if _clean(data, limits):
        return
    for where, key, v in _walk(dict(data)):
        if isinstance(v, str):
            if len(v) > limits.max_string_chars:
                raise RequestError(
                    f"a string of {len(v)} characters; the limit max_string_chars is "
                    f"{limits.max_string_chars}", where=where or "(job)", fix=FIX)
        elif isinstance(v, bool) or v is None:
            continue
        elif isinstance(v, int | float):
            if isinstance(v, float) and not math.isfinite(v):
                raise RequestError(f"{v} is not a finite number", where=where, fix=FIX)
            if abs(v) > MAX_SECONDS:
                raise RequestError(f"{_number(v)} is out of range (at most {MAX_SECONDS:g} "
                                   "in size)", where=where, fix=FIX)
            if where.startswith("utility") and _is_value(where) and abs(v) > MAX_WEIGHT:
                raise RequestError(f"a utility of {_number(v)} is out of range (at most "
                                   f"{MAX_WEIGHT:g} in size)", where=where, fix=FIX)
        elif isinstance(v, Mapping) and key == "demand":
            for r, x in v.items():
                if isinstance(x, int | float) and not isinstance(x, bool) and not x > 0:
                    raise RequestError(
                        f"a demand of {_number(x)} {r}: every demand must be > 0",
                        where=f"{where}.{r}",
                        fix="leave out a resource a task does not use")


def _number(v: float) -> str:
    """``v`` for a message: JSON integers have no size limit, and ``:g`` of one past a float's
    range raises (a 500 before; issue 46's "no request makes a 5xx")."""
    if isinstance(v, float) or abs(v) < 10**15:
        return f"{v:g}"
    return f"a {'negative ' if v < 0 else ''}{len(str(abs(v)))}-digit integer"


def _clean(data: Mapping[str, Any], limits: Limits) -> bool:
    """True when ``check_payload`` finds nothing: one pass without the paths that only its
    messages need (every submission pays for this one).  Conservative: under ``utility`` any
    number past the bound of an amount of utility sends the job to the full check."""
    most = limits.max_string_chars
    stack: list[tuple[Any, str, bool]] = [(data, "", False)]
    while stack:
        v, key, utility = stack.pop()
        if isinstance(v, str):
            if len(v) > most:
                return False
        elif isinstance(v, bool) or v is None:
            continue
        elif isinstance(v, int | float):
            if (isinstance(v, float) and not math.isfinite(v)) or abs(v) > MAX_SECONDS or (
                    utility and abs(v) > MAX_WEIGHT):
                return False
        elif isinstance(v, Mapping):
            for k, x in v.items():
                if len(str(k)) > most:
                    return False
                if key == "demand" and isinstance(x, int | float) and not isinstance(
                        x, bool) and not x > 0:
                    return False
                top = v is data and str(k).startswith("utility")
                stack.append((x, str(k), utility or top))
        elif isinstance(v, list | tuple):
            stack.extend((x, key, utility) for x in v)
    return True


def _is_value(where: str) -> bool:
    """Under ``utility``: an amount of utility (a field named like one, or what a
    distribution of one draws from), or the value of a piecewise point -- not a time."""
    parts = where.split(".")[1:]
    if any(p.split("[", 1)[0] in _UTILITY_VALUES for p in parts):
        return True
    return bool(parts) and parts[-1].startswith("points[") and parts[-1].endswith("][1]")


def check_declared(data: Mapping[str, Any], limits: Limits) -> Held:
    """Refuse a job whose literal task counts pass the limits before it is built (building a
    job of 10**6 tasks costs seconds and ~100 MB); ``check_job`` checks the exact counts.
    Returns the fewest tasks and stages the built job can have (its literal counts; at least
    one of each), for ``Usage.room``."""
    counts: list[tuple[str, float]] = []
    fewest = 0
    stages = _dicts(data.get("stages"))
    for i, st in enumerate(stages):
        n = _most(st.get("tasks"))
        if isinstance(st.get("durations"), list):
            n = len(st["durations"])
        if isinstance(n, int | float) and not isinstance(n, bool):
            counts.append((f"stages[{i}].tasks", n))
            exact = n is st.get("tasks") or isinstance(st.get("durations"), list)
            if exact and n >= 1:  # (not the most a distribution may draw)
                fewest += int(n)
    run = data.get("run")
    if isinstance(run, Mapping):
        for k in ("maps", "reduces"):
            if isinstance(run.get(k), int | float):
                counts.append((f"run.{k}", run[k]))
        if isinstance(run.get("tasks"), int | float):
            steps = run.get("steps", 1)
            counts.append(("run.tasks", run["tasks"] * (steps if isinstance(
                steps, int | float) and not isinstance(steps, bool) else 1)))
        for i, st in enumerate(_dicts(run.get("stages"))):
            if isinstance(st.get("tasks"), int | float):
                counts.append((f"run.stages[{i}].tasks", st["tasks"]))
    for where, n in counts:
        if n > limits.max_tasks_per_stage:
            raise RequestError(f"{n:g} tasks in a stage; the limit max_tasks_per_stage is "
                               f"{limits.max_tasks_per_stage}", where=where, fix=FIX)
    total = sum(n for _, n in counts)
    if total > limits.max_tasks_per_job:
        raise RequestError(f"{total:g} tasks in the job; the limit max_tasks_per_job is "
                           f"{limits.max_tasks_per_job}", where="stages", fix=FIX)
    return Held(1, 0, max(fewest, 1), max(len(stages), 1))


def _most(tasks: Any) -> Any:
    """A stage's literal task count, or the most a distribution of it can draw when it says
    (a ``max`` clip, a constant, a choice); else None (the built job is checked)."""
    if not isinstance(tasks, Mapping):
        return tasks
    if isinstance(tasks.get("max"), int | float):
        return tasks["max"]
    if tasks.get("dist") == "constant":
        return tasks.get("value")
    values = tasks.get("values")
    if isinstance(values, list) and values and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return max(values)
    return None


def _dicts(x: Any) -> list[Mapping[str, Any]]:
    return [s for s in x if isinstance(s, Mapping)] if isinstance(x, list) else []


@dataclass(frozen=True)
class InputSize:
    """A job's input: ``total`` bytes it reads, ``written`` of them generated into its folder
    (what counts against the disk quota; an input read in place takes none)."""

    total: int = 0
    written: int = 0


def input_size(run: Any, base_dir: Path) -> InputSize:
    """The input of a ``run:`` block (``jobs.specs``): generated text, records or bodies, or
    the files it reads in place (relative paths against ``base_dir``, as ``jobs.kinds``)."""
    from utilon.jobs import textdata
    from utilon.jobs.specs import GrepRun, NBodyRun, SortRun, WordCountRun

    if isinstance(run, WordCountRun | GrepRun):
        if run.input is None:
            n = int(run.generate_mb * MB)
            return InputSize(n, n)
        path = Path(run.input).expanduser()
        path = (path if path.is_absolute() else base_dir / path).resolve()
        try:
            files = textdata.input_files(path)
        except (ValueError, OSError):
            return InputSize()  # building the job says what is wrong with it
        return InputSize(sum(f.stat().st_size for f in files), 0)
    if isinstance(run, SortRun):
        return InputSize(100 * run.records, 100 * run.records)
    if isinstance(run, NBodyRun):
        n = 7 * 8 * run.bodies  # positions, velocities and masses, float64
        return InputSize(n, n)
    return InputSize()


def check_input(size: InputSize, limits: Limits) -> None:
    if size.total > limits.max_input_mb * MB:
        raise RequestError(f"{size.total / MB:g} MB of input; the limit max_input_mb is "
                           f"{limits.max_input_mb:g}", where="run", fix=FIX)


def check_job(job: Job, limits: Limits, capacity: float, slot_resource: str) -> None:
    """The exact task counts of a built job, and that each gang stage fits in the slots the
    tenant may hold (else it could never start)."""
    total = 0
    for st in job.stages:
        n = len(st.tasks)
        total += n
        if n > limits.max_tasks_per_stage:
            raise RequestError(f"{n} tasks in stage {st.name!r}; the limit "
                               f"max_tasks_per_stage is {limits.max_tasks_per_stage}",
                               where="stages", fix=FIX)
        if st.gang and limits.caps_running:
            need = sum(t.demand[slot_resource] for t in st.tasks)
            cap = limits.running_cap(capacity)
            if need > cap + 1e-9:
                raise RequestError(
                    f"gang stage {st.name!r} needs {need:g} {slot_resource} at once; the "
                    f"tenant may hold {cap:g} (max_running_slots / max_running_share)",
                    where="stages", fix="fewer or smaller tasks in the gang stage")
    if total > limits.max_tasks_per_job:
        raise RequestError(f"{total} tasks in the job; the limit max_tasks_per_job is "
                           f"{limits.max_tasks_per_job}", where="stages", fix=FIX)


# -- what a tenant holds ----------------------------------------------------------------------
class Held(NamedTuple):
    """What one tenant's open jobs hold (or one job adds)."""

    jobs: int = 0
    input_bytes: int = 0
    tasks: int = 0
    stages: int = 0

    def plus(self, o: Held, sign: int = 1) -> Held:
        return Held(*(a + sign * b for a, b in zip(self, o, strict=True)))


NOTHING = Held()
ONE_JOB = Held(1, 0, 1, 1)
"""the least any job adds: itself, one stage of one task"""


class Usage:
    """Each tenant's open jobs, the input bytes they hold (reserved at submission, the
    measured size once prepared), their tasks and their stages, kept in memory: counted
    under one lock, so concurrent submissions of one tenant cannot pass its limits
    together."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, tuple[str, Held]] = {}  # key -> (tenant, what it holds)
        self._held: dict[str, Held] = {}

    def room(self, tenant: str, limits: Limits, adds: Held = ONE_JOB) -> None:
        """Refuse (429) at once a tenant with no room for one more job that adds at least
        ``adds`` (what it says before it is built: ``check_declared``): checked again by
        ``admit``, but before the job is built, so that a flood past the quota costs the
        server next to nothing."""
        with self._lock:
            self._room(tenant, limits, adds)

    def _room(self, tenant: str, limits: Limits, adds: Held) -> None:
        held = self._held.get(tenant, NOTHING)
        if held.jobs >= limits.max_queued_jobs:
            raise RequestError(
                f"tenant {tenant!r} has {held.jobs} jobs queued or running; the limit "
                f"max_queued_jobs is {limits.max_queued_jobs}", status=429,
                where="max_queued_jobs", fix="wait for some to finish, or cancel some")
        for what, has, more, limit in (
                ("tasks", held.tasks, adds.tasks, limits.max_queued_tasks),
                ("stages", held.stages, adds.stages, limits.max_queued_stages)):
            if has + more > limit:
                raise RequestError(
                    f"tenant {tenant!r} has {has} {what} in jobs queued or running and this "
                    f"job adds {more}; the limit max_queued_{what} is {limit}", status=429,
                    where=f"max_queued_{what}",
                    fix="wait for some jobs to finish, cancel some, or send smaller ones")

    def admit(self, tenant: str, key: str, adds: Held, limits: Limits) -> None:
        """Count ``key`` (``adds``: one job, its input bytes, tasks and stages) against
        ``tenant``, or refuse (429) naming the limit and the use."""
        with self._lock:
            self._room(tenant, limits, adds)
            held = self._held.get(tenant, NOTHING).input_bytes
            nbytes = adds.input_bytes
            if nbytes and held + nbytes > limits.max_input_total_mb * MB:
                raise RequestError(
                    f"tenant {tenant!r} holds {held / MB:g} MB of input and this job adds "
                    f"{nbytes / MB:g} MB; the limit max_input_total_mb is "
                    f"{limits.max_input_total_mb:g}", status=429, where="max_input_total_mb",
                    fix="wait for some jobs to finish, or cancel some")
            self._add(tenant, key, adds)

    def hold(self, tenant: str, key: str, adds: Held) -> None:
        """Count ``key`` whatever the limits (a job recovered after a restart)."""
        with self._lock:
            self._add(tenant, key, adds)

    def _add(self, tenant: str, key: str, adds: Held) -> None:
        if key in self._jobs:
            return
        self._jobs[key] = (tenant, adds)
        self._held[tenant] = self._held.get(tenant, NOTHING).plus(adds)

    def resize(self, key: str, nbytes: int) -> None:
        """The measured size of ``key``'s input, in place of what was reserved."""
        with self._lock:
            held = self._jobs.get(key)
            if held is not None:
                tenant, before = held
                after = before._replace(input_bytes=nbytes)
                self._jobs[key] = (tenant, after)
                self._held[tenant] = self._held[tenant].plus(after).plus(before, -1)

    def release(self, key: str) -> None:
        with self._lock:
            held = self._jobs.pop(key, None)
            if held is not None:
                tenant, adds = held
                self._held[tenant] = self._held[tenant].plus(adds, -1)

    def of(self, tenant: str) -> Held:
        """What ``tenant``'s open jobs hold."""
        with self._lock:
            return self._held.get(tenant, NOTHING)
