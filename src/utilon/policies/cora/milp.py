"""Reference solver of CORA's intended objective with a MILP (HiGHS): the yardstick that tests
``exact.solve_exact`` against.  Slow; meant for small instances.

Model (N jobs, R resources, T slots, u = utility):

* y[i, t] in {0, 1}, sum_t y[i, t] = 1: job i is *due* in slot t (its deadline).
* x[i, r, t] integer in [0, min(cap[i, r], C[r, t], R[i, r])], sum_t x[i, r, t] = R[i, r]
  (eq. 4), sum_i x[i, r, t] <= C[r, t] (eq. 3), and x[i, r, t] <= ub * sum_{t' >= t} y[i, t']:
  nothing after the deadline.

A job due in slot t is worth at least u[i, t]; the optimum over deadlines equals the optimum
over completion slots (finishing early never hurts, see ``exact``), and the allocation's own
completion slots give the reported utilities.

Objective.  Let v_1 < ... < v_L be the distinct utility values and c_l the number of jobs worth
<= v_l (c_l = sum of y[i, t] over the (i, t) with u[i, t] <= v_l).  Comparing sorted utility
vectors lexicographically is the same as comparing (c_1, ..., c_{L-1}) lexicographically, the
smaller the better: the first level where the counts differ is the first value where one
sorted vector has an entry the other has not.  So the lexicographic max-min is found by L - 1
MILPs: minimise c_l subject to c_k <= c_k* for every k < l.

Why not the alternatives.  (a) "Maximise the minimum over the unfixed jobs, then fix the jobs
that cannot exceed it" is only right for convex problems: with two jobs of demand 1 worth
[1, 0] and one unit per slot, each can finish first but not both, no job is ever fixed and the
iteration stalls (the count version above picks one).  (b) One MILP with weights
K^(L - rank) (Lemma 1 of the paper) is exact in exact arithmetic but its coefficients span
K^L, far beyond what a MILP solver's tolerances (1e-6 .. 1e-9) can separate once L > 3 or 4.

Speed-up, still exact: every MILP minimises weight * c_l + (c_{l+1} + ... + c_{L-1}) with
weight = N (L - 1) + 1 > the largest possible secondary sum, so c_l is still minimised first
while the solution is steered towards good later counts; it is kept as the incumbent; at level l the
value max(c_{l-1}*, number of jobs whose best value u[i, 0] is <= v_l) is a lower bound on c_l
(c_l >= c_{l-1} in every solution, and every solution satisfying the earlier constraints has
c_{l-1} = c_{l-1}*); when the incumbent meets it, level l needs no MILP.  HiGHS runs with
mip_rel_gap = 0 and without output.  It keeps HiGHS's own thread count: HiGHS's task scheduler is
one per process, and asking for another count once it is running makes every solve fail.
"""

from __future__ import annotations

import time

import highspy
import numpy as np

from utilon.highs import new_highs
from utilon.policies.cora.instance import CoraInstance, CoraSolution, InfeasibleInstance

__all__ = ["solve_milp_reference"]


def _new_highs() -> highspy.Highs:
    h = new_highs()
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-9)
    return h


