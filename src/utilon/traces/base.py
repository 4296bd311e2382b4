"""What every trace importer shares: windows, skip accounting, provenance, job classes.

An importer reads one real trace file *as a stream* (line by line, never the whole file into
memory at once unless the format forces it) and turns it into a part of a scenario: jobs
(``produces = "workload"``) or a cluster with a capacity timeline (``produces = "cluster"``).
``utilon.traces.api`` puts the parts together into a scenario document.

Rows fall into three groups, all counted in the :class:`SkipLog`:

* used;
* *filtered*: well-formed but not wanted (outside the time window, a status we do not replay,
  beyond ``--max-jobs``), counted per reason;
* *malformed*: wrong field count, a number that does not parse, a negative size.  They are
  skipped and reported with the line of their first example.  A file whose malformed share is
  above ``max_bad`` (default 1%), or that has no usable row at all, is not that format: the
  import fails with one line naming the file, the first bad line and the reason.

Everything an importer derives rather than reads is written down in a :class:`Provenance`
(``real``: what comes from the data; ``assumed``: modelling choices and their parameters), which
lands in the scenario's ``metadata`` and from there in every run's ``provenance.json``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import math
import zlib
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from utilon.errors import UtilonError
from utilon.limits import MAX_SECONDS, finite_seconds

DEFAULT_LOAD = 0.7
"""Offered load a proposed cluster is sized for when neither --machines nor --load is given."""


class TraceError(UtilonError):
    """A trace file is missing, unreadable, or not in the format its importer expects."""


# -- reading ---------------------------------------------------------------------------------
MAX_LINE = 4 << 20
"""Longest line a trace may have (4 Mi characters): real trace lines are under a kilobyte."""


def open_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, line without newline)`` of a text file, gzip-compressed or not."""
    if not path.exists():
        raise TraceError("file not found", where=str(path), fix="check the path")
    if path.is_dir():
        raise TraceError("is a directory, not a trace file", where=str(path))
    try:
        with path.open("rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
        raw: Any = gzip.open(path, "rb") if gz else path.open("rb")  # noqa: SIM115
        with raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as text:
            n = 0
            while True:
                # bounded reads: one endless line must not take all memory
                line = text.readline(MAX_LINE + 1)
                if not line:
                    return
                n += 1
                if len(line) > MAX_LINE:
                    raise TraceError(f"line {n} is longer than {MAX_LINE:,} characters",
                                     where=f"{path}:{n}",
                                     fix="check that this is a text trace of this kind")
                yield n, line.rstrip("\r\n")
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise TraceError(f"not a text trace ({type(e).__name__}: {e})", where=str(path),
                         fix="pass the uncompressed or .gz text file") from None


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# -- windows ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Window:
    """Which part of a trace to replay, in the trace's own seconds.

    ``start``/``duration`` cut a slice; times are shifted so the slice starts at 0 and divided
    by ``arrival_scale`` (2 = twice the arrival rate).  ``max_jobs`` keeps the first jobs (by
    submit time) of the slice.  Capacity timelines are shifted but not scaled by default.
    """

    start: float = 0.0
    duration: float | None = None
    max_jobs: int | None = None
    arrival_scale: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.start) and self.start >= 0):
            raise TraceError("--start must be >= 0 seconds", where="command line")
        if self.duration is not None and not (self.duration > 0):
            raise TraceError("--duration must be > 0 seconds", where="command line")
        if self.max_jobs is not None and self.max_jobs < 1:
            raise TraceError("--max-jobs must be >= 1", where="command line")
        if not (math.isfinite(self.arrival_scale) and self.arrival_scale > 0):
            raise TraceError("--arrival-scale must be > 0", where="command line",
                             fix="2 doubles the arrival rate, 0.5 halves it")

    @property
    def end(self) -> float:
        return math.inf if self.duration is None else self.start + self.duration

    def contains(self, t: float) -> bool:
        return self.start <= t < self.end

    def job_time(self, t: float) -> float:
        """A submit time in the trace -> seconds in the scenario."""
        return round((t - self.start) / self.arrival_scale, 6)

    def describe(self) -> str:
        dur = "to the end" if self.duration is None else f"for {self.duration:g} s"
        s = f"trace seconds from {self.start:g} {dur}"
        if self.max_jobs is not None:
            s += f", first {self.max_jobs} jobs"
        if self.arrival_scale != 1:
            s += f", arrival rate x{self.arrival_scale:g}"
        return s


