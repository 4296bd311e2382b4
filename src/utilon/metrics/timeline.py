"""The run's timeline files, bounded in size whatever the run's length.

* ``allocation.csv`` — ``start,end,job,slots``: job ``job`` held ``slots`` units of the
  cluster's slot resource on ``[start, end)``.  Exact (one row per change of the job's
  allocation) while that takes at most ``ALLOCATION_ROWS`` rows; beyond, each job's allocation
  is averaged over buckets of a round width (1, 2 or 5 × 10^k s) chosen so that the rows fit,
  and ``summary.json`` says so (``timeline.allocation.resolution``).
* ``capacity.csv`` — ``time,machines,<resource>...,effective``: the cluster's declared capacity
  from ``time`` on (one row per instant at which it changed; ``effective`` is the slot
  resource's capacity × machine speed, which scale-up changes).
* ``attempts.csv`` — ``job,stage,index,machine,start,end,outcome``: task attempts for Gantt
  charts.  All of them up to ``ATTEMPT_ROWS``; beyond, every attempt of an evenly spaced
  sample of machines (and if one machine alone has too many, its earliest attempts), and the
  summary says which.

Tasks still running when the run stopped appear with ``end`` = the end of the run and outcome
``running``.  With the defaults a full-day trace gives at most a few megabytes of timeline.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from utilon.core.scheduler import SchedulerCore
from utilon.core.timeline import OUTCOME_CODE, OUTCOMES

ALLOCATION_ROWS = 100_000
ATTEMPT_ROWS = 20_000


@dataclass(frozen=True)
class Attempts:
    """Every attempt of a run, still-running ones closed at the end, as parallel arrays."""

    job: np.ndarray
    stage: np.ndarray
    task: np.ndarray
    machine: np.ndarray
    start: np.ndarray
    end: np.ndarray
    slots: np.ndarray
    outcome: np.ndarray

    def take(self, idx: np.ndarray) -> Attempts:
        return Attempts(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))

    def __len__(self) -> int:
        return len(self.job)


def attempts_of(core: SchedulerCore, end: float) -> Attempts:
    tl = core.timeline
    extra: list[tuple[int, int, int, int, float, float, float]] = []
    si = core.names.index(core.slot_resource)
    for jr in core.active.values():
        for (_, stage, idx), run in jr.running.items():
            mi, start = run.machine, run.start
            extra.append((jr.seq, stage, idx, mi, start, end,
                          jr.stages[stage].vectors[idx][si]))
    cols = list(zip(*extra, strict=True)) if extra else [()] * 7

    def cat(arr: Any, more: tuple[Any, ...], dtype: Any) -> np.ndarray:
        a = np.asarray(arr, dtype=dtype)  # (a column is a fresh array: ``Timeline._col``)
        return np.concatenate([a, np.asarray(more, dtype=dtype)]) if more else a

    return Attempts(
        job=cat(tl.job, cols[0], np.int32), stage=cat(tl.stage, cols[1], np.int32),
        task=cat(tl.task, cols[2], np.int32), machine=cat(tl.machine, cols[3], np.int32),
        start=cat(tl.start, cols[4], np.float64), end=cat(tl.end, cols[5], np.float64),
        slots=cat(tl.slots, cols[6], np.float64),
        outcome=cat(tl.outcome, (OUTCOME_CODE["running"],) * len(extra), np.int8))


# ------------------------------------------------------------------ allocation
def _exact_allocation(a: Attempts) -> tuple[np.ndarray, ...]:
    """Per job, the step function of slots held: rows (start, end, job, slots)."""
    keep = (a.end > a.start) & (a.slots > 0)
    if not keep.any():
        return tuple(np.zeros(0) for _ in range(4))
    job = np.concatenate([a.job[keep], a.job[keep]])
    t = np.concatenate([a.start[keep], a.end[keep]])
    d = np.concatenate([a.slots[keep], -a.slots[keep]])
    order = np.lexsort((t, job))
    job, t, level = job[order], t[order], np.cumsum(d[order])
    # one point per (job, time): the level after every change at that instant
    last = np.ones(len(t), bool)
    last[:-1] = (job[1:] != job[:-1]) | (t[1:] != t[:-1])
    job, t, level = job[last], t[last], np.round(level[last], 6)
    # drop points that do not change the level (a task ended as another started)
    change = np.ones(len(t), bool)
    change[1:] = (job[1:] != job[:-1]) | (level[1:] != level[:-1])
    job, t, level = job[change], t[change], level[change]
    same = job[1:] == job[:-1]
    rows = same & (level[:-1] > 0)
    return t[:-1][rows], t[1:][rows], job[:-1][rows], level[:-1][rows]


def _nice_widths(lo: float) -> list[float]:
    k = math.floor(math.log10(max(lo, 1e-3)))
    return [m * 10.0 ** e for e in range(k, k + 12) for m in (1, 2, 5)]


def _bucketed_allocation(a: Attempts, end: float, limit: int
                         ) -> tuple[tuple[np.ndarray, ...], float]:
    keep = (a.end > a.start) & (a.slots > 0)
    job, s, e, x = a.job[keep], a.start[keep], a.end[keep], a.slots[keep]
    first = np.full(job.max() + 1, np.inf)
    np.minimum.at(first, job, s)
    last = np.zeros(job.max() + 1)
    np.maximum.at(last, job, e)
    seen = np.isfinite(first)
    span_lo, span_hi = first[seen], last[seen]
    widths = _nice_widths(max(end, 1.0) / limit)
    width = next((w for w in widths
                  if np.sum(np.floor(span_hi / w) - np.floor(span_lo / w) + 1) <= limit),
                 widths[-1])
    b0 = np.floor(s / width).astype(np.int64)
    b1 = np.floor(np.nextafter(e, -np.inf) / width).astype(np.int64)  # end is exclusive
    n = b1 - b0 + 1
    idx = np.repeat(np.arange(len(s)), n)
    bucket = np.repeat(b0, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    lo = np.maximum(s[idx], bucket * width)
    hi = np.minimum(e[idx], (bucket + 1) * width)
    key = job[idx].astype(np.int64) * (int(b1.max()) + 1) + bucket
    uniq, inv = np.unique(key, return_inverse=True)
    integral = np.bincount(inv, weights=(hi - lo) * x[idx])
    nb = int(b1.max()) + 1
    rjob, rbucket = uniq // nb, uniq % nb
    start = rbucket * width
    stop = np.minimum((rbucket + 1) * width, max(end, float(e.max())))
    order = np.lexsort((rjob, start))
    mean = np.round(integral / (stop - start), 6)[order]  # the last bucket may be shorter
    return (start[order].astype(float), stop[order].astype(float), rjob[order], mean), width


# ------------------------------------------------------------------ attempts sample
def _sample_attempts(a: Attempts, n_machines: int, limit: int) -> tuple[Attempts, dict[str, Any]]:
    if len(a) <= limit:
        return a, {"rows": len(a), "of": len(a), "sampled": False}
    per = np.bincount(a.machine, minlength=n_machines)
    stride = 1
    while True:
        chosen = np.arange(0, n_machines, stride)
        if per[chosen].sum() <= limit or len(chosen) == 1:
            break
        stride += max(1, stride // 4)
    mask = np.isin(a.machine, chosen)
    idx = np.flatnonzero(mask)
    note = f"every {ordinal(stride)} machine ({len(chosen)} of {n_machines})"
    if len(idx) > limit:  # one machine alone has too many: keep its earliest attempts
        idx = idx[np.argsort(a.start[idx], kind="stable")[:limit]]
        idx.sort()
        note += f", earliest {limit} attempts"
    return a.take(idx), {"rows": len(idx), "of": len(a), "sampled": True,
                         "machines": len(chosen), "of_machines": n_machines, "note": note}


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 22nd."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# ------------------------------------------------------------------ writing
def write_timeline(out_dir: Path, core: SchedulerCore, end: float, *,
                   allocation_rows: int = ALLOCATION_ROWS,
                   attempt_rows: int = ATTEMPT_ROWS) -> dict[str, Any]:
    """Write allocation.csv, capacity.csv and attempts.csv; return what summary.json says
    about them (resolution, sampling)."""
    a = attempts_of(core, end)
    tl = core.timeline
    cols = _exact_allocation(a)
    resolution: str | float = "exact"
    if len(cols[0]) > allocation_rows:
        cols, resolution = _bucketed_allocation(a, end, allocation_rows)
    jobs = tl.job_ids
    with (out_dir / "allocation.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("start", "end", "job", "slots"))
        for s, e, j, x in zip(*(c.tolist() for c in cols), strict=True):
            w.writerow((round(s, 4), round(e, 4), jobs[j], x))

    names = core.names
    with (out_dir / "capacity.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("time", "machines", *names, "effective"))
        for i, t in enumerate(tl.cap_time):
            w.writerow((round(t, 4), tl.cap_machines[i],
                        *(round(col[i], 6) for col in tl.cap_totals),
                        round(tl.cap_effective[i], 6)))

    sample, about = _sample_attempts(a, len(tl.machine_ids), attempt_rows)
    stage_names = {jr.seq: [st.name for st in jr.job.stages] for jr in core.jobs.values()}
    mids = tl.machine_ids
    with (out_dir / "attempts.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("job", "stage", "index", "machine", "start", "end", "outcome"))
        for j, st, ix, m, s, e, o in zip(sample.job.tolist(), sample.stage.tolist(),
                                         sample.task.tolist(), sample.machine.tolist(),
                                         sample.start.tolist(), sample.end.tolist(),
                                         sample.outcome.tolist(), strict=True):
            w.writerow((jobs[j], stage_names[j][st], ix, mids[m], round(s, 4), round(e, 4),
                        OUTCOMES[o]))
    return {
        "allocation": {"rows": len(cols[0]), "resolution": resolution},
        "capacity": {"rows": len(tl.cap_time)},
        "attempts": about,
    }
