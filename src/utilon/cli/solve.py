"""``utilon solve <problem> INSTANCE.json``: one optimization problem, solved once."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from utilon.cli.common import errors as _errors
from utilon.cli.common import out

solve_app = typer.Typer(help="Solve one instance of a scheduler's optimization problem.",
                        no_args_is_help=True)


def _solve(problem: str, instance: Path | None, solver: str | None, solvers: Sequence[str],
           schema: Callable[[], dict[str, Any]] | None, out_file: Path | None,
           run: Callable[[Path], dict[str, Any]]) -> None:
    """What every ``utilon solve`` command does: the schema, or one solve to JSON."""
    with _errors():
        if schema is not None:
            out.print_json(json.dumps(schema()))
            return
        if instance is None:
            from utilon.errors import UtilonError

            raise UtilonError("no instance given", where="INSTANCE",
                              fix=f"utilon solve {problem} INSTANCE.json (or --schema)")
        if solver is not None and solver not in solvers:
            from utilon.errors import UnknownNameError

            raise UnknownNameError("solver", solver, list(solvers), where="--solver")
        try:
            result = run(instance)
        except (ArithmeticError, ValueError, TypeError, RecursionError, MemoryError) as e:
            # every field has a limit checked at load; a value that slips past one still
            # ends as one line naming the file, never a traceback
            from utilon.errors import UtilonError

            raise UtilonError(f"cannot solve this instance ({type(e).__name__}: {e})",
                              where=str(instance),
                              fix=f"check its values against docs/solve-{problem}.md"
                              ) from None
        text = json.dumps(result, indent=1)
        if out_file is not None:
            out_file.write_text(text + "\n", encoding="utf-8")
            out.print(f"wrote {out_file}")
        else:
            print(text)


@solve_app.command("cora")
def cora(
    instance: Annotated[Path | None, typer.Argument(
        help="instance JSON (docs/solve-cora.md)", show_default=False)] = None,
    solver: Annotated[str | None, typer.Option(
        "--solver", help="cora (exact), cora-lp (the paper's FINAL LP) or milp (reference); "
        "default: the instance's `solver`, else cora")] = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="write the JSON here")] = None,
    schema: Annotated[bool, typer.Option("--schema", help="print the instance's JSON Schema "
                                         "and exit")] = False,
) -> None:
    """CORA's slotted lexicographic max-min problem: completion slots, utilities, allocation."""
    from utilon.policies.cora import oneshot

    _solve("cora", instance, solver, oneshot.SOLVERS, oneshot.schema if schema else None,
           out_file, lambda p: oneshot.solve_file(p, solver))


@solve_app.command("alsched")
def alsched(
    instance: Annotated[Path | None, typer.Argument(
        help="instance JSON (docs/solve-alsched.md)", show_default=False)] = None,
    solver: Annotated[str | None, typer.Option(
        "--solver", help="greedy (the paper's), bnb (exact branch-and-bound) or milp (HiGHS); "
        "default: the instance's `solver`, else greedy")] = None,
    compare: Annotated[bool, typer.Option("--compare", help="also solve with every solver and "
                                          "report greedy's optimality gap")] = False,
    out_file: Annotated[Path | None, typer.Option("--out", help="write the JSON here")] = None,
    schema: Annotated[bool, typer.Option("--schema", help="print the instance's JSON Schema "
                                         "and exit")] = False,
) -> None:
    """alsched's allocation problem: units per job and equivalence class, utilities, total."""
    from utilon.policies.alsched import oneshot
    from utilon.policies.alsched.solvers import SOLVERS

    _solve("alsched", instance, solver, SOLVERS, oneshot.schema if schema else None, out_file,
           lambda p: oneshot.solve_file(p, solver, compare))
