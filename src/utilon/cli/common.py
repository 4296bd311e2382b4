"""What every sub-command shares: the two consoles and the one-line error handling."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

from utilon.errors import UtilonError

# Tables are wide: when output is not a terminal (CI logs, pipes) do not squeeze them to 80.
out = Console(width=None if Console().is_terminal else 160)
err = Console(stderr=True)
state = {"debug": False}


@contextmanager
def errors() -> Iterator[None]:
    """Turn a ``UtilonError`` into one ``error:`` line and exit status 2 (``--debug``: raise)."""
    try:
        yield
    except UtilonError as e:
        if state["debug"]:
            raise
        err.print(f"[bold red]error:[/] {e.one_line()}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130) from None
