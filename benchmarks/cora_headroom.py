"""CORA's Table I headroom on the calibrated workload (issue 21): for each seed, every
scheduler's min and sum of utility (critical + sensitive jobs) beside the upper bound no
scheduler can beat -- each job alone on the empty cluster at its own submission time.

    .venv/bin/python benchmarks/cora_headroom.py [--seeds 1 2 3] [--json F]

About a minute per seed on 2 cores.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from utilon.repro import cora as R
from utilon.runner import run_policy

MIX = {"critical": 0.2, "sensitive": 0.6, "insensitive": 0.2}
CONFIGS = (("edf-p", None), ("fifo", None), ("rrh", None), ("fair", None), ("cora", None),
           ("cora-ct", None), ("cora-ct", {"margin": 0.0}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--json", type=Path, default=Path(__file__).with_name(
        "results-cora-headroom.json"))
    a = ap.parse_args()
    out = {}
    for seed in a.seeds:
        wl = R.cora_workload(100, MIX, seed, name="headroom")
        row = {"alone_bound": R.alone_bound(wl, ("critical", "sensitive"))}
        for name, params in CONFIGS:
            o = run_policy(wl, name, params)
            umin, usum = R._u_stats(o.rows, ("critical", "sensitive"))
            label = name + (json.dumps(params, sort_keys=True) if params else "")
            row[label] = {"min": round(umin, 4), "sum": round(usum, 2),
                          "misses": o.summary["misses"]}
        out[str(seed)] = row
        print(f"seed {seed}: bound {row['alone_bound']['min']:.4f} / "
              f"{row['alone_bound']['sum']:.2f}; " + "; ".join(
                  f"{k} {v['min']:.4f} / {v['sum']:.2f}" for k, v in row.items()
                  if k != "alone_bound"), flush=True)
    a.json.write_text(json.dumps({"workload": R.CALIBRATED, "seeds": out}, indent=2) + "\n",
                      encoding="utf-8")


if __name__ == "__main__":
    main()
