"""The code base stays ruff- and mypy-clean: both run as part of `make test`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:  # pragma: no cover - the test extra installs both
        pytest.fail(f"{name} is not installed: run `make test` (it installs the test extra)")
    return found


def test_ruff_is_clean() -> None:
    proc = subprocess.run([_tool("ruff"), "check", "src", "tests", "benchmarks"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean() -> None:
    proc = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
