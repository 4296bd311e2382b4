"""What every ``utilon reproduce <paper>`` command shares: the app, options, number formats
and the per-claim table over seeds (:mod:`utilon.repro.claims`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from utilon.cli.common import err, out
from utilon.cli.common import errors as _errors
from utilon.repro.claims import DEFAULT_SEEDS, QUICK_SEEDS, fmt_ours, fmt_share

reproduce_app = typer.Typer(help="Reproduce a paper's evaluation: tables (paper beside ours), "
                            "its claims checked over many seeds, and figures.",
                            no_args_is_help=True)

SeedsOpt = Annotated[int | None, typer.Option(
    "--seeds", help=f"check the paper's claims on this many seeds, --seed, --seed + 1, ... "
    f"(default {DEFAULT_SEEDS}; {QUICK_SEEDS} with --quick)", show_default=False)]


def run(reproduce: Callable[..., dict[str, Any]], out_dir: Path, *, quick: bool, seed: int,
        seeds: int | None, jobs: int | None, ray_address: str | None) -> dict[str, Any]:
    """A paper's ``reproduce`` under a spinner that shows its progress; a mistake in the
    options or the inputs is one error line (exit 2), as everywhere in the CLI."""
    from utilon.parallel import check_jobs  # the process pool: only when a paper runs

    with _errors(), err.status("running", spinner="dots") as status:
        check_jobs(jobs)
        return reproduce(out_dir, quick=quick, seed=seed, seeds=seeds, jobs=jobs,
                         ray_address=ray_address, progress=lambda m: status.update(m))


def _f(x: Any, nd: int = 3) -> str:
    if x is None:
        return "–"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def _p(x: float | None, nd: int = 0) -> str:
    return "–" if x is None or x != x else f"{x:.{nd}f}%"


def _s(x: float | None) -> str:
    return "–" if x is None or x != x else f"{x:,.0f}"


def print_claims(res: dict[str, Any], paper: str) -> None:
    """The paper's claims over the run's seeds: per claim and system, the paper's number, ours
    (mean and range over seeds) and the share of seeds on which the claim holds."""
    from rich.table import Table

    seeds = res["seeds"]
    t = Table(title=f"{paper}'s claims over {len(seeds)} seed(s) ({seeds[0]}–{seeds[-1]}): "
              "held = on at least 80% of seeds, fragile = on fewer, failed = on none",
              title_justify="left", show_lines=True)
    for c in ("claim (paper)", "paper", "rule (one seed)", "system", "ours: mean [range]",
              "holds on"):
        t.add_column(c, overflow="fold")
    style = {"held": "green", "fragile": "yellow", "failed": "red"}
    for c in res["claims"]:
        for i, r in enumerate(c["systems"]):
            first = i == 0
            t.add_row(c["claim"] if first else "", c["paper"] if first else "",
                      c["rule"] if first else "", r["system"], fmt_ours(r, c["unit"]),
                      f"[{style[r['verdict']]}]{fmt_share(r)}[/]")
    out.print(t)
