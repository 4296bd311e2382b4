"""The YAML/JSON face of the utility language.

An expression is either a string in prefix syntax (``"(max nck(r1, 4, 2) nck(r2, 4, 2))"``)
or a mapping with exactly one operator key::

    {max: [e, ...]}   {min: [e, ...]}   {sum: [e, ...]}
    {scale: 0.5, of: e}                 {barrier: 64, of: e}
    {nck: {class: i, k: 64, u: 64}}     {nck: [i, 64, 64]}      (same for lnck)

Numbers are YAML numbers or the strings ``"cap(j)"`` / ``"tasks"`` (any prefix-syntax number
is accepted).  Strings and mappings mix freely at any depth.  Errors are ``SpecError`` (a
``ScenarioError``, since these specs live in scenario files) whose ``where`` is the path to the
offending value, e.g. ``request.expr.max[1].of``; a prefix-syntax string keeps its
``ParseError`` with the column, the path becoming its ``where``.

``to_obj`` emits the mapping form (numbers as ints when integral), so
``from_obj(to_obj(e)) == e``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from utilon.errors import ModelError, ScenarioError
from utilon.policies.alsched.lang.ast import (
    NARY,
    Barrier,
    Lit,
    LnCk,
    Max,
    Min,
    NCk,
    Node,
    NumTerm,
    Prim,
    Scale,
    Sum,
    size,
)
from utilon.policies.alsched.lang.parse import MAX_DEPTH, MAX_NODES, MAX_NUMBER, parse, parse_number
from utilon.policies.alsched.lang.printer import format_num

__all__ = ["SpecError", "check_keys", "from_obj", "number_from_obj", "number_to_obj",
           "to_obj"]


class SpecError(ScenarioError):
    """A YAML/JSON spec of an expression, class or request is malformed."""


_NARY_KINDS: dict[str, Callable[[tuple[Node, ...]], Node]] = {"max": Max, "min": Min,
                                                               "sum": Sum}
_PRIM_KINDS: dict[str, type[NCk] | type[LnCk]] = {"nck": NCk, "lnck": LnCk}
_KEYS: dict[str, tuple[str, ...]] = {
    **{k: (k,) for k in (*_NARY_KINDS, *_PRIM_KINDS)},
    "scale": ("of", "scale"),
    "barrier": ("barrier", "of"),
}
_PRIM_FIELDS = ("class", "k", "u")
_EXACT_INT = 2.0**53


def _kind_name(obj: object) -> str:
    return "null" if obj is None else type(obj).__name__


def check_keys(obj: Mapping[object, object], allowed: Sequence[str], where: str) -> None:
    """Reject keys outside ``allowed`` (one line naming the key and the valid ones)."""
    for key in obj:
        if key not in allowed:
            raise SpecError(f"unknown key {key!r}; expected one of: {', '.join(sorted(allowed))}",
                            where=where)


def _model(where: str, make: Callable[[], Node]) -> Node:
    try:
        return make()
    except ModelError as err:
        raise SpecError(err.message, where=where, fix="every number must be >= 0") from None


# -- numbers -------------------------------------------------------------------------------------
def number_from_obj(obj: object, where: str) -> NumTerm:
    """A number: a YAML number or a prefix-syntax string (``"cap(j)"``, ``"tasks"``)."""
    if isinstance(obj, str):
        return parse_number(obj, where=where)
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        raise SpecError(f"expected a number, 'cap(CLASS)' or 'tasks', got {_kind_name(obj)}",
                        where=where)
    try:
        term = Lit(float(obj))
    except (ModelError, OverflowError):
        raise SpecError(f"number {obj!r} is not finite", where=where) from None
    _check_size(term.value, where)
    return term


def _check_size(value: float, where: str) -> None:
    if abs(value) > MAX_NUMBER:
        raise SpecError(f"number {value:g} is larger than {MAX_NUMBER:g}", where=where,
                        fix=f"unit counts and utilities stay below {MAX_NUMBER:g}")


def _plain(v: float) -> int | float:
    return int(v) if v.is_integer() and abs(v) < _EXACT_INT else v


def number_to_obj(t: NumTerm) -> int | float | str:
    return _plain(t.value) if isinstance(t, Lit) else format_num(t)


# -- expressions ---------------------------------------------------------------------------------
def from_obj(obj: object, where: str = "expr") -> Node:
    """An expression from its YAML/JSON form (a prefix string or an operator mapping), at
    most ``MAX_DEPTH`` levels deep and ``MAX_NODES`` nodes large (text and mappings
    together)."""
    node = _from_obj(obj, where, 0)
    if isinstance(obj, Mapping) and size(node) > MAX_NODES:
        raise SpecError(f"more than {MAX_NODES:,} operators and primitives", where=where,
                        fix="use a class (or a loop variable) instead of one primitive per "
                            "machine")
    return node


def _from_obj(obj: object, where: str, depth: int) -> Node:
    if isinstance(obj, str):
        return parse(obj, where=where, max_depth=MAX_DEPTH - depth)
    if depth >= MAX_DEPTH and isinstance(obj, Mapping):
        raise SpecError(f"nested deeper than {MAX_DEPTH} levels", where=where,
                        fix="flatten the expression")
    if not isinstance(obj, Mapping):
        raise SpecError(f"expected an expression (prefix text or a mapping with one of: "
                        f"{', '.join(_KEYS)}), got {_kind_name(obj)}", where=where)
    ops = [k for k in obj if k in _KEYS]
    if len(ops) != 1:
        found = f"found {', '.join(map(str, ops))}" if ops else "found none"
        raise SpecError(f"an expression mapping needs exactly one operator key "
                        f"({', '.join(_KEYS)}); {found}", where=where)
    op = str(ops[0])
    check_keys(obj, _KEYS[op], where)
    if op in _NARY_KINDS:
        return _nary(op, obj[op], f"{where}.{op}", depth + 1)
    if op in _PRIM_KINDS:
        return _prim(op, obj[op], f"{where}.{op}")
    if "of" not in obj:
        raise SpecError(f"'{op}' needs 'of': the expression it applies to", where=where)
    arg = _from_obj(obj["of"], f"{where}.of", depth + 1)
    if op == "scale":
        factor = _factor(obj[op], f"{where}.scale")
        return _model(f"{where}.scale", lambda: Scale(factor, arg))
    level = number_from_obj(obj[op], f"{where}.barrier")
    return _model(f"{where}.barrier", lambda: Barrier(level, arg))


def _nary(op: str, items: object, where: str, depth: int) -> Node:
    if isinstance(items, (str, Mapping)) or not isinstance(items, Sequence) or not items:
        raise SpecError(f"'{op}' takes a non-empty list of expressions, got "
                        f"{_kind_name(items)}", where=where)
    args = tuple(_from_obj(item, f"{where}[{i}]", depth) for i, item in enumerate(items))
    return _NARY_KINDS[op](args)


def _factor(obj: object, where: str) -> float:
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        raise SpecError(f"scale's factor must be a plain number, got {obj!r}", where=where)
    f = float(obj)
    if not (math.isfinite(f) and f >= 0):
        raise SpecError(f"scale's factor must be a finite number >= 0, got {obj!r}",
                        where=where)
    _check_size(f, where)
    return f


def _prim(op: str, spec: object, where: str) -> Node:
    if isinstance(spec, Mapping):
        check_keys(spec, _PRIM_FIELDS, where)
        missing = [k for k in _PRIM_FIELDS if k not in spec]
        if missing:
            raise SpecError(f"'{op}' is missing {', '.join(missing)}", where=where,
                            fix=f"write {{{op}: {{class: C, k: K, u: U}}}}")
        cls, k, u = (spec[f] for f in _PRIM_FIELDS)
        paths = tuple(f"{where}.{f}" for f in _PRIM_FIELDS)
    elif isinstance(spec, Sequence) and not isinstance(spec, str) and len(spec) == 3:
        cls, k, u = spec
        paths = tuple(f"{where}[{i}]" for i in range(3))
    else:
        raise SpecError(f"'{op}' takes {{class, k, u}} or a list [class, k, u], got "
                        f"{spec!r}", where=where)
    if not isinstance(cls, str) or not cls:
        raise SpecError(f"the class must be a non-empty string, got {cls!r}", where=paths[0])
    kt = number_from_obj(k, paths[1])
    ut = number_from_obj(u, paths[2])
    return _model(where, lambda: _PRIM_KINDS[op](cls, kt, ut))


def to_obj(e: Node) -> dict[str, object]:
    """The mapping form of ``e`` (inverse of ``from_obj``)."""
    if isinstance(e, Prim):
        return {e.kind: {"class": e.cls, "k": number_to_obj(e.k), "u": number_to_obj(e.u)}}
    if isinstance(e, Scale):
        return {"scale": _plain(e.factor), "of": to_obj(e.arg)}
    if isinstance(e, Barrier):
        return {"barrier": number_to_obj(e.level), "of": to_obj(e.arg)}
    if isinstance(e, NARY):
        return {e.kind: [to_obj(a) for a in e.children]}
    raise TypeError(f"not an expression node: {e!r}")
