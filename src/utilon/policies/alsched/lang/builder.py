"""Building expressions from Python.

Thin constructors over the AST that accept plain ints and floats wherever a number goes, so
``max_(nck("rack1", 4, 2), scale(0.5, nck("all", 4, 2)))`` reads like the paper's figures.
Symbolic numbers are ``cap("j")`` and ``TASKS``.  Operator names carry a trailing underscore
where they would shadow a builtin.  Invalid input raises ``ModelError``, as the AST does.
"""

from __future__ import annotations

import math

from utilon.errors import ModelError
from utilon.policies.alsched.lang.ast import (
    Barrier,
    Cap,
    LnCk,
    Max,
    Min,
    NCk,
    Node,
    NumTerm,
    Scale,
    Sum,
    Tasks,
    lit,
)

__all__ = ["TASKS", "Number", "barrier", "cap", "lnck", "max_", "min_", "nck", "scale", "sum_"]

Number = int | float | NumTerm
TASKS = Tasks()
"""``tasks``: the ready tasks of the stage, filled in when a request is bound."""


def _class(cls: object, what: str) -> str:
    if not isinstance(cls, str) or not cls:
        raise ModelError(f"{what}: the class must be a non-empty string, got {cls!r}")
    return cls


def cap(cls: str) -> Cap:
    """``cap(cls)``: the capacity of class ``cls``, in units, once bound."""
    return Cap(_class(cls, "cap"))


def nck(cls: str, k: Number, u: Number) -> NCk:
    """``u`` once at least ``k`` units come from ``cls``, else 0."""
    return NCk(_class(cls, "nck"), lit(k), lit(u))


def lnck(cls: str, k: Number, u: Number) -> LnCk:
    """``u * min(D[cls] / k, 1)``."""
    return LnCk(_class(cls, "lnck"), lit(k), lit(u))


def max_(*es: Node) -> Max:
    return Max(tuple(es))


def min_(*es: Node) -> Min:
    return Min(tuple(es))


def sum_(*es: Node) -> Sum:
    return Sum(tuple(es))


def scale(f: float, e: Node) -> Scale:
    """``f * e``; the factor is a plain number (it is never symbolic)."""
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f):
        raise ModelError(f"scale: the factor must be a finite number, got {f!r}")
    return Scale(float(f), e)


def barrier(b: Number, e: Node) -> Barrier:
    """``b`` once ``e`` reaches ``b``, else 0."""
    return Barrier(lit(b), e)
