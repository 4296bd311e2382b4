"""``utilon reproduce alsched``: the paper's evaluation, paper beside ours, and its claims over
seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from utilon.cli.common import JobsOpt, RayAddressOpt, out
from utilon.cli.reproduce.common import SeedsOpt, _f, print_claims, reproduce_app, run


@reproduce_app.command("alsched")
def alsched(
    quick: Annotated[bool, typer.Option("--quick", help="3 seeds (not 10), 5 speedup factors "
                                        "(not 9), and the sweeps at half size (4 + 40 and "
                                        "1 + 40 machines, 250 jobs)")] = False,
    out_dir: Annotated[Path, typer.Option("--out", help="where figures and results.json go")]
    = Path("runs/reproduce/alsched"),
    seed: Annotated[int, typer.Option("--seed", help="first workload seed")] = 0,
    seeds: SeedsOpt = None,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """alsched (Tumanov et al., SoCC 2012): Table 1 and the Soft / Hard / None sweeps of
    Figs. 7-9 (means over the seeds), and every claim checked on every seed."""
    from rich.table import Table

    from utilon.repro import alsched as R

    res = run(R.reproduce, out_dir, quick=quick, seed=seed, seeds=seeds, jobs=jobs,
              ray_address=ray_address)
    t1 = res["table1"]
    n = len(res["seeds"])
    kinds = list(t1["paper"]["soft"])
    for key, system, note in (("ours", "alsched", "faithful: None's cores first-fit"),
                              ("spread", "alsched-spread", "variant: None's cores spread, "
                               "never co-located")):
        t = Table(title=f"Table 1 ({system}, {note}): total time of {t1['jobs']} jobs at "
                  f"t = 0 (duration {t1['duration']:g}; 8 x 32 + 64 x 8 cores; NBODY speedup "
                  f"{t1['speedup']:g}, assumed), paper / ours (mean of {n} seed(s))",
                  title_justify="left")
        t.add_column("policy")
        for k in kinds:
            t.add_column(k, justify="right")
        for p in R.POLICIES:
            t.add_row(p.capitalize(), *(f"{t1['paper'][p][k]} / {_f(t1[key][p][k], 1)}"
                                        for k in kinds))
        out.print(t)
    for key, fig in (("fig7", "Fig. 7"), ("fig9", "Figs. 8-9")):
        sw = res[key]
        s = Table(title=f"{fig}: total runtime of {sw['jobs']} NBODY jobs (duration "
                  f"{R.FIG_DURATION:g}), {sw['large']} x 32 + {sw['small']} x 8 cores = ratio "
                  f"{sw['ratio']}; mean of {sw['seeds']} seed(s)", title_justify="left")
        for col in ("speedup f", "Soft", "Hard", "None", "Soft vs None", "best"):
            s.add_column(col, justify="right")
        for i, f in enumerate(sw["speedups"]):
            row = {p: sw["runtime"][p][i] for p in R.POLICIES}
            best = min(row, key=lambda p: row[p])
            s.add_row(f"{f:g}", *(_f(row[p], 1) for p in R.POLICIES),
                      f"{-sw['soft_vs_none_pct'][i]:+.0f}%", best.capitalize())
        out.print(s)
        inf = sw["inflection"]
        per = ", ".join("–" if v is None else f"{v:.1f}" for v in sw["inflections"].values())
        out.print(f"{fig}: Hard overtakes Soft at f = "
                  f"{'(not within the sweep)' if inf is None else f'{inf:.1f}'} on the means "
                  f"(per seed: {per}); paper: {res['paper_inflection'][sw['ratio']]}")
    out.print(f"figures: {', '.join(res['figures'])} in {out_dir}; numbers: "
              f"{out_dir}/results.json")
    print_claims(res, "alsched")
    out.print("Why ours differ from the paper's: docs/reproduction-alsched.md")
