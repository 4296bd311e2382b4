"""Grids of independent runs -- (workload, policy) pairs -- in parallel: the runs of
``utilon compare`` over several scenarios and seeds, and of the league.

``runner.run_policies`` runs several policies on one workload; a grid runs any mix of
workloads and policies in one pool, so that the slow policy of one workload overlaps with the
fast runs of the next instead of leaving a core idle at the end of each.  A run's workload is
either one of the ``workloads`` shared with every worker (sent once per worker, as
``run_policies`` sends its one workload; this is what travels to a Ray cluster) or a
``WorkloadRef``: a scenario file the worker loads itself and keeps for the next runs of the
same workload (the league has a hundred workloads, too many to send every worker all of them).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utilon.parallel import OnProgress, run_all
from utilon.runner import run_policy, write_files, written
from utilon.scenario.build import Workload


@dataclass(frozen=True)
class WorkloadRef:
    """A slot scenario file to load (``load_scenario``) at ``seed`` with ``estimates``."""

    path: str
    seed: int | None = None
    estimates: str | None = None
    capacity: str | None = None
    max_jobs: int | None = None
    """Keep only the first jobs (a smoke test of the machinery on a big workload)."""

    def load(self) -> Workload:
        from utilon.scenario.load import load_scenario

        wl = load_scenario(self.path, seed=self.seed, capacity=self.capacity,
                           estimates=self.estimates)
        if not isinstance(wl, Workload):
            from utilon.errors import ScenarioError

            raise ScenarioError("a cloud scenario cannot run in a grid of slot policies",
                                where=self.path, fix="give a slot scenario (cluster:)")
        if self.max_jobs is not None:
            wl = dataclasses.replace(wl, jobs=wl.jobs[:self.max_jobs])
        return wl


@dataclass(frozen=True)
class GridRun:
    """One run: ``workload`` (an index into the shared workloads, or a file to load), the
    registered ``policy`` with ``params``, and where its files go (none: the summary only)."""

    workload: int | WorkloadRef
    policy: str
    params: dict[str, Any] = field(default_factory=dict)
    out_dir: Path | None = None
    wall_limit: float | None = None
    ship: bool = False
    """Send the run's files back instead of writing them where it ran (a Ray node)."""
    cpu_limit: float | None = None


def run_grid(runs: Sequence[GridRun], workloads: Sequence[Workload] = (), *,
             jobs: int | None = None, ray_address: str | None = None,
             on_progress: OnProgress | None = None) -> list[dict[str, Any]]:
    """Every run's summary, in the order of ``runs`` (each run's files in its ``out_dir``),
    in parallel over local processes (``jobs``) or a Ray cluster (``ray_address``)."""
    if ray_address is not None:
        runs = [r if r.out_dir is None else GridRun(r.workload, r.policy, r.params, r.out_dir,
                                                    r.wall_limit, True, r.cpu_limit)
                for r in runs]
    done = run_all(_run_one, tuple(workloads), runs, jobs=jobs, ray_address=ray_address,
                   on_progress=on_progress)
    for run, (_, files) in zip(runs, done, strict=True):
        if files:
            assert run.out_dir is not None
            write_files(run.out_dir, files)
    return [summary for summary, _ in done]


_KEEP = 3
_loaded: dict[WorkloadRef, Workload] = {}
"""Workloads this process loaded, the most recent last (grids list a workload's runs
together, so a few are enough)."""


def _workload(shared: tuple[Workload, ...], ref: int | WorkloadRef) -> Workload:
    if isinstance(ref, int):
        return shared[ref]
    wl = _loaded.pop(ref, None)
    if wl is None:
        wl = ref.load()
        while len(_loaded) >= _KEEP:
            del _loaded[next(iter(_loaded))]
    _loaded[ref] = wl
    return wl


def _run_one(shared: tuple[Workload, ...], run: GridRun,
             progress: Callable[[int, int], None] | None
             ) -> tuple[dict[str, Any], dict[str, bytes]]:
    wl = _workload(shared, run.workload)

    def one(out_dir: Path | None) -> dict[str, Any]:
        cpu = time.process_time()
        summary = run_policy(wl, run.policy, run.params, out_dir=out_dir, progress=progress,
                             wall_limit=run.wall_limit, cpu_limit=run.cpu_limit).summary
        # CPU seconds of the run and its outputs: what a league is sized by on a busy machine
        # (only in the summary returned; wall-clock numbers live under timing)
        timing = {**summary.get("timing", {}), "cpu_s": round(time.process_time() - cpu, 3)}
        return {**summary, "timing": timing}

    if run.out_dir is None or not run.ship:
        return one(run.out_dir), {}
    return written(one)
