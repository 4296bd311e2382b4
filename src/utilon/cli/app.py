"""The ``utilon`` command line: one sub-command per thing a user does.

Every command turns a ``UtilonError`` into a single ``error: <file>: <field>: <message>`` line
on stderr and exit status 2; ``--debug`` shows the traceback instead, for bug reports.
"""

from __future__ import annotations

import csv
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from utilon.errors import UtilonError
from utilon.policies import make_policy, policy_class, policy_names, policy_parameters
from utilon.runner import RunOutput, resolve_policies, run_policy
from utilon.scenario import load_workload, read_scenario, scenario_json_schema
from utilon.scenario.build import build_workload

app = typer.Typer(
    name="utilon",
    help="Schedule data-processing jobs so they finish when their owners need them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Tables are wide: when output is not a terminal (CI logs, pipes) do not squeeze them to 80.
out = Console(width=None if Console().is_terminal else 160)
err = Console(stderr=True)
_state = {"debug": False}


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks on errors")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="log progress")] = False,
) -> None:
    _state["debug"] = debug
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except UtilonError as e:
        if _state["debug"]:
            raise
        err.print(f"[bold red]error:[/] {e.one_line()}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130) from None


def _parse_params(items: list[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise UtilonError(f"--param {item!r} is not KEY=VALUE", where="command line",
                              fix="write e.g. --param k=4")
        k, v = item.split("=", 1)
        try:
            params[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            params[k.strip()] = v
    return params


ScenarioArg = Annotated[Path, typer.Argument(help="scenario file (YAML or JSON)",
                                             show_default=False)]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="override the scenario's seed")]


def _default_out(name: str) -> Path:
    return Path("runs") / name


# ---------------------------------------------------------------------------------- simulate
@app.command()
def simulate(
    scenario: ScenarioArg,
    policy: Annotated[str | None, typer.Option("--policy", "-p",
                                               help="policy name (default: the scenario's)")]
    = None,
    seed: SeedOpt = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="output directory")] = None,
    param: Annotated[list[str] | None, typer.Option("--param", help="policy parameter "
                                                    "KEY=VALUE (repeatable)")] = None,
    validate: Annotated[bool, typer.Option(help="check core invariants after every event "
                                           "(slow)")] = False,
) -> None:
    """Simulate one policy on a scenario and write jobs.csv, summary.json, provenance.json."""
    with _errors():
        workload = load_workload(scenario, seed=seed)
        name = policy or (workload.spec.policy.name if workload.spec.policy else None)
        if name is None:
            raise UtilonError("no policy given", where=str(scenario),
                              fix="pass --policy NAME or set policy: in the scenario")
        policy_class(name)
        target = out_dir or _default_out(workload.name) / name
        with _progress() as prog:
            task = prog.add_task(name, total=len(workload.jobs))
            res = run_policy(workload, name, _parse_params(param), out_dir=target,
                             validate=validate,
                             progress=lambda d, t: prog.update(task, completed=d))
        out.print(_table([res], f"{workload.name} (seed {workload.seed})"))
        _warn(res)
        out.print(f"outputs: {target}/jobs.csv, summary.json, provenance.json")


# ---------------------------------------------------------------------------------- compare
@app.command()
def compare(
    scenario: ScenarioArg,
    policies: Annotated[str, typer.Option("--policies", help="comma-separated names, or 'all'")]
    = "all",
    seed: SeedOpt = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="output directory")] = None,
) -> None:
    """Run several policies on the same scenario and print one summary row per policy."""
    with _errors():
        names = resolve_policies(policies)
        if not names:
            raise UtilonError("no policies given", where="--policies",
                              fix="e.g. --policies fifo,fair or --policies all")
        workload = load_workload(scenario, seed=seed)
        target = out_dir or _default_out(workload.name)
        results: list[RunOutput] = []
        with _progress() as prog:
            tasks = {n: prog.add_task(n, total=len(workload.jobs)) for n in names}
            for n in names:
                def report(d: int, t: int, _n: str = n) -> None:
                    prog.update(tasks[_n], completed=d)

                results.append(run_policy(workload, n, out_dir=target / n, progress=report))
                prog.update(tasks[n], completed=len(workload.jobs))
        _write_comparison(target, results)
        out.print(_table(results, f"{workload.name}: {len(workload.jobs)} jobs, "
                                  f"{len(workload.cluster.machines)} machines, seed "
                                  f"{workload.seed}"))
        for r in results:
            _warn(r)
        out.print(f"outputs: {target}/<policy>/ and {target}/comparison.csv")


