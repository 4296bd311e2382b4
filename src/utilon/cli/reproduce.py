"""``utilon reproduce <paper>``: a paper's tables with its numbers beside ours, and its figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from utilon.cli.common import JobsOpt, RayAddressOpt, err, out
from utilon.cli.common import errors as _errors
from utilon.parallel import check_jobs

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
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """CORA (Huang et al., INFOCOM 2015): Tables I–III, Figs. 3–4."""
    from utilon.repro import cora as R

    with _errors(), err.status("running", spinner="dots") as status:
        check_jobs(jobs)
        res = R.reproduce(out_dir, quick=quick, seed=seed, jobs=jobs, ray_address=ray_address,
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
    b = t1["alone_bound"]
    t.add_row("[dim]each job alone (no scheduler can beat)[/dim]", "", _f(b["min"], 4), "",
              _f(b["sum"], 1), "", "", "")
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
                  "RRH min (paper/ours)", "RRH agg (paper/ours)", "CORA-CT min / agg",
                  "CORA-CT-SUM min / agg"):
            tt.add_column(c, justify="right")
        for pct, r in res[key].items():
            p = paper[int(pct)]
            variants = [f"{_f(v['min'], 4)} / {_f(v['sum'], 1)}" if (v := r.get(k)) else "–"
                        for k in ("cora-ct", "cora-ct-sum")]
            tt.add_row(pct, f"{p[0]:.4g} / {r['cora']['min']:.4g}",
                       f"{p[1]:.1f} / {r['cora']['sum']:.1f}",
                       f"{p[2]:.4g} / {r['rrh']['min']:.4g}",
                       f"{p[3]:.1f} / {r['rrh']['sum']:.1f}", *variants)
        out.print(tt)
    out.print(f"figures: {out_dir}/fig3-ccdf.png, fig4-delta.png, fig5-delta-critical.png, "
              "fig6-delta-steep.png; "
              f"numbers: {out_dir}/results.json; runs: {out_dir}/table1/<scheduler>/")
    out.print("Why ours differ from the paper's: docs/reproduction-cora.md")


def _p(x: float | None, nd: int = 0) -> str:
    return "–" if x is None or x != x else f"{x:.{nd}f}%"


@reproduce_app.command("rds")
def rds(
    quick: Annotated[bool, typer.Option("--quick", help="one solar day instead of five, "
                                        "fewer error/horizon points: about a minute")] = False,
    out_dir: Annotated[Path, typer.Option("--out", help="where runs, figures and "
                                          "results.json go")] = Path("runs/reproduce/rds"),
    seed: Annotated[int, typer.Option("--seed", help="task-duration jitter seed")] = 0,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """RDS (Cheng et al., TPDS 2019): case study (Table 1/Fig. 2), Table 3 workload in
    scale-up and scale-out (Figs. 7–11)."""
    from utilon.repro import rds as R

    with _errors(), err.status("running", spinner="dots") as status:
        check_jobs(jobs)
        res = R.reproduce(out_dir, quick=quick, seed=seed, jobs=jobs, ray_address=ray_address,
                          progress=lambda m: status.update(m))
    t = Table(title="Table 1 / Fig. 2 case study: finish time (min) / deadline, met?",
              title_justify="left")
    for c in ("scheduler", "J1", "J2", "paper"):
        t.add_column(c)
    for s, per_job in res["case"]["rows"].items():
        cells = [f"{v['finish_min']} / {v['deadline_min']} {'met' if v['met'] else 'MISSED'}"
                 for v in per_job.values()]
        t.add_row(s, *cells, res["case"]["paper"].get(s, ""))
    out.print(t)
    days = ", ".join(res["days"])
    for mode in R.MODES:
        tt = Table(title=f"Table 3 workload, {mode} (solar days {days}): mean over days",
                   title_justify="left")
        for c in ("scheduler", "penalty", "soft misses", "hard misses", "mean completion",
                  "RDS: less penalty (paper)", "RDS: less penalty (ours)",
                  "objective: tardiness: less penalty"):
            tt.add_column(c, justify="left" if c == "scheduler" else "right")
        names = {"rds-no-decay": "rds, no δ decay", "rds-h1": "rds, H = 1",
                 "rds-cumulative": "rds, cumulative Y",
                 "rds-deadline": "rds, objective: deadline",
                 "rds-tardiness": "rds, objective: tardiness",
                 "rds-tardiness-h1": "rds, objective: tardiness, H = 1",
                 "rds-job-models": "rds, models: job"}
        tard = res.get("fig7_variants", {}).get(mode, {}).get("rds-tardiness", {})
        for s, r in res["table3"][mode].items():
            f7 = res["fig7"][mode].get(s, {})
            paper = R.PAPER_FIG7[mode].get(s)
            tt.add_row(names.get(s, s), f"{r['penalty']:.3f}", _p(r["soft_miss_pct"]),
                       _p(r["hard_miss_pct"]), f"{r['response_mean_min']:.1f} min",
                       "–" if paper is None else f"{paper}%",
                       _p(f7.get("penalty_less_pct")) if f7 else "–",
                       _p(tard[s].get("penalty_less_pct")) if s in tard else "–")
        out.print(tt)
    f9 = Table(title="Fig. 9: RDS soft vs hard misses by workload (paper: hard misses much "
               "fewer than soft)", title_justify="left")
    for c in ("mode", *R.TASK_SECONDS):
        f9.add_column(c, justify="right")
    for mode, kinds in res["fig9"].items():
        f9.add_row(mode, *[f"soft {_p(v['soft_pct'])} / hard {_p(v['hard_pct'])}"
                           for v in kinds.values()])
    out.print(f9)
    f10 = Table(title="Fig. 10: completion-time prediction NRMSE and injected error",
                title_justify="left")
    for c in ("mode", "NRMSE over completion time / remaining time (paper 9.6%)",
              "models: job", "injected error → soft misses (paper: 10% → 10.5%, 35% → 33%)"):
        f10.add_column(c)
    for mode, v in res["fig10"].items():
        inj = ", ".join(f"{e}% → {_p(x['soft_miss_pct'])}" for e, x in v["injected"].items())
        f10.add_row(mode, f"{_p(v['completion_nrmse_by_completion_time_pct'], 1)} / "
                          f"{_p(v['completion_nrmse_pct'], 1)}",
                    f"{_p(v.get('job_models_nrmse_by_completion_time_pct'), 1)} / "
                    f"{_p(v.get('job_models_nrmse_pct'), 1)}", inj)
    out.print(f10)
    hz = Table(title="Horizon sensitivity H_p = H_c (paper: 3 is best)", title_justify="left")
    for c in ("mode", "H → penalty (soft misses)"):
        hz.add_column(c)
    for mode, v in res["horizon"].items():
        hz.add_row(mode, ", ".join(f"{h}: {x['penalty']:.3f} ({_p(x['soft_miss_pct'])})"
                                   for h, x in v.items()))
    out.print(hz)
    f11 = Table(title="Fig. 11: capacity predictors (paper: green 16% less penalty than "
                "ARIMA; ARIMA NRMSE 9.5–13% on Google)", title_justify="left")
    for c in ("mode", "arima penalty", "green penalty", "oracle penalty",
              "green: less penalty", "NRMSE 1-step arima / green"):
        f11.add_column(c, justify="right")
    for mode, v in res["fig11"].items():
        f11.add_row(mode, f"{v['rds']['penalty']:.3f}", f"{v['rds-green']['penalty']:.3f}",
                    f"{v['rds-oracle']['penalty']:.3f}", _p(v["green_less_penalty_pct"]),
                    f"{100 * v['rds']['capacity_nrmse']['1']:.1f}% / "
                    f"{100 * v['rds-green']['capacity_nrmse']['1']:.1f}%")
    out.print(f11)
    g = res["fig11b"]["ours_nrmse_by_step"]
    if g:
        out.print(f"Fig. 11b: ARIMA on a Google cell's capacity ({res['fig11b']['days']} "
                  "day(s), 2,000 machines; it "
                  f"varies by {g['capacity_range_pct']:.1f}% of its mean), NRMSE by step — "
                  "over the range: " + ", ".join(f"{k}: {100 * v:.1f}%"
                                                 for k, v in g["by_range"].items())
                  + "; over the mean: " + ", ".join(f"{k}: {100 * v:.2f}%"
                                                    for k, v in g["by_mean"].items())
                  + " (paper 9.5–13%)")
    out.print(f"figures: {', '.join(res['figures'])} in {out_dir}; "
              f"numbers: {out_dir}/results.json")
    out.print("Why ours differ from the paper's: docs/reproduction-rds.md")


def _s(x: float | None) -> str:
    return "–" if x is None or x != x else f"{x:,.0f}"


@reproduce_app.command("ras")
def ras(
    quick: Annotated[bool, typer.Option("--quick", help="skip the sensitivity runs "
                                        "(no-thrashing, control period): under a minute")]
    = False,
    out_dir: Annotated[Path, typer.Option("--out", help="where scenarios, figures and "
                                          "results.json go")] = Path("runs/reproduce/ras"),
    seed: Annotated[int, typer.Option("--seed", help="task-duration jitter seed")] = 0,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """RAS (Polo et al., Middleware 2011): Experiments 1 and 2 on the Gridmix workload of
    Table 1 (Figs. 3–6)."""
    from utilon.repro import ras as R

    with _errors(), err.status("running", spinner="dots") as status:
        check_jobs(jobs)
        res = R.reproduce(out_dir, quick=quick, seed=seed, jobs=jobs, ray_address=ray_address,
                          progress=lambda m: status.update(m))
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
    f3 = Table(title="Fig. 3, Experiment 1 (relaxed goals): makespan, Fair Scheduler with k map "
               f"slots vs RAS (thrashing γ {res['thrashing']})", title_justify="left")
    for c in ("scheduler", "makespan s (paper)", "makespan s (ours)", "RAS better by (ours)",
              "tasks per TT (ours)", "CPU use % (ours)", "CPU waiting % (ours)"):
        f3.add_column(c, justify="left" if c == "scheduler" else "right")
    paper = {"ras": R.PAPER_RAS_MAKESPAN[0], f"fair-{R.PAPER_FAIR_BEST[0]}": R.PAPER_FAIR_BEST[1]}
    for name in [f"fair-{k}" for k in range(1, 9)] + ["ras"]:
        gain = e1["ras_gain_pct"].get(name)
        f3.add_row(name, _s(paper.get(name)), _s(e1["makespan"][name]),
                   "" if gain is None else f"{gain:+.0f}%",
                   f"{e1['concurrency_per_tt'][name]:.2f}"
                   + (f" (paper {R.PAPER_CONCURRENCY})" if name == "ras" else ""),
                   f"{e1['cpu'][name]['use']:.0f}", f"{e1['cpu'][name]['wait']:.1f}")
    out.print(f3)
    lo, hi = R.PAPER_GAIN_PCT
    gains = [v for v in e1["ras_gain_pct"].values() if v is not None]
    out.print(f"RAS better than every static configuration by (paper) {lo:.0f}–{hi:.0f}% / "
              f"(ours) {min(gains):+.0f}…{max(gains):+.0f}%; best static k: paper "
              f"{R.PAPER_FAIR_BEST[0]}, ours {e1['fair_best_k']}")
    c1 = Table(title="Experiment 1: completion time per job (s, absolute)", title_justify="left")
    for c in ("job", "paper", "RAS (ours)", f"fair-{e1['fair_best_k']} (ours)"):
        c1.add_column(c, justify="left" if c == "job" else "right")
    for j, r in e1["completion"].items():
        c1.add_row(j, _s(r["paper"]), _s(r["ours"]), _s(r[f"fair-{e1['fair_best_k']} (ours)"]))
    out.print(c1)
    e2 = res["exp2"]
    c2 = Table(title="Experiment 2 (tight goals, Fig. 6): completion time vs goal per job "
               "(s, absolute)", title_justify="left")
    for c in ("job", "goal", "paper", "RAS (ours)", "Fair (ours)", "Exp. 1 paper / ours"):
        c2.add_column(c, justify="left" if c == "job" else "right")

    def met(x: float | None, ok: bool) -> str:
        return f"{_s(x)} {'met' if ok else 'MISSED'}"

    for j, r in e2["jobs"].items():
        c2.add_row(j, _s(r["goal"]), met(r["paper"], r["paper_met"]),
                   met(r["ours"], r["ours_met"]), met(r["fair (ours)"], r["fair_met"]),
                   f"{_s(r['paper_exp1'])} / {_s(r['ours_exp1'])}")
    out.print(c2)
    m2 = e2["makespan"]
    out.print(f"Experiment 2: goals met — paper {e2['met']['paper']}/9, RAS (ours) "
              f"{e2['met']['ours']}/9, Fair (ours) {e2['met']['fair (ours)']}/9; makespan RAS "
              f"(paper 4,614 s) {_s(m2['ras'])} s")
    if "exp1_no_thrashing" in res:
        nt = res["exp1_no_thrashing"]["makespan"]
        out.print("Experiment 1 without thrashing (γ = 0, pure proportional sharing): "
                  + ", ".join(f"{k} {_s(v)}" for k, v in nt.items()))
        out.print("RAS control period T: " + ", ".join(
            f"{k} s → {_s(v)}" for k, v in sorted(res["interval"].items(),
                                                  key=lambda kv: float(kv[0]))))
    out.print(f"figures: fig3-makespan.png, fig4-tasks-cpu.png, fig5-utility.png, "
              f"fig6-exp2.png in {out_dir}; numbers: {out_dir}/results.json")
    out.print("Why ours differ from the paper's: docs/reproduction-ras.md")


@reproduce_app.command("alsched")
def alsched(
    quick: Annotated[bool, typer.Option("--quick", help="one seed and 6 speedup factors "
                                        "instead of 3 seeds and 14")] = False,
    out_dir: Annotated[Path, typer.Option("--out", help="where figures and results.json go")]
    = Path("runs/reproduce/alsched"),
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """alsched (Tumanov et al., SoCC 2012): Table 1 and the Soft / Hard / None sweeps of
    Figs. 7-9."""
    from utilon.repro import alsched as R

    with _errors(), err.status("running", spinner="dots") as status:
        check_jobs(jobs)
        res = R.reproduce(out_dir, quick=quick, jobs=jobs, ray_address=ray_address,
                          progress=lambda m: status.update(m))
    t1 = res["table1"]
    t = Table(title=f"Table 1: total time of {t1['jobs']} jobs at t = 0 (duration "
              f"{t1['duration']:g}; 8 x 32 + 64 x 8 cores; NBODY speedup {t1['speedup']:g}, "
              "assumed), paper / ours", title_justify="left")
    t.add_column("policy")
    kinds = list(t1["paper"]["soft"])
    for k in kinds:
        t.add_column(k, justify="right")
    for p in R.POLICIES:
        t.add_row(p.capitalize(), *(f"{t1['paper'][p][k]} / {_f(t1['ours'][p][k], 1)}"
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
        out.print(f"{fig}: Hard overtakes Soft at f = "
                  f"{'(not within the sweep)' if inf is None else f'{inf:.1f}'}; paper: "
                  f"{res['paper_inflection'][sw['ratio']]}")
    checks = Table(title="The paper's claims, checked", title_justify="left")
    for col in ("claim (paper)", "ours", "holds"):
        checks.add_column(col)
    for row in res["claims"]:
        checks.add_row(row["claim"], row["ours"], "yes" if row["holds"] else "NO")
    out.print(checks)
    out.print(f"figures: {', '.join(res['figures'])} in {out_dir}; numbers: "
              f"{out_dir}/results.json")
    out.print("Why ours differ from the paper's: docs/reproduction-alsched.md")


@reproduce_app.command("cura")
def cura(
    quick: Annotated[bool, typer.Option("--quick", help="Appendix B and Figs. 5-6 on 300 jobs "
                                        "(about 30 s) instead of every figure on 500")] = False,
    out_dir: Annotated[Path, typer.Option("--out", help="where figures and results.json go")]
    = Path("runs/reproduce/cura"),
    seed: Annotated[int, typer.Option("--seed", help="workload seed")] = 1,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """Cura (Palanisamy et al., IEEE TPDS 2015): Appendix B's schedules (Tables 5-6) and the
    service comparisons of Figs. 5-12."""
    from utilon.repro import cura as R

    with _errors(), err.status("running", spinner="dots") as status:
        check_jobs(jobs)
        res = R.reproduce(out_dir, quick=quick, seed=seed, jobs=jobs, ray_address=ray_address,
                          progress=lambda m: status.update(m))
    ab = res["appendix_b"]
    for key, title in (("table5", f"Table 5: VM-aware schedule, pools {ab['pools_t5']}"),
                       ("table6", f"Table 6: with reconfiguration, pools {ab['pools_t6']} "
                                  "(from §3.2 on these jobs)")):
        tab = ab[key]
        t = Table(title=title + " — paper | ours", title_justify="left")
        for col in ("job", "type", "arrive", "deadline", "VM", "VMs", "start", "end", "met",
                  "VM ", "VMs ", "start ", "end ", "met "):
            t.add_column(col, justify="right")
        for r in tab["rows"]:
            p, o = r["paper"], r["ours"]
            flag = "" if p["consistent"] else "*"
            t.add_row(str(r["job"]), r["type"], f"{r['arrival']:g}", f"{r['deadline']:g}",
                      str(p["vm"]), str(p["vms"]), f"{p['start']}", f"{p['end']}{flag}",
                      "yes" if p["met"] else "NO",
                      _f(o["vm"]), str(o["vms"]), _f(o["start"], 0), _f(o["end"], 0),
                      "yes" if o["met"] else ("NO" if not o["dropped"] else "dropped"))
        out.print(t)
        out.print(f"{key}: deadlines met paper {tab['met_paper']}/15, ours {tab['met_ours']}/15;"
                  f" total cost (Tables 1-4 prices) paper {tab['cost_paper']:.0f}, ours "
                  f"{tab['cost_ours']:.0f}; * = paper row's duration does not match its type "
                  f"and cluster in Tables 1-4 (rows {tab['inconsistent_paper_rows']})")
    for name, sw in res["figures"].items():
        if name == "fig9":
            t = Table(title="Fig. 9: success rate on fixed fleets", title_justify="left")
            fleets = list(next(iter(sw.values())))
            t.add_column("service")
            for s in fleets:
                t.add_column(f"{s} servers", justify="right")
            for svc, pts in sw.items():
                t.add_row(svc, *(f"{pts[s]:.3f}" for s in fleets))
            out.print(t)
            continue
        t = Table(title=f"{name.replace('_', '/').replace('fig', 'Fig. ')}: servers required "
                  f"(searched) / mean response s / per-job server-hours / effective "
                  f"utilization, by {sw['x']}", title_justify="left")
        t.add_column(sw["x"])
        svcs = list(next(iter(sw["points"].values())))
        for svc in svcs:
            t.add_column(svc, justify="right")
        for x, p in sw["points"].items():
            t.add_row(x, *(f"{p[s]['servers']} / {_f(p[s]['mean_response_s'], 0)} / "
                           f"{p[s]['per_job_server_hours']:.3f} / "
                           f"{p[s]['effective_utilization']:.2f}" for s in svcs))
        out.print(t)
    c = Table(title="The paper's claims beside ours", title_justify="left")
    c.add_column("paper")
    c.add_column("ours")
    for k, v in res["claims"]["paper"].items():
        c.add_row(v, res["claims"]["ours"].get(k, "(not run in --quick)"))
    out.print(c)
    out.print(f"figures: {', '.join(Path(p).name for p in res['plots'])} in {out_dir}; "
              f"numbers: {out_dir}/results.json")
    out.print("Why ours differ from the paper's: docs/reproduction-cura.md")
