"""``utilon check-policy`` (utilon's own property checks, run on any policy) and ``utilon
job-kinds`` (the live job kinds, built in and from plugins): docs/plugins.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from utilon.cli.common import err, errors, key_values, out
from utilon.errors import UtilonError


def check_policy_command(
    policy: Annotated[str, typer.Argument(
        help="the policy: a name (built in, or an installed plugin's) or package.module:Class",
        show_default=False)],
    param: Annotated[list[str] | None, typer.Option(
        "--param", help="policy parameter KEY=VALUE (repeatable)")] = None,
    examples: Annotated[int, typer.Option(
        "--examples", "-n", min=1, help="random scenarios to run")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="seed of the random scenarios")] = 0,
    estimates: Annotated[str, typer.Option(
        "--estimates", help="what the policy knows of task durations, drawn per scenario from "
        "these comma-separated modes (docs/estimates.md)")] = "declared,realistic",
    out_file: Annotated[Path | None, typer.Option(
        "--out", help="where the smallest failing scenario goes [default: "
        "check-<policy>.json]", show_default=False)] = None,
    replay: Annotated[Path | None, typer.Option(
        "--replay", help="run a saved failing scenario again instead of random ones",
        show_default=False)] = None,
    max_wall: Annotated[float, typer.Option(
        "--max-wall", help="seconds one simulation may take before it counts as stuck")]
    = 60.0,
) -> None:
    """Run utilon's liveness and invariant checks on a policy over random scenarios (machines
    joining, leaving and slowing; gangs; chains of stages; several resources) and print what
    failed, with the smallest failing scenario saved to a file.  Exit status 1 on a failure."""
    with errors():
        try:
            from utilon import checks
        except ImportError as e:  # hypothesis is a test dependency of utilon
            raise UtilonError(f"check-policy needs hypothesis ({e})",
                              fix="pip install hypothesis (or utilon[test])") from None
        from utilon.sim.estimates import parse_mode

        params = key_values(param, "--param", "k=4")
        if replay is not None:
            report = checks.replay(replay, policy, params if param else None)
        else:
            modes = [m.strip() for m in estimates.split(",") if m.strip()]
            for m in modes or ["(none)"]:
                try:
                    parse_mode(m)
                except ValueError as e:
                    raise UtilonError(str(e), where="--estimates") from None
            with err.status(f"checking {policy} on {examples} random scenarios",
                            spinner="dots"):
                report = checks.check_policy(policy, params, examples=examples, seed=seed,
                                             estimates=modes, wall_limit=max_wall)
    failure = report.failure
    if failure is None:
        what = (f"the scenario {replay}" if replay is not None else
                f"{report.examples} random scenarios (seed {seed}, estimates {estimates})")
        out.print(f"ok: {policy} kept liveness, the run invariants, determinism and the "
                  f"decision contract on {what}", highlight=False)
        return
    sc = failure.scenario
    tasks = sum(len(s.tasks) for j in sc.jobs for s in j.stages)
    out.print(f"[bold red]FAILED[/] {failure.property}: {failure.message}", highlight=False)
    out.print(f"smallest failing scenario: {len(sc.cluster.machines)} machine(s), "
              f"{len(sc.cluster.timeline)} capacity change(s), {len(sc.jobs)} job(s), {tasks} "
              f"task(s); estimates {failure.estimates}, seed {failure.seed}", highlight=False)
    for line in checks.describe(sc):
        out.print(f"  {line}", highlight=False)
    if replay is None:
        target = out_file or Path(f"check-{re.sub(r'[^A-Za-z0-9_.-]+', '-', policy)}.json")
        with errors():
            checks.write_case(target, report)
        out.print(f"saved: {target} (run it again: utilon check-policy {policy} --replay "
                  f"{target})", highlight=False)
    raise typer.Exit(1)


def job_kinds_command() -> None:
    """List the job kinds a scenario's run: block can name (real jobs for `utilon run` and
    the service), with their fields and where they come from: utilon, or an installed
    plugin's package (docs/plugins.md)."""
    from rich.table import Table

    from utilon.jobs.kinds import job_kinds

    t = Table(title="job kinds (run: {kind: ...}; every kind also takes estimate and demand)")
    for col in ("kind", "what", "fields", "from"):
        t.add_column(col)
    for k in job_kinds():
        t.add_row(k.kind, k.summary, k.fields, k.origin)
    out.print(t)