# -- skip accounting -------------------------------------------------------------------------
@dataclass
class SkipLog:
    """Counts of rows used, filtered and malformed, with the first line of each reason."""

    path: Path
    max_bad: float = 0.01
    rows: int = 0
    used: int = 0
    filtered: Counter[str] = field(default_factory=Counter)
    malformed: Counter[str] = field(default_factory=Counter)
    first_line: dict[str, int] = field(default_factory=dict)

    def row(self) -> None:
        self.rows += 1

    def use(self) -> None:
        self.used += 1

    def filter(self, line: int, reason: str) -> None:
        self.filtered[reason] += 1
        self.first_line.setdefault(reason, line)

    def bad(self, line: int, reason: str) -> None:
        self.malformed[reason] += 1
        self.first_line.setdefault(reason, line)

    def finish(self, what: str = "rows") -> None:
        """Fail if the file does not look like this format at all."""
        n_bad = sum(self.malformed.values())
        if self.rows == 0:
            raise TraceError(f"no {what} in the file", where=str(self.path),
                             fix="check that this is the right file for this kind")
        only_bad = self.used == 0 and not self.filtered
        if n_bad and (n_bad > self.max_bad * self.rows or only_bad):
            reason, _ = self.malformed.most_common(1)[0]
            raise TraceError(
                f"{n_bad} of {self.rows} {what} are malformed ({reason})",
                where=f"{self.path}:{self.first_line[reason]}",
                fix="check the file is of this kind (see `utilon trace kinds`), "
                    "or raise --max-bad to skip them")
        if self.used == 0:
            reasons = ", ".join(f"{r}: {c}" for r, c in self.filtered.most_common(3))
            raise TraceError(f"none of the {self.rows} {what} is usable ({reasons})",
                             where=str(self.path), fix="widen --start/--duration")

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "used": self.used,
            "filtered": {r: {"count": c, "first_line": self.first_line[r]}
                         for r, c in sorted(self.filtered.items())},
            "malformed": {r: {"count": c, "first_line": self.first_line[r]}
                          for r, c in sorted(self.malformed.items())},
        }

    def lines(self) -> list[str]:
        out = [f"{self.used} of {self.rows} rows used"]
        for kind, counter in (("filtered", self.filtered), ("malformed", self.malformed)):
            for r, c in counter.most_common():
                out.append(f"{kind}: {c} x {r} (first at line {self.first_line[r]})")
        return out


# -- provenance ------------------------------------------------------------------------------
@dataclass
class Provenance:
    """What comes from the data and what the importer assumed (each with its parameters)."""

    real: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)


