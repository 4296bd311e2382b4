"""docs/tutorial-policy.md runs as written: its ```python blocks, in order, in one namespace,
each printing exactly the ```text block that follows it (when one does)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial-policy.md"

# A fenced block: its language and body.  Fences in the tutorial are never nested or indented.
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(text: str) -> list[tuple[str, str | None, int]]:
    """(code, the output shown right under it or None, line) per ```python block; an output
    block is a ```text block separated from its code block by blank lines only."""
    found = list(FENCE.finditer(text))
    out: list[tuple[str, str | None, int]] = []
    for i, m in enumerate(found):
        if m.group(1) != "python":
            continue
        expected = None
        nxt = found[i + 1] if i + 1 < len(found) else None
        if nxt is not None and nxt.group(1) == "text" and not text[m.end():nxt.start()].strip():
            expected = nxt.group(2)
        out.append((m.group(2), expected, text.count("\n", 0, m.start()) + 2))
    return out


def test_tutorial_has_code_and_outputs() -> None:
    found = blocks(TUTORIAL.read_text(encoding="utf-8"))
    assert len(found) >= 5
    assert sum(expected is not None for _, expected, _ in found) >= 5


def test_tutorial_blocks_run_and_print_what_it_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    from utilon.policies import base

    monkeypatch.chdir(ROOT)  # the tutorial's paths are relative to the repository's root
    registered = dict(base._REGISTRY)
    namespace: dict[str, object] = {"__name__": "tutorial"}
    try:
        for code, expected, line in blocks(TUTORIAL.read_text(encoding="utf-8")):
            # blank lines up front so that a traceback names the line of the tutorial
            source = "\n" * (line - 1) + code
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(source, str(TUTORIAL), "exec"), namespace)
            if expected is not None:
                assert printed.getvalue() == expected, (
                    f"{TUTORIAL.name}, block at line {line}: the output shown under it is "
                    f"stale; it now prints:\n{printed.getvalue()}")
    finally:
        # the tutorial registers its policy: leave the registry as other tests expect it
        base._REGISTRY.clear()
        base._REGISTRY.update(registered)
