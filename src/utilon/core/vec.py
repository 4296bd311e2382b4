"""Element-wise operations on short resource vectors, specialised to their length.

A cluster has a handful of resources, and the hot path adds, subtracts and compares resource
vectors several times per task.  ``list(map(add, a, b))`` costs a map object and a list grown
from an iterator (~250 ns for three resources); the same sum written out element by element,
``[a[0] + b[0], a[1] + b[1], a[2] + b[2]]``, costs ~100 ns including the call.  ``ops(n)``
writes those functions out for ``n`` resources (the way ``collections.namedtuple`` and
``dataclasses`` generate their methods) and caches them; the arithmetic is the same, element by
element and in the same order, so results are bit-identical to the ``map`` forms.  Beyond
``MAX_UNROLLED`` resources the ``map`` forms are used as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from operator import add, gt, le, sub
from typing import NamedTuple

MAX_UNROLLED = 16

Vec = Sequence[float]


class VecOps(NamedTuple):
    """Operations on vectors of one length ``n``."""

    add: Callable[[Vec, Vec], list[float]]  # a + b
    sub: Callable[[Vec, Vec], list[float]]  # a - b
    le: Callable[[Vec, Vec], bool]  # a <= b in every element
    gt_any: Callable[[Vec, Vec], bool]  # a > b in some element


def _map_ops() -> VecOps:
    return VecOps(
        add=lambda a, b: list(map(add, a, b)),
        sub=lambda a, b: list(map(sub, a, b)),
        le=lambda a, b: all(map(le, a, b)),
        gt_any=lambda a, b: any(map(gt, a, b)),
    )


@cache
def ops(n: int) -> VecOps:
    """The operations for vectors of ``n`` elements (``n >= 1``)."""
    if n < 1:
        raise ValueError(f"a resource vector has at least one element, got {n}")
    if n > MAX_UNROLLED:
        return _map_ops()
    idx = range(n)
    src = "\n".join([
        "def add(a, b):",
        f"    return [{', '.join(f'a[{i}] + b[{i}]' for i in idx)}]",
        "def sub(a, b):",
        f"    return [{', '.join(f'a[{i}] - b[{i}]' for i in idx)}]",
        "def le(a, b):",
        f"    return {' and '.join(f'a[{i}] <= b[{i}]' for i in idx)}",
        "def gt_any(a, b):",
        f"    return {' or '.join(f'a[{i}] > b[{i}]' for i in idx)}",
    ])
    namespace: dict[str, Callable[..., object]] = {}
    exec(src, {}, namespace)  # generated from integers only: no user input reaches it
    return VecOps(**namespace)  # type: ignore[arg-type]
