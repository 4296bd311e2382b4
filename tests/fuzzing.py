"""Settings and checks shared by the fuzz tests of every parser.

A fuzz test feeds a parser arbitrary or mutated input and accepts exactly two outcomes: a
result, or a ``UtilonError`` whose one line names the file (or field, or line) and says what
to fix.  Anything else -- another exception, a hang, a memory blow-up -- fails the test.

``fuzz_settings()`` runs ``FUZZ_EXAMPLES`` inputs per parser in ``make test`` and 10,000 under
``HYPOTHESIS_PROFILE=thorough``; ``deadline`` turns a slow input into a failure (a hang is a
bug too: parsers must keep their work bounded by their limits).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, settings

from conftest import THOROUGH
from utilon.errors import UtilonError

FUZZ_EXAMPLES = 10_000 if THOROUGH else 150
"""Inputs per parser: 10,000 in the thorough profile, a quick sample in ``make test``."""


def fuzz_settings(examples: int | None = None, *, deadline_s: float = 5.0) -> settings:
    """Hypothesis settings for one parser's fuzz test (``examples`` scales the default)."""
    n = FUZZ_EXAMPLES if examples is None else (examples if not THOROUGH else 10_000)
    return settings(max_examples=n, deadline=timedelta(seconds=deadline_s),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture])


def assert_clean_error(err: UtilonError, *must_mention: str) -> str:
    """``err`` reads as one line that mentions each of ``must_mention`` (e.g. the file)."""
    line = err.one_line()
    assert line and "\n" not in line, repr(line)
    assert "Traceback" not in line, line
    for text in must_mention:
        assert text in line, f"{text!r} not in {line!r}"
    return line


FUZZ_MAX_TASKS = "50000"
"""The task limit while fuzzing: a fuzzed count of 368,114 jobs is valid but takes seconds to
build; a lower limit keeps every input fast and exercises the limit's own path."""


@contextmanager
def fuzz_task_limit() -> Iterator[None]:
    """``UTILON_MAX_TASKS`` at ``FUZZ_MAX_TASKS`` inside the block, restored after it."""
    before = os.environ.get("UTILON_MAX_TASKS")
    os.environ["UTILON_MAX_TASKS"] = FUZZ_MAX_TASKS
    try:
        yield
    finally:
        if before is None:
            del os.environ["UTILON_MAX_TASKS"]
        else:
            os.environ["UTILON_MAX_TASKS"] = before


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into a nested document of dicts and lists (the places to mutate)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, (*prefix, i))
    return out
