"""The typed, frozen AST of alsched's utility language (§3.2-3.3 of the paper).

A utility expression maps an allocation -- ``D[class]``, the number of schedulable units a job
gets from each of its equivalence classes -- to a utility.  Leaves are the two primitives of
§3.2, inner nodes the five operators of §3.3:

=========================  ===================================================================
``NCk(cls, k, u)``         ``u`` once at least ``k`` units come from ``cls``, else 0 (Fig. 1)
``LnCk(cls, k, u)``        ``u * min(D[cls] / k, 1)``: linear up to ``k`` units (Fig. 2)
``Min/Max/Sum(children)``  the min / max / sum of the children (n-ary, at least one child)
``Scale(factor, child)``   ``factor * child``
``Barrier(level, child)``  ``level`` once the child reaches ``level``, else 0 (§3.3: "evaluates
                           to zero until the utility of the child reaches a certain barrier, at
                           which point it returns the specified utility")
=========================  ===================================================================

Every number is non-negative, so every node is monotone non-decreasing in every ``D[class]``
(the property branch-and-bound relies on, §4); each node class declares ``monotone = True``
and ``upper()`` gives the best utility the node can reach (its value under unlimited
resources), ``lower()`` its value with nothing allocated.

A *template* is an expression as written: class names may be loop variables (``i`` and ``j``
in §3.4's n-body expression) and numbers may be symbolic: ``cap(x)`` (the capacity of class
``x``, in units) and ``tasks`` (the stage's ready tasks when the request is bound).  Binding
(``utilon.policies.alsched.lang.bind``) turns a template into a *concrete* expression, whose
numbers are all ``Lit`` and whose class names all name resolved classes; only concrete
expressions evaluate.

Nodes are frozen dataclasses with structural equality and hashing, so equal expressions compare
equal and can key caches.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar

from utilon.errors import ModelError

TOL = 1e-9
"""Tolerance of the ``>=`` comparisons (barrier levels are compared to sums of floats)."""


# -- numbers -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Lit:
    """A literal number."""

    value: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.value):
            raise ModelError(f"number {self.value!r} is not finite")


@dataclass(frozen=True, slots=True)
class Cap:
    """``cap(x)``: the capacity, in units, of class ``x`` (a class name or a loop variable)."""

    cls: str


@dataclass(frozen=True, slots=True)
class Tasks:
    """``tasks``: the number of ready tasks of the stage the request is bound for."""


NumTerm = Lit | Cap | Tasks


def num_value(n: NumTerm) -> float:
    """The value of a bound number; symbolic numbers must be bound first."""
    if type(n) is Lit:
        return n.value
    raise ModelError(f"{describe_num(n)} is symbolic: bind the expression before evaluating it")


def describe_num(n: NumTerm) -> str:
    if type(n) is Lit:
        v = n.value
        return str(int(v)) if v == int(v) and abs(v) < 1e15 else repr(v)
    if type(n) is Cap:
        return f"cap({n.cls})"
    return "tasks"


def lit(v: float | int | NumTerm) -> NumTerm:
    """Coerce a Python number to ``Lit``; pass terms through."""
    if isinstance(v, (Lit, Cap, Tasks)):
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ModelError(f"expected a number, got {v!r}")
    return Lit(float(v))


def _check_nonneg(n: NumTerm, what: str) -> None:
    if type(n) is Lit and n.value < 0:
        raise ModelError(f"{what} must be >= 0 (utility functions are monotone), got "
                         f"{describe_num(n)}")


# -- nodes ---------------------------------------------------------------------------------------
class Node(ABC):
    """Base class of every expression node."""

    __slots__ = ()
    kind: ClassVar[str]
    """The node's name in the structured (YAML/JSON) face and in the canonical printer."""
    monotone: ClassVar[bool] = True
    """Non-decreasing in every ``D[class]``: true of every node of the language."""

    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    @abstractmethod
    def evaluate(self, alloc: Mapping[str, float]) -> float:
        """The utility of allocation ``alloc`` (class -> units; absent classes count 0)."""

    @abstractmethod
    def upper(self) -> float:
        """The best utility this node can reach (its value under unlimited resources)."""

    def lower(self) -> float:
        """The node's utility with nothing allocated."""
        return self.evaluate({})

    def numbers(self) -> tuple[NumTerm, ...]:
        return ()

    def with_children(self, children: tuple[Node, ...]) -> Node:
        return self

    def with_numbers(self, nums: tuple[NumTerm, ...]) -> Node:
        return self


