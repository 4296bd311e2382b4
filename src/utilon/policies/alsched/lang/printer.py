"""The canonical prefix text of an expression.

One spelling per AST, so printed expressions diff and cache well: operators by their full
lower-case names (``(max A B)``, ``(scale 0.5 A)``, ``(barrier 64 A)``), primitives as
``nck(i, 64, 64)``, no grouping parentheses.  Numbers print as integers when integral (and
small enough to be exact) and otherwise as the shortest ``repr`` that reads back to the same
float; class names are quoted only when they are not plain identifiers.  Hence
``parse(to_text(e), strict=True) == e`` for every AST.
"""

from __future__ import annotations

import re

from utilon.policies.alsched.lang.ast import (
    NARY,
    Barrier,
    Cap,
    Lit,
    Node,
    NumTerm,
    Prim,
    Scale,
)

__all__ = ["format_class", "format_num", "format_number", "to_text"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.:@/-]*", re.ASCII)
_EXACT_INT = 2.0**53  # beyond this, int(v) would print digits the float does not have


def format_number(v: float) -> str:
    if v.is_integer() and abs(v) < _EXACT_INT:
        return str(int(v))
    return repr(v)


def format_class(name: str) -> str:
    if _IDENT.fullmatch(name):
        return name
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def format_num(t: NumTerm) -> str:
    if isinstance(t, Lit):
        return format_number(t.value)
    if isinstance(t, Cap):
        return f"cap({format_class(t.cls)})"
    return "tasks"


def to_text(e: Node) -> str:
    """The canonical prefix text of ``e``."""
    if isinstance(e, Prim):
        return f"{e.kind}({format_class(e.cls)}, {format_num(e.k)}, {format_num(e.u)})"
    if isinstance(e, Scale):
        return f"(scale {format_number(e.factor)} {to_text(e.arg)})"
    if isinstance(e, Barrier):
        return f"(barrier {format_num(e.level)} {to_text(e.arg)})"
    if isinstance(e, NARY):
        return f"({e.kind} {' '.join(to_text(a) for a in e.children)})"
    raise TypeError(f"not an expression node: {e!r}")
