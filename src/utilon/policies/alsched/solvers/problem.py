"""The allocation problem every alsched solver takes, and the solution they all return.

A ``Problem`` is a snapshot of §4's scheduler state: the free schedulable units (cores) of
every machine and the pending ``Request``s, each a job's *concrete* utility expression over
equivalence classes, the machines each class names (classes may overlap, within a job and
across jobs), an optional priority ``weight`` and an optional ``limit`` on the units the job
can use (its ready tasks).  A ``Solution`` gives units per job per machine; ``class_alloc``
turns it into the paper's ``D[i, j]`` matrix (units of job ``i`` from class ``j``), which is
what the expressions evaluate.

A request's ``size`` is how many of a machine's units one of its units takes (default 1, the
paper's case: a task is a core).  A stage whose tasks need two cores asks for tasks with
``size=2``: its expression and ``limit`` count tasks, and each task it gets on a machine uses
two of that machine's free units, so a task is never split across machines.

``check`` is the contract all solvers honour (and the tests enforce): machine capacities
and job limits respected, reported utilities equal to the expressions' values, ``total`` the
weighted sum and ``bound`` an upper bound no smaller than ``total``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, TypeVar

from utilon.errors import UtilonError
from utilon.policies.alsched.lang.ast import Node, class_names, is_concrete

STATUSES = ("optimal", "time_limit", "heuristic")
FILLS = ("first-fit", "spread")
TOL = 1e-6
"""Tolerance of ``check``'s comparisons of utilities (sums of floats)."""
K = TypeVar("K")
T = TypeVar("T")