@dataclass(frozen=True, slots=True)
class _Prim(Node):
    cls: str
    k: NumTerm
    u: NumTerm

    def __post_init__(self) -> None:
        if not self.cls:
            raise ModelError(f"{self.kind}: the class name must not be empty")
        _check_nonneg(self.k, f"{self.kind}({self.cls}, ...): k")
        _check_nonneg(self.u, f"{self.kind}({self.cls}, ...): u")

    def upper(self) -> float:
        return num_value(self.u)

    def numbers(self) -> tuple[NumTerm, ...]:
        return (self.k, self.u)

    def with_numbers(self, nums: tuple[NumTerm, ...]) -> Node:
        return type(self)(self.cls, nums[0], nums[1])

    def with_class(self, cls: str) -> _Prim:
        return type(self)(cls, self.k, self.u)


@dataclass(frozen=True, slots=True)
class NCk(_Prim):
    """``u`` once ``D[cls] >= k``, else 0 (the paper's "n Choose k", Fig. 1)."""

    kind: ClassVar[str] = "nck"

    def evaluate(self, alloc: Mapping[str, float]) -> float:
        return num_value(self.u) if alloc.get(self.cls, 0) >= num_value(self.k) - TOL else 0.0


@dataclass(frozen=True, slots=True)
class LnCk(_Prim):
    """``u * min(D[cls] / k, 1)`` (the linear "n Choose k", Fig. 2); ``k = 0`` gives ``u``."""

    kind: ClassVar[str] = "lnck"

    def evaluate(self, alloc: Mapping[str, float]) -> float:
        k = num_value(self.k)
        u = num_value(self.u)
        if k <= 0:
            return u
        return u * min(alloc.get(self.cls, 0) / k, 1.0)


@dataclass(frozen=True, slots=True)
class _NAry(Node):
    args: tuple[Node, ...]

    def __post_init__(self) -> None:
        if not self.args:
            raise ModelError(f"{self.kind} needs at least one operand")
        for a in self.args:
            if not isinstance(a, Node):
                raise ModelError(f"{self.kind}: operand {a!r} is not an expression")

    @property
    def children(self) -> tuple[Node, ...]:
        return self.args

    def with_children(self, children: tuple[Node, ...]) -> Node:
        return type(self)(children)


@dataclass(frozen=True, slots=True)
class Min(_NAry):
    kind: ClassVar[str] = "min"

    def evaluate(self, alloc: Mapping[str, float]) -> float:
        return min(a.evaluate(alloc) for a in self.args)

    def upper(self) -> float:
        return min(a.upper() for a in self.args)


@dataclass(frozen=True, slots=True)
class Max(_NAry):
    kind: ClassVar[str] = "max"

    def evaluate(self, alloc: Mapping[str, float]) -> float:
        return max(a.evaluate(alloc) for a in self.args)

    def upper(self) -> float:
        return max(a.upper() for a in self.args)


@dataclass(frozen=True, slots=True)
class Sum(_NAry):
    kind: ClassVar[str] = "sum"

    def evaluate(self, alloc: Mapping[str, float]) -> float:
        return sum(a.evaluate(alloc) for a in self.args)

    def upper(self) -> float:
        return sum(a.upper() for a in self.args)


@dataclass(frozen=True, slots=True)
class Scale(Node):
    """``factor * child``; the factor is a plain number >= 0."""

    factor: float
    arg: Node
    kind: ClassVar[str] = "scale"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.factor) and self.factor >= 0):
            raise ModelError(f"scale factor must be a number >= 0 (utility functions are "
                             f"monotone), got {self.factor!r}")
        if not isinstance(self.arg, Node):
            raise ModelError(f"scale: operand {self.arg!r} is not an expression")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.arg,)

    def with_children(self, children: tuple[Node, ...]) -> Node:
        return Scale(self.factor, children[0])

    def evaluate(self, alloc: Mapping[str, float]) -> float:
        return self.factor * self.arg.evaluate(alloc)

    def upper(self) -> float:
        return self.factor * self.arg.upper()


