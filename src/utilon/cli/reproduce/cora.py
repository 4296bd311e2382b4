"""``utilon reproduce cora``: the paper's evaluation, paper beside ours, and its claims over
seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from utilon.cli.common import JobsOpt, RayAddressOpt, out
from utilon.cli.reproduce.common import SeedsOpt, _f, print_claims, reproduce_app, run


@reproduce_app.command("cora")
def cora(
    quick: Annotated[bool, typer.Option("--quick", help="3 seeds and 3 mixes in Tables "
                                        "II/III: about a minute of CPU")] = False,
    out_dir: Annotated[Path, typer.Option("--out", help="where runs, figures and "
                                          "results.json go")] = Path("runs/reproduce/cora"),
    seed: Annotated[int, typer.Option("--seed", help="first workload seed")] = 1,
    seeds: SeedsOpt = None,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """CORA (Huang et al., INFOCOM 2015): Tables I–III and the claims on every seed."""
    from rich.table import Table

    from utilon.repro import cora as R

    res = run(R.reproduce, out_dir, quick=quick, seed=seed, seeds=seeds, jobs=jobs,
              ray_address=ray_address)
    t1 = res["table1"]
    t = Table(title=f"Table I, seed {t1['seed']}: {t1['jobs']} jobs, 20/60/20% critical/"
                    "sensitive/insensitive (min and sum over critical + sensitive jobs)",
              title_justify="left")
    for c in ("scheduler", "min (paper)", "min (ours)", "sum (paper)", "sum (ours)",
              "solver ms mean±std (paper)", "solver ms mean±std (ours)", "misses (ours)"):
        t.add_column(c, justify="left" if c == "scheduler" else "right")
    for s, r in t1["rows"].items():
        p = t1["paper"][s]
        ps = (f"{p['solver_ms_mean']:.1f} ± {p['solver_ms_std']:.1f}"
              if p["solver_ms_mean"] is not None else "< 1")
        os_ = (f"{r['solver_ms_mean']:.2f} ± {r['solver_ms_std']:.2f}"
               if r["solver_ms_mean"] is not None else f"decide p50 {r['decide_ms_p50']:.3f}")
        t.add_row(s, _f(p["min"], 4), _f(r["min"], 4), _f(p["sum"], 1), _f(r["sum"], 1),
                  ps, os_, str(r["misses"]))
    b = t1["alone_bound"]
    t.add_row("[dim]each job alone (no scheduler can beat)[/dim]", "", _f(b["min"], 4), "",
              _f(b["sum"], 1), "", "", "")
    out.print(t)
    _headroom(res)
    f3 = Table(title="Fig. 3: CORA's minimum utility vs each baseline's, per scheduling event",
               title_justify="left")
    for c in ("baseline", "events", "CORA better", "CORA worse", "median improvement %"):
        f3.add_column(c, justify="left" if c == "baseline" else "right")
    for b, v in res["fig3"].items():
        f3.add_row(b, str(v["events"]), f"{v['share_positive']:.0%}",
                   f"{v['share_negative']:.0%}", f"{v['median']:.1f}")
    out.print(f3)
    for key, title, paper in (
            ("table2", "Table II: sigmoid utilities, varying % critical", R.PAPER_TABLE2),
            ("table3", "Table III: linear utilities, varying % steep-slope", R.PAPER_TABLE3)):
        tt = Table(title=f"{title} ({res['workload']['mix_jobs']} jobs, seed {res['seed']}; "
                   "every seed in results.json)", title_justify="left")
        for c in ("%", "CORA min (paper/ours)", "CORA agg (paper/ours)",
                  "RRH min (paper/ours)", "RRH agg (paper/ours)", "CORA-CT min / agg",
                  "CORA-CT-SUM min / agg", "CORA-LP min / agg", "alone min / agg (bound)"):
            tt.add_column(c, justify="right")
        for pct, r in res[key].items():
            p = paper[int(pct)]
            variants = [f"{_f(v['min'], 4)} / {_f(v['sum'], 1)}" if (v := r.get(k)) else "–"
                        for k in ("cora-ct", "cora-ct-sum", "cora-lp", "alone")]
            tt.add_row(pct, f"{p[0]:.4g} / {r['cora']['min']:.4g}",
                       f"{p[1]:.1f} / {r['cora']['sum']:.1f}",
                       f"{p[2]:.4g} / {r['rrh']['min']:.4g}",
                       f"{p[3]:.1f} / {r['rrh']['sum']:.1f}", *variants)
        out.print(tt)
    out.print(f"figures: {out_dir}/fig3-ccdf.png, fig4-delta.png, fig5-delta-critical.png, "
              "fig6-delta-steep.png; "
              f"numbers: {out_dir}/results.json; runs: {out_dir}/table1/<scheduler>/")
    print_claims(res, "CORA")
    out.print("Why ours differ from the paper's: docs/reproduction-cora.md")


def _headroom(res: dict[str, Any]) -> None:
    """Table I on every seed: the best baseline beside the per-job bound (each job alone on
    the empty cluster), and each CORA system, min / sum."""
    from rich.table import Table

    from utilon.repro.cora_claims import BASELINES, SYSTEMS, table1_headroom

    t = Table(title="Table I on every seed, min / sum: the headroom (best baseline against "
              "each job alone) beside each CORA system", title_justify="left")
    for c in ("seed", "best baseline min", "best baseline sum", "alone min / sum",
              "best sum / alone", "baselines all min 0", *SYSTEMS):
        t.add_column(c, justify="right")
    for seed, one in res["per_seed"].items():
        rows = one["table1"]
        h = table1_headroom(rows, one["alone"])
        best_min = max(BASELINES, key=lambda b: rows[b]["min"])
        t.add_row(seed, f"{h['best_baseline_min']:.4f} ({best_min})",
                  f"{h['best_baseline_sum']:.1f} ({h['best_baseline']})",
                  f"{h['alone_min']:.4f} / {h['alone_sum']:.1f}",
                  f"{h['best_sum_over_alone']:.1%}", "yes" if h["baselines_min_zero"] else "no",
                  *(f"{rows[s]['min']:.4f} / {rows[s]['sum']:.1f}" if s in rows else "–"
                    for s in SYSTEMS))
    out.print(t)
