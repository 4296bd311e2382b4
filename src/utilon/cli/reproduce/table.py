"""``utilon reproduce table``: the claims of finished reproductions as one Markdown table (the
README's), read from their ``results.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from utilon.cli.common import errors as _errors
from utilon.cli.common import out
from utilon.cli.reproduce.common import reproduce_app
from utilon.errors import UtilonError

PAPERS = {"cora": "CORA", "cura": "Cura", "alsched": "alsched", "ras": "RAS", "rds": "RDS"}


@reproduce_app.command("table")
def table(
    root: Annotated[Path, typer.Option("--dir", help="where the reproductions wrote their "
                                       "folders (<paper>/results.json)")]
    = Path("runs/reproduce"),
) -> None:
    """Print every finished reproduction's claims, with the share of seeds on which each holds
    for the faithful system and each variant, as one Markdown table."""
    from utilon.repro.claims import readme_rows

    with _errors():
        lines = ["| paper | claim | paper's number | faithful: seeds held | variants: seeds "
                 "held |", "| --- | --- | --- | --- | --- |"]
        found = []
        for key, name in PAPERS.items():
            path = root / key / "results.json"
            if not path.is_file():
                continue
            try:
                res = json.loads(path.read_text(encoding="utf-8"))
                rows = readme_rows(res["claims"], name)
                seeds = res["seeds"]
            except (ValueError, KeyError, TypeError) as e:
                raise UtilonError(f"not a reproduction's results ({type(e).__name__}: {e})",
                                  where=str(path), fix=f"run `utilon reproduce {key}` again"
                                  ) from None
            found.append(f"{name}: seeds {seeds[0]}–{seeds[-1]} ({len(seeds)})")
            lines += rows
        if not found:
            raise UtilonError("no reproduction results found", where=str(root),
                              fix="run `utilon reproduce <paper>` first, or give --dir")
        out.print("\n".join(lines), highlight=False, soft_wrap=True, markup=False)
        out.print("\n" + "; ".join(found), highlight=False, soft_wrap=True)
