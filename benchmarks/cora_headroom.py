"""CORA's Table I headroom on the calibrated workload (issue 21): for each seed, every
scheduler's min and sum of utility (critical + sensitive jobs) beside the upper bound no
scheduler can beat -- each job alone on the empty cluster at its own submission time.

    .venv/bin/python benchmarks/cora_headroom.py [--seeds 1 2 3] [--json F]
    .venv/bin/python benchmarks/cora_headroom.py --sum-study --seeds $(seq 1 40)
    .venv/bin/python benchmarks/cora_headroom.py --sum-study --issue21 \
        --only "run floors, window 2 (cora-ct-sum)" --seeds $(seq 41 60) \
        --json benchmarks/results-cora-sum-issue21.json   # issue 21's workload, new seeds

A few seconds per seed.  Also, per seed, where ``cora-ct``'s sum goes
against EDF's (``trades``): the utility it loses on the jobs EDF serves better, the utility it
gains on the others, and the largest losses beside the gains on jobs valued below them --
what a lexicographic max-min over absolute utilities trades away.  And, for ``cora-ct``
with ``above_min: edf`` (only the max-min level, EDF above it), ``overrides``: at how many
decisions the minimum of the jobs present moved a job ahead of EDF's order, whether any moved
job is the one that pins the run's minimum, and what the moved jobs gained against what the
others lost, both against EDF.  For ``above_min: sum`` (the run's first max-min level kept,
the loss-rate order above it), ``sum_trades``: the same per-job account against EDF, and at
how many plans its order was not EDF's and the floors changed the loss-rate order.

``--sum-study``: ``above_min: sum`` beside its ablations (floors at the present jobs' level
only, no floors, windows of 1 and 4 task durations) against the best baseline of each seed,
written to ``results-cora-sum.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from utilon.repro import cora as R
from utilon.runner import run_policy

MIX = {"critical": 0.2, "sensitive": 0.6, "insensitive": 0.2}
CONFIGS = (("edf-p", None), ("fifo", None), ("rrh", None), ("fair", None), ("cora", None),
           ("cora-ct", None), ("cora-ct", {"margin": 0.0}), ("cora-ct", {"above_min": "edf"}),
           ("cora-ct", {"above_min": "sum"}))
SUM = {"above_min": "sum"}


def trades(edf: dict, ct: dict, rows: list | None = None, label: str = "cora-ct") -> dict:
    """Per job, cora-ct's utility minus EDF's: the total lost and gained, and the three
    largest losses, each with the job's utility under both (``rows``: another run's rows
    in place of ``ct``, reported under ``label``)."""
    if rows is not None:
        ct = {r["id"]: r for r in rows}
    diff = sorted((ct[j]["utility"] - edf[j]["utility"], j) for j in edf)
    return {
        "lost": round(sum(d for d, _ in diff if d < 0), 3),
        "gained": round(sum(d for d, _ in diff if d > 0), 3),
        "jobs_lost": sum(d < -1e-9 for d, _ in diff),
        "jobs_gained": sum(d > 1e-9 for d, _ in diff),
        "largest_losses": [{"job": j, "edf": edf[j]["utility"], label: ct[j]["utility"]}
                           for d, j in diff[:3] if d < 0],
    }


def overrides(edf: dict, out, classes: tuple[str, ...] = ("critical", "sensitive")) -> dict:
    """What ``above_min: edf``'s departures from EDF bought (``out``: its run)."""
    report = out.summary["policy_report"]
    moved = set(report["moved_up"])
    rows = [r for r in out.rows if r["class"] in classes]
    pin = min(rows, key=lambda r: r["utility"])
    return {
        "decisions": out.summary["decisions"],
        "overrides": report["edf_overrides"],
        "jobs_moved_up": len(moved),
        "run_minimum_job_moved": pin["id"] in moved,
        "moved_gained": round(sum(r["utility"] - edf[r["id"]]["utility"] for r in rows
                                  if r["id"] in moved), 3),
        "others_gained": round(sum(r["utility"] - edf[r["id"]]["utility"] for r in rows
                                   if r["id"] not in moved), 3),
    }


BASELINES = ("edf-p", "fifo", "rrh", "fair")
STUDY: dict[str, dict[str, Any]] = {
    "run floors, window 2 (cora-ct-sum)": SUM,
    "present floors": {**SUM, "floors": "present"},
    "no floors": {**SUM, "floors": "none"},
    "window 1": {**SUM, "window": 1.0},
    "window 4": {**SUM, "window": 4.0}}


ISSUE21 = {"scale": 0.5, "mu_unit": 60.0, "standalone": "measured", "count_self": True}
"""Issue 21's calibration (before issue 44's): what ``--issue21`` runs."""


