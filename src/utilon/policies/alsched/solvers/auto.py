"""``auto``: the exact MILP within a time budget where it fits, greedy where it does not
(issue 47).

Greedy (``greedy.py``) is the paper's simulation choice and takes milliseconds, but it is not
exact: on a 3-unit instance it reaches 0.5 where the optimum is 10 (``tests``).  ``auto``
solves greedy first, then -- unless the instance is larger than ``max_size`` MILP columns
(``milp_size``), where building and solving the model would cost more than a decision should
-- the HiGHS MILP (``milp.py``), warm-started from greedy's allocation, for at most ``budget``
seconds.  The better of the two is kept; on a tie greedy's allocation stays, so where
exactness buys nothing the placement is greedy's (first-fit: ``fill``), not wherever the
MILP's optimum happened to fall.

Every answer says what it accepted (``Outcome``): ``how`` is ``optimal`` (the MILP proved
the optimum), ``improved`` (out of time, but its incumbent beat greedy), ``budget`` (out of
time, greedy kept) or ``size`` (too large, greedy without trying); ``gap`` is the relative
distance to the proven bound, ``(bound - total) / bound``: 0 when proven optimal, ``None``
("unknown") when nothing better than the trivial bound -- the sum of every job's best
utility -- was proven (``size``; a MILP cut off before its first dual bound).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Literal

from utilon.policies.alsched.lang import walk
from utilon.policies.alsched.lang.ast import TOL
from utilon.policies.alsched.solvers.greedy import solve_greedy
from utilon.policies.alsched.solvers.milp import solve_milp
from utilon.policies.alsched.solvers.problem import Problem, Solution, make_solution, upper

DEFAULT_BUDGET = 0.2
"""Seconds the MILP may take per solve (HiGHS's ``time_limit``; the model build comes on
top, bounded by ``DEFAULT_MAX_SIZE``)."""
DEFAULT_MAX_SIZE = 2000
"""Largest instance (``milp_size``: MILP columns before the binaries) the MILP is tried on."""

How = Literal["optimal", "improved", "budget", "size"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One ``auto`` solve: the allocation kept and what was accepted with it."""

    solution: Solution
    how: How
    greedy_total: float
    gap: float | None
    """``(bound - total) / bound`` of the kept allocation; ``None``: unknown (no bound)."""
    size: int

    @property
    def exact(self) -> bool:
        """The MILP ran (within its budget)."""
        return self.how != "size"

    @property
    def fallback(self) -> bool:
        """Greedy's allocation was kept because the MILP did not finish or did not run."""
        return self.how in ("budget", "size")


def milp_size(problem: Problem) -> int:
    """The MILP's allocation columns (one per job and machine of its classes) plus one
    utility column per expression node: what its build and solve time grow with."""
    return sum(len(r.machines()) + sum(1 for _ in walk(r.expr)) for r in problem.requests)


def trivial_bound(problem: Problem) -> float:
    """Every job at its best utility: a bound that proves nothing about the instance."""
    return sum(r.weight * upper(r.expr) for r in problem.requests)


def solve_auto_outcome(problem: Problem, *, budget: float = DEFAULT_BUDGET,
                       max_size: int = DEFAULT_MAX_SIZE) -> Outcome:
    """Greedy, then the MILP for ``budget`` seconds if the instance has at most ``max_size``
    columns; the better allocation (greedy's on a tie) with its gap (module docstring)."""
    start = time.perf_counter()
    greedy = solve_greedy(problem)
    size = milp_size(problem)
    if size > max_size or not problem.requests:
        how: How = "size" if problem.requests else "optimal"
        sol = replace(greedy, solver="auto", seconds=time.perf_counter() - start)
        return Outcome(sol, how, greedy.total, None if how == "size" else 0.0, size)
    exact = solve_milp(problem, time_limit=budget, greedy=greedy)
    optimal = exact.status == "optimal"
    if exact.total > greedy.total + TOL:
        kept, how = exact, ("optimal" if optimal else "improved")
    else:
        kept, how = greedy, ("optimal" if optimal else "budget")
    sol = make_solution(problem, kept.alloc, bound=exact.bound, status=exact.status,
                        solver="auto", seconds=time.perf_counter() - start)
    return Outcome(sol, how, greedy.total, accepted_gap(problem, sol), size)


def accepted_gap(problem: Problem, sol: Solution) -> float | None:
    """``(bound - total) / bound`` of any solver's answer: 0 when proven optimal, ``None``
    (unknown) when its bound is no better than ``trivial_bound`` (greedy's; an exact solver
    stopped before proving one of its own)."""
    if sol.status == "optimal" or sol.bound <= sol.total + TOL:
        return 0.0
    if sol.bound >= trivial_bound(problem) - TOL:
        return None
    return (sol.bound - sol.total) / sol.bound if sol.bound > 0 else 0.0


def solve_auto(problem: Problem, *, budget: float = DEFAULT_BUDGET,
               max_size: int = DEFAULT_MAX_SIZE) -> Solution:
    """``solve_auto_outcome``'s allocation (the registry's face of it)."""
    return solve_auto_outcome(problem, budget=budget, max_size=max_size).solution