def _write_comparison(target: Path, results: list[RunOutput]) -> None:
    target.mkdir(parents=True, exist_ok=True)
    cols = ["policy", "utility_min", "utility_sum", "utility_mean", "misses", "miss_rate",
            "penalty", "makespan", "response_mean", "response_p95", "utilisation", "servers",
            "cost"]
    with (target / "comparison.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(cols)
        for r in results:
            w.writerow([r.summary[c] for c in cols])
    (target / "comparison.json").write_text(
        json.dumps([r.summary for r in results], indent=2) + "\n", encoding="utf-8")


def _progress() -> Progress:
    return Progress(TextColumn("{task.description:>12}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("jobs"), TimeElapsedColumn(), console=err, transient=True,
                    disable=not err.is_terminal)


def _table(results: list[RunOutput], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for col, just in (("policy", "left"), ("U min", "right"), ("U sum", "right"),
                      ("U mean", "right"), ("misses", "right"), ("penalty", "right"),
                      ("makespan s", "right"), ("resp mean s", "right"),
                      ("resp p95 s", "right"), ("util", "right"),
                      ("decide p50/p95 ms", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in results:
        s = r.summary
        tm = s["timing"]
        t.add_row(s["policy"], f"{s['utility_min']:.3f}", f"{s['utility_sum']:.2f}",
                  f"{s['utility_mean']:.3f}", f"{s['misses']} ({s['miss_rate']:.0%})",
                  f"{s['penalty']:.2f}", f"{s['makespan']:.0f}", f"{s['response_mean']:.0f}",
                  f"{s['response_p95']:.0f}", f"{s['utilisation']:.0%}",
                  f"{tm['decide_ms_p50']:.3f} / {tm['decide_ms_p95']:.3f}")
    return t


def _warn(r: RunOutput) -> None:
    s = r.summary
    if s["stopped_early"]:
        err.print(f"[yellow]warning:[/] {s['policy']}: run stopped early: "
                  f"{s['stopped_early']}; {s['jobs'] - s['finished']} job(s) unfinished "
                  f"({s['unsubmitted']} never submitted)")
    for w in s["warnings"]:
        err.print(f"[yellow]warning:[/] {w}")


# ---------------------------------------------------------------------------------- policies
@app.command("policies")
def list_policies() -> None:
    """List the registered policies with a one-line description and their parameters."""
    t = Table(title="policies")
    t.add_column("name")
    t.add_column("description")
    t.add_column("parameters")
    for n in policy_names():
        cls = policy_class(n)
        params = ", ".join(f"{k}={d!r}" for k, (_, d) in policy_parameters(n).items())
        t.add_row(n, cls.summary, params or "-")
    out.print(t)


# ---------------------------------------------------------------------------------- validate
@app.command()
def validate(scenario: ScenarioArg, seed: SeedOpt = None) -> None:
    """Check a scenario file and say what it describes, or print one line saying what is wrong."""
    with _errors():
        spec = read_scenario(scenario)
        workload = build_workload(spec, seed=seed, source=str(scenario))
        for name, params in spec.policies.items():
            make_policy(name, params, where=f"{scenario}: policies.{name}")
        if spec.policy is not None:
            make_policy(spec.policy.name,
                        {**spec.policies.get(spec.policy.name, {}), **spec.policy.params},
                        where=f"{scenario}: policy")
        tasks = sum(j.n_tasks for j in workload.jobs)
        out.print(f"ok: {scenario}: scenario {workload.name!r}, "
                  f"{len(workload.cluster.machines)} machines, {len(workload.cluster.timeline)} "
                  f"capacity changes, {len(workload.jobs)} jobs, {tasks} tasks")


# ---------------------------------------------------------------------------------- schema
@app.command()
def schema(
    out_file: Annotated[Path | None, typer.Option("--out", help="write here instead of stdout")]
    = None,
) -> None:
    """Print the JSON Schema of the scenario format."""
    text = json.dumps(scenario_json_schema(), indent=2, sort_keys=True) + "\n"
    if out_file is None:
        sys.stdout.write(text)
    else:
        out_file.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    app(args=argv)