def sum_study(seeds: list[int], path: Path, knobs: dict | None = None) -> None:
    """``above_min: sum`` and its ablations against the best baseline on each seed: how
    often the sum is at least the best baseline's and the minimum at least the best
    baseline's, and how many jobs ended below the level their floor kept."""
    per: dict[str, dict] = {}
    for seed in seeds:
        wl = R.cora_workload(100, MIX, seed, name="headroom", **(knobs or {}))
        row: dict = {"alone": R.alone_bound(wl, ("critical", "sensitive"))}
        for b in BASELINES:
            umin, usum = R._u_stats(run_policy(wl, b).rows, ("critical", "sensitive"))
            row[b] = {"min": round(umin, 4), "sum": round(usum, 2)}
        for label, params in STUDY.items():
            o = run_policy(wl, "cora-ct", params)
            umin, usum = R._u_stats(o.rows, ("critical", "sensitive"))
            row[label] = {"min": round(umin, 4), "sum": round(usum, 2),
                          "floors_broken": o.summary["policy_report"].get("floors_broken")}
        per[str(seed)] = row
    summary = {}
    for label, params in STUDY.items():
        dsum = [r[label]["sum"] - max(r[b]["sum"] for b in BASELINES) for r in per.values()]
        both = [r[label]["sum"] >= max(r[b]["sum"] for b in BASELINES) - 1e-9
                and r[label]["min"] >= max(r[b]["min"] for b in BASELINES) - 1e-9
                for r in per.values()]
        dmin = [r[label]["min"] - max(r[b]["min"] for b in BASELINES) for r in per.values()]
        summary[label] = {
            "seeds": len(dsum),
            "sum_minus_best_baseline_mean": round(sum(dsum) / len(dsum), 3),
            "sum_minus_best_baseline_worst": round(min(dsum), 3),
            "sum_at_least_every_baseline": sum(d >= -1e-9 for d in dsum),
            "both_headlines": sum(both),
            "best_min_at_alone_bound": sum(
                max(r[b]["min"] for b in BASELINES) >= r["alone"]["min"] - 1e-4
                for r in per.values()),
            "min_at_least_every_baseline": sum(d >= -1e-9 for d in dmin),
            "min_minus_best_baseline_worst": round(min(dmin), 4),
            "floors_broken": (None if params.get("floors") == "none" else
                              sum(r[label]["floors_broken"] for r in per.values()))}
        print(f"{label}: " + ", ".join(f"{k} {v}" for k, v in summary[label].items()),
              flush=True)
    path.write_text(json.dumps({"workload": knobs or R.CALIBRATED, "summary": summary,
                                "seeds": per},
                               indent=2) + "\n", encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--sum-study", action="store_true",
                    help="only above_min: sum and its ablations against the baselines "
                         "(default JSON: results-cora-sum.json)")
    ap.add_argument("--issue21", action="store_true",
                    help="with --sum-study: issue 21's workload (ISSUE21), not today's")
    ap.add_argument("--only", nargs="+", default=None,
                    help="with --sum-study: only these of its configurations")
    a = ap.parse_args()
    if a.sum_study:
        if a.only:
            for k in list(STUDY):
                if k not in a.only:
                    del STUDY[k]
        sum_study(a.seeds, a.json or Path(__file__).with_name("results-cora-sum.json"),
                  ISSUE21 if a.issue21 else None)
        return
    a.json = a.json or Path(__file__).with_name("results-cora-headroom.json")
    out = {}
    for seed in a.seeds:
        wl = R.cora_workload(100, MIX, seed, name="headroom")
        row: dict[str, Any] = {"alone_bound": R.alone_bound(wl, ("critical", "sensitive"))}
        rows = {}
        for name, params in CONFIGS:
            o = run_policy(wl, name, params)
            if not params:
                rows[name] = {r["id"]: r for r in o.rows
                              if r["class"] in ("critical", "sensitive")}
            if params == {"above_min": "edf"}:
                row["overrides"] = overrides(rows["edf-p"], o)
            if params == SUM:  # what the sum order trades against EDF, and the floors' work
                rep = o.summary["policy_report"]
                row["sum_trades"] = {**trades(rows["edf-p"], {}, o.rows, "cora-ct-sum"),
                                     "decisions": o.summary["decisions"],
                                     "solves": rep["solves"],
                                     "orders_not_edf": rep["edf_overrides"],
                                     "floor_repairs": rep["floor_repairs"]}
            umin, usum = R._u_stats(o.rows, ("critical", "sensitive"))
            label = name + (json.dumps(params, sort_keys=True) if params else "")
            row[label] = {"min": round(umin, 4), "sum": round(usum, 2),
                          "misses": o.summary["misses"]}
        row["trades"] = trades(rows["edf-p"], rows["cora-ct"])
        out[str(seed)] = row
        print(f"seed {seed}: bound {row['alone_bound']['min']:.4f} / "
              f"{row['alone_bound']['sum']:.2f}; " + "; ".join(
                  f"{k} {v['min']:.4f} / {v['sum']:.2f}" for k, v in row.items()
                  if k not in ("alone_bound", "trades", "overrides", "sum_trades")),
              flush=True)
        t = row["trades"]
        print(f"  cora-ct vs edf-p: lost {t['lost']} on {t['jobs_lost']} jobs, gained "
              f"{t['gained']} on {t['jobs_gained']}; largest losses " + ", ".join(
                  f"{x['job']} {x['edf']:.3f} -> {x['cora-ct']:.3f}"
                  for x in t["largest_losses"]), flush=True)
        v = row["overrides"]
        print(f"  above_min edf: {v['overrides']} of {v['decisions']} decisions left EDF's "
              f"order, moving {v['jobs_moved_up']} jobs up (the run's minimum among them: "
              f"{v['run_minimum_job_moved']}); they gained {v['moved_gained']}, the others "
              f"{v['others_gained']}", flush=True)
        v = row["sum_trades"]
        print(f"  above_min sum vs edf-p: lost {v['lost']} on {v['jobs_lost']} jobs, gained "
              f"{v['gained']} on {v['jobs_gained']}; {v['orders_not_edf']} of {v['solves']} "
              f"plans not in EDF's order, {v['floor_repairs']} changed by the floors",
              flush=True)
    a.json.write_text(json.dumps({"workload": R.CALIBRATED, "seeds": out}, indent=2) + "\n",
                      encoding="utf-8")


if __name__ == "__main__":
    main()
