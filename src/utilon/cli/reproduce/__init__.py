"""``utilon reproduce <paper>``: one module per paper, on one Typer app."""

from utilon.cli.reproduce import alsched, cora, cura, ras, rds, table  # noqa: F401  (commands)
from utilon.cli.reproduce.common import reproduce_app

__all__ = ["reproduce_app"]