# -- job classes and utilities ---------------------------------------------------------------
class ClassRule(BaseModel):
    """Seeded assignment of completion-time classes and utilities to imported jobs.

    A job's size is its work in slot-seconds (sum of task durations x demand in slots).  Jobs
    are *small* below ``small_work``, *large* above ``large_work``, *medium* between.  Each
    size draws its class from its own shares (interactive queries tend to be small and
    critical; large batch jobs tolerate delay).  Priority p ~ U[1, 5].  Utilities follow CORA
    (issue 6): critical and sensitive jobs get a sigmoid ``p / (1 + exp(mu (t - d)))`` with
    ``d = submit + slack x standalone runtime`` and ``mu = decay / standalone`` (decay
    U[4, 6] for critical, U[0.01, 1] for sensitive, so the fall takes about one standalone
    runtime whatever the job's length); insensitive jobs a constant p.  ``utility: deadline``
    gives every job a step: p until d, 0 after.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    slack: float = 2.0
    small_work: float = 300.0
    large_work: float = 30_000.0
    shares_small: tuple[float, float, float] = (0.5, 0.4, 0.1)
    shares_medium: tuple[float, float, float] = (0.2, 0.6, 0.2)
    shares_large: tuple[float, float, float] = (0.05, 0.35, 0.6)
    utility: Literal["cora", "deadline"] = "cora"

    CLASSES: ClassVar[tuple[str, str, str]] = ("critical", "sensitive", "insensitive")

    def assign(self, work: float, standalone: float, rng: np.random.Generator
               ) -> dict[str, Any]:
        """``class``, ``priority`` and ``utility`` fields of a scenario job."""
        size = 0 if work < self.small_work else 2 if work > self.large_work else 1
        u = rng.random(3)  # always three draws: the stream does not depend on the class
        cls = self.CLASSES[int(np.searchsorted(self._cumulative[size], u[0], side="right"))]
        p = round(1.0 + 4.0 * float(u[1]), 3)
        deadline = f"{self.slack:g}x"
        utility: dict[str, Any]
        if self.utility == "deadline":
            utility = {"kind": "deadline", "deadline": deadline, "value": p}
        elif cls == "insensitive":
            utility = {"kind": "constant", "value": p}
        else:
            lo, hi = (4.0, 6.0) if cls == "critical" else (0.01, 1.0)
            decay = lo + (hi - lo) * float(u[2])
            mu = decay / max(standalone, 1e-9)
            utility = {"kind": "sigmoid", "deadline": deadline, "p": p,
                       "mu": float(f"{mu:.6g}")}
        return {"class": cls, "priority": math.ceil(p), "utility": utility}

    @cached_property
    def _cumulative(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        def cum(shares: tuple[float, float, float]) -> np.ndarray:
            return np.cumsum(shares) / sum(shares)
        return cum(self.shares_small), cum(self.shares_medium), cum(self.shares_large)

    def describe(self) -> str:
        return (f"classes by size (work < {self.small_work:g} slot-s small, > "
                f"{self.large_work:g} large) with shares critical/sensitive/insensitive "
                f"small {self.shares_small}, medium {self.shares_medium}, large "
                f"{self.shares_large}; priority p ~ U[1,5]; utility {self.utility}: deadline "
                f"d = submit + {self.slack:g} x standalone runtime"
                + ("; critical sigmoid mu = U[4,6]/standalone, sensitive U[0.01,1]/standalone, "
                   "insensitive constant p" if self.utility == "cora" else "; step p -> 0 at d"))


def standalone(stages: list[dict[str, Any]], slots: float) -> float:
    """A job's runtime alone on ``slots`` one-slot workers (the scenario builder's formula,
    assuming one slot per task): per stage max(longest task, work / min(slots, tasks)),
    chained along ``after`` (default: reduce after map)."""
    finish: dict[str, float] = {}
    for st in stages:
        if st.get("durations"):
            durs = st["durations"]
            longest, total, n = max(durs), sum(durs), len(durs)
        else:
            longest, n = float(st["duration"]), int(st["tasks"])
            total = longest * n
        t = max(longest, total / max(1.0, min(slots, n)))
        after = st.get("after")
        if after is None:
            after = [o["name"] for o in stages[:stages.index(st)] if o["name"] == "map"] \
                if st["name"] == "reduce" else []
        finish[st["name"]] = max((finish[a] for a in after), default=0.0) + t
    return max(finish.values())


def job_limit_problem(stages: list[dict[str, Any]], runtime: float, slack: float
                      ) -> str | None:
    """Why a job derived from one row cannot be replayed, or ``None``: a task that would last
    beyond ``MAX_SECONDS``, or a deadline (``slack`` x standalone ``runtime``) that
    would fall more than ``MAX_SECONDS`` after its submit time.  Importers count such a row as
    malformed, so one corrupt line never makes a scenario that fails to load."""
    for st in stages:
        durs = st.get("durations") or [st.get("duration", 0.0)]
        if not all(finite_seconds(float(d)) for d in durs):
            return f"a {st.get('name', 'task')} task would last beyond {MAX_SECONDS:g} s"
    if not finite_seconds(slack * runtime):
        return (f"its deadline ({slack:g} x standalone runtime {runtime:.3g} s) would be "
                f"beyond {MAX_SECONDS:g} s after submit")
    return None


def work_of(stages: list[dict[str, Any]]) -> float:
    """Slot-seconds of work (one slot per task)."""
    return sum(sum(st["durations"]) if st.get("durations") else
               float(st["duration"]) * int(st["tasks"]) for st in stages)


def timeline_stats(machines: list[dict[str, Any]], timeline: list[dict[str, Any]]
                   ) -> dict[str, Any]:
    """Machines, changes by action, and the range of machines up and capacity over time."""
    base = {m["id"]: m["capacity"] for m in machines}
    up = {m["id"] for m in machines if not m.get("down")}
    scale = dict.fromkeys(base, 1.0)
    names = sorted({r for c in base.values() for r in c})
    total = {r: sum(base[m].get(r, 0.0) for m in up) for r in names}  # kept up to date

    def add(m: str, sign: float) -> None:
        for r in names:
            total[r] += sign * base[m].get(r, 0.0) * scale[m]

    n0 = lo_n = hi_n = len(up)
    lo_c, hi_c = dict(total), dict(total)
    by_action: Counter[str] = Counter()
    i = 0
    while i < len(timeline):
        t = timeline[i]["at"]
        while i < len(timeline) and timeline[i]["at"] == t:  # one instant at a time
            e = timeline[i]
            ms = [e["machines"]] if isinstance(e["machines"], str) else e["machines"]
            for m in ms:
                act = e["action"]
                by_action[act] += 1
                if act == "join" and m not in up:
                    up.add(m)
                    add(m, 1.0)
                elif act == "leave" and m in up:
                    up.discard(m)
                    add(m, -1.0)
                elif act == "scale":
                    if m in up:
                        add(m, -1.0)
                    scale[m] = float(e.get("factor", 1.0))
                    if m in up:
                        add(m, 1.0)
            i += 1
        lo_n, hi_n = min(lo_n, len(up)), max(hi_n, len(up))
        for r in names:
            lo_c[r], hi_c[r] = min(lo_c[r], total[r]), max(hi_c[r], total[r])
    return {
        "machines": len(machines),
        "machines_up_at_start": n0,
        "events": dict(sorted(by_action.items())),
        "machines_up": {"min": lo_n, "max": hi_n},
        "capacity": {r: {"min": round(lo_c[r], 3), "max": round(hi_c[r], 3)} for r in names},
        "last_event_s": timeline[-1]["at"] if timeline else 0.0,
    }


# -- importers -------------------------------------------------------------------------------
class ImporterOptions(BaseModel):
    """Importer-specific options (``--set key=value`` on the command line)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class TracePart:
    """What an importer read: jobs (scenario ``workload.jobs`` entries) and/or a cluster
    (scenario ``cluster`` mapping), with its provenance and statistics."""

    jobs: list[dict[str, Any]] | None = None
    """Jobs as a scenario's ``workload.jobs`` entries (a workload importer)."""
    cluster: dict[str, Any] | None = None
    """A scenario's ``cluster`` mapping: proposed by a workload importer, or what a cluster
    importer read."""
    provenance: Provenance = field(default_factory=Provenance)
    """What came from the data and what was assumed."""
    stats: dict[str, Any] = field(default_factory=dict)
    """Figures about the import (into ``ImportResult.stats``; ``utilon trace import`` prints
    them)."""


