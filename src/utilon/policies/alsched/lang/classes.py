"""Equivalence classes (§3.1): named sets of machines a job treats as interchangeable.

A ``ClassQuery`` picks machines either by listing them or by their attributes, so that the
partition is the workload's own and follows the cluster as it changes.  Spec forms::

    all                                  every machine
    {machines: [m1, m2]}  or  [m1, m2]   an explicit list of machine ids
    {where: {rack: r1, cores: {">=": 32}}}
    {rack: r1, cores: {">=": 32}}        shorthand for where (unless a key is machines/where)

A condition is a scalar (equality), a list (membership) or a mapping of operators among
``==, !=, <, <=, >, >=, in``; all conditions must hold.  The attributes of a machine are its
``attributes`` plus ``id`` (the machine id) and ``capacity.<resource>`` (its declared capacity;
0 on a machine that lacks a resource some other machine has).  A machine without an attribute
matches no condition on it, ``!=`` included.  Ordering operators compare numbers only; booleans
equal booleans only (YAML's ``true`` is not ``1``).

Queries are frozen and hashable, conditions kept sorted so that equal specs give equal queries;
``to_spec`` emits the canonical form (``all``, ``{machines: [...]}`` or ``{where: {...}}``) and
``from_spec(to_spec(q)) == q``.  ``resolve`` maps a query to the sorted indices of the machines
it matches, with one-line errors for unknown machine ids and attribute names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from utilon.model.cluster import AttrValue, Machine
from utilon.policies.alsched.lang.structured import SpecError

__all__ = ["ALL", "OPERATORS", "ClassQuery", "Condition", "known_attributes"]

OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "in")
_ORDERING = ("<", "<=", ">", ">=")
_SHOWN = 8  # known ids / attributes listed in an error message

Operand = AttrValue | tuple[AttrValue, ...]
Condition = tuple[tuple[str, Operand], ...]
"""The (operator, operand) pairs an attribute must satisfy, sorted by operator."""


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _scalar(v: object, where: str) -> AttrValue:
    if isinstance(v, (str, bool, int)):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return v
    raise SpecError(f"expected a string, number or boolean, got {v!r}", where=where)


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f", ... ({len(names)} in all)" if len(names) > _SHOWN else "")


# -- conditions ----------------------------------------------------------------------------------
def _condition(spec: object, where: str) -> Condition:
    if isinstance(spec, Mapping):
        if not spec:
            raise SpecError("an operator mapping must not be empty", where=where,
                            fix=f"use one of {', '.join(OPERATORS)}")
        return tuple(sorted(_operator(op, arg, where) for op, arg in spec.items()))
    if isinstance(spec, Sequence) and not isinstance(spec, str):
        return (_operator("in", spec, where),)
    return (("==", _scalar(spec, where)),)


def _operator(op: object, arg: object, where: str) -> tuple[str, Operand]:
    if op not in OPERATORS:
        raise SpecError(f"bad operator {op!r}; expected one of: {', '.join(OPERATORS)}",
                        where=where)
    if op == "in":
        if isinstance(arg, str) or not isinstance(arg, Sequence) or not arg:
            raise SpecError(f"'in' takes a non-empty list, got {arg!r}", where=where)
        return "in", tuple(_scalar(a, where) for a in arg)
    value = _scalar(arg, where)
    if op in _ORDERING and not _is_num(value):
        raise SpecError(f"operator {op!r} compares numbers, got {arg!r}", where=where)
    return str(op), value


def _equal(have: AttrValue, want: AttrValue) -> bool:
    if isinstance(have, bool) or isinstance(want, bool):
        return isinstance(have, bool) and isinstance(want, bool) and have == want
    if _is_num(have) and _is_num(want):
        return float(have) == float(want)
    return have == want


def _holds(op: str, arg: Operand, have: AttrValue) -> bool:
    if isinstance(arg, tuple):  # "in"
        return any(_equal(have, a) for a in arg)
    if op == "==":
        return _equal(have, arg)
    if op == "!=":
        return not _equal(have, arg)
    if not (_is_num(have) and _is_num(arg)):
        return False
    h, a = float(have), float(arg)
    return {"<": h < a, "<=": h <= a, ">": h > a, ">=": h >= a}[op]


def _cond_to_spec(cond: Condition) -> object:
    if len(cond) == 1:
        op, arg = cond[0]
        if op == "==" and not isinstance(arg, tuple):
            return arg
        if op == "in" and isinstance(arg, tuple):
            return list(arg)
    return {op: list(arg) if isinstance(arg, tuple) else arg for op, arg in cond}


# -- attribute lookup ----------------------------------------------------------------------------
def _lookup(m: Machine, name: str) -> AttrValue | None:
    if name == "id":
        return m.id
    if name.startswith("capacity."):
        return m.capacity.get(name.removeprefix("capacity."), 0.0)
    return m.attr(name)


def known_attributes(machines: Sequence[Machine]) -> tuple[str, ...]:
    """The attribute names a query may use on these machines."""
    names = {"id"}
    for m in machines:
        names.update(k for k, _ in m.attributes)
        names.update(f"capacity.{r}" for r in m.capacity.names)
    return tuple(sorted(names))


# -- the query -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ClassQuery:
    """A set of machines: an explicit id list, or attribute conditions (none = all)."""

    machines: tuple[str, ...] | None = None
    where: tuple[tuple[str, Condition], ...] = ()

    @classmethod
    def from_spec(cls, obj: object, where: str = "class") -> ClassQuery:
        if obj == "all":
            return ALL
        if isinstance(obj, Sequence) and not isinstance(obj, str):
            return cls._explicit(obj, where)
        if not isinstance(obj, Mapping):
            raise SpecError(f"expected a class query ('all', a list of machine ids, "
                            f"{{machines: [...]}} or {{where: {{...}}}}), got {obj!r}",
                            where=where)
        if "machines" in obj or "where" in obj:
            return cls._keyed(obj, where)
        return cls._conditions(obj, where)

    @classmethod
    def _keyed(cls, obj: Mapping[object, object], where: str) -> ClassQuery:
        if len(obj) != 1:
            raise SpecError(f"a class query has either 'machines' or 'where', got keys "
                            f"{', '.join(map(str, obj))}", where=where,
                            fix="to match attributes named machines/where, nest them under "
                                "where:")
        if "machines" in obj:
            ids = obj["machines"]
            if isinstance(ids, str) or not isinstance(ids, Sequence):
                raise SpecError(f"'machines' takes a list of machine ids, got {ids!r}",
                                where=f"{where}.machines")
            return cls._explicit(ids, f"{where}.machines")
        conds = obj["where"]
        if not isinstance(conds, Mapping):
            raise SpecError(f"'where' takes a mapping attribute -> condition, got {conds!r}",
                            where=f"{where}.where")
        return cls._conditions(conds, f"{where}.where")

    @classmethod
    def _explicit(cls, ids: Sequence[object], where: str) -> ClassQuery:
        if not ids:
            raise SpecError("an explicit class needs at least one machine id", where=where)
        for mid in ids:
            if not isinstance(mid, str) or not mid:
                raise SpecError(f"a machine id must be a non-empty string, got {mid!r}",
                                where=where)
        seen: set[object] = set()
        for mid in ids:
            if mid in seen:
                raise SpecError(f"machine {mid!r} is listed twice", where=where)
            seen.add(mid)
        return cls(machines=tuple(str(m) for m in ids))

    @classmethod
    def _conditions(cls, conds: Mapping[object, object], where: str) -> ClassQuery:
        items: list[tuple[str, Condition]] = []
        for attr, spec in conds.items():
            if not isinstance(attr, str) or not attr:
                raise SpecError(f"an attribute name must be a non-empty string, got {attr!r}",
                                where=where)
            items.append((attr, _condition(spec, f"{where}.{attr}")))
        return cls(where=tuple(sorted(items)))

    @property
    def is_all(self) -> bool:
        return self.machines is None and not self.where

    def to_spec(self) -> object:
        if self.machines is not None:
            return {"machines": list(self.machines)}
        if not self.where:
            return "all"
        return {"where": {attr: _cond_to_spec(cond) for attr, cond in self.where}}

    def matches(self, m: Machine) -> bool:
        if self.machines is not None:
            return m.id in self.machines
        for attr, cond in self.where:
            have = _lookup(m, attr)
            if have is None or not all(_holds(op, arg, have) for op, arg in cond):
                return False
        return True

    def resolve(self, machines: Sequence[Machine], where: str = "class") -> tuple[int, ...]:
        """The sorted indices of the machines the query matches."""
        if self.machines is not None:
            index = {m.id: i for i, m in enumerate(machines)}
            for mid in self.machines:
                if mid not in index:
                    raise SpecError(f"unknown machine {mid!r}; known machines: "
                                    f"{_listing([m.id for m in machines])}", where=where)
            return tuple(sorted(index[mid] for mid in self.machines))
        known = known_attributes(machines)
        for attr, _ in self.where:
            if attr not in known:
                raise SpecError(f"no machine has attribute {attr!r}; known attributes: "
                                f"{_listing(known)}", where=f"{where}.{attr}")
        return tuple(i for i, m in enumerate(machines) if self.matches(m))


ALL = ClassQuery()
"""Every machine."""
