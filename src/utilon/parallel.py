"""Independent simulations in parallel: local processes by default, a Ray cluster on request.

A simulation is a pure function of its workload, policy and parameters (the simulator has no
global state and draws every random number from the scenario's seed), so runs that share a
workload can go to different processes and still write what a serial run writes.  ``run_all``
sends the shared input (the workload) once per worker, not once per run, keeps the results in
the order of the items whatever order they finish in, and forwards each run's progress
(``done``, ``total``) to the caller's callback from the main thread, ending with ``(1, 1)``
when the run has returned.

* ``jobs=1`` runs in this process, one after another (no pickling, no pool);
* ``jobs=N`` (default: the machine's cores, at most one per item) uses N spawned processes;
* ``ray_address`` sends each run to a Ray cluster as one task (``"local"`` starts one here).
  Every node must have utilon installed, at the version of the caller.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, TypeVar

from utilon.errors import UtilonError

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

Progress = Callable[[int, int], None]
#: ``fn(shared, item, progress)``: a module-level function (it is pickled by reference)
Work = Callable[[S, T, Progress | None], R]
OnProgress = Callable[[int, int, int], None]  # (item index, done, total)

_REPORT_EVERY = 0.2  # s between two progress messages of one run
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def default_jobs(n_items: int) -> int:
    return max(1, min(n_items, os.cpu_count() or 1))


def check_jobs(jobs: int | None, where: str = "--jobs") -> int | None:
    if jobs is not None and jobs < 1:
        raise UtilonError(f"--jobs must be at least 1, got {jobs}", where=where,
                          fix="give a number of processes, e.g. --jobs 2, or omit it")
    return jobs


def run_all(fn: Work[S, T, R], shared: S, items: Sequence[T], *, jobs: int | None = None,
            ray_address: str | None = None, on_progress: OnProgress | None = None) -> list[R]:
    """``[fn(shared, item, progress) for item in items]``, in parallel, in the items' order."""
    if not items:
        return []
    if ray_address is not None:
        with _Ray(ray_address) as ray:
            return ray.map(fn, shared, items, on_progress)
    n = default_jobs(len(items)) if jobs is None else min(check_jobs(jobs) or 1, len(items))
    if n == 1:
        return _serial(fn, shared, items, on_progress)
    with _Processes(n, shared) as pool:
        return pool.map(fn, items, on_progress)


def _serial(fn: Work[S, T, R], shared: S, items: Sequence[T],
            on_progress: OnProgress | None) -> list[R]:
    from threadpoolctl import threadpool_limits

    results = []
    # one thread for the numeric libraries, as in the pool's workers: their small solves
    # (RDS's ARIMA fits) ran about 10x slower with a thread per core on a busy machine
    with threadpool_limits(limits=1):
        for i, item in enumerate(items):
            report = None if on_progress is None else _bind(on_progress, i)
            results.append(fn(shared, item, report))
            if on_progress is not None:
                on_progress(i, 1, 1)
    return results


def _bind(on_progress: OnProgress, index: int) -> Progress:
    return lambda done, total: on_progress(index, done, total)


# -------------------------------------------------------------------------- local processes
_shared: Any = None
_messages: Any = None


def _init_worker(shared: Any, messages: Any) -> None:
    global _shared, _messages
    _shared, _messages = shared, messages


class _Reporter:
    """Progress of one run inside a worker, sent at most every ``_REPORT_EVERY`` seconds."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last >= _REPORT_EVERY or done >= total:
            self.last = now
            _messages.put((self.index, done, total))


def _call_in_worker(fn: Work[Any, Any, Any], index: int, item: Any, report: bool) -> Any:
    return fn(_shared, item, _Reporter(index) if report else None)


class _Processes:
    """A pool of spawned worker processes that hold ``shared`` from their start (it is sent
    once per worker, not once per run).  Spawned, not forked: the caller may hold threads (a
    progress bar's), which fork would copy in whatever state they are in."""

    def __init__(self, n: int, shared: Any) -> None:
        ctx = mp.get_context("spawn")
        # one thread per worker for the numeric libraries: n workers are already n cores
        self._env = {k: os.environ.get(k) for k in _THREAD_VARS}
        os.environ.update({k: "1" for k, v in self._env.items() if v is None})
        self._manager = ctx.Manager()
        self._messages = self._manager.Queue()
        self._pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx,
                                         initializer=_init_worker,
                                         initargs=(shared, self._messages))

    def __enter__(self) -> _Processes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._manager.shutdown()
        for k, v in self._env.items():
            if v is None:
                os.environ.pop(k, None)

    def map(self, fn: Work[Any, T, R], items: Sequence[T],
            on_progress: OnProgress | None) -> list[R]:
        futures: dict[Future[R], int] = {
            self._pool.submit(_call_in_worker, fn, i, item, on_progress is not None): i
            for i, item in enumerate(items)}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=_REPORT_EVERY, return_when=FIRST_COMPLETED)
            self._drain(on_progress)
            for f in finished:
                error = f.exception()
                if error is not None:
                    for g in pending:
                        g.cancel()
                    raise error
                if on_progress is not None:
                    on_progress(futures[f], 1, 1)
        return [f.result() for f in futures]

    def _drain(self, on_progress: OnProgress | None) -> None:
        while True:
            try:
                index, done, total = self._messages.get_nowait()
            except queue.Empty:
                return
            if on_progress is not None:
                on_progress(index, done, total)


