"""The ``utilon`` command line: one sub-command per thing a user does.

Every command turns a ``UtilonError`` into a single ``error: <file>: <field>: <message>`` line
on stderr and exit status 2; ``--debug`` shows the traceback instead, for bug reports.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
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
from utilon.cli.common import state as _state
from utilon.cli.explain import explain_command
from utilon.cli.league import league_command
from utilon.cli.plan import plan_command
from utilon.cli.plugins import check_policy_command, job_kinds_command

try:  # typer >= 0.2x carries its own copy of click; older ones use click itself
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import ClickException, UsageError  # type: ignore[assignment]
from utilon.cli.reproduce import reproduce_app
from utilon.cli.service import register as register_service
from utilon.cli.solve import solve_app
from utilon.cli.trace import trace_app
from utilon.errors import UtilonError

if TYPE_CHECKING:
    from rich.progress import Progress
    from rich.table import Table

    from utilon.cloud.scenario import CloudWorkload
    from utilon.live import LiveProgress
    from utilon.runner import LiveOutput
    from utilon.scenario.build import Workload

# The simulator, the live backends, the policies, the process pool (utilon.parallel) and
# rich's tables and progress bars are imported by the commands that use them, not here:
# `utilon --help` and `validate` must start fast (tests/test_startup.py holds the import of
# this module to what it needs; benchmarks/bench_startup.py times them).
#: where `utilon run` executes tasks (utilon.runner.BACKENDS; a test holds the two equal)
BACKENDS = ("local", "ray")

app = typer.Typer(
    name="utilon",
    help="Schedule data-processing jobs so they finish when their owners need them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(trace_app, name="trace")
app.add_typer(reproduce_app, name="reproduce")
app.add_typer(solve_app, name="solve")
app.command("plan")(plan_command)
app.command("league")(league_command)
app.command("explain")(explain_command)
app.command("check-policy")(check_policy_command)
app.command("job-kinds")(job_kinds_command)
register_service(app)


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks on errors")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="log progress")] = False,
) -> None:
    _state["debug"] = debug
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


def _parse_params(items: list[str] | None) -> dict[str, Any]:
    return key_values(items, "--param", "k=4")




CapacityOpt = Annotated[Path | None, typer.Option(
    "--capacity", help="capacity file replacing the scenario's timeline: a list of events, or "
    "a cluster written by `utilon trace import` (machines and timeline)")]


MaxWallOpt = Annotated[float | None, typer.Option(
    "--max-wall", "--timeout", help="stop a simulation after this many seconds of wall-clock "
    "time; it then counts its unfinished jobs as missed and says so (its results depend on the "
    "machine's speed; --timeout is the same option)", show_default=False)]


ReportOpt = Annotated[bool, typer.Option(
    "--report", help="also write report.html (self-contained) and its figures as PNG into the "
    "output directory")]


def _check_max_wall(seconds: float | None) -> None:
    if seconds is not None and not seconds > 0:
        raise UtilonError(f"--max-wall must be a positive number of seconds, got {seconds:g}",
                          where="--max-wall", fix="e.g. --max-wall 300, or omit it")


def _default_out(workload: Workload | CloudWorkload) -> Path:
    """``runs/<name>-<digest>``: imports of different hours of one trace share a name, and
    their runs must not land in (and be reported from) one folder."""
    from utilon.scenario.digest import scenario_digest

    return Path("runs") / f"{workload.name}-{scenario_digest(workload.spec)}"


def _write_report(dirs: Sequence[Path], out_file: Path, title: str = "",
                  allow_mixed: bool = False) -> None:
    from utilon.report import build_report  # matplotlib: only loaded when a report is asked

    with err.status("drawing the report", spinner="dots"):
        rep = build_report(dirs, out_file, title=title, allow_mixed=allow_mixed)
    size = rep.html.stat().st_size
    out.print(f"report: {rep.html} ({size / 1e6:.1f} MB) and {len(rep.pngs)} PNG figures "
              f"next to it")


# ---------------------------------------------------------------------------------- simulate
@app.command()
def simulate(
    scenario: ScenarioArg,
    policy: Annotated[str | None, typer.Option("--policy", "-p",
                                               help="policy name (default: the scenario's, else "
                                               "`default`: triage, utilon's own)")]
    = None,
    seed: SeedOpt = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="output directory")] = None,
    param: Annotated[list[str] | None, typer.Option("--param", help="policy parameter "
                                                    "KEY=VALUE (repeatable)")] = None,
    validate: Annotated[bool, typer.Option(help="check core invariants after every event "
                                           "(slow)")] = False,
    capacity: CapacityOpt = None,
    estimates: EstimatesOpt = None,
    report: ReportOpt = False,
    max_wall: MaxWallOpt = None,
) -> None:
    """Simulate one policy on a scenario and write jobs.csv, summary.json, provenance.json
    and the timeline (allocation.csv, capacity.csv, attempts.csv) and story.jsonl (see
    `utilon explain`).  A cloud scenario
    (``cloud:``) runs one of Cura's services on its fleet."""
    from utilon.policies import policy_class
    from utilon.scenario import load_scenario
    from utilon.scenario.admission import check_admission
    from utilon.scenario.build import Workload

    with _errors():
        workload = load_scenario(scenario, seed=seed, capacity=capacity, estimates=estimates)
        from utilon.policies import DEFAULT_POLICY, canonical

        name = canonical(policy or (workload.spec.policy.name if workload.spec.policy
                                    else DEFAULT_POLICY))
        _check_max_wall(max_wall)
        target = out_dir or _default_out(workload) / name
        if not isinstance(workload, Workload):  # a cloud scenario: Cura's world
            from utilon.cli.cloud import refuse_slot_options, simulate_cloud

            refuse_slot_options(workload, **{"--validate": validate, "--max-wall": max_wall})
            simulate_cloud(workload, name, _parse_params(param), target)
            if report:
                _write_report([target], target / "report.html")
            return
        policy_class(name)
        check_admission(workload, f"{scenario}: workload")
        from utilon.runner import run_policy

        with _progress() as prog:
            task = prog.add_task(name, total=len(workload.jobs))
            res = run_policy(workload, name, _parse_params(param), out_dir=target,
                             validate=validate, wall_limit=max_wall,
                             progress=lambda d, t: prog.update(task, completed=d))
        out.print(_table([res.summary], f"{workload.name} (seed {workload.seed})"))
        _warn(res.summary)
        out.print(f"outputs: {target}/jobs.csv, summary.json, provenance.json, "
                  "allocation.csv, capacity.csv, attempts.csv, story.jsonl")
        if report:
            _write_report([target], target / "report.html")