@dataclass(frozen=True, slots=True)
class Barrier(Node):
    """``level`` once the child's utility reaches ``level``, else 0."""

    level: NumTerm
    arg: Node
    kind: ClassVar[str] = "barrier"

    def __post_init__(self) -> None:
        _check_nonneg(self.level, "barrier level")
        if not isinstance(self.arg, Node):
            raise ModelError(f"barrier: operand {self.arg!r} is not an expression")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.arg,)

    def with_children(self, children: tuple[Node, ...]) -> Node:
        return Barrier(self.level, children[0])

    def numbers(self) -> tuple[NumTerm, ...]:
        return (self.level,)

    def with_numbers(self, nums: tuple[NumTerm, ...]) -> Node:
        return Barrier(nums[0], self.arg)

    def evaluate(self, alloc: Mapping[str, float]) -> float:
        b = num_value(self.level)
        return b if self.arg.evaluate(alloc) >= b - TOL else 0.0

    def upper(self) -> float:
        b = num_value(self.level)
        return b if self.arg.upper() >= b - TOL else 0.0


Expr = Node
PRIMITIVES: tuple[type[_Prim], ...] = (NCk, LnCk)
NARY: tuple[type[_NAry], ...] = (Min, Max, Sum)
Prim = _Prim
NAry = _NAry


# -- traversals ----------------------------------------------------------------------------------
def walk(e: Node) -> Iterator[Node]:
    """Every node, parents before children."""
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def class_names(e: Node) -> frozenset[str]:
    """The class names (or loop variables) the primitives and ``cap(...)`` terms refer to."""
    out: set[str] = set()
    for n in walk(e):
        if isinstance(n, _Prim):
            out.add(n.cls)
        for t in n.numbers():
            if type(t) is Cap:
                out.add(t.cls)
    return frozenset(out)


def is_concrete(e: Node) -> bool:
    """True if every number is a literal (the expression can be evaluated)."""
    return all(type(t) is Lit for n in walk(e) for t in n.numbers())


def transform(e: Node, fn: Callable[[Node], Node]) -> Node:
    """Rebuild bottom-up, applying ``fn`` to every node after its children were rebuilt."""
    kids = e.children
    if kids:
        new = tuple(transform(c, fn) for c in kids)
        if new != kids:
            e = e.with_children(new)
    return fn(e)


def size(e: Node) -> int:
    return sum(1 for _ in walk(e))


def depth(e: Node) -> int:
    kids = e.children
    return 1 + (max(depth(c) for c in kids) if kids else 0)


# -- the policies of §5.2 ------------------------------------------------------------------------
def _keep_max_branches(e: Node, best: bool) -> Node:
    def fn(n: Node) -> Node:
        if type(n) is not Max or len(n.args) == 1:
            return n
        ups = [a.upper() for a in n.args]
        target = max(ups) if best else min(ups)
        kept = tuple(a for a, u in zip(n.args, ups, strict=True) if abs(u - target) <= TOL)
        return kept[0] if len(kept) == 1 else Max(kept)
    return transform(e, fn)


def preferred(e: Node) -> Node:
    """The "Hard" reading (§5.2): at every ``max``, keep only the branches of highest upper
    bound -- the preferred placement, which becomes a requirement.  Branches of equal bound
    are all kept, so a ``max`` over equally good machines (LOCAL's "any one machine") is a
    hard constraint under every policy, as the paper's LOCAL row of Table 1 requires."""
    return _keep_max_branches(e, best=True)


def fallback(e: Node) -> Node:
    """The "None" reading (§5.2): at every ``max``, keep only the branches of lowest upper
    bound -- the last-resort placement, which asks for resources but no particular ones."""
    return _keep_max_branches(e, best=False)
