"""``utilon reproduce rds``: the paper's evaluation, paper beside ours, and its claims over
seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from utilon.cli.common import JobsOpt, RayAddressOpt, out
from utilon.cli.reproduce.common import SeedsOpt, _p, print_claims, reproduce_app, run


@reproduce_app.command("rds")
def rds(
    quick: Annotated[bool, typer.Option("--quick", help="3 seeds' held-out days, the "
                                        "claims' systems only; no in-sample days, sweeps, "
                                        "Fig. 11b or figures: about a minute")] = False,
    out_dir: Annotated[Path, typer.Option("--out", help="where runs, figures and "
                                          "results.json go")] = Path("runs/reproduce/rds"),
    seed: Annotated[int, typer.Option("--seed", help="first seed: seed s runs on held-out "
                                      "solar day s (repro.rds.day_of_seed) with its own "
                                      "task jitter and profile")] = 0,
    seeds: SeedsOpt = None,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """RDS (Cheng et al., TPDS 2019): case study (Table 1/Fig. 2), Table 3 workload in
    scale-up and scale-out (Figs. 7–11)."""
    from rich.table import Table

    from utilon.repro import rds as R

    res = run(R.reproduce, out_dir, quick=quick, seed=seed, seeds=seeds, jobs=jobs,
              ray_address=ray_address)
    t = Table(title="Table 1 / Fig. 2 case study: finish time (min) / deadline, met?",
              title_justify="left")
    for c in ("scheduler", "J1", "J2", "paper"):
        t.add_column(c)
    for s, per_job in res["case"]["rows"].items():
        cells = [f"{v['finish_min']} / {v['deadline_min']} {'met' if v['met'] else 'MISSED'}"
                 for v in per_job.values()]
        t.add_row(s, *cells, res["case"]["paper"].get(s, ""))
    out.print(t)
    groups = [("held-out", res, f"held-out days of seeds {res['seeds'][0]}–"
               f"{res['seeds'][-1]}: mean over seeds")]
    if "in_sample" in res:
        groups.append(("in-sample", res["in_sample"], "IN-SAMPLE development days "
                       f"{', '.join(res['in_sample']['days'])}: mean over days"))
    names = {"rds-no-decay": "rds, no δ decay", "rds-h1": "rds, H = 1",
             "rds-cumulative": "rds, cumulative Y",
             "rds-deadline": "rds, objective: deadline",
             "rds-tardiness": "rds, objective: tardiness",
             "rds-tardiness-h1": "rds, objective: tardiness, H = 1",
             "rds-job-models": "rds, models: job"}
    for _, g, what in groups:
        for mode in R.MODES:
            tt = Table(title=f"Table 3 workload, {mode} ({what})", title_justify="left")
            for c in ("scheduler", "penalty", "soft misses", "hard misses", "mean completion",
                      "RDS: less penalty (paper)", "RDS: less penalty (ours)",
                      "objective: tardiness: less penalty"):
                tt.add_column(c, justify="left" if c == "scheduler" else "right")
            tard = g.get("fig7_variants", {}).get(mode, {}).get("rds-tardiness", {})
            for s, r in g["table3"][mode].items():
                f7 = g["fig7"][mode].get(s, {})
                paper = R.PAPER_FIG7[mode].get(s)
                tt.add_row(names.get(s, s), f"{r['penalty']:.3f}", _p(r["soft_miss_pct"]),
                           _p(r["hard_miss_pct"]), f"{r['response_mean_min']:.1f} min",
                           "–" if paper is None else f"{paper}%",
                           _p(f7.get("penalty_less_pct")) if f7 else "–",
                           _p(tard[s].get("penalty_less_pct")) if s in tard else "–")
            out.print(tt)
    ps = Table(title="Penalty per seed (each seed: its held-out solar day, never used in "
               "development; task jitter and profile drawn from the seed)",
               title_justify="left")
    labels = ("fair", "edf-n", "edf-p", "rds", "rds-green", "rds-deadline", "rds-tardiness")
    for c in ("seed", "day", "mode", *labels):
        ps.add_column(c, justify="right")
    for row in res["per_seed"]:
        ps.add_row(str(row["seed"]), row["day"], row["mode"],
                   *[f"{row['penalty'][lb]:.2f}" if lb in row["penalty"] else "–"
                     for lb in labels])
    out.print(ps)
    f9 = Table(title="Fig. 9: RDS soft vs hard misses by workload (paper: hard misses much "
               "fewer than soft)", title_justify="left")
    for c in ("days", "mode", *R.TASK_SECONDS):
        f9.add_column(c, justify="right")
    for gname, g, _ in groups:
        for mode, kinds in g["fig9"].items():
            f9.add_row(gname, mode, *[f"soft {_p(v['soft_pct'])} / hard {_p(v['hard_pct'])}"
                                      for v in kinds.values()])
    out.print(f9)
    f10 = Table(title="Fig. 10: completion-time prediction NRMSE and injected error",
                title_justify="left")
    for c in ("days", "mode", "NRMSE over completion time / remaining time, replayed with "
              "the allocations received (perfect knowledge of the future share; paper 9.6%)",
              "with the allocation the controller planned (forecasts that never finish)",
              "models: job", "injected error → soft misses (paper: 10% → 10.5%, 35% → 33%)"):
        f10.add_column(c)
    for gname, g, _ in groups:
        for mode, v in g["fig10"].items():
            inj = ", ".join(f"{e}% → {_p(x['soft_miss_pct'])}"
                            for e, x in v["injected"].items())
            f10.add_row(gname, mode, f"{_p(v['completion_nrmse_by_completion_time_pct'], 1)} / "
                        f"{_p(v['completion_nrmse_pct'], 1)}",
                        f"{_p(v.get('planned_nrmse_by_completion_time_pct'), 1)} / "
                        f"{_p(v.get('planned_nrmse_pct'), 1)} "
                        f"({v.get('planned_never_finish', 0)})",
                        f"{_p(v.get('job_models_nrmse_by_completion_time_pct'), 1)} / "
                        f"{_p(v.get('job_models_nrmse_pct'), 1)}", inj)
    out.print(f10)
    hz = Table(title="Horizon sensitivity H_p = H_c (paper: 3 is best)", title_justify="left")
    for c in ("mode", "H → penalty (soft misses)"):
        hz.add_column(c)
    for mode, v in groups[-1][1]["horizon"].items():
        hz.add_row(mode, ", ".join(f"{h}: {x['penalty']:.3f} ({_p(x['soft_miss_pct'])})"
                                   for h, x in v.items()))
    hz.title = f"{hz.title} — {groups[-1][0]} days"
    out.print(hz)
    f11 = Table(title="Fig. 11: capacity predictors (paper: green 16% less penalty than "
                "ARIMA; ARIMA NRMSE 9.5–13% on Google)", title_justify="left")
    for c in ("days", "mode", "arima penalty", "green penalty", "oracle penalty",
              "green: less penalty", "NRMSE 1-step arima / green"):
        f11.add_column(c, justify="right")

    def pen(v: dict[str, Any], label: str) -> str:
        return f"{v[label]['penalty']:.3f}" if label in v else "–"

    for gname, g, _ in groups:
        for mode, v in g["fig11"].items():
            f11.add_row(gname, mode, pen(v, "rds"), pen(v, "rds-green"), pen(v, "rds-oracle"),
                        _p(v["green_less_penalty_pct"]),
                        f"{100 * v['rds']['capacity_nrmse']['1']:.1f}% / "
                        f"{100 * v['rds-green']['capacity_nrmse']['1']:.1f}%")
    out.print(f11)
    gg = res["fig11b"]["ours_nrmse_by_step"]
    if gg:
        out.print(f"Fig. 11b: ARIMA on a Google cell's capacity ({res['fig11b']['days']} "
                  "day(s), 2,000 machines; it "
                  f"varies by {gg['capacity_range_pct']:.1f}% of its mean), NRMSE by step — "
                  "over the range: " + ", ".join(f"{k}: {100 * v:.1f}%"
                                                 for k, v in gg["by_range"].items())
                  + "; over the mean: " + ", ".join(f"{k}: {100 * v:.2f}%"
                                                    for k, v in gg["by_mean"].items())
                  + " (paper 9.5–13%)")
    out.print(f"figures: {', '.join(res['figures'])} in {out_dir}; "
              f"numbers: {out_dir}/results.json")
    if "in_sample" in res:
        print_claims({"seeds": list(range(len(res["in_sample"]["days"]))),
                      "claims": res["in_sample"]["claims"]},
                     "RDS on the IN-SAMPLE development days (one 'seed' per day: "
                     f"{', '.join(res['in_sample']['days'])})")
    print_claims(res, "RDS (held-out days: " + ", ".join(
        f"seed {k} {d}" for k, d in res["days"].items()) + ")")
    if res["quick"]:
        out.print("--quick: held-out days only; Fig. 11a checked for the faithful rds only; "
                  "no in-sample days, horizon or injected-error sweeps, Fig. 11b or figures")
    out.print("Why ours differ from the paper's: docs/reproduction-rds.md")
