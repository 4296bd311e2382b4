"""The ``utilon`` command-line interface (typer + rich)."""

from utilon.cli.app import app, main

__all__ = ["app", "main"]
