"""The element-wise vector operations of ``vec``, typed for the compiled build.

``setup.py`` compiles this module with the simulator's hot modules.  Compiled, these loops run
on unboxed doubles and cost a fraction of a call into the interpreter, where ``vec``'s
written-out functions are Python; interpreted, those are the faster ones.  The core and the
fluid model take these when ``COMPILED`` (``ops``) and ``vec``'s otherwise.  The arithmetic is
the same element by element and in the same order (a property test holds them to the ``map``
forms bit for bit), so the build changes no result.

The types are what the hot path passes: a machine's free capacity or usage is a list, a task's
demand a tuple (whose elements may be ints: they are read as doubles, as Python's mixed
arithmetic does).
"""

from __future__ import annotations

from typing import Final

# True in the compiled build: the module is then an extension, not this file
COMPILED: Final = not __file__.endswith(".py")


def add(a: list[float], b: tuple[float, ...]) -> list[float]:
    """``a + b``, element-wise."""
    return [a[i] + b[i] for i in range(len(a))]


def sub(a: list[float], b: tuple[float, ...]) -> list[float]:
    """``a - b``, element-wise."""
    return [a[i] - b[i] for i in range(len(a))]


def le(a: tuple[float, ...], b: list[float]) -> bool:
    """``a <= b`` in every element (``a`` a demand: typed as a tuple, its elements are read
    without a generic item lookup)."""
    return all(a[i] <= b[i] for i in range(len(b)))


def gt_any(a: list[float], b: list[float]) -> bool:
    """``a > b`` in some element."""
    return any(a[i] > b[i] for i in range(len(a)))
