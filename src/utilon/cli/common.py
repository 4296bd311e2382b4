"""What every sub-command shares: the two consoles and the one-line error handling."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from utilon.errors import UtilonError


def _console(stderr: bool = False) -> Console:
    """A console that wraps only on a terminal.  Piped or redirected output (CI logs,
    ``| grep``, a test runner) never wraps: rich would otherwise break lines at 80 columns,
    and a long path in an ``ok:`` or ``error:`` line would split a one-line message."""
    probe = Console(stderr=stderr)
    if probe.is_terminal:
        return probe
    return Console(stderr=stderr, width=10_000, soft_wrap=True)


out = _console()
err = _console(stderr=True)
state = {"debug": False}


@contextmanager
def errors() -> Iterator[None]:
    """Turn a ``UtilonError`` (or an ``OSError`` on a path) into one ``error:`` line and exit
    status 2 (``--debug``: raise)."""
    try:
        yield
    except UtilonError as e:
        if state["debug"]:
            raise
        err.print(f"[bold red]error:[/] {e.one_line()}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except OSError as e:  # an output or input path the OS refuses: one line, not a traceback
        if state["debug"]:
            raise
        where = f"{e.filename}: " if e.filename else ""
        err.print(f"[bold red]error:[/] {where}{e.strerror or e} (fix: check the path exists "
                  "and is writable/readable)", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130) from None


def key_values(items: list[str] | None, option: str, example: str) -> dict[str, Any]:
    """Repeated ``KEY=VALUE`` options -> a dict; values are JSON when they parse as JSON."""
    values: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise UtilonError(f"{option} {item!r} is not KEY=VALUE", where="command line",
                              fix=f"write e.g. {option} {example}")
        k, v = item.split("=", 1)
        try:
            values[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            values[k.strip()] = v
    return values


ScenarioArg = Annotated[Path, typer.Argument(help="scenario file (YAML or JSON)",
                                             show_default=False)]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="override the scenario's seed")]
EstimatesOpt = Annotated[str | None, typer.Option(
    "--estimates", help="what policies know of task durations, instead of the scenario's "
    "simulation.estimates: exact, online, realistic (priors off by an error measured on a "
    "real trace, learned online) or lognormal:SIGMA (docs/estimates.md)", show_default=False)]
JobsOpt = Annotated[int | None, typer.Option(
    "--jobs", "--workers", "-j", help="simulations run at once in local processes (default: one "
    "per core; 1 = one after another in this process; --workers is the same option)",
    show_default=False)]
RayAddressOpt = Annotated[str | None, typer.Option(
    "--ray-address", help="run the simulations as tasks on this Ray cluster instead "
    "(`local` starts one here; every node needs utilon installed)", show_default=False)]
