"""``utilon reproduce ras``: the paper's evaluation, paper beside ours, and its claims over
seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from utilon.cli.common import JobsOpt, RayAddressOpt, out
from utilon.cli.reproduce.common import SeedsOpt, _s, print_claims, reproduce_app, run


@reproduce_app.command("ras")
def ras(
    quick: Annotated[bool, typer.Option("--quick", help="3 seeds unless --seeds; skip the "
                                        "sensitivity runs (no-thrashing, control period)")]
    = False,
    out_dir: Annotated[Path, typer.Option("--out", help="where scenarios, figures and "
                                          "results.json go")] = Path("runs/reproduce/ras"),
    seed: Annotated[int, typer.Option("--seed", help="first seed (task-duration jitter)")] = 0,
    seeds: SeedsOpt = None,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """RAS (Polo et al., Middleware 2011): Experiments 1 and 2 on the Gridmix workload of
    Table 1 (Figs. 3–6)."""
    from rich.table import Table

    from utilon.repro import ras as R

    res = run(R.reproduce, out_dir, quick=quick, seed=seed, seeds=seeds, jobs=jobs,
              ray_address=ray_address)
    w = Table(title="Table 1 workload on 20 TaskTrackers (task durations assumed: see docs)",
              title_justify="left")
    for c in ("job", "app", "input GB", "maps", "reduces", "map s", "reduce s", "submit",
              "alone (paper)", f"alone, {res['calibration']['isolation_slots']} slots (ours)",
              "alone, RAS (ours)"):
        w.add_column(c, justify="left" if c in ("job", "app") else "right")
    for r in res["workload"]:
        w.add_row(r["job"], r["app"], f"{r['input_gb']:g}", str(r["maps"]), str(r["reduces"]),
                  f"{r['map_s']:.0f}", f"{r['reduce_s']:.0f}", _s(r["submit"]),
                  _s(r["isolation_paper"]), _s(r["isolation_ours"]), _s(r["isolation_ras"]))
    out.print(w)
    fit = res["calibration"]["fit"]
    out.print(f"Calibration (on the Fair Scheduler only; see docs/reproduction-ras.md): "
              f"Fair-{fit['best_k']['paper']} paper {_s(fit['fair_best']['paper'])} / ours "
              f"{_s(fit['fair_best']['ours'])} ({fit['fair_best']['error_pct']:+.1f}%); worst "
              f"Fair-k ≈ {_s(fit['fair_worst']['target'])} / ours {_s(fit['fair_worst']['ours'])} "
              f"at k = {fit['fair_worst']['k']} ({fit['fair_worst']['error_pct']:+.1f}%); best k "
              f"paper {fit['best_k']['paper']} / ours {fit['best_k']['ours']}")
    e1 = res["exp1"]
    f3 = Table(title=f"Fig. 3, Experiment 1 (relaxed goals), seed {res['seeds'][0]}: makespan, "
               f"Fair Scheduler with k map slots vs RAS (thrashing γ {res['thrashing']})",
               title_justify="left")
    for c in ("scheduler", "makespan s (paper)", "makespan s (ours)", "RAS better by (ours)",
              "tasks per TT (ours)", "CPU use % (ours)", "CPU waiting % (ours)"):
        f3.add_column(c, justify="left" if c == "scheduler" else "right")
    paper = {"ras": R.PAPER_RAS_MAKESPAN[0], f"fair-{R.PAPER_FAIR_BEST[0]}": R.PAPER_FAIR_BEST[1]}
    for name in [f"fair-{k}" for k in range(1, 9)] + list(res["systems"]):
        gain = e1["ras_gain_pct"].get(name)
        f3.add_row(name, _s(paper.get(name)), _s(e1["makespan"][name]),
                   "" if gain is None else f"{gain:+.0f}%",
                   f"{e1['concurrency_per_tt'][name]:.2f}"
                   + (f" (paper {R.PAPER_CONCURRENCY})" if name in res["systems"] else ""),
                   f"{e1['cpu'][name]['use']:.0f}", f"{e1['cpu'][name]['wait']:.1f}")
    out.print(f3)
    lo, hi = R.PAPER_GAIN_PCT
    gains = [v for v in e1["ras_gain_pct"].values() if v is not None]
    out.print(f"RAS better than every static configuration by (paper) {lo:.0f}–{hi:.0f}% / "
              f"(ours) {min(gains):+.0f}…{max(gains):+.0f}%; best static k: paper "
              f"{R.PAPER_FAIR_BEST[0]}, ours {e1['fair_best_k']}")
    c1 = Table(title=f"Experiment 1, seed {res['seeds'][0]}: completion time per job "
               "(s, absolute)", title_justify="left")
    for c in ("job", "paper", "RAS (ours)", f"fair-{e1['fair_best_k']} (ours)"):
        c1.add_column(c, justify="left" if c == "job" else "right")
    for j, r in e1["completion"].items():
        c1.add_row(j, _s(r["paper"]), _s(r["ours"]), _s(r[f"fair-{e1['fair_best_k']} (ours)"]))
    out.print(c1)
    e2 = res["exp2"]
    seed = res["seeds"][0]
    c2 = Table(title=f"Experiment 2 (tight goals, Fig. 6), seed {seed}: completion time vs "
               "goal per job (s, absolute); ras = faithful, ras-reduce-aware = variant",
               title_justify="left")
    labels = e2["systems"]
    for c in ("job", "goal", "paper", *(f"{lab} (ours)" for lab in labels),
              "Exp. 1 paper / ras (ours)"):
        c2.add_column(c, justify="left" if c == "job" else "right")

    def met(x: float | None, ok: bool) -> str:
        return f"{_s(x)} {'met' if ok else 'MISSED'}"

    for j, r in e2["jobs"].items():
        c2.add_row(j, _s(r["goal"]), met(r["paper"], r["paper_met"]),
                   *(met(r[lab]["ours"], r[lab]["met"]) for lab in labels),
                   f"{_s(r['paper_exp1'])} / {_s(r['ras']['exp1'])}")
    out.print(c2)
    m2 = e2["makespan"]
    out.print(f"Experiment 2, seed {seed}: goals met — paper {e2['met']['paper']}/9, "
              + ", ".join(f"{lab} (ours) {e2['met'][lab]}/9" for lab in labels)
              + "; makespan (paper RAS 4,614 s): "
              + ", ".join(f"{lab} {_s(m2[lab])} s" for lab in labels))
    ps = Table(title="Per seed: Experiment 1 makespan (s) and Experiment 2 goals missed "
               "(paper: J1, J2)", title_justify="left")
    for c in ("seed", "best Fair-k", "ras", "ras-reduce-aware", "Fair best-k",
              "missed: ras", "missed: ras-reduce-aware", "missed: Fair best-k"):
        ps.add_column(c, justify="left" if c.startswith("missed") else "right")
    for r in res["per_seed"]:
        k = r["fair_best_k"]
        ms = r["exp1_makespan"]
        miss = r["exp2_missed"]
        ps.add_row(str(r["seed"]), str(k), _s(ms["ras"]), _s(ms["ras-reduce-aware"]),
                   _s(ms[f"fair-{k}"]),
                   *(f"{len(miss[lab])}: {' '.join(miss[lab]) or '–'}"
                     for lab in ("ras", "ras-reduce-aware", f"fair-{k}")))
    out.print(ps)
    if "exp1_no_thrashing" in res:
        nt = res["exp1_no_thrashing"]["makespan"]
        out.print("Experiment 1 without thrashing (γ = 0, pure proportional sharing): "
                  + ", ".join(f"{k} {_s(v)}" for k, v in nt.items()))
        out.print("RAS control period T: " + ", ".join(
            f"{k} s → {_s(v)}" for k, v in sorted(res["interval"].items(),
                                                  key=lambda kv: float(kv[0]))))
    out.print(f"figures: fig3-makespan.png, fig4-tasks-cpu.png, fig5-utility.png, "
              f"fig6-exp2.png in {out_dir}; numbers: {out_dir}/results.json")
    print_claims(res, "RAS")
    out.print("Why ours differ from the paper's: docs/reproduction-ras.md")
