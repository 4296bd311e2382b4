"""Solvers of alsched's allocation problem (§4): give schedulable units to pending jobs so
that the total (priority-weighted) utility of their expressions is as large as possible.

* ``greedy`` -- the paper's simulation choice: jobs one by one, each taking a good
  allocation of its own expression from what is left (fast, not exact);
* ``bnb`` -- exact branch-and-bound over each job's minimal requirement sets, using the
  monotonicity of the language (§4);
* ``milp`` -- exact reference: one HiGHS MILP.

Every solver returns a ``Solution`` whose allocation is trimmed to the fewest units keeping
each job's utility (``trim``), whose utilities are evaluated from that allocation, and whose
``bound`` is a proven upper bound on the optimum (``check`` verifies all of it).
"""

from __future__ import annotations

from utilon.errors import UnknownNameError
from utilon.policies.alsched.solvers.bnb import solve_bnb
from utilon.policies.alsched.solvers.greedy import solve_greedy
from utilon.policies.alsched.solvers.milp import solve_milp
from utilon.policies.alsched.solvers.problem import (
    Problem,
    Request,
    Solution,
    check,
    class_alloc,
    evaluate,
)
from utilon.policies.alsched.solvers.trim import trim

SOLVERS = ("greedy", "bnb", "milp")

__all__ = ["SOLVERS", "Problem", "Request", "Solution", "check", "class_alloc", "evaluate",
           "solve", "solve_bnb", "solve_greedy", "solve_milp", "trim"]


def solve(problem: Problem, solver: str = "greedy", *, time_limit: float = 10.0,
          node_limit: int | None = None) -> Solution:
    """Solve ``problem`` with ``solver`` (one of ``SOLVERS``); ``time_limit`` (seconds) and
    ``node_limit`` bound the exact solvers (``node_limit``: branch-and-bound only)."""
    if solver == "greedy":
        return solve_greedy(problem)
    if solver == "bnb":
        return solve_bnb(problem, time_limit=time_limit, node_limit=node_limit)
    if solver == "milp":
        return solve_milp(problem, time_limit=time_limit)
    raise UnknownNameError("alsched solver", solver, SOLVERS)