# ---------------------------------------------------------------------------------- compare
@app.command()
def compare(
    scenarios: Annotated[list[Path], typer.Argument(
        help="scenario file(s) (YAML or JSON); several, or --seeds N, compare over all of "
        "them", show_default=False)],
    policies: Annotated[str, typer.Option("--policies", help="comma-separated names, or 'all'")]
    = "all",
    seed: SeedOpt = None,
    seeds: Annotated[int, typer.Option(
        "--seeds", help="run each scenario at N seeds (--seed, or the scenario's, and the "
        "N-1 after it) and report means with 95% confidence intervals and paired "
        "wins/ties/losses", min=1)] = 1,
    estimates: EstimatesOpt = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="output directory")] = None,
    capacity: CapacityOpt = None,
    report: ReportOpt = False,
    jobs: JobsOpt = None,
    ray_address: RayAddressOpt = None,
    max_wall: MaxWallOpt = None,
) -> None:
    """Run several policies on the same scenario and print one summary row per policy.

    The runs are independent and go to parallel processes (``--jobs``, default one per core)
    or to a Ray cluster (``--ray-address``); the outputs are the same as one after another.
    On a cloud scenario (``cloud:``) the policies are Cura's services (``all``: every one).
    With several scenarios or ``--seeds N`` every policy runs on every scenario at every seed
    (``<out>/<scenario>/seed-<k>/<policy>/``) and the comparison is over all of them: means
    with 95% confidence intervals per scenario and paired wins/ties/losses (docs/reports.md)."""
    from utilon.scenario import load_scenario
    from utilon.scenario.admission import check_admission
    from utilon.scenario.build import Workload

    with _errors():
        from utilon.parallel import check_jobs

        check_jobs(jobs)
        _check_max_wall(max_wall)
        if len(scenarios) > 1 or seeds > 1:
            _compare_seeds(scenarios, policies, seed, seeds, estimates, out_dir, capacity,
                           report, jobs, ray_address, max_wall)
            return
        scenario = scenarios[0]
        loaded = load_scenario(scenario, seed=seed, capacity=capacity,
                               estimates=estimates)
        target = out_dir or _default_out(loaded)
        if not isinstance(loaded, Workload):  # a cloud scenario: Cura's world
            from utilon.cli.cloud import refuse_slot_options

            refuse_slot_options(loaded, **{"--max-wall": max_wall})
            _compare_cloud(loaded, policies, target, jobs, ray_address, report)
            return
        workload: Workload = loaded
        check_admission(workload, f"{scenario}: workload")
        from utilon.runner import run_policies

        names = _policy_names(policies)
        with _progress() as prog:
            tasks = [prog.add_task(n, total=len(workload.jobs)) for n in names]

            def advance(i: int, done: int, total: int) -> None:
                prog.update(tasks[i], completed=done * len(workload.jobs) / max(total, 1))

            results = run_policies(workload, names, out_dir=target, jobs=jobs,
                                   ray_address=ray_address, on_progress=advance,
                                   wall_limit=max_wall)
        _write_comparison(target, results)
        out.print(_table(results, f"{workload.name}: {len(workload.jobs)} jobs, "
                                  f"{len(workload.cluster.machines)} machines, seed "
                                  f"{workload.seed}"))
        for r in results:
            _warn(r)
        out.print(f"outputs: {target}/<policy>/ and {target}/comparison.csv")
        if report:  # this comparison's runs only, not what an older one left in the folder
            _write_report([target / n for n in names], target / "report.html")


