"""A service's finished jobs as the files a batch run writes, so `utilon report` reads them.

``jobs.csv`` holds the row each job got when it finished (the batch run's columns);
``summary.json`` the counts, utilities, misses, penalty and response times over those rows, and
how many jobs were cancelled, failed or are still open; ``verification.json`` each real job's
output check; ``provenance.json`` the store, its epoch and incarnations.  Times are service time
(seconds since the store's epoch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from utilon.metrics.outputs import write_jobs_csv, write_summary
from utilon.service.store import Store


def export(db: str, out_dir: Path) -> int:
    store = Store(db)
    try:
        rows: list[dict[str, Any]] = []
        checks: dict[str, Any] = {}
        offset = 0
        while True:
            recs, total = store.page(states=("finished",), limit=1000, offset=offset,
                                     newest_first=False)
            for r in recs:
                assert r.result is not None
                rows.append(r.result["row"])
                checks[r.id] = r.result.get("verification")
            offset += len(recs)
            if offset >= total or not recs:
                break
        counts = store.counts()
        epoch, incarnation = store.clock()
    finally:
        store.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    write_jobs_csv(out_dir / "jobs.csv", rows)
    write_summary(out_dir / "summary.json", _summary(rows, counts))
    (out_dir / "verification.json").write_text(json.dumps(checks, indent=2, sort_keys=True)
                                               + "\n", encoding="utf-8")
    (out_dir / "provenance.json").write_text(json.dumps({
        "scenario": "service", "source": store.safe_url, "mode": "service", "epoch": epoch,
        "incarnations": incarnation,
        "derivations": ["times are service time: seconds since the store's epoch"]},
        indent=2) + "\n", encoding="utf-8")
    return len(rows)


def _summary(rows: list[dict[str, Any]], counts: dict[str, int]) -> dict[str, Any]:
    util = [float(r["utility"]) for r in rows]
    resp = [float(r["finish"]) - float(r["submit"]) for r in rows if r["finish"] is not None]
    misses = sum(1 for r in rows if r["missed"])
    return {
        "scenario": "service", "policy": "service", "mode": "service",
        "jobs": len(rows), "finished": len(rows), "unfinished": 0,
        "cancelled": counts.get("cancelled", 0), "failed": counts.get("failed", 0),
        "open": counts.get("queued", 0) + counts.get("running", 0),
        "utility_min": min(util) if util else 0.0, "utility_sum": round(sum(util), 6),
        "utility_mean": round(float(np.mean(util)), 6) if util else 0.0,
        "misses": misses, "miss_rate": round(misses / len(rows), 6) if rows else 0.0,
        "penalty": round(sum(float(r["penalty"]) for r in rows), 6),
        "makespan": round(max((float(r["finish"]) for r in rows), default=0.0)
                          - min((float(r["submit"]) for r in rows), default=0.0), 3),
        "response_mean": round(float(np.mean(resp)), 3) if resp else 0.0,
        "response_p95": round(float(np.percentile(resp, 95)), 3) if resp else 0.0,
        "cost": round(sum(float(r["cost"]) for r in rows), 6),
        "timing": {},
    }
