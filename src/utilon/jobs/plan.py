"""What a real job is made of: a plan of stages whose tasks call Python functions.

A *job kind* (word count, grep, sort, pi, n-body, or any importable callable) turns its
parameters into a ``JobPlan``: the stages the scheduler sees (task counts, a prior estimate of
each task's duration, dependencies), the function each task calls, how to prepare the job's
input before the run, and how to verify its output after it.

Task functions run in worker processes (LocalBackend) or on Ray workers (RayBackend), so a
call is named by its import path (``"package.module:function"``) and its arguments are plain
JSON-able data.  Every task receives a ``TaskContext`` and communicates only through files in
its job directory; outputs are written atomically, so a task that is killed and re-run (a
preemption, a lost node) leaves no half-written file behind.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TaskFunction = Callable[["TaskContext"], Mapping[str, Any] | None]


@dataclass(frozen=True)
class TaskContext:
    """Everything a task function may rely on."""

    job: str
    """The job's id."""
    stage: str
    """The stage's name."""
    index: int
    """The task's index within its stage, 0-based."""
    tasks: int
    """The number of tasks in the stage."""
    attempt: int
    """1 for the task's first attempt, 2 after one re-run, ..."""
    job_dir: Path
    """The job's directory: ``input/``, ``shuffle/`` and ``output/`` live under it."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """The stage's arguments (``StagePlan.args``)."""

    def path(self, *parts: str) -> Path:
        """A path under the job's directory."""
        return self.job_dir.joinpath(*parts)


@dataclass(frozen=True)
class Verification:
    """Result of checking a job's output; ``ok`` is None when the kind cannot verify."""

    ok: bool | None
    detail: str


@dataclass(frozen=True)
class StagePlan:
    """One stage of a real job: what the scheduler sees of it, and what its tasks call."""

    name: str
    """The stage's name, unique within the job."""
    kind: str
    """``map``, ``reduce`` or ``task``."""
    tasks: int
    """How many tasks the stage has."""
    call: str
    """The task function, ``"package.module:function"``; it receives a ``TaskContext``."""
    estimate: float
    """Prior expected seconds per task (policies start from it)."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """JSON-able arguments, passed to every task as ``TaskContext.args``."""
    after: tuple[str, ...] | None = None
    """The stages this one waits for; ``None``: a reduce waits for every map, other kinds
    for none."""
    demand: Mapping[str, float] | None = None
    """Declared demand of every task; ``None``: the scenario's default demand."""
    gang: bool = False
    """Start all the stage's tasks together."""
    colocate_speedup: float = 1.0
    """alsched's NBODY factor: how much faster the stage runs when all its tasks share a
    machine."""


@dataclass(frozen=True)
class JobPlan:
    """What a job kind makes of a job's parameters: its stages, and how to prepare its input
    and verify its output."""

    kind: str
    """The job kind's name."""
    stages: tuple[StagePlan, ...]
    """The stages, in order."""
    prepare: Callable[[Path], None] | None = None
    """Writes the job's input into its job directory, before the run's clock starts."""
    verify: Callable[[Path], Verification] | None = None
    """Checks the output in the job directory after the job finished."""
    notes: tuple[str, ...] = ()
    """How the priors were derived, and what data is generated."""


def resolve_call(path: str) -> TaskFunction:
    """Import ``"package.module:function"``; raise ValueError with a clear message if absent."""
    mod_name, sep, attr = path.partition(":")
    if not sep or not mod_name or not attr:
        raise ValueError(f"call {path!r} is not of the form 'package.module:function'")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ValueError(f"call {path!r}: cannot import module {mod_name!r} ({e})") from None
    fn: Any = mod
    for part in attr.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise ValueError(f"call {path!r}: module {mod_name!r} has no {attr!r}")
    if not callable(fn):
        raise ValueError(f"call {path!r} does not name a function")
    return fn


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write ``path`` so that readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
