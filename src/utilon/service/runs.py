"""Past runs for the dashboard: the run directories that ``utilon report`` reads.

The service is given a folder (``--runs``, default ``runs/``); every directory below it (three
levels deep at most) that holds a ``summary.json`` and a ``jobs.csv`` is a run: a simulation,
a comparison's policy, a batch live run or an export of the service's own finished jobs.  A run
is read with ``utilon.report.data.load_run`` and served as its summary, a page of its jobs (a
tenant sees only its own tenant's rows) and its allocation per tenant over time, averaged into
at most ``POINTS`` buckets, with the capacity on top.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from utilon.report.data import ReportError, load_run
from utilon.service.tenants import Principal

MAX_RUNS = 500
POINTS = 300


def list_runs(root: Path, who: Principal | None = None) -> list[dict[str, Any]]:
    """The runs under ``root``; for a tenant (not an admin, not ``None``) only those with jobs
    of its own, their job and miss counts over its own jobs."""
    if not root.is_dir():
        return []
    found: list[dict[str, Any]] = []
    for depth in ("*", "*/*", "*/*/*"):
        for d in sorted(root.glob(depth)):
            if len(found) >= MAX_RUNS:
                break
            if d.is_dir() and (d / "summary.json").is_file() and (d / "jobs.csv").is_file():
                try:
                    s = json.loads((d / "summary.json").read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                if not isinstance(s, dict):
                    continue
                jobs, misses = s.get("jobs"), s.get("misses")
                if who is not None and not who.admin:
                    jobs, misses = _own_counts(d, who)
                    if not jobs:
                        continue
                found.append({"path": d.relative_to(root).as_posix(),
                              "scenario": s.get("scenario"), "policy": s.get("policy"),
                              "world": s.get("world", "slot"), "mode": s.get("mode", "sim"),
                              "jobs": jobs, "misses": misses})
    return found


def _own_counts(d: Path, who: Principal) -> tuple[int, int]:
    """Jobs and misses of ``who``'s tenant in a run's jobs.csv."""
    import csv

    jobs = misses = 0
    try:
        with (d / "jobs.csv").open(newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                if who.may_see(r.get("tenant", "") or ""):
                    jobs += 1
                    misses += str(r.get("missed", "")).lower() in ("1", "true")
    except (OSError, ValueError, csv.Error):
        return 0, 0
    return jobs, misses


def resolve(root: Path, rel: str) -> Path | None:
    """``rel`` under ``root``, or None when it leaves it, is not a run, or is no path at all
    (a NUL byte, which the file system refuses, or a name too long for it)."""
    if "\x00" in rel or len(rel) > 4096:
        return None
    base = root.resolve()
    try:
        d = (base / rel).resolve()
        if base != d and base not in d.parents:
            return None
        return d if (d / "summary.json").is_file() else None
    except (OSError, ValueError):
        return None


def read_run(d: Path, who: Principal, limit: int, offset: int) -> dict[str, Any]:
    run = load_run(d)
    j = run.jobs
    tenants = _tenants(d, len(j.id))
    keep = [i for i in range(len(j.id)) if who.may_see(tenants[i])] if not who.admin \
        else list(range(len(j.id)))
    page = keep[offset:offset + limit]

    def num(x: float) -> float | None:
        return None if not np.isfinite(x) else round(float(x), 3)

    rows = [{"id": j.id[i], "tenant": tenants[i], "class": j.job_class[i],
             "submit": num(j.submit[i]), "start": num(j.start[i]), "finish": num(j.finish[i]),
             "goal": num(j.goal[i]), "utility": num(j.utility[i]), "missed": bool(j.missed[i])}
            for i in page]
    summary = run.summary if who.admin else {
        k: run.summary.get(k) for k in ("scenario", "policy", "world", "mode", "seed")}
    return {"summary": summary, "jobs": rows, "total": len(keep), "limit": limit,
            "offset": offset, "allocation": _allocation(run, tenants, who)}


def _tenants(d: Path, n: int) -> list[str]:
    import csv

    with (d / "jobs.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [r.get("tenant", "") or "" for r in rows][:n] + [""] * max(0, n - len(rows))


def _allocation(run: Any, tenants: list[str], who: Principal) -> dict[str, Any]:
    steps = run.allocation
    if steps is None or not len(steps.start):
        return {"t": [], "series": {}, "capacity": []}
    owner = dict(zip(run.jobs.id, tenants, strict=True))
    end = float(max(steps.end.max(), 1e-9))
    edges = np.linspace(0.0, end, POINTS + 1)
    width = np.diff(edges)
    series: dict[str, np.ndarray] = {}
    for s0, s1, key, v in zip(steps.start, steps.end, steps.key, steps.value, strict=True):
        t = owner.get(key, "")
        if not who.may_see(t):
            continue
        arr = series.setdefault(t or "(none)", np.zeros(POINTS))
        lo = np.clip(edges[:-1], s0, s1)
        hi = np.clip(edges[1:], s0, s1)
        arr += v * (hi - lo) / width  # time-weighted mean level in each bucket
    cap: list[float] = []
    if run.capacity is not None and len(run.capacity.get("time", [])):
        times, eff = run.capacity["time"], run.capacity.get("effective")
        if eff is not None:
            idx = np.clip(np.searchsorted(times, edges[:-1], side="right") - 1, 0, None)
            cap = [round(float(x), 3) for x in eff[idx]]
    return {"t": [round(float(x), 3) for x in edges[:-1]],
            "series": {k: [round(float(x), 3) for x in v] for k, v in sorted(series.items())},
            "capacity": cap}


__all__ = ["ReportError", "list_runs", "read_run", "resolve"]