def _policy_names(policies: str) -> list[str]:
    from utilon.runner import resolve_policies

    names = resolve_policies(policies)
    if not names:
        raise UtilonError("no policies given", where="--policies",
                          fix="e.g. --policies fifo,fair or --policies all")
    return names


def _compare_seeds(scenarios: Sequence[Path], policies: str, seed: int | None, seeds: int,
                   estimates: str | None, out_dir: Path | None, capacity: Path | None,
                   report: bool, jobs: int | None, ray_address: str | None,
                   max_wall: float | None) -> None:
    """``compare`` over several scenarios and/or seeds: every policy on every (scenario,
    seed) workload, in one parallel grid; per-seed comparisons, then the statistics."""
    from utilon.league.grid import GridRun, run_grid
    from utilon.metrics.stats import ci_rows, seed_statistics, wtl_rows
    from utilon.scenario import load_scenario
    from utilon.scenario.admission import check_admission
    from utilon.scenario.build import Workload

    names = _policy_names(policies)
    loaded: list[tuple[str, int, Workload]] = []  # (scenario label, seed, workload)
    labels: list[str] = []
    for path in scenarios:
        first = seed
        for k in range(seeds):
            wl = load_scenario(path, seed=None if first is None else first + k,
                               capacity=capacity, estimates=estimates)
            if not isinstance(wl, Workload):
                raise UtilonError("several scenarios and --seeds compare slot scenarios; this "
                                  "is a cloud scenario", where=str(path),
                                  fix="compare a cloud scenario alone, with one seed")
            if first is None:  # the scenario's own seed is the first
                first = wl.seed
            check_admission(wl, f"{path}: workload")
            if k == 0:
                label = wl.name if wl.name not in labels else f"{wl.name}-{len(labels) + 1}"
                labels.append(label)
            loaded.append((labels[-1], wl.seed, wl))
    single = len(scenarios) == 1
    target = out_dir or _default_seeds_out([wl for _, _, wl in loaded], single)

    def run_dir(label: str, s: int) -> Path:
        return target / f"seed-{s}" if single else target / label / f"seed-{s}"

    grid = [GridRun(i, n, out_dir=run_dir(label, s) / n, wall_limit=max_wall)
            for i, (label, s, _) in enumerate(loaded) for n in names]
    with _progress() as prog:
        tasks = [prog.add_task(f"{label} s{s}", total=len(wl.jobs) * len(names))
                 for label, s, wl in loaded]
        fractions = [0.0] * len(grid)

        def advance(i: int, done: int, total: int) -> None:
            fractions[i] = done / max(total, 1)
            w = i // len(names)
            frac = sum(fractions[w * len(names):(w + 1) * len(names)])
            prog.update(tasks[w], completed=frac * len(loaded[w][2].jobs))

        summaries = run_grid(grid, [wl for _, _, wl in loaded], jobs=jobs,
                             ray_address=ray_address, on_progress=advance)
    runs: dict[str, dict[int, dict[str, dict[str, Any]]]] = {}
    for w, (label, s, _) in enumerate(loaded):
        results = summaries[w * len(names):(w + 1) * len(names)]
        _write_comparison(run_dir(label, s), results)
        runs.setdefault(label, {})[s] = {r["policy"]: r for r in results}
        for r in results:
            _warn({**r, "policy": f"{label} seed {s}: {r['policy']}"})
    doc = seed_statistics(runs)
    doc["layout"] = {label: {str(s): str(run_dir(label, s).relative_to(target))
                             for s in by_seed} for label, by_seed in runs.items()}
    doc["estimates"] = estimates
    _write_seed_files(target, doc, ci_rows(doc), wtl_rows(doc))
    for label, by_seed in runs.items():
        wl0 = next(wl for lab, _, wl in loaded if lab == label)
        out.print(_seeds_table(doc, label, f"{label}: {len(wl0.jobs)} jobs, "
                               f"{len(wl0.cluster.machines)} machines, seeds "
                               f"{', '.join(str(s) for s in by_seed)}: mean ± 95% CI"))
    for m in doc["key_metrics"]:
        out.print(_wtl_table(doc, m))
    where = "seed-<k>" if single else "<scenario>/seed-<k>"
    out.print(f"outputs: {target}/{where}/<policy>/, {target}/{where}/comparison.csv, "
              f"{target}/comparison-seeds.json, comparison-seeds.csv, comparison-wtl.csv")
    if report:
        for label in runs:
            base = target if single else target / label
            _write_report([base], base / "report.html",
                          title=f"utilon report: {label} over {len(runs[label])} seed(s)")


