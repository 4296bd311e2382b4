"""``utilon league``: the candidate policy against every other on a fixed set of workloads.

Light at import (``utilon --help`` must start fast): the league's machinery is imported by the
command when it runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from utilon.cli.common import JobsOpt, err, errors, out

if TYPE_CHECKING:
    from rich.table import Table


def league_command(
    set_name: Annotated[str, typer.Option(
        "--set", help="tuning (what a policy may be developed against) or held-out (run once, "
        "at the end: docs/league.md)")] = "tuning",
    seeds: Annotated[int | None, typer.Option(
        "--seeds", help="seeds per workload (default: the league file's, 5)", min=1,
        show_default=False)]
    = None,
    estimates: Annotated[str | None, typer.Option(
        "--estimates", help="comma-separated estimate modes (default: the league file's, "
        "realistic,exact)",
        show_default=False)] = None,
    candidate: Annotated[str | None, typer.Option(
        "--candidate", help="the policy the targets are for (default: the league file's, "
        "default: utilon's own)",
        show_default=False)] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="output folder (results go to "
                                          "OUT/<set>/, generated workloads to OUT/workloads/)")]
    = Path("runs/league"),
    jobs: JobsOpt = None,
    league_file: Annotated[Path, typer.Option("--league", help="the league definition")]
    = Path("league.yaml"),
    data: Annotated[Path | None, typer.Option(
        "--data", help="folder of the trace files (default: the league file's data:)",
        show_default=False)]
    = None,
    only: Annotated[str | None, typer.Option(
        "--only", help="comma-separated workload names: run only these", show_default=False)]
    = None,
    max_jobs: Annotated[int | None, typer.Option(
        "--max-jobs", help="keep only each workload's first N jobs: a smoke test of the "
        "machinery, not the league's result (the files say so)", min=1, show_default=False)]
    = None,
) -> None:
    """Run a league set: every competitor and the candidate on every workload at every seed
    and estimate mode; print whether each of the candidate's targets holds, and write
    league.json, league.md (the table), league-details.md and runs.csv."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from utilon.parallel import check_jobs

    with errors():
        check_jobs(jobs)
        from utilon.league import run_league, setup

        s = setup(league_file, set_name, seeds=seeds, candidate=candidate, out=out_dir,
                  estimates=_split(estimates), data=data, only=_split(only),
                  max_jobs=max_jobs)
        if set_name == "held-out" and not max_jobs:
            err.print("[yellow]note:[/] the held-out set is run once, at the end, and reported "
                      "as it comes out (docs/league.md)")
        n_runs = sum(len(s.seeds[w.name]) * len(s.modes)
                     * sum(1 for p in s.players if p.name not in w.exclude)
                     for w in s.workloads)
        err.print(f"league {set_name}: {len(s.workloads)} workload(s) x {len(s.modes)} "
                  f"estimate mode(s) x {len(next(iter(s.seeds.values())))} seed(s), "
                  f"{len(s.players)} players: {n_runs} runs; candidate {s.candidate.name}")
        with Progress(TextColumn("{task.description:>28}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err, transient=True,
                      disable=not err.is_terminal) as prog:
            task = prog.add_task("starting", total=n_runs)

            def progress(what: str, done: int, total: int) -> None:
                prog.update(task, description=what[-28:], completed=done, total=total)

            doc = run_league(s, out=out_dir, jobs=jobs, progress=progress)
        out.print(league_table(doc))
        held, judged = doc["held"]["all"], doc["held"]["judged"]
        out.print(f"targets held: {judged[0]} of {judged[1]} with {doc['judged']} estimates, "
                  f"{held[0]} of {held[1]} over every mode ({doc['wall_s']:.0f} s)")
        folder = out_dir / set_name
        out.print(f"outputs: {folder}/league.json, league.md, league-details.md, runs.csv")


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [x.strip() for x in text.split(",") if x.strip()] or None


def league_table(doc: dict[str, Any]) -> Table:
    from rich.table import Table

    from utilon.league.run import table_rows, target_heads

    t = Table(title=f"league, {doc['set']} set: candidate {doc['candidate']} "
                    f"({doc['candidate_policy']}), means over {doc['seeds']} seed(s)",
              title_justify="left")
    t.add_column("workload")
    t.add_column("estimates")
    for head in target_heads(doc).values():
        t.add_column(head)
    t.add_column("notes")
    for row in table_rows(doc):
        t.add_row(*(_color(c) for c in row))
    return t


def _color(cell: str) -> str:
    if cell.startswith("✓"):
        return f"[green]{cell}[/]"
    if cell.startswith("✗"):
        return f"[red]{cell}[/]"
    return cell
