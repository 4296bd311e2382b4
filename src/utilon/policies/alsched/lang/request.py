"""Requests: an expression template plus the classes it names, bound to a concrete cluster.

A ``Request`` is what a job states (§3): an expression *template* together with named
classes (``classes``) and loop variables (``each``), both given as ``ClassQuery``s.  Binding
it against the machines of a cluster gives a ``BoundRequest``: a concrete expression (only
literal numbers) and the machine indices of every class it uses.

Binding rules
-------------
* **Names.**  A class name in the expression is, in this order: a loop variable from
  ``each``; a named class from ``classes``; ``all`` (every machine); a machine id (a
  single-machine class named by that id).  Anything else is an error naming the class.  A
  name may not be both a loop variable and a named class, and ``all`` cannot be redefined.
* **Loop variables.**  The node that uses a variable ``v`` -- a primitive over class ``v`` or
  with ``cap(v)`` in ``k``/``u``, or a barrier with level ``cap(v)`` -- is replicated once
  per machine of ``v``'s range, in machine index order, each copy naming that machine by its
  id; inside a copy ``v`` stays fixed, so deeper uses of ``v`` refer to the same machine.
  The copies become operands of the enclosing n-ary operator (max/min/sum) when that is the
  node's parent; when the parent is a scale or barrier, or the node is the root, the copies
  are wrapped in an implicit ``sum`` (a single copy is left unwrapped).  So
  ``(max (nck(i,64,64)))`` is "any one machine of i", and ``(bar 64 (LnCk(j,cap(j),cap(j))))``
  is a barrier over the sum across j's machines.  A scale or barrier thus stops the search for
  an enclosing n-ary operator: otherwise the paper's own §3.4 expression, whose root ``max``
  encloses the j branch, would give every machine its own 64-unit barrier, contrary to its
  "run the tasks on the rest of the cluster" reading.  Several variables used by one node
  give the cartesian product of their ranges, in ``each`` order.
* **Empty ranges.**  A loop over no machine drops the node; an n-ary operator left without
  operands is dropped, and so is a scale or barrier whose operand was dropped.  If the root
  is dropped, ``bind`` returns ``None``: the request cannot be met by this cluster.
* **Numbers.**  ``cap(x)`` is the sum of ``capacity_units`` over the machines of class ``x``;
  ``tasks`` is the ``tasks`` argument.
* **Determinism.**  Machines are visited in index order, so binding the same request against
  the same cluster gives the same expression.

``BoundRequest.classes`` lists the classes the bound expression's primitives use; a name that
would mean two different machine sets (a named class called like a machine that a loop also
visits) is an error.

The paper's §3.4 n-body request is ``PAPER_NBODY``; bind it with ``i`` over the 64-core
machines and ``j`` over all machines::

    Request.from_spec({"expr": PAPER_NBODY,
                       "each": {"i": {"capacity.cores": {">=": 64}}, "j": "all"}})

which binds to ``(max (scale 1 (barrier 64 (max nck(m1, 64, 64) ...)))
(scale 0.5 (barrier 64 (sum lnck(m1, 64, 64) ...))))``: 64 for a whole 64-core machine, 32
for 64 units spread anywhere, 0 below 64 units.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from utilon.errors import ModelError
from utilon.model.cluster import Machine
from utilon.policies.alsched.lang.ast import (
    NARY,
    Barrier,
    Cap,
    Lit,
    Node,
    NumTerm,
    Prim,
    Scale,
    Sum,
    Tasks,
)
from utilon.policies.alsched.lang.classes import ClassQuery
from utilon.policies.alsched.lang.parse import parse
from utilon.policies.alsched.lang.printer import to_text
from utilon.policies.alsched.lang.structured import SpecError, check_keys, from_obj

__all__ = ["PAPER_NBODY", "BoundRequest", "Request", "bind"]

PAPER_NBODY = ("(max (*1 (bar 64 (max (nck(i,64,64))))))"
               "(*0.5 (bar 64 (LnCk(j,cap(j), cap(j)))))")
"""§3.4's n-body request, verbatim (its misplaced parenthesis included)."""

_SHOWN = 8
MAX_BOUND_NODES = 1_000_000
"""Most nodes one bound request may expand to (loops replicate a node once per machine of
their range, and several loop variables on one node multiply): past it binding would run out
of memory or time, so it is a one-line error instead."""
Named = tuple[tuple[str, ClassQuery], ...]


@dataclass(frozen=True, slots=True)
class BoundRequest:
    """A concrete expression and the machine indices of each class it names."""

    expr: Node
    classes: dict[str, tuple[int, ...]] = field(hash=False)

    def allocation(self, units: Mapping[int, float] | Sequence[float]) -> dict[str, float]:
        """``D[class]`` for units per machine index: a class gets every unit placed on one
        of its machines (classes may overlap, e.g. ``all`` and a machine id)."""
        per = units if isinstance(units, Mapping) else dict(enumerate(units))
        return {name: sum(per.get(i, 0.0) for i in idx) for name, idx in self.classes.items()}

    def utility(self, units: Mapping[int, float] | Sequence[float]) -> float:
        """The utility of placing ``units[i]`` units on machine ``i``."""
        return self.expr.evaluate(self.allocation(units))


