"""``utilon reproduce cura``: the paper's evaluation, paper beside ours, and its claims over
seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from utilon.cli.common import JobsOpt, RayAddressOpt, out
from utilon.cli.reproduce.common import SeedsOpt, _f, print_claims, reproduce_app, run


@reproduce_app.command("cura")
def cura(
    quick: Annotated[bool, typer.Option("--quick", help="Appendix B and Figs. 5-6 on 300 jobs "
                                        "(3 seeds, about a minute) instead of Figs. 5-6 on 500 "
                                        "jobs and Figs. 7-12 on the first seed")] = False,
    out_dir: Annotated[Path, typer.Option("--out", help="where figures and results.json go")]
    = Path("runs/reproduce/cura"),
    seed: Annotated[int, typer.Option("--seed", help="first workload seed")] = 1,
    seeds: SeedsOpt = None,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """Cura (Palanisamy et al., IEEE TPDS 2015): Appendix B's schedules (Tables 5-6) and the
    service comparisons of Figs. 5-12."""
    from rich.table import Table

    from utilon.repro import cura as R

    res = run(R.reproduce, out_dir, quick=quick, seed=seed, seeds=seeds, jobs=jobs,
              ray_address=ray_address)
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
            t = Table(title=f"Fig. 9 (seed {res['seed']}): success rate on fixed fleets",
                      title_justify="left")
            fleets = list(next(iter(sw.values())))
            t.add_column("service")
            for s in fleets:
                t.add_column(f"{s} servers", justify="right")
            for svc, pts in sw.items():
                t.add_row(svc, *(f"{pts[s]:.3f}" for s in fleets))
            out.print(t)
            continue
        t = Table(title=f"{name.replace('_', '/').replace('fig', 'Fig. ')} (seed "
                  f"{res['seed']}, {res['jobs']} jobs): servers required (searched) / mean "
                  f"response s / per-job server-hours / effective utilization, by {sw['x']}",
                  title_justify="left")
        t.add_column(sw["x"])
        svcs = list(next(iter(sw["points"].values())))
        for svc in svcs:
            t.add_column(svc, justify="right")
        for x, p in sw["points"].items():
            t.add_row(x, *(f"{p[s]['servers']} / {_f(p[s]['mean_response_s'], 0)} / "
                           f"{p[s]['per_job_server_hours']:.3f} / "
                           f"{p[s]['effective_utilization']:.2f}" for s in svcs))
        out.print(t)
    _servers_by_seed(res)
    fc = res["figure_claims"]
    c = Table(title=f"The paper's \"up to\" figures beside ours (seed {res['seed']} only; the "
              "claims over every seed follow)", title_justify="left")
    c.add_column("paper")
    c.add_column("ours")
    for k, v in fc["paper"].items():
        c.add_row(v, fc["ours"].get(k, "(not run in --quick)"))
    out.print(c)
    out.print(f"figures: {', '.join(Path(p).name for p in res['plots'])} in {out_dir}; "
              f"numbers: {out_dir}/results.json")
    print_claims(res, "Cura")
    out.print("Why ours differ from the paper's: docs/reproduction-cura.md")


def _servers_by_seed(res: dict[str, Any]) -> None:
    """Figs. 5(a)/6(a) on every seed: the servers each service needs (the claims' input)."""
    from rich.table import Table

    by_seed = res["fig5_6_by_seed"]
    first = next(iter(by_seed.values()))["points"]
    svcs = list(next(iter(first.values())))
    t = Table(title=f"Figs. 5(a)/6(a) on every seed ({res['jobs']} jobs at "
              f"{res['arrival_rate']:g} per s): servers required", title_justify="left")
    t.add_column("seed", justify="right")
    t.add_column("mean deadline s", justify="right")
    for svc in svcs:
        t.add_column(svc, justify="right")
    for s, sw in by_seed.items():
        for x, p in sw["points"].items():
            t.add_row(s, x, *(str(p[svc]["servers"]) for svc in svcs))
    out.print(t)
