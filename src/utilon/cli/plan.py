"""``utilon plan``: the smallest cluster at which a target holds under a policy."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from utilon.cli.common import (
    EstimatesOpt,
    JobsOpt,
    RayAddressOpt,
    ScenarioArg,
    SeedOpt,
    err,
    key_values,
    out,
)
from utilon.cli.common import errors as _errors
from utilon.errors import UtilonError

if TYPE_CHECKING:  # the planner, the simulator and the process pool load when a plan runs
    from rich.table import Table

    from utilon.plan import PlanResult, Point


def plan_command(
    scenario: ScenarioArg,
    policy: Annotated[str, typer.Option("--policy", "-p", help="policy name",
                                        show_default=False)],
    target: Annotated[str, typer.Option(
        "--target", "-t", help='what must hold, e.g. "misses<=1%", "p99 delta <= 0", '
        '"utility_min>=0.5"', show_default=False)],
    param: Annotated[list[str] | None, typer.Option("--param", help="policy parameter "
                                                    "KEY=VALUE (repeatable)")] = None,
    seed: SeedOpt = None,
    lo: Annotated[int, typer.Option("--min", help="smallest number of machines to try")] = 1,
    hi: Annotated[int | None, typer.Option(
        "--max", help="largest number of machines to try (default: 64 x the scenario's)",
        show_default=False)] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", help="where plan.json and plan.png go (default: runs/plan/<scenario>-<policy>)",
        show_default=False)] = None,
    seeds: Annotated[int, typer.Option(
        "--seeds", help="plan for this many workload draws (--seed or the scenario's seed, "
        "then the next ones): the answer is the smallest size at which the target holds on "
        "every one")] = 1,
    estimates: EstimatesOpt = None,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
) -> None:
    """The fewest machines (of the scenario's kinds, in its proportions) at which TARGET holds
    under POLICY: a search over simulations of the scenario's jobs, several at once.  On a
    cloud scenario: the fewest servers under one of Cura's services."""
    from utilon.cloud.scenario import CloudWorkload
    from utilon.parallel import check_jobs
    from utilon.plan import parse_target, plan
    from utilon.policies import cloud_policy_class, policy_class
    from utilon.scenario import load_scenario

    with _errors():
        goal = parse_target(target)
        check_jobs(jobs)
        params = key_values(param, "--param", "k=4")
        if seeds < 1:
            raise UtilonError(f"--seeds must be at least 1, got {seeds}", where="--seeds",
                              fix="e.g. --seeds 5, or omit it for one draw")
        workload = load_scenario(scenario, seed=seed, estimates=estimates)
        cloud = isinstance(workload, CloudWorkload)
        unit = "servers" if cloud else "machines"
        (cloud_policy_class if cloud else policy_class)(policy)
        target_dir = out_dir or Path("runs") / "plan" / f"{workload.name}-{policy}"
        runs: list[tuple[int, PlanResult]] = []
        for i in range(seeds):
            if i:
                workload = load_scenario(scenario, seed=runs[0][0] + i, estimates=estimates)
            with err.status(f"planning {workload.name} under {policy} (seed {workload.seed}, "
                            f"{i + 1} of {seeds})", spinner="dots") as status:
                def seen(p: Point, status: Any = status, sd: int = workload.seed) -> None:
                    status.update(f"seed {sd}: {p.machines} {unit}: {_value(p)} "
                                  f"({'holds' if p.holds else 'fails'})")

                res = plan(workload, policy, goal, params=params, lo=lo, hi=hi, jobs=jobs,
                           ray_address=ray_address, on_point=seen)
            runs.append((workload.seed, res))
            out.print(_table(res, f"{workload.name}: {len(workload.jobs)} jobs under {policy}, "
                                  f"target {goal.text}, seed {workload.seed}", unit))
        target_dir.mkdir(parents=True, exist_ok=True)
        answer = _write(runs, workload.name, target_dir, unit)
        res = runs[0][1]
        fleet = workload.servers if isinstance(workload, CloudWorkload) else None
        has = (f"the scenario has {res.scenario_machines}" if not cloud else
               f"the scenario has {fleet}" if fleet is not None else "the scenario sets none")
        used = (f"{seeds} seeds ({runs[0][0]}–{runs[-1][0]})" if seeds > 1 else
                f"1 seed ({runs[0][0]}; --seeds N checks N draws)")
        answers = [r.answer for _, r in runs]
        if len(res.points) == 1 and res.limit == res.scenario_machines and cloud:
            out.print(f"{policy} sizes its own fleet: {res.limit} servers for these jobs; "
                      f"the target {'holds' if res.answer else 'does not hold'} there "
                      f"(seed {runs[0][0]})")
        elif answer is None:
            fails = [sd for sd, r in runs if r.answer is None]
            out.print(f"the target does not hold on up to {res.limit} {unit} ({has}) on "
                      f"seed(s) {', '.join(map(str, fails))}; {used}")
        else:
            import statistics

            spread = ("" if seeds == 1 else f"; per seed {min(a for a in answers if a)}–"
                      f"{max(a for a in answers if a)}, median "
                      f"{statistics.median(a for a in answers if a):g}")
            out.print(f"smallest {'fleet' if cloud else 'cluster'} on every seed: {answer} "
                      f"{unit} ({has}){spread}; {used}; "
                      f"{sum(len(r.points) for _, r in runs)} sizes simulated")
        out.print(f"outputs: {target_dir}/plan.json, plan.png")


def _value(p: Point) -> str:
    return "–" if math.isnan(p.value) else ("≥ " if p.at_least else "") + f"{p.value:.4g}"


def _table(res: PlanResult, title: str, unit: str) -> Table:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    groups = unit == "machines"  # a cloud fleet is one group of servers
    for col in (unit, *(["per group"] if groups else []), res.target.metric
                if res.target.quantile is None else f"p{res.target.quantile * 100:g} delta",
                "holds", "stopped early", "wall s"):
        t.add_column(col, justify="left" if col in ("stopped early", "per group") else "right")
    for p in res.table():
        mark = "[green]yes[/]" if p.holds else "[red]no[/]"
        if p.machines == res.answer:
            mark += " ←"
        t.add_row(str(p.machines), *([" + ".join(map(str, p.counts))] if groups else []),
                  _value(p), mark,
                  p.stopped or "", f"{p.wall_s:.1f}")
    return t


def _write(runs: list[tuple[int, PlanResult]], scenario: str, directory: Path,
           unit: str) -> int | None:
    """plan.json (the first seed's search at the top level, as with one seed, and every
    seed's under ``per_seed``) and plan.png (the first seed's); return the answer over all
    seeds: the largest per-seed answer (the target is assumed to get no worse with size)."""
    answers = [r.answer for _, r in runs]
    answer = None if None in answers else max(a for a in answers if a is not None)

    def points(res: PlanResult) -> list[dict[str, Any]]:
        return [{"machines": p.machines, "per_group": list(p.counts),
                 "value": None if math.isnan(p.value) or math.isinf(p.value) else p.value,
                 "at_least": p.at_least, "holds": p.holds, "stopped_early": p.stopped}
                for p in res.table()]

    res = runs[0][1]
    doc = {"scenario": scenario, "policy": res.policy, "unit": unit, "target": res.target.text,
           "metric": res.target.metric, "quantile": res.target.quantile,
           "scenario_machines": res.scenario_machines, "answer": answer,
           "seeds": [sd for sd, _ in runs], "max_machines": res.limit,
           "points": points(res),
           "per_seed": [{"seed": sd, "answer": r.answer, "points": points(r),
                         "timing": {str(p.machines): round(p.wall_s, 3) for p in r.table()}}
                        for sd, r in runs],
           "timing": {str(p.machines): round(p.wall_s, 3) for p in res.table()}}
    (directory / "plan.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    _plot(res, directory / "plan.png", unit)
    return answer


def _plot(res: PlanResult, path: Path, unit: str) -> None:
    from matplotlib.figure import Figure  # only loaded when a plan is written

    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    pts = [p for p in res.table() if math.isfinite(p.value) and not p.at_least]
    ax.plot([p.machines for p in pts], [p.value for p in pts], marker="o", color="tab:blue",
            label="measured")
    bounds = [p for p in res.table() if p.at_least]
    if bounds:
        ax.scatter([p.machines for p in bounds], [p.value for p in bounds], marker="^",
                   facecolors="none", edgecolors="tab:red",
                   label="at least (run stopped once the target had failed)")
    failed = [p for p in res.table() if not math.isfinite(p.value)]
    for p in failed:
        ax.axvline(p.machines, color="tab:red", alpha=0.3, lw=1)
    ax.axhline(res.target.value, color="black", ls="--", lw=1, label=f"target {res.target.text}")
    if res.answer is not None:
        ax.axvline(res.answer, color="tab:green", lw=1.5, label=f"answer: {res.answer}")
    ax.set_xlabel(unit + (" (red lines: the jobs could not run)" if failed else ""))
    label = res.target.metric if res.target.quantile is None else (
        f"p{res.target.quantile * 100:g} of Δ = finish − goal (s)")
    ax.set_ylabel(label)
    ax.set_title(f"{res.policy}: {label} against the number of {unit}")
    ax.legend(loc="best", fontsize=8)
    fig.savefig(path, dpi=110)