@dataclass(frozen=True)
class Common:
    """Options every importer understands."""

    window: Window = field(default_factory=Window)
    seed: int = 0
    machines: int | None = None
    """Cluster size: machines to build (workload importers) or to sample (cluster importers)."""
    classes: ClassRule = field(default_factory=ClassRule)
    max_bad: float = 0.01


class Importer(ABC):
    """One trace format.  Subclasses set the class attributes and implement ``read``."""

    kind: ClassVar[str]
    """The name it is registered under (``utilon trace import KIND``)."""
    summary: ClassVar[str]
    """One line for ``utilon trace kinds``."""
    produces: ClassVar[Literal["workload", "cluster"]]
    """``workload``: ``read`` returns jobs (and may propose a cluster); ``cluster``: machines
    and a capacity timeline."""
    Options: ClassVar[type[ImporterOptions]] = ImporterOptions
    """The model of its own options (``--set key=value``); none by default."""
    sized_by_load: ClassVar[bool] = False
    """The proposed cluster is an assumption (the trace does not give it): without
    ``--machines`` it is sized so that the offered load is ``DEFAULT_LOAD``."""

    @abstractmethod
    def read(self, path: Path, common: Common, options: Any, log: SkipLog) -> TracePart:
        """Stream ``path`` into jobs or a cluster, counting every row in ``log``."""

    @classmethod
    def parse_options(cls, values: dict[str, Any]) -> ImporterOptions:
        try:
            return cls.Options.model_validate(values)
        except ValidationError as exc:
            e = exc.errors()[0]
            name = ".".join(str(p) for p in e["loc"]) or "(options)"
            msg = "unknown option" if e["type"] == "extra_forbidden" else e["msg"]
            valid = ", ".join(cls.Options.model_fields) or "(none)"
            raise TraceError(f"{msg}", where=f"--set {name}",
                             fix=f"options of {cls.kind}: {valid}") from None


_REGISTRY: dict[str, type[Importer]] = {}
PLUGIN_GROUP = "utilon.traces"


def register(cls: type[Importer]) -> type[Importer]:
    """Class decorator: make the importer available under ``cls.kind`` in this process."""
    _REGISTRY[cls.kind] = cls
    return cls


def parse_size(text: str | float | int) -> float:
    """``"128MiB"``, ``"1.5GB"``, ``"64k"`` or a plain number -> bytes."""
    if isinstance(text, int | float):
        return float(text)
    s = text.strip().replace(" ", "")
    units = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 2**10, "m": 1e6, "mb": 1e6,
             "mib": 2**20, "g": 1e9, "gb": 1e9, "gib": 2**30, "t": 1e12, "tb": 1e12,
             "tib": 2**40}
    i = len(s)
    while i and not (s[i - 1].isdigit() or s[i - 1] == "."):
        i -= 1
    try:
        return float(s[:i]) * units[s[i:].lower()]
    except (ValueError, KeyError):
        raise ValueError(f"not a size: {text!r} (write e.g. 128MiB, 1GB, 65536)") from None


Size = Annotated[float, BeforeValidator(parse_size), Field(gt=0)]
"""A byte count option: a number or a string like ``128MiB``."""