def _default_seeds_out(workloads: Sequence[Workload], single: bool) -> Path:
    """One scenario: its usual folder; several: ``runs/compare-<digest of them all>``."""
    if single:
        return _default_out(workloads[0])
    import hashlib

    from utilon.scenario.digest import scenario_digest

    key = ",".join(f"{w.name}-{scenario_digest(w.spec)}-{w.seed}" for w in workloads)
    return Path("runs") / f"compare-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def _write_seed_files(target: Path, doc: dict[str, Any], ci: list[dict[str, Any]],
                      wtl: list[dict[str, Any]]) -> None:
    target.mkdir(parents=True, exist_ok=True)
    (target / "comparison-seeds.json").write_text(json.dumps(doc, indent=2) + "\n",
                                                  encoding="utf-8")
    for name, rows in (("comparison-seeds.csv", ci), ("comparison-wtl.csv", wtl)):
        with (target / name).open("w", newline="", encoding="utf-8") as f:
            import csv

            w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)


_SEED_COLUMNS = (("U min", "utility_min", 3), ("U sum", "utility_sum", 2),
                 ("misses", "misses", 1), ("penalty", "penalty", 2),
                 ("unfinished", "unfinished", 1), ("resp mean s", "response_mean", 0),
                 ("resp p95 s", "response_p95", 0))


def _seeds_table(doc: dict[str, Any], scenario: str, title: str) -> Table:
    from rich.table import Table

    from utilon.metrics.stats import pm

    t = Table(title=title, title_justify="left")
    t.add_column("policy")
    for head, _, _ in _SEED_COLUMNS:
        t.add_column(head, justify="right")
    t.add_column("stopped", justify="right")
    for p, stats in doc["scenarios"][scenario]["policies"].items():
        t.add_row(p, *(pm(stats[m], nd) for _, m, nd in _SEED_COLUMNS),
                  str(stats["stopped"]) if stats["stopped"] else "–")
    return t


def _wtl_table(doc: dict[str, Any], metric: str) -> Table:
    """Rows against columns: the row policy's wins/ties/losses against the column's."""
    from rich.table import Table

    policies = doc["policies"]
    better = doc["metrics"][metric]
    t = Table(title=f"{metric} ({better} is better): wins/ties/losses of the row against the "
                    f"column over {doc['pairs']} paired run(s)", title_justify="left")
    t.add_column("")
    for p in policies:
        t.add_column(p, justify="center")
    for a in policies:
        row = doc["wtl"][metric][a]
        t.add_row(a, *("·" if a == b else "{wins}/{ties}/{losses}".format(**row[b])
                       for b in policies))
    return t


def _compare_cloud(workload: CloudWorkload, policies: str, target: Path, jobs: int | None,
                   ray_address: str | None, report: bool) -> None:
    from utilon.cli.cloud import cloud_table
    from utilon.runner import resolve_policies, run_policies

    names = resolve_policies(policies, world="cloud")
    if not names:
        raise UtilonError("no policies given", where="--policies",
                          fix="e.g. --policies vm-aware,cura or --policies all")
    with _progress() as prog:
        tasks = [prog.add_task(n, total=len(workload.jobs)) for n in names]

        def advance(i: int, done: int, total: int) -> None:
            prog.update(tasks[i], completed=done * len(workload.jobs) / max(total, 1))

        results = run_policies(workload, names, out_dir=target, jobs=jobs,
                               ray_address=ray_address, on_progress=advance)
    _write_comparison(target, results, _CLOUD_COLUMNS)
    cloud = workload.store.cloud
    out.print(cloud_table(results, f"{workload.name}: {len(workload.jobs)} jobs, "
                                   f"{workload.servers} servers of {cloud.server_cores} cores "
                                   f"(dedicated: its own), seed {workload.seed}"))
    out.print(f"outputs: {target}/<service>/ and {target}/comparison.csv")
    if report:
        _write_report([target / n for n in names], target / "report.html")


_SLOT_COLUMNS = ("policy", "utility_min", "utility_sum", "utility_mean", "misses", "miss_rate",
                 "unfinished", "penalty", "makespan", "response_mean", "response_p95",
                 "utilisation", "servers", "cost")
_CLOUD_COLUMNS = ("policy", "servers", "misses", "miss_rate", "dropped", "success_rate",
                  "response_mean", "response_p95", "makespan", "utilisation",
                  "per_job_server_hours", "mean_usage_cost", "cost", "reconfigurations",
                  "reconfigured_vms")