# --------------------------------------------------------------------------------------- Ray
def _ray_module() -> Any:
    try:
        import ray
    except ImportError:
        raise UtilonError("Ray is not installed", where="--ray-address",
                          fix="pip install 'utilon[ray]', or omit --ray-address") from None
    return ray


def check_reachable(address: str, *, where: str, timeout: float = 5.0,
                    otherwise: str = "`--ray-address local`") -> None:
    """Fail in seconds on a ``host:port`` nobody listens at: ``ray.init`` would retry for
    minutes.  Other forms (``auto``, ``ray://``, ``local``) are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in host or not host:
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise UtilonError(f"cannot reach a Ray cluster at {address} ({e.strerror or e})",
                          where=where, fix="start one with `ray start --head` and pass the "
                          f"address it prints, or {otherwise}") from None


class _Ray:
    """A connection to a Ray cluster for the length of a ``with`` block (``"local"`` starts
    one here); runs each item as one Ray task.  Ray tasks report only when they end."""

    def __init__(self, address: str) -> None:
        self._ray = ray = _ray_module()
        self._started = False
        if ray.is_initialized():
            return
        check_reachable(address, where=f"--ray-address {address}")
        try:
            ray.init(address=None if address == "local" else address,
                     include_dashboard=False, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UtilonError(f"cannot connect to Ray: {first}", where=f"--ray-address {address}",
                              fix="start a cluster with `ray start --head` and pass its "
                                  "address, or `--ray-address local`") from None
        self._started = True

    def __enter__(self) -> _Ray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False

    def map(self, fn: Work[S, T, R], shared: S, items: Sequence[T],
            on_progress: OnProgress | None) -> list[R]:
        ray = self._ray
        remote = ray.remote(_ray_call)
        ref = ray.put(shared)
        refs = [remote.remote(fn, ref, item) for item in items]
        index = {r: i for i, r in enumerate(refs)}
        results: list[Any] = [None] * len(items)
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                results[index[r]] = ray.get(r)
                if on_progress is not None:
                    on_progress(index[r], 1, 1)
        return results


def _ray_call(fn: Work[S, T, R], shared: S, item: T) -> R:
    return fn(shared, item, None)  # progress is not streamed back from Ray


# ------------------------------------------------------------------------ many maps, one pool
def _with_shared(_: None, packed: tuple[Work[Any, T, R], Any, T],
                 progress: Progress | None) -> R:
    fn, shared, item = packed
    return fn(shared, item, progress)


class Fanout:
    """Where a reproduction's independent simulations run (``--jobs``, ``--ray-address``),
    kept for all its steps (one pool, or one Ray connection, started on first use), and how
    it says how far it got: ``map`` reports ``"<what>: k/n runs done"``.  Here ``shared`` goes
    with every item: reproductions share small workloads.  Use it in a ``with`` block."""

    def __init__(self, jobs: int | None = None, ray_address: str | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.jobs = check_jobs(jobs)
        self.ray_address = ray_address
        self.progress = progress
        self._backend: _Processes | _Ray | None = None

    def __enter__(self) -> Fanout:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def map(self, fn: Work[S, T, R], items: Sequence[T], *, shared: S | None = None,
            what: str = "simulations") -> list[R]:
        finished: set[int] = set()

        def tick(i: int, done: int, total: int) -> None:
            if done >= total and i not in finished:
                finished.add(i)
                if self.progress is not None:
                    self.progress(f"{what}: {len(finished)}/{len(items)} runs done")

        if self.progress is not None:
            self.progress(f"{what}: 0/{len(items)} runs done")
        n = self.jobs if self.jobs is not None else default_jobs(10**6)
        if not items:
            return []
        if self.ray_address is None and (n == 1 or len(items) == 1):
            return _serial(fn, shared, items, tick)  # type: ignore[arg-type]
        if self._backend is None:
            self._backend = (_Ray(self.ray_address) if self.ray_address is not None
                             else _Processes(n, None))
        packed = [(fn, shared, item) for item in items]
        if isinstance(self._backend, _Ray):
            return self._backend.map(_with_shared, None, packed, tick)
        return self._backend.map(_with_shared, packed, tick)