@dataclass(frozen=True, slots=True)
class Request:
    """An expression template with its named classes and loop variables."""

    expr: Node
    classes: Named = ()
    each: Named = ()

    def __post_init__(self) -> None:
        if not isinstance(self.expr, Node):
            raise ModelError(f"a request's expr must be an expression node, got {self.expr!r}")
        _check_names(self.classes, self.each, "request")

    @classmethod
    def of(cls, expr: Node | str, *, classes: Mapping[str, ClassQuery] | None = None,
           each: Mapping[str, ClassQuery] | None = None) -> Request:
        """Convenience constructor from mappings (and prefix text)."""
        node = parse(expr) if isinstance(expr, str) else expr
        return cls(node, tuple((classes or {}).items()), tuple((each or {}).items()))

    @classmethod
    def from_spec(cls, obj: object, where: str = "request") -> Request:
        """A request from YAML/JSON: an expression, or ``{expr, classes, each}``."""
        if isinstance(obj, str):
            return cls(parse(obj, where=where))
        if not isinstance(obj, Mapping):
            raise SpecError(f"expected an expression or a mapping with expr, classes, each; "
                            f"got {obj!r}", where=where)
        check_keys(obj, ("classes", "each", "expr"), where)
        if "expr" not in obj:
            raise SpecError("a request needs 'expr'", where=where,
                            fix="add expr: with the utility expression")
        try:
            expr = from_obj(obj["expr"], f"{where}.expr")
        except RecursionError:
            raise SpecError("the expression is nested too deeply", where=f"{where}.expr",
                            fix="a placement preference nests a few levels") from None
        classes = _named(obj.get("classes"), f"{where}.classes")
        each = _named(obj.get("each"), f"{where}.each")
        _check_names(classes, each, where)
        return cls(expr, classes, each)

    def to_spec(self) -> object:
        """The canonical spec: the text alone, or a mapping when classes are declared."""
        text = to_text(self.expr)
        if not self.classes and not self.each:
            return text
        out: dict[str, object] = {"expr": text}
        if self.classes:
            out["classes"] = {name: q.to_spec() for name, q in self.classes}
        if self.each:
            out["each"] = {name: q.to_spec() for name, q in self.each}
        return out

    def bind(self, machines: Sequence[Machine], capacity_units: Sequence[float], tasks: int,
             where: str = "request", *, max_nodes: int = MAX_BOUND_NODES
             ) -> BoundRequest | None:
        """The concrete request on these machines, or None if no part of it can be met;
        a bound expression of more than ``max_nodes`` nodes is a ``SpecError``."""
        return _Binder(self, machines, capacity_units, tasks, where, max_nodes).run()


def bind(expr: Node | str, machines: Sequence[Machine], capacity_units: Sequence[float],
         tasks: int, *, classes: Mapping[str, ClassQuery] | None = None,
         each: Mapping[str, ClassQuery] | None = None,
         where: str = "request") -> BoundRequest | None:
    """Bind an expression template directly (``Request.of(...).bind(...)``)."""
    return Request.of(expr, classes=classes, each=each).bind(machines, capacity_units, tasks,
                                                             where)


# -- spec helpers --------------------------------------------------------------------------------
def _named(obj: object, where: str) -> Named:
    if obj is None:
        return ()
    if not isinstance(obj, Mapping):
        raise SpecError(f"expected a mapping name -> class query, got {obj!r}", where=where)
    out: list[tuple[str, ClassQuery]] = []
    for name, spec in obj.items():
        if not isinstance(name, str) or not name:
            raise SpecError(f"a class name must be a non-empty string, got {name!r}",
                            where=where)
        out.append((name, ClassQuery.from_spec(spec, f"{where}.{name}")))
    return tuple(out)


def _check_names(classes: Named, each: Named, where: str) -> None:
    seen: set[str] = set()
    for section, named in (("classes", classes), ("each", each)):
        for name, query in named:
            if not isinstance(query, ClassQuery):
                raise SpecError(f"{name!r} is not a ClassQuery: {query!r}",
                                where=f"{where}.{section}")
            if name == "all":
                raise SpecError("'all' is reserved for every machine",
                                where=f"{where}.{section}", fix="choose another name")
            if name in seen:
                raise SpecError(f"{name!r} is declared twice (classes and each share names)",
                                where=f"{where}.{section}", fix="rename one of them")
            seen.add(name)


def _direct_names(n: Node) -> set[str]:
    """The class names a node uses itself (not through its children)."""
    names = {n.cls} if isinstance(n, Prim) else set()
    names.update(t.cls for t in n.numbers() if isinstance(t, Cap))
    return names