def _write_comparison(target: Path, results: list[dict[str, Any]],
                      cols: Sequence[str] = _SLOT_COLUMNS) -> None:
    target.mkdir(parents=True, exist_ok=True)
    with (target / "comparison.csv").open("w", newline="", encoding="utf-8") as f:
        import csv

        w = csv.writer(f, lineterminator="\n")
        w.writerow(cols)
        for r in results:
            w.writerow([r[c] for c in cols])
    (target / "comparison.json").write_text(
        json.dumps(results, indent=2) + "\n", encoding="utf-8")


def _progress() -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(TextColumn("{task.description:>12}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("jobs"), TimeElapsedColumn(), console=err, transient=True,
                    disable=not err.is_terminal)


def _table(results: Sequence[dict[str, Any]], title: str) -> Table:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col, just in (("policy", "left"), ("U min", "right"), ("U sum", "right"),
                      ("U mean", "right"), ("misses", "right"), ("unfinished", "right"),
                      ("penalty", "right"),
                      ("makespan s", "right"), ("resp mean s", "right"),
                      ("resp p95 s", "right"), ("util", "right"),
                      ("decide p50/p95 ms", "right"), ("solves", "right"),
                      ("solve p50/p95 ms", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for s in results:
        tm = s["timing"]
        t.add_row(s["policy"], f"{s['utility_min']:.3f}", f"{s['utility_sum']:.2f}",
                  f"{s['utility_mean']:.3f}", f"{s['misses']} ({s['miss_rate']:.0%})",
                  str(s["unfinished"]), f"{s['penalty']:.2f}", f"{s['makespan']:.0f}",
                  f"{s['response_mean']:.0f}", f"{s['response_p95']:.0f}",
                  f"{s['utilisation']:.0%}",
                  f"{tm['decide_ms_p50']:.3f} / {tm['decide_ms_p95']:.3f}",
                  # an optimising policy may follow a standing plan at most decisions: the
                  # solves, and what each costs, are shown apart
                  str(tm.get("solver_calls") or "–"),
                  f"{tm['solver_ms_p50']:.3f} / {tm['solver_ms_p95']:.3f}"
                  if tm.get("solver_calls") else "–")
    return t


def _warn(s: dict[str, Any]) -> None:
    if s["stopped_early"]:
        err.print(f"[yellow]warning:[/] {s['policy']}: run stopped early: "
                  f"{s['stopped_early']}; {s['unfinished']} job(s) unfinished "
                  f"({s['unsubmitted']} never submitted), each counted as missed and charged "
                  "a penalty", soft_wrap=True)
    elif s["unfinished"]:
        err.print(f"[yellow]warning:[/] {s['policy']}: {s['unfinished']} job(s) did not "
                  "finish, each counted as missed and charged a penalty", soft_wrap=True)
    for w in s["warnings"]:
        err.print(f"[yellow]warning:[/] {w}")
    if s.get("impossible_goals"):
        err.print(f"[yellow]warning:[/] {s['policy']}: {s['impossible_goals']} job(s) have a "
                  "goal no schedule can meet (admission: accept); they count as misses")


# ---------------------------------------------------------------------------------- run
@app.command()
def run(
    scenario: ScenarioArg,
    policy: Annotated[str | None, typer.Option("--policy", "-p",
                                               help="policy name (default: the scenario's, else "
                                               "`default`: triage, utilon's own)")]
    = None,
    backend: Annotated[str, typer.Option("--backend", "-b",
                                         help=f"where tasks run: {' | '.join(BACKENDS)}")]
    = "local",
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", help="Ray cluster to connect to (default: start a local one)")] = None,
    ray_cpus: Annotated[int | None, typer.Option(
        "--ray-cpus", help="CPUs of the local Ray started when no address is given")] = None,
    seed: SeedOpt = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="run directory (inputs, "
                                                 "task outputs, results)")] = None,
    param: Annotated[list[str] | None, typer.Option("--param", help="policy parameter "
                                                    "KEY=VALUE (repeatable)")] = None,
    capacity: CapacityOpt = None,
    timeout: Annotated[float | None, typer.Option(
        "--max-wall", "--timeout", help="stop after this many seconds of wall-clock time "
        "(--timeout is the same option)", show_default=False)] = None,
    calibrate: Annotated[bool, typer.Option(
        "--calibrate", help="measure each job kind's speed on this host first (one task per "
        "kind) and scale the priors, and so the goals derived from them, to it")] = False,
    report: ReportOpt = False,
) -> None:
    """Run a scenario's jobs for real (local worker processes or Ray) under one policy."""
    from utilon.policies import policy_class
    from utilon.scenario import load_workload
    from utilon.scenario.admission import check_admission

    with _errors():
        if backend not in BACKENDS:
            from utilon.errors import UnknownNameError

            raise UnknownNameError("backend", backend, BACKENDS, where="--backend")
        workload = load_workload(scenario, seed=seed, capacity=capacity)
        from utilon.policies import DEFAULT_POLICY, canonical

        name = canonical(policy or (workload.spec.policy.name if workload.spec.policy
                                    else DEFAULT_POLICY))
        policy_class(name)
        check_admission(workload, f"{scenario}: workload")
        from utilon.runner import make_backend, run_live

        target = out_dir or _default_out(workload) / f"{name}-{backend}"
        if calibrate:
            from utilon.live.calibrate import calibrate as measure

            with err.status("measuring this host's speed per job kind", spinner="dots"):
                workload, speeds = measure(workload, target / "calibration")
            for sp in speeds:
                err.print(f"calibrated {sp.kind}: {sp.job}'s first task took "
                          f"{sp.measured:.2f} s against a prior of {sp.prior:.2f} s: priors "
                          f"x {sp.factor:.2f}")
            check_admission(workload, f"{scenario}: workload")
        err.print(f"preparing inputs of {len(workload.plans)} real job(s) in {target}/jobs")
        be = make_backend(backend, ray_address=ray_address, ray_cpus=ray_cpus)
        with _LiveView(name, backend) as view:
            res = run_live(workload, name, be, _parse_params(param), out_dir=target,
                           timeout=timeout, progress=view.update)
        out.print(_table([res.summary],
                         f"{workload.name} live on {backend} (seed {workload.seed})"))
        _report_live(res)
        out.print(f"outputs: {target}/jobs.csv, summary.json, attempts.csv, allocation.csv, "
                  "capacity.csv, verification.json; task outputs under jobs/")
        if report:
            _write_report([target], target / "report.html")
        if res.summary["verified"]["failed"]:
            raise typer.Exit(1)  # a job's output is wrong (or it never finished)


class _LiveView:
    """A live status line: time, jobs submitted/done, running tasks, misses, utility."""

    def __init__(self, policy: str, backend: str) -> None:
        from rich.live import Live

        self.label = f"{policy} on {backend}"
        self.live = Live(self._render(None), console=err, transient=True,
                         refresh_per_second=4, auto_refresh=err.is_terminal)
        self.enabled = err.is_terminal

    def _render(self, p: LiveProgress | None) -> Any:
        from rich.text import Text

        if p is None:
            return Text(f"{self.label}: starting")
        return Text(f"{self.label}  t={p.now:7.1f}s  jobs {p.finished}/{p.jobs} done, "
                    f"{p.submitted - p.finished} running ({p.running_tasks} tasks)  "
                    f"misses {p.misses}  utility {p.utility:.2f}")

    def update(self, p: LiveProgress) -> None:
        if self.enabled:
            self.live.update(self._render(p))

    def __enter__(self) -> _LiveView:
        if self.enabled:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            self.live.__exit__(*exc)


def _report_live(res: LiveOutput) -> None:
    s = res.summary
    if "warning" in s.get("priors", {}):
        err.print(f"[yellow]warning:[/] {s['priors']['warning']}")
    v = s["verified"]
    err.print(f"verified outputs: {v['ok']} ok, {v['failed']} failed, "
              f"{v['unverifiable']} without a verifier, {v['plain']} plain (sleep) job(s)")
    for job, check in sorted(res.result.verification.items()):
        if check.ok is False:
            err.print(f"[red]verification failed:[/] {job}: {check.detail}")
    t = s["tasks"]
    if t["failed"] or t["lost"] or t["killed"]:
        err.print(f"tasks: {t['failed']} failed, {t['lost']} lost, {t['killed']} preempted; "
                  "all were re-queued")
    _warn(res.summary)


# ---------------------------------------------------------------------------------- report
@app.command("report")
def report_cmd(
    run_dirs: Annotated[list[Path], typer.Argument(
        help="run directories (simulate/run --out) or comparison directories (compare --out)",
        show_default=False)],
    out_file: Annotated[Path | None, typer.Option(
        "--out", help="HTML file to write (default: RUN_DIR/report.html for one directory, "
        "./report.html for several); PNGs are written next to it")] = None,
    title: Annotated[str, typer.Option("--title", help="report title")] = "",
    allow_mixed: Annotated[bool, typer.Option(
        "--allow-mixed", help="put runs of different scenarios side by side (refused "
        "otherwise: their numbers are not comparable)")] = False,
) -> None:
    """Draw a self-contained HTML report (and PNG figures) of one or more runs."""
    with _errors():
        target = out_file or (run_dirs[0] / "report.html" if len(run_dirs) == 1
                              else Path("report.html"))
        if target.suffix.lower() not in (".html", ".htm"):
            raise UtilonError("the report is an HTML file", where=f"--out {target}",
                              fix="give a name ending in .html")
        _write_report(run_dirs, target, title, allow_mixed)


# ---------------------------------------------------------------------------------- policies
@app.command("policies")
def list_policies() -> None:
    """List the registered policies of both worlds with a one-line description, their
    parameters and where they come from (utilon, or an installed plugin's package:
    docs/plugins.md): the slot world's (scenarios with cluster:) and Cura's cloud services
    (scenarios with cloud:)."""
    from rich.table import Table

    from utilon.policies import origin, plugin_policies, policy_names, policy_parameters

    for world, title in (("slot", "policies (slot world: scenarios with cluster:)"),
                         ("cloud", "cloud services (Cura's world: scenarios with cloud:)")):
        t = Table(title=title)
        for col in ("name", "description", "parameters", "from"):
            t.add_column(col)
        for n in [*policy_names(world), *plugin_policies(world)]:
            params = ", ".join(f"{k}={d!r}" for k, (_, d) in policy_parameters(n).items())
            t.add_row(n, getattr(world_class(n), "summary", ""), params or "-", origin(n))
        out.print(t)


# ---------------------------------------------------------------------------------- validate
@app.command()
def validate(scenario: ScenarioArg, seed: SeedOpt = None) -> None:
    """Check a scenario file and say what it describes, or print one line saying what is wrong
    (including a job that could never run on its cluster, or under a policy it configures)."""
    from utilon.core.feasibility import check_workload
    from utilon.policies import make_policy
    from utilon.scenario import load_scenario
    from utilon.scenario.admission import check_admission
    from utilon.scenario.build import Workload

    with _errors():
        loaded = load_scenario(scenario, seed=seed)
        if not isinstance(loaded, Workload):  # a cloud scenario: Cura's world
            from utilon.cli.cloud import validate_cloud

            validate_cloud(loaded, scenario)
            return
        workload: Workload = loaded
        spec = workload.spec
        where = f"{scenario}: workload"
        check_workload(workload.cluster, workload.jobs, where=where)
        policies = [make_policy(name, params, where=f"{scenario}: policies.{name}")
                    for name, params in spec.policies.items()]
        if spec.policy is not None:
            policies.append(make_policy(
                spec.policy.name, {**spec.policies.get(spec.policy.name, {}),
                                   **spec.policy.params}, where=f"{scenario}: policy"))
        for policy in policies:  # a job the scenario's own policies could never run
            check_workload(workload.cluster, workload.jobs, policy, where=where)
        accepted = check_admission(workload, where)
        tasks = sum(j.n_tasks for j in workload.jobs)
        out.print(f"ok: {scenario}: scenario {workload.name!r}, "
                  f"{len(workload.cluster.machines)} machines, {len(workload.cluster.timeline)} "
                  f"capacity changes, {len(workload.jobs)} jobs, {tasks} tasks"
                  + (f"; {len(accepted)} job(s) with a goal no schedule can meet, accepted "
                     f"(admission: accept), e.g. {accepted[0].job!r} needs "
                     f"{accepted[0].needs:g} s, has {accepted[0].allowed:g} s" if accepted else ""))


# ---------------------------------------------------------------------------------- schema
@app.command()
def schema(
    out_file: Annotated[Path | None, typer.Option("--out", help="write here instead of stdout")]
    = None,
    world: Annotated[str, typer.Option(
        "--world", help="slot (cluster: scenarios) or cloud (cloud: scenarios, Cura's world)")]
    = "slot",
) -> None:
    """Print the JSON Schema of the scenario format (of either world)."""
    from utilon.cloud.scenario import cloud_json_schema
    from utilon.scenario import scenario_json_schema

    with _errors():
        if world not in ("slot", "cloud"):
            raise UtilonError(f"unknown world {world!r}", where="--world",
                              fix="use slot or cloud")
    doc = scenario_json_schema() if world == "slot" else cloud_json_schema()
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if out_file is None:
        sys.stdout.write(text)
    else:
        out_file.write_text(text, encoding="utf-8")


def world_class(name: str) -> Any:
    from utilon.policies import cloud_policy_class, policy_class, world_of

    return cloud_policy_class(name) if world_of(name) == "cloud" else policy_class(name)


#: The root options that take no value (``_main``): they may come before a command's name.
_ROOT_FLAGS = frozenset({"--debug", "--verbose", "-v"})


def _help_only(info: Any) -> Any:
    """A copy of a command (``CommandInfo``) that lists as the command does in its group's
    help -- name, one-line help, panel -- with no parameters to build."""
    import copy
    import inspect

    from typer.main import get_command_name

    def listed() -> None:  # pragma: no cover - never run: the root help exits first
        raise AssertionError("a help-only command ran")

    stub = copy.copy(info)
    stub.name = info.name or get_command_name(info.callback.__name__)
    stub.help = info.help if info.help is not None else inspect.getdoc(info.callback)
    stub.callback = listed
    return stub


def routed(argv: Sequence[str]) -> typer.Typer:
    """The part of ``app`` that ``argv`` runs: the same commands, built lazily.

    typer builds every command's click command -- evaluating each one's annotations -- before
    it parses a word, and utilon has about thirty: ``utilon validate`` needs one of them and
    ``utilon --help`` only their names and one-line help.  So a command named first (after
    ``--debug``/``--verbose``) gets an app with only that command (or group); the root help
    an app whose commands list alike but have no parameters; anything else (an unknown
    command, ``--help`` before a command's name, ...) the whole ``app``, so that click's own
    messages and suggestions stay as they are.  tests/test_startup.py holds the output of
    each route equal to the whole app's; issue 47 (startup under 0.5 s)."""
    import copy

    from typer.main import get_command_name

    words = list(argv)
    if not words or ("--help" in words and _ROOT_FLAGS.issuperset(set(words) - {"--help"})):
        part = copy.copy(app)  # the root help
        part.registered_commands = [_help_only(c) for c in app.registered_commands]
        part.registered_groups = []
        for g in app.registered_groups:  # a group lists by its own help, not its commands'
            sub = copy.copy(g.typer_instance)
            if sub is None:
                return app
            sub.registered_commands, sub.registered_groups = [], []
            group = copy.copy(g)
            group.typer_instance = sub
            part.registered_groups.append(group)
        return part
    name = next((a for a in words if a not in _ROOT_FLAGS), None)
    commands = [c for c in app.registered_commands
                if (c.name or get_command_name(getattr(c.callback, "__name__", ""))) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if len(commands) + len(groups) != 1:
        return app
    part = copy.copy(app)
    part.registered_commands = commands
    part.registered_groups = groups
    return part


class _Deferred(type):
    """A stand-in for a class of another module: calling it, or asking it for an attribute,
    imports the module and hands over to the real class."""

    _module: str

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._real()(*args, **kwargs)

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(cls._real(), name)

    def _real(cls) -> Any:
        import importlib

        return getattr(importlib.import_module(cls._module), cls.__name__)


def _import_help_renderer() -> None:
    """Import typer's help renderer (``typer.rich_utils``) without rich's Markdown and
    Traceback.  It imports both at its top -- markdown-it-py and pygments, two thirds of its
    import time and a fifth of ``utilon --help``'s -- for help written in Markdown
    (``rich_markup_mode="markdown"``) and for pretty tracebacks (``pretty_exceptions_enable``),
    and utilon uses neither.  While it is imported, ``rich.markdown`` and ``rich.traceback``
    are stand-in modules whose classes import the real ones when first used; they are gone
    from ``sys.modules`` right after, so any other import gets the real modules.
    tests/test_startup.py holds the help equal to the one drawn with the real modules."""
    import types

    if "typer.rich_utils" in sys.modules:
        return
    stand_ins = {}
    for module, name in (("rich.markdown", "Markdown"), ("rich.traceback", "Traceback")):
        if module not in sys.modules:
            stand_in = types.ModuleType(module)
            setattr(stand_in, name, _Deferred(name, (), {"_module": module}))
            stand_ins[module] = stand_in
    sys.modules.update(stand_ins)
    try:
        import typer.rich_utils  # noqa: F401
    finally:
        for module, stand_in in stand_ins.items():
            if sys.modules.get(module) is stand_in:
                del sys.modules[module]


def main(argv: list[str] | None = None) -> None:
    """The ``utilon`` command.  A command-line mistake (a missing argument, an unknown
    option or command, a bad value) is one ``error:`` line naming the command and the fix,
    exit status 2, like every other refusal -- not click's boxed usage block."""
    words = sys.argv[1:] if argv is None else argv
    if "--help" in words or sum(not w.startswith("-") for w in words) < 2:
        _import_help_renderer()  # help is (likely) drawn: `utilon`, `utilon trace`, --help
    try:
        code = routed(words)(args=argv, prog_name="utilon" if argv is not None else None,
                             standalone_mode=False)
    except UsageError as e:
        cmd = e.ctx.command_path if e.ctx is not None else "utilon"
        err.print(f"[bold red]error:[/] {cmd}: {e.format_message()} (fix: see "
                   f"'{cmd} --help')", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except ClickException as e:
        err.print(f"[bold red]error:[/] {e.format_message()}", highlight=False,
                   soft_wrap=True)
        sys.exit(e.exit_code)
    except typer.Abort:
        err.print("interrupted")
        sys.exit(130)
    if isinstance(code, int) and code:
        sys.exit(code)


