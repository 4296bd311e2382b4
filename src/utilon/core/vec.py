"""Element-wise operations on short resource vectors, specialised to their length.

A cluster has a handful of resources, and the hot path adds, subtracts and compares resource
vectors several times per task.  ``list(map(add, a, b))`` costs a map object and a list grown
from an iterator (~250 ns for three resources); the same sum written out element by element,
``[a[0] + b[0], a[1] + b[1], a[2] + b[2]]``, costs ~100 ns including the call.  ``ops(n)``
writes those functions out for ``n`` resources (the way ``collections.namedtuple`` and
``dataclasses`` generate their methods) and caches them; the arithmetic is the same, element by
element and in the same order, so results are bit-identical to the ``map`` forms.  Beyond
``MAX_UNROLLED`` resources the ``map`` forms are used as they are.

The compiled build (``setup.py``) has faster ones for the hot path: ``vec_native``'s loops on
unboxed doubles, which ``hot_ops(n)`` returns there, and ``ops(n)``'s otherwise.

The generated functions are this module's attributes (``_add3``, ``_le3``, ...), created on
first use, so that objects holding them pickle by reference like any function (parallel runs
send results between processes).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from operator import add, gt, le, sub
from typing import NamedTuple

from utilon.core import vec_native

MAX_UNROLLED = 16

Vec = Sequence[float]


class VecOps(NamedTuple):
    """Operations on vectors of one length ``n``."""

    add: Callable[[Vec, Vec], list[float]]  # a + b
    sub: Callable[[Vec, Vec], list[float]]  # a - b
    le: Callable[[Vec, Vec], bool]  # a <= b in every element
    gt_any: Callable[[Vec, Vec], bool]  # a > b in some element


def _map_add(a: Vec, b: Vec) -> list[float]:
    return list(map(add, a, b))


def _map_sub(a: Vec, b: Vec) -> list[float]:
    return list(map(sub, a, b))


def _map_le(a: Vec, b: Vec) -> bool:
    return all(map(le, a, b))


def _map_gt_any(a: Vec, b: Vec) -> bool:
    return any(map(gt, a, b))


_GENERATED = re.compile(r"_(add|sub|le|gt_any)(\d+)")


def __getattr__(name: str) -> Callable[[Vec, Vec], object]:
    """A generated function named by a pickle made in another process: generate it here."""
    found = _GENERATED.fullmatch(name)
    if found is None or not 1 <= int(found[2]) <= MAX_UNROLLED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(ops(int(found[2])), found[1])


@cache
def ops(n: int) -> VecOps:
    """The operations for vectors of ``n`` elements (``n >= 1``)."""
    if n < 1:
        raise ValueError(f"a resource vector has at least one element, got {n}")
    if n > MAX_UNROLLED:
        return VecOps(_map_add, _map_sub, _map_le, _map_gt_any)
    idx = range(n)
    src = "\n".join([
        f"def _add{n}(a, b):",
        f"    return [{', '.join(f'a[{i}] + b[{i}]' for i in idx)}]",
        f"def _sub{n}(a, b):",
        f"    return [{', '.join(f'a[{i}] - b[{i}]' for i in idx)}]",
        f"def _le{n}(a, b):",
        f"    return {' and '.join(f'a[{i}] <= b[{i}]' for i in idx)}",
        f"def _gt_any{n}(a, b):",
        f"    return {' or '.join(f'a[{i}] > b[{i}]' for i in idx)}",
    ])
    namespace: dict[str, Callable[..., object]] = {}
    exec(src, {}, namespace)  # generated from integers only: no user input reaches it
    for fn in namespace.values():
        fn.__module__ = __name__  # pickled by reference, as ``utilon.core.vec._add3``
        globals()[fn.__name__] = fn
    return VecOps(*namespace.values())  # type: ignore[arg-type]


AddSub = Callable[[list[float], tuple[float, ...]], list[float]]  # a list +/- a tuple


class HotOps(NamedTuple):
    """The operations as the hot path calls them: on a machine's list and a task's tuple."""

    add: AddSub
    sub: AddSub
    le: Callable[[tuple[float, ...], list[float]], bool]
    gt_any: Callable[[list[float], list[float]], bool]


def hot_ops(n: int) -> HotOps:
    """``vec_native``'s compiled loops in the compiled build, else ``ops(n)``."""
    if vec_native.COMPILED:
        return HotOps(vec_native.add, vec_native.sub, vec_native.le, vec_native.gt_any)
    o = ops(n)
    return HotOps(o.add, o.sub, o.le, o.gt_any)
