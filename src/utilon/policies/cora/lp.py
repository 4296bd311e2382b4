"""The paper's FINAL LP (CORA §II-C), built and solved with HiGHS exactly as written.

For every job ``i``, slot ``t`` and resource ``r`` (one *term* ``j = (i, r, t)``) the LP has four
columns -- ``x_it^r``, ``λ0``, ``λ1``, ``λc`` -- and two rows::

    λ1 + C λc - x = 0          (λ-representation of x on the sampling points 0, 1, C)
    λ0 + λ1 + λc  = 1          (convex combination)

plus eq. (3) ``Σ_i x_it^r <= C_t^r`` per (r, t) and eq. (4) ``Σ_t x_it^r = R_i^r`` per (i, r);
every column is non-negative and there is no integrality (the paper relies on total
unimodularity).  The objective is ``Σ_j λ0_j + k^(-u_it) (λ1_j + λc_j)`` with
``k = |N||T||R|`` (Lemma 1: the number of terms).  What this optimises is *not* CORA's
lexicographic max-min of job utilities; see ``docs/cora-lp.md`` for the derivation.

Choices the paper leaves open (all documented in ``docs/cora-lp.md``):

* Utility scaling (§II-A: "multiply it by a constant coefficient to convert it into an
  integer").  ``scale="rank"`` (default) maps the distinct positive utility values to the
  integers 1, 2, ... in increasing order, 0 to 0 and negative values to -1, -2, ... in
  decreasing order.  A lexicographic max-min optimum depends only on the order of the
  utilities, so this is lossless, and it keeps the exponents as small as any order-preserving
  integer scaling can.  A float ``scale=s`` instead uses ``round(s * u)`` (the paper's literal
  multiplier; it can merge close values and makes the exponents large).  Either way
  ``k^(-u)`` falls below HiGHS's tolerances (1e-7) for all but the few smallest exponents as
  soon as k is in the hundreds, and underflows to exactly 0.0 for ``u * log10(k) > ~308``:
  the solver then cannot see the utilities at all.  ``info`` counts both effects.
* A per-slot capacity ``C_t^r`` is used as the sampling point C in the λ row of slot t (the
  paper has one C^r).  A slot with no capacity uses the point 1 instead of 0 (so the λc column
  keeps a non-zero coefficient); eq. (3) forces x = 0 there, hence λ1 = λc = 0 either way.
* The optional per-job parallelism cap is *our* addition (the paper has none): column bounds
  ``x_it^r <= cap_i^r``.

``solve_final_lp`` is the cold path; ``FinalLP`` keeps the HiGHS model so a scheduler event
(one task finished: eq. 4's right-hand side drops by one) can be applied and re-solved from
the previous optimal basis.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import highspy
import numpy as np

from utilon.highs import new_highs

from .instance import CoraInstance, CoraSolution, InfeasibleInstance

__all__ = ["FinalLP", "integral_exponents", "objective_value", "solve_final_lp"]

INTEGRALITY_TOL = 1e-6  # |x - round(x)| above this is reported as a fractional LP solution
DUAL_TOL = 1e-7  # HiGHS's default dual feasibility tolerance: smaller cost differences are noise

Scale = str | float


def integral_exponents(utility: np.ndarray, scale: Scale = "rank") -> np.ndarray:
    """Integer utilities u_it used as exponents of k (the paper's "constant coefficient").

    ``"rank"``: positive values -> 1..m by increasing value, 0 -> 0, negative values -> -1..
    by decreasing value (order- and sign-preserving).  A float ``s``: ``round(s * u)``.
    """
    u = np.asarray(utility, dtype=np.float64)
    if isinstance(scale, str):
        if scale != "rank":
            raise ValueError(f"scale must be 'rank' or a positive number, got {scale!r}")
        out = np.zeros(u.shape, dtype=np.int64)
        pos = u > 0
        if pos.any():
            # ranks of the distinct values: searchsorted into the sorted unique values
            vals = np.unique(u[pos])
            out[pos] = np.searchsorted(vals, u[pos]) + 1
        neg = u < 0
        if neg.any():
            vals = np.unique(-u[neg])
            out[neg] = -(np.searchsorted(vals, -u[neg]) + 1)
        return out
    s = float(scale)
    if not s > 0:
        raise ValueError(f"scale must be 'rank' or a positive number, got {scale!r}")
    return np.rint(u * s).astype(np.int64)


def objective_value(weights: np.ndarray, lam0: np.ndarray, lam1: np.ndarray,
                    lamc: np.ndarray) -> float:
    """The FINAL objective Σ λ0 + k^(-u)(λ1 + λc) at given λ's (all shaped (N, R, T));
    ``weights`` is k^(-u) shaped (N, T)."""
    return float(lam0.sum() + (weights[:, None, :] * (lam1 + lamc)).sum())


def _round_allocation(capacity: np.ndarray, demand: np.ndarray,
                      xf: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """Integer allocation from the LP's x (N, R, T), and what was needed to get it.

    ``capacity`` (R, T) and ``demand`` (N, R) are eqs. (3)-(4)'s right-hand sides.

    Integral within ``INTEGRALITY_TOL``: plain rounding.  Otherwise the fractional x is
    reported and repaired: the transportation system of eqs. (3)-(4) restricted to
    floor(x) <= x' <= ceil(x) (which keeps the caps: ceil(x) <= cap) is solved by simplex
    without presolve.  That system's matrix
    is a bipartite incidence matrix (totally unimodular) and its bounds are integers, so the
    vertex simplex returns is integral; the LP's x lies in the box, so it is feasible.  The
    cost -frac(x) rounds up the entries that were closest to the next integer.
    """
    frac = np.abs(xf - np.rint(xf))
    worst = float(frac.max()) if frac.size else 0.0
    meta: dict[str, Any] = {"integral": worst <= INTEGRALITY_TOL, "max_fractionality": worst}
    if worst <= INTEGRALITY_TOL:
        return np.rint(xf).astype(np.int64), meta
    n, nr, nt = xf.shape
    fractional = frac > INTEGRALITY_TOL
    meta["fractional_entries"] = int(fractional.sum())
    lo = np.floor(xf + INTEGRALITY_TOL)
    hi = np.ceil(xf - INTEGRALITY_TOL)
    kk = n * nr * nt
    i, r, t = (a.ravel() for a in np.indices((n, nr, nt)))
    # rows: capacity per (r, t), then demand per (i, r)
    index = np.stack([r * nt + t, nr * nt + i * nr + r], axis=1).ravel().astype(np.int32)
    lp = highspy.HighsLp()
    lp.num_col_ = kk
    lp.num_row_ = nr * nt + n * nr
    lp.col_cost_ = -(xf - np.floor(xf)).ravel()
    lp.col_lower_ = lo.ravel()
    lp.col_upper_ = hi.ravel()
    dem = demand.astype(np.float64).ravel()
    lp.row_lower_ = np.concatenate([np.full(nr * nt, -highspy.kHighsInf), dem])
    lp.row_upper_ = np.concatenate([capacity.astype(np.float64).ravel(), dem])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.arange(0, 2 * kk + 1, 2, dtype=np.int32)
    lp.a_matrix_.index_ = index
    lp.a_matrix_.value_ = np.ones(2 * kk)
    h = new_highs()
    h.setOptionValue("presolve", "off")
    h.setOptionValue("solver", "simplex")
    h.passModel(lp)
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    x2 = np.asarray(h.getSolution().col_value, dtype=np.float64).reshape(n, nr, nt)
    if status != "Optimal" or np.abs(x2 - np.rint(x2)).max() > INTEGRALITY_TOL:
        raise RuntimeError(f"rounding repair of a fractional FINAL solution failed ({status})")
    meta["repair"] = "transportation vertex within floor/ceil of the LP x"
    return np.rint(x2).astype(np.int64), meta


class FinalLP:
    """The FINAL LP of one instance, kept in a HiGHS object for warm re-solves.

    ``solve()`` is the first (cold) solve; ``task_finished`` lowers one job's remaining demand
    (eq. 4's right-hand side) and ``resolve()`` re-optimises from the previous optimal basis
    (HiGHS skips presolve when it has a valid basis and runs dual simplex from it).
    """

    def __init__(self, inst: CoraInstance, *, k: float | None = None, scale: Scale = "rank",
                 highs_options: Mapping[str, Any] | None = None) -> None:
        t0 = time.perf_counter()
        self.inst = inst
        self.demand = inst.demand.copy()  # remaining R_i^r, changed by task_finished
        n, nr, nt = inst.jobs, inst.resources, inst.slots
        self.shape = (n, nr, nt)
        kk = n * nr * nt
        self.terms = kk
        self.k = float(kk if k is None else k)
        if self.k <= 1:
            raise ValueError(f"k must exceed 1 (Lemma 1 uses k = |N||T||R|), got {self.k}")
        self.scale = scale
        self.exponents = integral_exponents(inst.utility, scale)
        # k^(-u): silently underflows to 0.0 for large exponents -- counted in info
        with np.errstate(under="ignore", over="ignore"):
            self.weights = np.power(self.k, -self.exponents.astype(np.float64))
        cap_rt = inst.capacity.astype(np.float64)

        # columns: [x | λ0 | λ1 | λc], each block in term order j = (i*R + r)*T + t
        i, r, t = (a.ravel() for a in np.indices(self.shape))
        j = np.arange(kk)
        row_cap = 2 * kk + r * nt + t
        row_dem = 2 * kk + nr * nt + i * nr + r
        idx_x = np.stack([j, row_cap, row_dem], axis=1).ravel()
        idx_l0 = kk + j
        idx_l1 = np.stack([j, kk + j], axis=1).ravel()
        idx_lc = idx_l1
        index = np.concatenate([idx_x, idx_l0, idx_l1, idx_lc]).astype(np.int32)
        c_point = np.maximum(cap_rt[r, t], 1.0)  # the sampling point C_t^r (1 if no capacity)
        val_x = np.tile(np.array([-1.0, 1.0, 1.0]), kk)
        val_lc = np.stack([c_point, np.ones(kk)], axis=1).ravel()
        value = np.concatenate([val_x, np.ones(kk), np.ones(2 * kk), val_lc])
        counts = np.concatenate([np.full(kk, 3), np.full(kk, 1), np.full(2 * kk, 2)])
        start = np.zeros(4 * kk + 1, dtype=np.int32)
        np.cumsum(counts, out=start[1:])

        w = self.weights[i, t]
        cost = np.concatenate([np.zeros(kk), np.ones(kk), w, w])
        x_upper = (np.full(kk, highspy.kHighsInf) if inst.cap is None
                   else inst.cap.astype(np.float64)[i, r])
        col_upper = np.concatenate([x_upper, np.full(3 * kk, highspy.kHighsInf)])
        dem = self.demand.astype(np.float64).ravel()
        row_lower = np.concatenate([np.zeros(kk), np.ones(kk),
                                    np.full(nr * nt, -highspy.kHighsInf), dem])
        row_upper = np.concatenate([np.zeros(kk), np.ones(kk), cap_rt.ravel(), dem])
        self._dem_row0 = 2 * kk + nr * nt

        lp = highspy.HighsLp()
        lp.num_col_ = 4 * kk
        lp.num_row_ = 2 * kk + nr * nt + n * nr
        lp.col_cost_ = cost
        lp.col_lower_ = np.zeros(4 * kk)
        lp.col_upper_ = col_upper
        lp.row_lower_ = row_lower
        lp.row_upper_ = row_upper
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = start
        lp.a_matrix_.index_ = index
        lp.a_matrix_.value_ = value
        self.highs = new_highs()
        # the paper solved FINAL with (Mosek's) simplex; simplex also leaves a basis to warm-start
        self.highs.setOptionValue("solver", "simplex")
        for name, value in (highs_options or {}).items():
            if self.highs.setOptionValue(name, value) != highspy.HighsStatus.kOk:
                raise ValueError(f"bad HiGHS option {name}={value!r}")
        status = self.highs.passModel(lp)
        if status != highspy.HighsStatus.kOk:
            raise RuntimeError(f"HiGHS rejected the FINAL model: {status}")
        self.build_seconds = time.perf_counter() - t0
        self.solves = 0

    # -- events -------------------------------------------------------------------------------
    def task_finished(self, i: int, r: int = 0, units: int = 1) -> None:
        """Job ``i`` finished ``units`` tasks of resource ``r``: R_i^r drops (eq. 4's RHS).

        The job must keep some demand: a job that finishes leaves the instance, which changes
        N and therefore k and every cost -- that event needs a new ``FinalLP``.
        """
        if units < 0 or units > self.demand[i, r]:
            raise ValueError(f"job {i} has {self.demand[i, r]} units of resource {r} left")
        if self.demand[i].sum() - units <= 0:
            raise ValueError(f"job {i} would finish; build a new FinalLP without it")
        self.demand[i, r] -= units
        d = float(self.demand[i, r])
        self.highs.changeRowBounds(self._dem_row0 + i * self.shape[1] + r, d, d)

    # -- solving ------------------------------------------------------------------------------
    def solve(self) -> CoraSolution:
        """First solve (cold: presolve + dual simplex from the slack basis)."""
        if self.solves:
            # forget the basis so this really is a cold solve of the current model
            self.highs.clearSolver()
        return self._run(warm=False)

    def resolve(self) -> CoraSolution:
        """Re-solve after ``task_finished`` from the previous optimal basis."""
        if not self.solves:
            raise RuntimeError("resolve() needs a previous solve()")
        return self._run(warm=True)

    def _run(self, *, warm: bool) -> CoraSolution:
        h = self.highs
        t0 = time.perf_counter()
        h.run()
        solve_seconds = time.perf_counter() - t0
        self.solves += 1
        status = h.modelStatusToString(h.getModelStatus())
        if status == "Infeasible":
            raise InfeasibleInstance("FINAL is infeasible: the slots cannot hold every job")
        if status != "Optimal":
            raise RuntimeError(f"HiGHS did not solve FINAL to optimality: {status}")
        n, nr, nt = self.shape
        kk = self.terms
        col = np.asarray(h.getSolution().col_value, dtype=np.float64)
        xf, lam0, lam1, lamc = (col[b * kk:(b + 1) * kk].reshape(n, nr, nt) for b in range(4))
        alloc, meta = _round_allocation(self.inst.capacity, self.demand, xf)
        used = alloc.sum(axis=1) > 0  # (N, T)
        if not used.any(axis=1).all():
            raise RuntimeError("a job with demand received nothing")  # eq. (4) guarantees it
        completion = nt - 1 - np.argmax(used[:, ::-1], axis=1)
        utility = self.inst.utility[np.arange(n), completion]
        w = self.weights
        info: dict[str, Any] = {
            "status": status,
            "objective": float(h.getObjectiveValue()),
            "iterations": int(h.getInfo().simplex_iteration_count),
            "warm": warm,
            "build_seconds": self.build_seconds,
            "solve_seconds": solve_seconds,
            "k": self.k,
            "scale": self.scale,
            "terms": kk,
            "columns": 4 * kk,
            "rows": int(h.getNumRow()),
            # numerics of k^(-u): exactly 0.0 (underflow) / invisible next to λ0's cost 1
            "weights_underflowed": int((w == 0.0).sum()),
            "weights_below_dual_tol": int((w < DUAL_TOL).sum()),
            "x": xf,
            "lambda0": lam0,
            "lambda1": lam1,
            "lambdac": lamc,
            "weights": w,
            **meta,
        }
        seconds = solve_seconds if warm else self.build_seconds + solve_seconds
        return CoraSolution(completion=completion, utility=utility, allocation=alloc,
                            solver="cora-lp", seconds=seconds, info=info)


def solve_final_lp(inst: CoraInstance, *, k: float | None = None, scale: Scale = "rank",
                   highs_options: Mapping[str, Any] | None = None) -> CoraSolution:
    """Build FINAL for ``inst`` and solve it cold; ``seconds`` includes building the model.

    ``highs_options`` override HiGHS options (default: dual simplex, output off).
    """
    return FinalLP(inst, k=k, scale=scale, highs_options=highs_options).solve()
