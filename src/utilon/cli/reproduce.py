"""``utilon reproduce <paper>``: a paper's tables with its numbers beside ours, and its figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from utilon.cli.common import err, out
from utilon.cli.common import errors as _errors

reproduce_app = typer.Typer(help="Reproduce a paper's evaluation: tables (paper beside ours) "
                            "and figures.", no_args_is_help=True)


def _f(x: Any, nd: int = 3) -> str:
    if x is None:
        return "–"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


@reproduce_app.command("cora")
def cora(
    quick: Annotated[bool, typer.Option("--quick", help="smaller runs (40 jobs in Table I, "
                                        "3 mixes in Tables II/III): about a minute")] = False,
    out_dir: Annotated[Path, typer.Option("--out", help="where runs, figures and "
                                          "results.json go")] = Path("runs/reproduce/cora"),
    seed: Annotated[int, typer.Option("--seed", help="workload seed")] = 1,
) -> None:
    """CORA (Huang et al., INFOCOM 2015): Tables I–III, Figs. 3–4."""
    from utilon.repro import cora as R

    with _errors(), err.status("running", spinner="dots") as status:
        res = R.reproduce(out_dir, quick=quick, seed=seed,
                          progress=lambda m: status.update(m))
    t1 = res["table1"]
    t = Table(title=f"Table I: {t1['jobs']} jobs, 20/60/20% critical/sensitive/insensitive "
                    "(min and sum over critical + sensitive jobs)", title_justify="left")
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
    out.print(t)
    f3 = Table(title="Fig. 3: CORA's minimum utility vs each baseline's, per scheduling event",
               title_justify="left")
    for c in ("baseline", "events", "CORA better", "CORA worse", "median improvement %"):
        f3.add_column(c, justify="left" if c == "baseline" else "right")
    for b, v in res["fig3"].items():
        f3.add_row(b, str(v["events"]), f"{v['share_positive']:.0%}",
                   f"{v['share_negative']:.0%}", f"{v['median']:.1f}")
    out.print(f3)
    for key, title, paper in (
            ("table2", "Table II: sigmoid utilities, varying % critical (20 jobs)",
             R.PAPER_TABLE2),
            ("table3", "Table III: linear utilities, varying % steep-slope (20 jobs)",
             R.PAPER_TABLE3)):
        tt = Table(title=title, title_justify="left")
        for c in ("%", "CORA min (paper/ours)", "CORA agg (paper/ours)",
                  "RRH min (paper/ours)", "RRH agg (paper/ours)"):
            tt.add_column(c, justify="right")
        for pct, r in res[key].items():
            p = paper[int(pct)]
            tt.add_row(pct, f"{p[0]:.4g} / {r['cora']['min']:.4g}",
                       f"{p[1]:.1f} / {r['cora']['sum']:.1f}",
                       f"{p[2]:.4g} / {r['rrh']['min']:.4g}",
                       f"{p[3]:.1f} / {r['rrh']['sum']:.1f}")
        out.print(tt)
    out.print(f"figures: {out_dir}/fig3-ccdf.png, fig4-delta.png, fig5-delta-critical.png, "
              "fig6-delta-steep.png; "
              f"numbers: {out_dir}/results.json; runs: {out_dir}/table1/<scheduler>/")
    out.print("Why ours differ from the paper's: docs/reproduction-cora.md")
