"""Executing one task attempt: shared by LocalBackend's worker processes and Ray's workers.

Kept free of heavy imports: a worker process imports only this module and ``jobs.plan``
until a task names its function.
"""

from __future__ import annotations

import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from utilon.jobs.plan import TaskContext, resolve_call


def execute(call: str, job: str, stage: str, index: int, tasks: int, attempt: int,
            job_dir: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run one attempt; return its summary and measured seconds (exceptions propagate)."""
    fn = resolve_call(call)
    ctx = TaskContext(job, stage, index, tasks, attempt, Path(job_dir), args)
    t0 = time.perf_counter()
    out = fn(ctx)
    return {"seconds": time.perf_counter() - t0, "result": dict(out) if out else {}}


def worker_main(conn: Connection) -> None:
    """A LocalBackend worker: run attempts sent over ``conn`` until told to stop (None)."""
    import numpy  # noqa: F401  # the clock starts

    from utilon.jobs import builtin, kinds  # noqa: F401  # preload what most tasks import, before
    conn.send(("ready",))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if msg is None:
            return
        attempt_id, payload = msg
        try:
            try:
                conn.send(("done", attempt_id, execute(**payload)))
            except KeyboardInterrupt:
                return
            except (BrokenPipeError, ConnectionResetError):
                raise  # the pipe, not the task
            except BaseException as e:  # the task failed, or its result does not pickle
                last = traceback.format_exc(limit=-1).strip().splitlines()
                conn.send(("error", attempt_id, f"{type(e).__name__}: {e}", last[-3:]))
        except (BrokenPipeError, ConnectionResetError):
            return  # the scheduler is gone (killed): an orphaned worker just ends