# -- binding -------------------------------------------------------------------------------------
class _Binder:
    def __init__(self, req: Request, machines: Sequence[Machine],
                 units: Sequence[float], tasks: int, where: str,
                 max_nodes: int = MAX_BOUND_NODES) -> None:
        if len(units) != len(machines):
            raise ModelError(f"{len(units)} capacity units for {len(machines)} machines",
                             where=where)
        if any(not (math.isfinite(u) and u >= 0) for u in units):
            raise ModelError("capacity units must be finite and >= 0", where=where)
        if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 0:
            raise ModelError(f"tasks must be an int >= 0, got {tasks!r}", where=where)
        self.req = req
        self.machines = machines
        self.units = units
        self.tasks = tasks
        self.where = where
        self.ids = {m.id: i for i, m in enumerate(machines)}
        self.named = {name: q.resolve(machines, f"{where}.classes.{name}")
                      for name, q in req.classes}
        self.ranges = {name: q.resolve(machines, f"{where}.each.{name}") for name, q in req.each}
        self.used: dict[str, tuple[int, ...]] = {}
        self.max_nodes = max_nodes
        self.nodes = 0

    def grow(self, n: int) -> None:
        """Count ``n`` more bound nodes against the budget (before building them)."""
        self.nodes += n
        if self.nodes > self.max_nodes:
            raise SpecError(f"binding expands the expression to more than "
                            f"{self.max_nodes:,} nodes (loops replicate a node per machine)",
                            where=f"{self.where}.expr",
                            fix="loop over fewer machines (one variable per node), or use a "
                                "class instead of a loop")

    def run(self) -> BoundRequest | None:
        out = self.expand(self.req.expr, {}, in_nary=False)
        return BoundRequest(out[0], dict(sorted(self.used.items()))) if out else None

    def expand(self, n: Node, env: Mapping[str, int], *, in_nary: bool) -> list[Node]:
        """The bound copies of ``n``: one per combination of the loop variables it uses
        itself, wrapped in an implicit sum unless they go into an n-ary parent."""
        direct = _direct_names(n)
        free = [v for v in self.ranges if v in direct and v not in env]
        self.grow(math.prod(len(self.ranges[v]) for v in free))
        combos = itertools.product(*(self.ranges[v] for v in free))
        copies = [c for combo in combos
                  if (c := self.node(n, {**env, **dict(zip(free, combo, strict=True))}))
                  is not None]
        if in_nary or len(copies) <= 1:
            return copies
        return [Sum(tuple(copies))]

    def node(self, n: Node, env: Mapping[str, int]) -> Node | None:
        if isinstance(n, NARY):
            args = [c for a in n.children for c in self.expand(a, env, in_nary=True)]
            return n.with_children(tuple(args)) if args else None
        if isinstance(n, (Scale, Barrier)):
            kids = self.expand(n.children[0], env, in_nary=False)
            if not kids:
                return None
            return n.with_children((kids[0],)).with_numbers(self.numbers(n, env))
        if isinstance(n, Prim):
            name, idx = self.resolve(n.cls, env)
            self.record(name, idx)
            return n.with_class(name).with_numbers(self.numbers(n, env))
        raise TypeError(f"not an expression node: {n!r}")

    def numbers(self, n: Node, env: Mapping[str, int]) -> tuple[NumTerm, ...]:
        return tuple(self.number(t, env) for t in n.numbers())

    def number(self, t: NumTerm, env: Mapping[str, int]) -> NumTerm:
        if isinstance(t, Cap):
            _, idx = self.resolve(t.cls, env)
            return Lit(float(sum(self.units[i] for i in idx)))
        if isinstance(t, Tasks):
            return Lit(float(self.tasks))
        return t

    def resolve(self, name: str, env: Mapping[str, int]) -> tuple[str, tuple[int, ...]]:
        """A class name's bound name and machine indices, by the precedence rules."""
        if name in env:
            i = env[name]
            return self.machines[i].id, (i,)
        if name in self.named:
            return name, self.named[name]
        if name == "all":
            return name, tuple(range(len(self.machines)))
        if name in self.ids:
            return name, (self.ids[name],)
        known = [m.id for m in self.machines[:_SHOWN]]
        more = ", ..." if len(self.machines) > _SHOWN else ""
        raise SpecError(f"unknown class {name!r}", where=f"{self.where}.expr",
                        fix=f"declare it under classes: or each:, or use 'all' or a machine "
                            f"id ({', '.join(known)}{more})")

    def record(self, name: str, idx: tuple[int, ...]) -> None:
        if self.used.setdefault(name, idx) != idx:
            raise SpecError(f"class name {name!r} would mean two different machine sets",
                            where=f"{self.where}.classes",
                            fix="rename the class so it differs from every machine id")