def solve_milp_reference(inst: CoraInstance) -> CoraSolution:
    """The lexicographically max-min utility vector by a sequence of HiGHS MILPs.

    Raises ``InfeasibleInstance`` if the jobs cannot all finish within the slots.  ``info``
    holds ``milps`` (how many MILPs were solved) and the ``counts`` c_l* per level.
    """
    start = time.perf_counter()
    n, r_n, t_n = inst.jobs, inst.resources, inst.slots
    if n == 0:
        return CoraSolution(np.zeros(0, dtype=np.int64), np.zeros(0),
                            np.zeros((0, r_n, t_n), dtype=np.int64), "milp",
                            time.perf_counter() - start, {"milps": 0, "counts": []})
    if t_n == 0:
        raise InfeasibleInstance("no slots")
    u = np.minimum.accumulate(inst.utility, axis=1)
    levels = np.unique(u)
    dem = inst.demand
    cap = inst.cap if inst.cap is not None else dem
    ub = np.minimum(np.minimum(cap, dem)[:, :, None], inst.capacity[None, :, :])  # (N, R, T)

    ny = n * t_n
    nx = n * r_n * t_n

    def yi(i: int, t: int) -> int:
        return i * t_n + t

    def xi(i: int, r: int, t: int) -> int:
        return ny + (i * r_n + r) * t_n + t

    h = _new_highs()
    lower = np.zeros(ny + nx)
    upper = np.concatenate((np.ones(ny), ub.ravel().astype(np.float64)))
    h.addVars(ny + nx, lower, upper)
    h.changeColsIntegrality(ny + nx, np.arange(ny + nx, dtype=np.int32),
                            np.full(ny + nx, highspy.HighsVarType.kInteger))

    rows_lo: list[float] = []
    rows_hi: list[float] = []
    starts: list[int] = []
    index: list[int] = []
    value: list[float] = []

    def row(lo: float, hi: float, cols: list[int], vals: list[float]) -> None:
        rows_lo.append(lo)
        rows_hi.append(hi)
        starts.append(len(index))
        index.extend(cols)
        value.extend(vals)

    for i in range(n):
        row(1.0, 1.0, [yi(i, t) for t in range(t_n)], [1.0] * t_n)
        for r in range(r_n):
            row(float(dem[i, r]), float(dem[i, r]), [xi(i, r, t) for t in range(t_n)],
                [1.0] * t_n)
            for t in range(t_n):
                if ub[i, r, t] == 0:
                    continue
                # x[i, r, t] <= ub * (y[i, t] + ... + y[i, T-1])
                cols = [xi(i, r, t)] + [yi(i, s) for s in range(t, t_n)]
                row(-highspy.kHighsInf, 0.0, cols, [1.0] + [-float(ub[i, r, t])] * (t_n - t))
    for r in range(r_n):
        for t in range(t_n):
            row(-highspy.kHighsInf, float(inst.capacity[r, t]),
                [xi(i, r, t) for i in range(n)], [1.0] * n)
    h.addRows(len(rows_lo), np.array(rows_lo), np.array(rows_hi), len(index),
              np.array(starts, dtype=np.int32), np.array(index, dtype=np.int32),
              np.array(value))

    all_cols = np.arange(ny + nx, dtype=np.int32)
    milps = 0

    # rank[i, t] = index of u[i, t] among the levels; "worth <= v_l" is rank <= l
    rank = np.searchsorted(levels, u)
    top = levels.shape[0] - 1
    weight = float(n * top + 1)  # > any secondary sum: c_l stays the primary objective

    def solve(level: int) -> np.ndarray:
        nonlocal milps
        cost = np.zeros(ny + nx)
        # primary: c_level; secondary (steers the incumbent, exactness untouched): the sum of
        # the later counts c_{level+1} + ... + c_{L-1}
        later = np.maximum(0, top - np.maximum(rank, level + 1))
        cost[:ny] = (weight * (rank <= level) + later).ravel()
        h.changeColsCost(ny + nx, all_cols, cost)
        h.run()
        milps += 1
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            raise InfeasibleInstance("the MILP reference finds no allocation within the slots")
        if status != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"HiGHS ended with {h.modelStatusToString(status)}")
        return np.asarray(h.getSolution().col_value)

    counts: list[int] = []
    sol: np.ndarray | None = None
    prev = 0
    for level in range(levels.shape[0] - 1):
        mask = (u <= levels[level]).ravel()
        bound = max(prev, int((u[:, 0] <= levels[level]).sum()))
        have = None if sol is None else round(float(sol[:ny][mask].sum()))
        if have != bound:
            sol = solve(level)
            have = round(float(sol[:ny][mask].sum()))
        counts.append(have)
        prev = have
        at_most = np.flatnonzero(mask).astype(np.int32)  # fix c_level <= have from now on
        h.addRow(-highspy.kHighsInf, float(have), at_most.shape[0], at_most,
                 np.ones(at_most.shape[0]))
    if sol is None:  # a single utility value: any feasible allocation
        sol = solve(levels.shape[0] - 1)

    alloc = np.rint(sol[ny:]).astype(np.int64).reshape(n, r_n, t_n)
    used = alloc.sum(axis=1) > 0
    completion = t_n - 1 - np.argmax(used[:, ::-1], axis=1)
    utility = inst.utility[np.arange(n), completion]
    return CoraSolution(completion.astype(np.int64), utility, alloc, "milp",
                        time.perf_counter() - start, {"milps": milps, "counts": counts})