@dataclass(frozen=True)
class Request:
    """A pending job's utility expression over classes (class name -> machine indices)."""

    job: str
    expr: Node
    classes: Mapping[str, tuple[int, ...]]
    weight: float = 1.0
    limit: int | None = None
    size: int = 1
    """Machine units one allocated unit of this request takes (see the module docstring)."""
    class_sets: Mapping[str, frozenset[int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the classes as sets, for the D[i] sums of sparse allocations (hot in every solver)
        object.__setattr__(self, "class_sets", _sets(self.classes))

    def machines(self) -> tuple[int, ...]:
        """Every machine one of the job's classes names, ascending."""
        return tuple(sorted({m for ms in self.classes.values() for m in ms}))


@dataclass(frozen=True)
class Problem:
    """Free units per machine and the pending requests; validated on construction."""

    capacity: tuple[int, ...]
    requests: tuple[Request, ...]
    fill: str = "first-fit"
    """How the greedy solver takes a class's fungible units from its machines (``FILLS``):
    first-fit in machine order (no placement preference), or ``spread`` one per machine
    (the reading before issue 44).  The exact solvers place as their optimum falls."""

    def __post_init__(self) -> None:
        if self.fill not in FILLS:
            raise UtilonError(f"fill must be one of {', '.join(FILLS)}, got {self.fill!r}")
        for m, c in enumerate(self.capacity):
            if c < 0:
                raise UtilonError(f"machine {m} has negative capacity {c}")
        seen: set[str] = set()
        for r in self.requests:
            if r.job in seen:
                raise UtilonError(f"job {r.job!r} has two requests")
            seen.add(r.job)
            _validate_request(r, len(self.capacity))

    def request(self, job: str) -> Request:
        for r in self.requests:
            if r.job == job:
                return r
        raise UtilonError(f"no request for job {job!r}")


def _validate_request(r: Request, machines: int) -> None:
    if not (math.isfinite(r.weight) and r.weight > 0):
        raise UtilonError(f"job {r.job!r}: weight must be > 0, got {r.weight!r}")
    if not (isinstance(r.size, int) and r.size >= 1):
        raise UtilonError(f"job {r.job!r}: size must be an integer >= 1, got {r.size!r}")
    if r.limit is not None and r.limit < 0:
        raise UtilonError(f"job {r.job!r}: limit must be >= 0, got {r.limit}")
    names = _checked_names(r.expr)
    if names is None:
        raise UtilonError(f"job {r.job!r}: the expression has symbolic numbers (bind it first)")
    for cls in names:
        if cls not in r.classes:
            raise UtilonError(f"job {r.job!r}: class {cls!r} is used but not defined")
    lo, hi = _span(r.classes)
    if lo < 0 or hi >= machines:
        for cls, ms in r.classes.items():
            for m in ms:
                if not 0 <= m < machines:
                    raise UtilonError(f"job {r.job!r}: class {cls!r} names machine {m}, "
                                      f"out of range 0..{machines - 1}")


class _ByIdentity(Generic[K, T]):
    """A pure function of an immutable argument (an expression, a request's classes),
    memoised by the argument's identity: the policy re-submits the same bound expressions
    and classes every decision, and walking an n-body expression (a hundred nodes) per
    request per decision was a third of a reproduction's time, while hashing one
    structurally costs as much as the walk.  An entry holds its argument, so the id is not
    reused while it is cached; the memo is emptied when it is full."""

    def __init__(self, fn: Callable[[K], T], size: int = 4096) -> None:
        self.fn = fn
        self.size = size
        self.memo: dict[int, tuple[K, T]] = {}

    def __call__(self, arg: K) -> T:
        hit = self.memo.get(id(arg))
        if hit is not None and hit[0] is arg:
            return hit[1]
        value = self.fn(arg)
        if len(self.memo) >= self.size:
            self.memo.clear()
        self.memo[id(arg)] = (arg, value)
        return value


_checked_names: _ByIdentity[Node, tuple[str, ...] | None] = _ByIdentity(
    lambda e: tuple(sorted(class_names(e))) if is_concrete(e) else None)
"""The class names an expression uses, sorted; None if it has symbolic numbers."""
_empty_value: _ByIdentity[Node, float] = _ByIdentity(lambda e: e.evaluate({}))
"""An expression's utility with no units (most pending requests get none)."""
upper: _ByIdentity[Node, float] = _ByIdentity(lambda e: e.upper())
"""An expression's upper bound (``Node.upper``), memoised: bounds sum it per request."""


def _span_of(classes: Mapping[str, tuple[int, ...]]) -> tuple[int, int]:
    """The lowest and highest machine index the classes name (``(0, -1)`` for none)."""
    return (min((min(ms) for ms in classes.values() if ms), default=0),
            max((max(ms) for ms in classes.values() if ms), default=-1))


def _sets_of(classes: Mapping[str, tuple[int, ...]]) -> Mapping[str, frozenset[int]]:
    return {c: frozenset(ms) for c, ms in classes.items()}


# Classes are memoised only when read-only (a ``MappingProxyType``, as the policy submits
# them): a plain dict could be changed between two requests.
_memo_span = _ByIdentity(_span_of)
_memo_sets = _ByIdentity(_sets_of)


def _span(classes: Mapping[str, tuple[int, ...]]) -> tuple[int, int]:
    return _memo_span(classes) if type(classes) is MappingProxyType else _span_of(classes)


def _sets(classes: Mapping[str, tuple[int, ...]]) -> Mapping[str, frozenset[int]]:
    return _memo_sets(classes) if type(classes) is MappingProxyType else _sets_of(classes)


@dataclass(frozen=True)
class Solution:
    """Units per job per machine (jobs with nothing are absent), utilities (every job) and
    the weighted total; ``bound`` is a proven upper bound on the optimum."""

    alloc: dict[str, dict[int, int]]
    utility: dict[str, float]
    total: float
    bound: float
    status: str
    solver: str
    seconds: float = field(compare=False)
    nodes: int = 0


Alloc = Mapping[str, Mapping[int, int]]


def class_units(r: Request, machine_units: Mapping[int, int]) -> dict[str, int]:
    """``D[i]``: the units request ``r`` gets from each of its classes."""
    return {cls: sum(u for m, u in machine_units.items() if m in ms)
            for cls, ms in r.class_sets.items()}


def class_alloc(problem: Problem, solution: Solution) -> dict[str, dict[str, int]]:
    """The paper's ``D[i, j]`` matrix: job -> class -> units (allocated jobs only)."""
    return {r.job: class_units(r, solution.alloc[r.job])
            for r in problem.requests if r.job in solution.alloc}


def evaluate(problem: Problem, alloc: Alloc) -> dict[str, float]:
    """Every job's utility under ``alloc`` (job -> machine -> units)."""
    out = {}
    for r in problem.requests:
        units = alloc.get(r.job)
        out[r.job] = r.expr.evaluate(class_units(r, units)) if units else _empty_value(r.expr)
    return out


def make_solution(problem: Problem, alloc: Alloc, *, bound: float, status: str, solver: str,
                  seconds: float, nodes: int = 0) -> Solution:
    """A ``Solution`` whose utilities are *evaluated* from ``alloc`` (never trusted from a
    solver); jobs with zero utility or no units are dropped from ``alloc``."""
    utility = evaluate(problem, alloc)
    clean = {r.job: {m: int(u) for m, u in sorted(alloc[r.job].items()) if u > 0}
             for r in problem.requests if r.job in alloc and utility[r.job] > 0}
    clean = {j: a for j, a in clean.items() if a}
    total = sum(r.weight * utility[r.job] for r in problem.requests)
    bound = total if status == "optimal" else max(bound, total)
    return Solution(clean, utility, total, bound, status, solver, seconds, nodes)


def check(problem: Problem, solution: Solution) -> None:
    """Raise ``UtilonError`` unless ``solution`` is a valid answer to ``problem``."""
    if solution.status not in STATUSES:
        raise UtilonError(f"unknown status {solution.status!r}")
    used = [0] * len(problem.capacity)
    jobs = {r.job: r for r in problem.requests}
    for job, units in solution.alloc.items():
        if job not in jobs:
            raise UtilonError(f"allocation for unknown job {job!r}")
        for m, u in units.items():
            if not 0 <= m < len(used) or u < 0 or u != int(u):
                raise UtilonError(f"job {job!r}: invalid allocation {u!r} on machine {m}")
            used[m] += u * jobs[job].size
        limit = jobs[job].limit
        if limit is not None and sum(units.values()) > limit:
            raise UtilonError(f"job {job!r} gets {sum(units.values())} units, limit {limit}")
    for m, (u, c) in enumerate(zip(used, problem.capacity, strict=True)):
        if u > c:
            raise UtilonError(f"machine {m}: {u} units allocated, {c} free")
    _check_utilities(problem, solution)


def _check_utilities(problem: Problem, solution: Solution) -> None:
    actual = evaluate(problem, solution.alloc)
    for job, u in actual.items():
        if abs(solution.utility.get(job, math.nan) - u) > TOL:
            raise UtilonError(f"job {job!r}: reported utility {solution.utility.get(job)} "
                              f"but the allocation is worth {u}")
    total = sum(r.weight * actual[r.job] for r in problem.requests)
    if abs(total - solution.total) > TOL:
        raise UtilonError(f"reported total {solution.total} but the allocation is worth {total}")
    if solution.bound < solution.total - TOL:
        raise UtilonError(f"bound {solution.bound} is below the total {solution.total}")
    if solution.status == "optimal" and abs(solution.bound - solution.total) > TOL:
        raise UtilonError(f"optimal but bound {solution.bound} != total {solution.total}")
