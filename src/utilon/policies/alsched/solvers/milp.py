"""Exact reference solver: the whole allocation problem as one MILP, solved by HiGHS.

Variables: ``X[job, machine]`` integer >= 0 (only machines in the job's classes), with one
row per machine (capacity: the sum of ``size * X``) and per limited job (``limit``);
``D[job, class]`` is the linear expression ``sum of X over the class``.  Every expression
node ``n`` gets a utility variable ``v_n`` in ``[0, upper(n)]``, bounded above by what the node
can be worth:

* ``nck(c, k, u)``: binary ``z``, ``D[c] >= k z``, ``v <= u z``;
* ``lnck(c, k, u)``: ``v <= (u / k) D[c]`` (and ``v <= u`` by its bound);
* ``sum`` / ``min``: ``v <= sum of the children`` / ``v <= each child``;
* ``max``: binaries ``y_c`` with ``sum y_c = 1`` and ``v <= v_c + U (1 - y_c)``, ``U`` the
  node's upper bound (so only the chosen child binds);
* ``scale(s)``: ``v <= s v_c``;  ``barrier(b)``: binary ``z``, ``v_c >= b z``, ``v <= b z``.

Maximising ``sum weight * v_root`` pushes every ``v`` to its node's true value, so the
optimum equals the best total utility.

**Warm start** (``warm_start=True``, the default): the greedy allocation (``greedy.py``,
milliseconds; ``auto.py`` passes the one it already has) is handed to HiGHS as a partial
solution of the ``X`` columns, which HiGHS completes into its first incumbent.  A
time-limited solve never returns less than greedy: if HiGHS's incumbent is still below it,
the greedy allocation is returned with HiGHS's bound.

HiGHS runs silent with ``mip_rel_gap = 0``; its dual bound is the reported ``bound``, its
status maps to ``optimal`` or ``time_limit``.  The utilities reported are re-evaluated from
the (rounded, trimmed) allocation, never read off the MILP.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import highspy
import numpy as np

from utilon.highs import new_highs
from utilon.policies.alsched.lang.ast import (
    TOL,
    Barrier,
    LnCk,
    Max,
    Min,
    NCk,
    Node,
    Scale,
    Sum,
    num_value,
)
from utilon.policies.alsched.solvers.greedy import solve_greedy
from utilon.policies.alsched.solvers.problem import Problem, Request, Solution, make_solution
from utilon.policies.alsched.solvers.trim import trim

INF = highspy.kHighsInf


@dataclass
class _Model:
    """Columns and rows, collected before one ``addVars`` / ``addRows``."""

    lo: list[float] = field(default_factory=list)
    hi: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    row_lo: list[float] = field(default_factory=list)
    row_hi: list[float] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    index: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)

    def col(self, lo: float, hi: float, *, integer: bool = False, cost: float = 0.0) -> int:
        self.lo.append(lo)
        self.hi.append(hi)
        self.integer.append(integer)
        self.cost.append(cost)
        return len(self.lo) - 1

    def row(self, lo: float, hi: float, terms: list[tuple[int, float]]) -> None:
        self.row_lo.append(lo)
        self.row_hi.append(hi)
        self.starts.append(len(self.index))
        for i, v in terms:
            self.index.append(i)
            self.value.append(v)


def _job_columns(model: _Model, r: Request, capacity: tuple[int, ...]) -> dict[int, int]:
    """``X[job, m]`` for the machines of the job's classes; returns machine -> column."""
    cols = {m: model.col(0.0, float(capacity[m] // r.size), integer=True)
            for m in r.machines()}
    if r.limit is not None:
        model.row(-INF, float(r.limit), [(c, 1.0) for c in cols.values()])
    return cols


def _node(model: _Model, n: Node, r: Request, x: dict[int, int], cost: float = 0.0) -> int:
    """The utility variable of node ``n`` with the rows bounding it; returns its column."""
    upper = n.upper()
    v = model.col(0.0, upper, cost=cost)
    t = type(n)
    if t is NCk or t is LnCk:
        assert isinstance(n, (NCk, LnCk))
        k, u = num_value(n.k), num_value(n.u)
        if k <= 0:
            return v
        d = [(x[m], 1.0) for m in sorted(set(r.classes[n.cls]))]
        if t is NCk:
            z = model.col(0.0, 1.0, integer=True)
            model.row(0.0, INF, [*d, (z, -float(math.ceil(k - TOL)))])
            model.row(-INF, 0.0, [(v, 1.0), (z, -u)])
        else:
            model.row(-INF, 0.0, [(v, 1.0)] + [(c, -u / k) for c, _ in d])
        return v
    kids = [_node(model, c, r, x) for c in n.children]
    if t is Sum:
        model.row(-INF, 0.0, [(v, 1.0)] + [(c, -1.0) for c in kids])
    elif t is Min:
        for c in kids:
            model.row(-INF, 0.0, [(v, 1.0), (c, -1.0)])
    elif t is Scale:
        assert isinstance(n, Scale)
        model.row(-INF, 0.0, [(v, 1.0), (kids[0], -n.factor)])
    elif t is Barrier:
        assert isinstance(n, Barrier)
        b = num_value(n.level)
        z = model.col(0.0, 1.0, integer=True)
        model.row(0.0, INF, [(kids[0], 1.0), (z, -b)])
        model.row(-INF, 0.0, [(v, 1.0), (z, -b)])
    else:
        assert t is Max
        ys = [model.col(0.0, 1.0, integer=True) for _ in kids]
        model.row(1.0, 1.0, [(y, 1.0) for y in ys])
        for c, y in zip(kids, ys, strict=True):
            model.row(-INF, upper, [(v, 1.0), (c, -1.0), (y, upper)])
    return v


def _build(problem: Problem) -> tuple[highspy.Highs, list[dict[int, int]]]:
    model = _Model()
    xs = []
    for r in problem.requests:
        x = _job_columns(model, r, problem.capacity)
        xs.append(x)
        _node(model, r.expr, r, x, cost=r.weight)
    for m, cap in enumerate(problem.capacity):
        terms = [(x[m], float(r.size)) for r, x in zip(problem.requests, xs, strict=True)
                 if m in x]
        if terms:
            model.row(-INF, float(cap), terms)
    h = new_highs()
    for opt, val in (("output_flag", False), ("mip_rel_gap", 0.0),
                     ("mip_abs_gap", 1e-9), ("mip_feasibility_tolerance", 1e-9),
                     ("primal_feasibility_tolerance", 1e-9)):
        h.setOptionValue(opt, val)
    n = len(model.lo)
    if n:
        h.addVars(n, np.asarray(model.lo), np.asarray(model.hi))
        h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.asarray(
            [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
             for i in model.integer]))
        h.changeColsCost(n, np.arange(n, dtype=np.int32), np.asarray(model.cost))
    if model.row_lo:
        h.addRows(len(model.row_lo), np.asarray(model.row_lo), np.asarray(model.row_hi),
                  len(model.index), np.asarray(model.starts, dtype=np.int32),
                  np.asarray(model.index, dtype=np.int32), np.asarray(model.value))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    return h, xs


def solve_milp(problem: Problem, *, time_limit: float = 10.0, warm_start: bool = True,
               greedy: Solution | None = None) -> Solution:
    """The best allocation by one HiGHS MILP (see the module docstring); ``greedy``: the
    greedy solution of ``problem`` when the caller has it already (the warm start)."""
    start = time.perf_counter()
    h, xs = _build(problem)
    h.setOptionValue("time_limit", max(float(time_limit), 0.01))
    if not (warm_start and problem.requests):
        greedy = None
    elif greedy is None:
        greedy = solve_greedy(problem)
    if greedy is not None:
        idx = [c for x in xs for c in x.values()]
        val = [float(greedy.alloc.get(r.job, {}).get(m, 0))
               for r, x in zip(problem.requests, xs, strict=True) for m in x]
        if idx:
            h.setSolution(len(idx), np.asarray(idx, dtype=np.int32), np.asarray(val))
    h.run()
    status = h.getModelStatus()
    values = np.asarray(h.getSolution().col_value)
    alloc: dict[str, dict[int, int]] = {}
    if len(values) and h.getInfo().primal_solution_status == 2:  # 2: a feasible solution
        for r, x in zip(problem.requests, xs, strict=True):
            alloc[r.job] = {m: round(values[c]) for m, c in x.items() if round(values[c]) > 0}
    optimal = status == highspy.HighsModelStatus.kOptimal
    bound = h.getInfo().mip_dual_bound if len(values) else 0.0
    if not math.isfinite(bound):
        bound = sum(r.weight * r.expr.upper() for r in problem.requests)
    sol = make_solution(problem, trim(problem, alloc), bound=bound,
                        status="optimal" if optimal else "time_limit", solver="milp",
                        seconds=time.perf_counter() - start)
    if greedy is not None and greedy.total > sol.total + TOL:
        sol = make_solution(problem, greedy.alloc, bound=max(bound, greedy.total),
                            status=sol.status, solver="milp",
                            seconds=time.perf_counter() - start)
    return sol
