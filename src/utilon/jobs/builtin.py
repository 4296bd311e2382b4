"""Small generic task functions for tests and benchmarks (``kind: callable`` jobs).

Real: they really sleep, burn CPU, fail or write files.  Call them as
``utilon.jobs.builtin:sleep`` and so on.
"""

from __future__ import annotations

import time
from typing import Any

from utilon.jobs.plan import TaskContext, atomic_write


def _seconds(ctx: TaskContext) -> float:
    try:
        return float(ctx.args["seconds"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{ctx.stage}: args.seconds must be a number of seconds, got "
                         f"{ctx.args.get('seconds')!r}") from None


def sleep(ctx: TaskContext) -> dict[str, Any]:
    """Sleep ``args.seconds``: a task that holds its slot without using the CPU."""
    seconds = _seconds(ctx)
    time.sleep(seconds)
    return {"slept": seconds}


def spin(ctx: TaskContext) -> dict[str, Any]:
    """Keep one core busy for ``args.seconds`` of wall time."""
    end = time.perf_counter() + _seconds(ctx)
    loops = 0
    while time.perf_counter() < end:
        loops += 1
    return {"loops": loops}


def fail_first(ctx: TaskContext) -> dict[str, Any]:
    """Fail on the first attempt and succeed after: exercises re-queueing."""
    if ctx.attempt == 1:
        raise RuntimeError(f"{ctx.stage}[{ctx.index}] fails on attempt 1 on purpose")
    return {"attempt": ctx.attempt}


def touch(ctx: TaskContext) -> dict[str, Any]:
    """Write ``output/{stage}-{index}.txt`` holding the attempt number."""
    atomic_write(ctx.path("output", f"{ctx.stage}-{ctx.index}.txt"), f"{ctx.attempt}\n")
    return {"attempt": ctx.attempt}
