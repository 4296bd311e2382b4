"""Solvers of alsched's allocation problem (§4): give schedulable units to pending jobs so
that the total (priority-weighted) utility of their expressions is as large as possible.

* ``greedy`` -- the paper's simulation choice: jobs one by one, each taking a good
  allocation of its own expression from what is left (fast, not exact);
* ``bnb`` -- exact branch-and-bound over each job's minimal requirement sets, using the
  monotonicity of the language (§4);
* ``milp`` -- exact reference: one HiGHS MILP;
* ``auto`` -- greedy, then the MILP within a time budget where the instance is small enough,
  keeping the better allocation and the gap it accepted (``auto.py``, issue 47).

Every solver returns a ``Solution`` whose allocation is trimmed to the fewest units keeping
each job's utility (``trim``), whose utilities are evaluated from that allocation, and whose
``bound`` is a proven upper bound on the optimum (``check`` verifies all of it).
"""

from __future__ import annotations

from typing import Any

from utilon.errors import UnknownNameError
from utilon.policies.alsched.solvers.auto import (
    DEFAULT_BUDGET,
    DEFAULT_MAX_SIZE,
    Outcome,
    milp_size,
    solve_auto,
    solve_auto_outcome,
)
from utilon.policies.alsched.solvers.greedy import solve_greedy
from utilon.policies.alsched.solvers.problem import (
    Problem,
    Request,
    Solution,
    check,
    class_alloc,
    evaluate,
)
from utilon.policies.alsched.solvers.trim import trim

SOLVERS = ("greedy", "bnb", "milp", "auto")

__all__ = ["DEFAULT_BUDGET", "DEFAULT_MAX_SIZE", "SOLVERS", "Outcome", "Problem", "Request",
           "Solution", "check", "class_alloc", "evaluate", "milp_size", "solve", "solve_auto",
           "solve_auto_outcome", "solve_bnb", "solve_greedy", "solve_milp", "trim"]


def solve(problem: Problem, solver: str = "greedy", *, time_limit: float = 10.0,
          node_limit: int | None = None, max_size: int = DEFAULT_MAX_SIZE) -> Solution:
    """Solve ``problem`` with ``solver`` (one of ``SOLVERS``); ``time_limit`` (seconds) and
    ``node_limit`` bound the exact solvers (``node_limit``: branch-and-bound only;
    ``auto``: ``time_limit`` is its MILP's budget, ``max_size`` the largest instance it
    tries the MILP on)."""
    if solver == "greedy":
        return solve_greedy(problem)
    if solver == "bnb":
        from utilon.policies.alsched.solvers.bnb import solve_bnb

        return solve_bnb(problem, time_limit=time_limit, node_limit=node_limit)
    if solver == "milp":
        from utilon.policies.alsched.solvers.milp import solve_milp

        return solve_milp(problem, time_limit=time_limit)
    if solver == "auto":
        return solve_auto(problem, budget=time_limit, max_size=max_size)
    raise UnknownNameError("alsched solver", solver, SOLVERS)


def __getattr__(name: str) -> Any:
    """The exact solvers load HiGHS and scipy: imported when first used, so that checking a
    scenario with alsched (``utilon validate``) does without them (issue 47's startup goal)."""
    if name == "solve_bnb":
        from utilon.policies.alsched.solvers.bnb import solve_bnb

        return solve_bnb
    if name == "solve_milp":
        from utilon.policies.alsched.solvers.milp import solve_milp

        return solve_milp
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
