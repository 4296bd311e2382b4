"""RDS scheduling optimizer: the receding-horizon control QP of §3.1 (Eqs. 1-3).

At every control interval RDS chooses map and reduce allocations ``u^m_j``, ``u^r_j`` for
the next ``H_c`` intervals and applies only the first step (§3.1, §4.3; H_p = H_c = 3 by
default).  Eq. 3 reads ``Σ_{i<Hp} Σ_j ||y_j(t+i) − y_ref_j(t+i)||²_{W·δ} + Σ_{i<Hc} Σ_j
(||Δu^m_j||²_P + ||Δu^r_j||²_Q)`` subject to Eq. 2 (total allocation ≤ predicted capacity).
The paper leaves the exact meaning of several symbols open; this module implements the
following reading (and why):

* What Eq. 3 tracks (``tracking``). The paper: "y_j(t) is the actual progress of the job in
  interval t and y_ref_j(t) is the expected progress that ensures meeting the job's deadline",
  with per-interval targets ("if the job can finish one tenth of the total work in each
  interval, it can meet the overall deadline"; §6.6: "the per-interval deadline is the ratio of
  the overall deadline and the number of control intervals"). So ``tracking: interval``
  compares each step's progress ``y_{j,i} = Y_{j,i} − Y_{j,i−1}`` with the reference's
  increment over that step (the policy's default since issue 22). ``tracking: cumulative``
  compares the cumulative progress ``Y_{j,i} = Y_{j,i-1} + y_{j,i}`` with the cumulative
  reference -- our first reading: capacity given now then counts at every later step of the
  horizon, so the QP spends the step it applies on jobs merely behind a trajectory, and longer
  horizons did worse (measured in docs/reproduction-rds.md). Either way the completion bound
  ``Y ≤ 1`` is on cumulative progress, and the deadline term below charges the tracked
  shortfall. The per-interval progress is the linearised fuzzy model ``y_{j,i} = a_j +
  bm_j·um_{j,i} + br_j·ur_{j,i} + ar_j·y_{j,i-1}`` with ``y_{j,-1}`` the measured progress of
  the last interval.
* Tracking is *one-sided*: only being behind the reference costs, through a shortfall ``s_{j,i}
  ≥ ref_{j,i} − Y_{j,i}`` (per interval: the increments), ``s ≥ 0`` with cost ``w_{j,i}·s²``.
  Eq. 1 is a ``(·)^+`` penalty ("the penalty remains zero until the job misses its deadline");
  a symmetric norm would also punish jobs for running ahead of their reference and leave
  capacity idle.
* An extra *linear* term ``miss_weight · w_{j,d_j} · s_{j,d_j}`` at the step ``d_j`` in which
  job j's deadline falls (when inside the horizon).  The quadratic tracking spreads an
  unavoidable shortfall over all jobs, so on its own it lets a job miss its deadline by a
  little to spare another job an intermediate, still recoverable, lag (see the two-job case
  study in the tests).  Eq. 1's linear lateness penalty at the deadline step acts as an exact
  penalty and fixes that.  The problem stays a convex QP.
* Allocations beyond ``H_c`` hold the last control value (steps ``i ≥ Hc`` use the
  variables of step ``Hc−1``), the usual MPC convention.  ``Δu`` at step 0 is relative to
  the current allocation, and it is normalised by ``scale`` (the cluster's nominal
  capacity): ``P_i·((u_i − u_{i−1})/scale)²``, so the paper's small P/Q weights (≈0.01) are
  comparable to progress fractions whatever the unit of allocation.
* Bounds ``0 ≤ um ≤ cap_map``, ``0 ≤ ur ≤ cap_reduce`` (caps may be ``inf``); progress
  cannot exceed completion, ``Y_{j,i} ≤ 1``.  When the model's free response already
  exceeds 1 (e.g. a positive offset for a finished job) the row's bound is relaxed to what
  zero extra allocation gives, so the QP stays feasible.
* Capacity: ``Σ_j um_{j,i} + ur_{j,i} ≤ capacity_i`` for every ``i < Hp``; as the steps
  beyond ``Hc`` reuse step ``Hc−1``'s variables, those ``Hp − Hc + 1`` rows collapse to one
  row with the minimum capacity (identical feasible set, fewer rows).

Implementation: the progress recurrence is substituted so that ``Y`` is affine in the
allocations, ``Y_{j,i} = c_{j,i} + Σ_k G_{j,i,k}(bm_j·um_{j,k} + br_j·ur_{j,k})``; the
variables are ``um``, ``ur`` (J·Hc each) and ``s`` (J·Hp), grouped per job so the Hessian is
block diagonal.  Rows that cannot bind are dropped (shortfall rows of zero-cost steps or
steps the free response already meets, ``Y ≤ 1`` rows that cannot be reached), which keeps
the active-set QP small for large J.  Everything is built with vectorised numpy/scipy; only
the ≤ 10 horizon steps are looped over.  The allocation variables are ``u / scale`` inside
the QP (the Δu Hessian entries 2P/scale² next to O(1) shortfall entries made HiGHS's
active-set solver cycle on the paper's case study).

Solvers (``solver=``): **Clarabel** (default), an interior-point solver for sparse convex
QPs: the problem is block diagonal per job and coupled only through the H_c capacity rows, so
its sparse factorisation stays small (12 ms at 100 jobs, ~170 ms at 1,000, where every
instance is solved to optimality); columns fixed by their bounds (shortfalls without a row,
reduce allocations of map-phase jobs) are removed first.  **HiGHS**'s active-set QP solver,
the first implementation, is kept for comparison: ~25 ms at 100 jobs but seconds at 1,000
(its reduced Hessian is dense and the null space reaches several hundred dimensions), where
it often stops with "Solve error" (``benchmarks/bench_rds.py`` measures both).

Status: ``"optimal"``; ``"feasible: <solver status>"`` when the solver stopped without
proving optimality (time limit, HiGHS's occasional "Solve error" -- optimality claimed with a
~1e-4 violation of a shortfall row) but its last point satisfies the bounds, capacity and
``Y ≤ 1`` rows and beats the heuristic; otherwise ``"fallback: <solver status>"``: each job's
reference-needed allocation scaled down to fit the capacity.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from utilon.highs import new_highs

__all__ = ["SOLVERS", "RhcProblem", "RhcSolution", "objective", "solve_rhc"]

FloatArray = np.ndarray
TRACKING = ("cumulative", "interval")


def _arr(name: str, value: object, shape: tuple[int, ...], *, nonneg: bool = False,
         allow_inf: bool = False) -> FloatArray:
    """``value`` as a float64 array of exactly ``shape``, checked (errors name the field)."""
    a = np.array(value, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    if np.isnan(a).any() or (not allow_inf and not np.isfinite(a).all()):
        raise ValueError(f"{name} must be finite" + (" or +inf" if allow_inf else ""))
    if allow_inf and np.isneginf(a).any():
        raise ValueError(f"{name} must not be -inf")
    if nonneg and (a < 0).any():
        raise ValueError(f"{name} must be non-negative")
    return a


@dataclass(frozen=True, slots=True)
class RhcProblem:
    """One RHC instance: J jobs, prediction horizon Hp (= len(capacity)), control horizon
    Hc (= len(P)).  Arrays are converted to float64 copies on construction."""

    progress: FloatArray  # (J,) cumulative progress now, in [0, 1]
    last_step: FloatArray  # (J,) progress made in the last interval
    reference: FloatArray  # (J, Hp) cumulative reference progress at the END of step i
    weight: FloatArray  # (J, Hp) ω_j·δ_j(t+i) >= 0
    offset: FloatArray  # (J,) a_j
    gain_map: FloatArray  # (J,) bm_j >= 0
    gain_reduce: FloatArray  # (J,) br_j >= 0
    gain_prev: FloatArray  # (J,) ar_j
    cap_map: FloatArray  # (J,) >= 0, may be inf
    cap_reduce: FloatArray  # (J, Hc) >= 0, may be inf
    current_map: FloatArray  # (J,)
    current_reduce: FloatArray  # (J,)
    capacity: FloatArray  # (Hp,) predicted r_a
    P: FloatArray  # (Hc,)
    Q: FloatArray  # (Hc,)
    deadline_step: np.ndarray  # (J,) int, -1 = deadline beyond the horizon
    scale: float = 1.0
    miss_weight: float = 1.0
    tracking: str = "cumulative"  # what Eq. 3 tracks: cumulative Y, or each interval's y

    def __post_init__(self) -> None:
        put = object.__setattr__  # frozen: store the validated float copies
        if self.tracking not in TRACKING:
            raise ValueError(f"tracking must be one of {', '.join(TRACKING)}, "
                             f"got {self.tracking!r}")
        cap = _arr("capacity", self.capacity, np.shape(self.capacity), nonneg=True)
        if cap.ndim != 1 or cap.size == 0:
            raise ValueError(f"capacity must be a non-empty 1-D array, got shape {cap.shape}")
        p = _arr("P", self.P, np.shape(self.P), nonneg=True)
        if p.ndim != 1 or not 1 <= p.size <= cap.size:
            raise ValueError(f"P must be 1-D with 1 <= len(P) <= Hp = {cap.size}, "
                             f"got shape {p.shape}")
        hp, hc = cap.size, p.size
        prog = np.array(self.progress, dtype=np.float64)
        if prog.ndim != 1:
            raise ValueError(f"progress must be 1-D, got shape {prog.shape}")
        j = prog.size
        put(self, "capacity", cap)
        put(self, "P", p)
        put(self, "Q", _arr("Q", self.Q, (hc,), nonneg=True))
        prog = _arr("progress", prog, (j,))
        if ((prog < 0) | (prog > 1)).any():
            raise ValueError("progress must lie in [0, 1]")
        put(self, "progress", prog)
        for name in ("last_step", "offset", "gain_prev"):
            put(self, name, _arr(name, getattr(self, name), (j,)))
        for name in ("gain_map", "gain_reduce", "current_map", "current_reduce"):
            put(self, name, _arr(name, getattr(self, name), (j,), nonneg=True))
        put(self, "reference", _arr("reference", self.reference, (j, hp)))
        put(self, "weight", _arr("weight", self.weight, (j, hp), nonneg=True))
        put(self, "cap_map", _arr("cap_map", self.cap_map, (j,), nonneg=True, allow_inf=True))
        put(self, "cap_reduce", _arr("cap_reduce", self.cap_reduce, (j, hc), nonneg=True,
                                     allow_inf=True))
        d = np.array(self.deadline_step)
        if d.shape != (j,):
            raise ValueError(f"deadline_step must have shape {(j,)}, got {d.shape}")
        if d.size and (not np.issubdtype(d.dtype, np.integer) or d.min() < -1
                       or d.max() >= hp):
            raise ValueError(f"deadline_step must be integers in [-1, {hp})")
        put(self, "deadline_step", d.astype(np.int64))
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be a positive finite number, got {self.scale!r}")
        if not (math.isfinite(self.miss_weight) and self.miss_weight >= 0):
            raise ValueError(f"miss_weight must be finite and >= 0, got {self.miss_weight!r}")

    @property
    def jobs(self) -> int:
        return int(self.progress.size)

    @property
    def horizon(self) -> int:
        return int(self.capacity.size)

    @property
    def control_horizon(self) -> int:
        return int(self.P.size)


@dataclass(frozen=True, slots=True)
class RhcSolution:
    u_map: FloatArray  # (J, Hc)
    u_reduce: FloatArray  # (J, Hc)
    progress: FloatArray  # (J, Hp) predicted cumulative progress Y
    shortfall: FloatArray  # (J, Hp) max(0, reference − Y)
    objective: float
    # "optimal"; "feasible: <HiGHS status>" when HiGHS stopped early but its last point is
    # feasible and better than the heuristic; "fallback: <HiGHS status>" otherwise
    status: str
    seconds: float  # wall time of build + solve


def _response(pb: RhcProblem) -> tuple[FloatArray, FloatArray]:
    """``(c, G)`` with ``Y_{j,i} = c_{j,i} + Σ_k G_{j,i,k}(bm_j·um_{j,k} + br_j·ur_{j,k})``.

    Unrolling ``y_m = a + v_{K(m)} + ar·y_{m−1}`` (``v`` the gain-weighted allocation,
    ``K(m) = min(m, Hc−1)``): the input of step l reaches ``Y_i`` with weight
    ``S_{i−l} = Σ_{q≤i−l} ar^q``; the constant part is ``progress + Σ_{m≤i} (ar^{m+1}·last +
    a·S_m)``.
    """
    hp, hc = pb.horizon, pb.control_horizon
    ar = pb.gain_prev
    pw = ar[:, None] ** np.arange(hp + 1)  # (J, Hp+1): ar^q (0^0 = 1)
    s_cum = np.cumsum(pw[:, :hp], axis=1)  # S_n = Σ_{q<=n} ar^q
    g = np.zeros((pb.jobs, hp, hc))
    for i in range(hp):
        for step in range(i + 1):
            g[:, i, min(step, hc - 1)] += s_cum[:, i - step]
    free = pw[:, 1:] * pb.last_step[:, None] + pb.offset[:, None] * s_cum  # y_m at u = 0
    c = pb.progress[:, None] + np.cumsum(free, axis=1)
    return c, g


def _tracked(pb: RhcProblem, c: FloatArray, g: FloatArray
             ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(c, G, reference)`` of what the tracking term compares: cumulative progress Y (our
    default reading), or each interval's progress y_i = Y_i - Y_{i-1} against the
    reference's per-interval increments (``tracking: interval``, Eq. 3 read literally:
    "y_j(t) is the actual progress of the job in interval t")."""
    if pb.tracking == "cumulative":
        return c, g, pb.reference
    prev_c = np.hstack([pb.progress[:, None], c[:, :-1]])
    prev_g = np.concatenate([np.zeros_like(g[:, :1]), g[:, :-1]], axis=1)
    prev_r = np.hstack([pb.progress[:, None], pb.reference[:, :-1]])
    return c - prev_c, g - prev_g, pb.reference - prev_r


def _progress(pb: RhcProblem, um: FloatArray, ur: FloatArray,
              resp: tuple[FloatArray, FloatArray] | None = None) -> FloatArray:
    c, g = resp if resp is not None else _response(pb)
    v = pb.gain_map[:, None] * um + pb.gain_reduce[:, None] * ur  # (J, Hc)
    return c + np.einsum("jik,jk->ji", g, v)


def objective(problem: RhcProblem, u_map: FloatArray, u_reduce: FloatArray) -> float:
    """The RHC objective at the given allocations (J, Hc), with the optimal shortfalls
    ``max(0, ref − Y)`` (the cost is non-decreasing in s >= 0, so that is optimal)."""
    pb = problem
    um = np.asarray(u_map, dtype=np.float64).reshape(pb.jobs, pb.control_horizon)
    ur = np.asarray(u_reduce, dtype=np.float64).reshape(pb.jobs, pb.control_horizon)
    ct, gt, ref = _tracked(pb, *_response(pb))
    s = np.maximum(ref - _progress(pb, um, ur, (ct, gt)), 0.0)
    cost = float((pb.weight * s * s).sum())
    hit = np.flatnonzero(pb.deadline_step >= 0)
    d = pb.deadline_step[hit]
    cost += pb.miss_weight * float((pb.weight[hit, d] * s[hit, d]).sum())
    dm = np.diff(np.hstack([pb.current_map[:, None], um]), axis=1) / pb.scale
    dr = np.diff(np.hstack([pb.current_reduce[:, None], ur]), axis=1) / pb.scale
    return cost + float(((dm * dm) @ pb.P).sum() + ((dr * dr) @ pb.Q).sum())


def _csc(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray,
         shape: tuple[int, int]) -> sp.csc_matrix:
    m = sp.csc_matrix((vals, (rows, cols)), shape=shape)
    m.sum_duplicates()
    m.sort_indices()
    return m


def _fallback(pb: RhcProblem, resp: tuple[FloatArray, FloatArray]) -> tuple[FloatArray,
                                                                              FloatArray]:
    """A feasible allocation without the solver: per job, the constant allocation that
    reaches its last reference value, put on its stronger channel and clipped to its caps;
    then every step is scaled down uniformly to fit the capacity."""
    c, g = resp
    hc = pb.control_horizon
    use_map = pb.gain_map >= pb.gain_reduce
    gain = np.where(use_map, pb.gain_map, pb.gain_reduce) * g[:, -1, :].sum(axis=1)
    need = np.clip(pb.reference[:, -1] - c[:, -1], 0.0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(gain > 0, need / np.where(gain > 0, gain, 1.0), 0.0)
    um = np.where(use_map, np.minimum(v, pb.cap_map), 0.0)[:, None] * np.ones((1, hc))
    ur = np.where(~use_map[:, None], np.minimum(v[:, None], pb.cap_reduce), 0.0)
    total = (um + ur).sum(axis=0)
    cap = _step_capacity(pb)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(total > cap, cap / np.where(total > 0, total, 1.0), 1.0)
    return um * f, ur * f


def _step_capacity(pb: RhcProblem) -> FloatArray:
    """Capacity per control step: steps >= Hc reuse step Hc−1's variables."""
    hc = pb.control_horizon
    cap = pb.capacity[:hc].copy()
    cap[-1] = pb.capacity[hc - 1:].min()
    return cap


def _part(coef: FloatArray, ub: FloatArray, pos: bool) -> FloatArray:
    """Σ_k of the positive (``pos``) or negative coefficients (J, Hp, Hc) times their upper
    bounds (J, Hc): the max / min of Σ coef·u over the box.  Zero coefficients are skipped
    so an infinite cap does not produce 0 * inf."""
    sel = coef > 0 if pos else coef < 0
    ubb = np.broadcast_to(ub[:, None, :], coef.shape)
    return np.where(sel, coef * np.where(sel, ubb, 0.0), 0.0).sum(axis=2)


SOLVERS = ("clarabel", "highs")


def solve_rhc(problem: RhcProblem, *, time_limit: float = 5.0,
              solver: str = "clarabel") -> RhcSolution:
    """Solve the RHC QP; see the module docstring for the formulation and the solvers."""
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, got {solver!r}")
    t0 = time.perf_counter()
    pb = problem
    nj, hp, hc = pb.jobs, pb.horizon, pb.control_horizon
    if nj == 0:
        e = np.zeros((0, hc))
        return RhcSolution(e, e.copy(), np.zeros((0, hp)), np.zeros((0, hp)), 0.0, "optimal",
                           time.perf_counter() - t0)
    resp = _response(pb)
    c, g = resp
    nb = 2 * hc + hp  # variables per job: um_0.., ur_0.., s_0..
    n = nj * nb
    base = np.arange(nj) * nb
    # The QP's allocation variables are u / scale (fractions of the nominal capacity): with
    # raw slot counts the Δu Hessian entries (2·P/scale² ~ 1e-5) sit next to O(1) shortfall
    # entries and the active-set solver cycles on degenerate instances.
    sc = pb.scale
    am = (sc * pb.gain_map)[:, None, None] * g  # (J, Hp, Hc): ∂Y_{j,i}/∂(um_{j,k}/scale)
    arr = (sc * pb.gain_reduce)[:, None, None] * g
    cap_m = np.broadcast_to(pb.cap_map[:, None] / sc, (nj, hc))
    cap_r = pb.cap_reduce / sc
    # range of the allocation-dependent part of Y over the box
    y_hi = _part(am, cap_m, True) + _part(arr, cap_r, True)  # max of Σ coef·u
    y_lo = _part(am, cap_m, False) + _part(arr, cap_r, False)  # min of Σ coef·u
    # the tracked quantity (Y, or each interval's y) and its coefficients
    ct, gt, ref = _tracked(pb, c, g)
    am_t = (sc * pb.gain_map)[:, None, None] * gt
    arr_t = (sc * pb.gain_reduce)[:, None, None] * gt
    t_lo = _part(am_t, cap_m, False) + _part(arr_t, cap_r, False)

    # shortfall rows  Σ coef·u + s >= ref − c  only where s can be positive and costs
    need = ref - ct
    short = (pb.weight > 0) & (need > t_lo + 1e-12)
    # completion rows  Σ coef·u <= max(1 − c, y_lo)  only where they can bind
    ub_y = np.maximum(1.0 - c, y_lo)
    comp = y_hi > ub_y + 1e-12

    jj, ii, kk = (a.ravel() for a in np.indices((nj, hp, hc)))
    rows_l: list[np.ndarray] = []
    cols_l: list[np.ndarray] = []
    vals_l: list[np.ndarray] = []
    lo_l: list[np.ndarray] = []
    hi_l: list[np.ndarray] = []
    nrow = 0
    for mask, with_s, coefs in ((short, True, (am_t, arr_t)), (comp, False, (am, arr))):
        rid = np.full((nj, hp), -1, dtype=np.int64)
        cnt = int(mask.sum())
        rid[mask] = nrow + np.arange(cnt)
        r = rid[jj, ii]
        for coef, off in zip(coefs, (0, hc), strict=True):
            v = coef.ravel()
            keep = (r >= 0) & (v != 0)
            rows_l.append(r[keep])
            cols_l.append(base[jj[keep]] + off + kk[keep])
            vals_l.append(v[keep])
        if with_s:
            mj, mi = np.nonzero(mask)
            rows_l.append(rid[mj, mi])
            cols_l.append(base[mj] + 2 * hc + mi)
            vals_l.append(np.ones(cnt))
            lo_l.append(need[mask])
            hi_l.append(np.full(cnt, highspy.kHighsInf))
        else:
            lo_l.append(np.full(cnt, -highspy.kHighsInf))
            hi_l.append(ub_y[mask])
        nrow += cnt
    # capacity rows, one per control step
    jk, kc = (a.ravel() for a in np.indices((nj, hc)))
    for off in (0, hc):
        rows_l.append(nrow + kc)
        cols_l.append(base[jk] + off + kc)
        vals_l.append(np.ones(nj * hc))
    lo_l.append(np.full(hc, -highspy.kHighsInf))
    hi_l.append(_step_capacity(pb) / sc)
    nrow += hc
    a_mat = _csc(np.concatenate(rows_l), np.concatenate(cols_l), np.concatenate(vals_l),
                 (nrow, n))

    # bounds; s columns without a row are fixed at 0 (they are recomputed afterwards)
    lower = np.zeros(n)
    upper = np.empty((nj, nb))
    upper[:, :hc] = cap_m
    upper[:, hc:2 * hc] = cap_r
    upper[:, 2 * hc:] = np.where(short, highspy.kHighsInf, 0.0)
    col_upper = np.minimum(upper, highspy.kHighsInf).ravel()

    # objective ½xᵀHx + cᵀx + offset: H = 2 × (quadratic coefficients)
    cost = np.zeros((nj, nb))
    cost[:, 0] = -2.0 * pb.P[0] * pb.current_map / sc
    cost[:, hc] = -2.0 * pb.Q[0] * pb.current_reduce / sc
    hit = np.flatnonzero(pb.deadline_step >= 0)
    cost[hit, 2 * hc + pb.deadline_step[hit]] = pb.miss_weight * pb.weight[
        hit, pb.deadline_step[hit]]
    offset = float((pb.P[0] * pb.current_map ** 2 + pb.Q[0] * pb.current_reduce ** 2).sum()
                   / (sc * sc))
    h_r: list[np.ndarray] = []
    h_c: list[np.ndarray] = []
    h_v: list[np.ndarray] = []
    for wts, off in ((pb.P, 0), (pb.Q, hc)):
        diag = 2.0 * (wts + np.append(wts[1:], 0.0))  # u_k appears in Δ_k and Δ_{k+1}
        idx = base[:, None] + off + np.arange(hc)
        h_r.append(idx.ravel())
        h_c.append(idx.ravel())
        h_v.append(np.tile(diag, nj))
        if hc > 1:  # lower triangle: (u_k, u_{k−1}) for k >= 1
            h_r.append(idx[:, 1:].ravel())
            h_c.append(idx[:, :-1].ravel())
            h_v.append(np.tile(-2.0 * wts[1:], nj))
    sidx = base[:, None] + 2 * hc + np.arange(hp)
    h_r.append(sidx.ravel())
    h_c.append(sidx.ravel())
    h_v.append(2.0 * pb.weight.ravel())
    hv = np.concatenate(h_v)
    nz = hv != 0
    hess = _csc(np.concatenate(h_r)[nz], np.concatenate(h_c)[nz], hv[nz], (n, n))

    row_lo, row_hi = np.concatenate(lo_l), np.concatenate(hi_l)
    if solver == "clarabel":
        x, model_ok, name = _clarabel(hess, cost.ravel(), a_mat, row_lo, row_hi, lower,
                                      col_upper, time_limit)
        return _finish(pb, resp, x, model_ok, name, ub_y, t0)
    h = new_highs()
    h.setOptionValue("time_limit", float(time_limit))
    # the active-set QP solver refuses problems whose null space exceeds this (default 4000)
    h.setOptionValue("qp_nullspace_limit", max(4000, n))
    # The active-set solver can cycle on tiny degenerate instances (two jobs, one of them
    # without deadline pressure: measured 5 s, the whole time limit, for a 30-variable QP);
    # an iteration cap ends that in milliseconds with the same point, which is kept if it is
    # feasible (status "feasible: Iteration limit reached").
    h.setOptionValue("qp_iteration_limit", max(10_000, 20 * n))
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = nrow
    lp.col_cost_ = cost.ravel()
    lp.col_lower_ = lower
    lp.col_upper_ = col_upper
    lp.row_lower_ = row_lo
    lp.row_upper_ = row_hi
    lp.offset_ = offset
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a_mat.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a_mat.indices.astype(np.int32)
    lp.a_matrix_.value_ = a_mat.data
    h.passModel(lp)
    if hess.nnz:
        hh = highspy.HighsHessian()
        hh.dim_ = n
        hh.format_ = highspy.HessianFormat.kTriangular
        hh.start_ = hess.indptr.astype(np.int32)
        hh.index_ = hess.indices.astype(np.int32)
        hh.value_ = hess.data
        h.passHessian(hh)
    h.run()
    model_status = h.getModelStatus()
    # read the point even when HiGHS flags it invalid: it is checked below before any use
    x = np.asarray(h.getSolution().col_value, dtype=np.float64)
    optimal = model_status == highspy.HighsModelStatus.kOptimal
    return _finish(pb, resp, x if x.size == n and np.isfinite(x).all() else None, optimal,
                   h.modelStatusToString(model_status), ub_y, t0)


def _finish(pb: RhcProblem, resp: tuple[FloatArray, FloatArray], x: FloatArray | None,
            optimal: bool, name: str, ub_y: FloatArray, t0: float) -> RhcSolution:
    """The solution from a solver's point ``x`` (None: no usable point): kept when the solver
    proved it optimal; otherwise kept only if it is feasible and beats the fallback."""
    nj, hc = pb.jobs, pb.control_horizon
    g = resp[1]
    sc = pb.scale
    um = ur = np.zeros((nj, hc))
    if x is not None:
        x = x.reshape(nj, -1)
        # the clip removes -0.0 / 1e-16 noise (and an interior point's 1e-9 slack)
        um = np.clip(x[:, :hc] * sc, 0.0, pb.cap_map[:, None])
        ur = np.clip(x[:, hc:2 * hc] * sc, 0.0, pb.cap_reduce)
    if optimal and x is not None:
        obj = objective(pb, um, ur)
        status = "optimal"
    else:
        fb_m, fb_r = _fallback(pb, resp)
        obj = objective(pb, fb_m, fb_r)
        status = f"fallback: {name}"
        # The solver's last point is usually primal feasible (after a time limit, or HiGHS's
        # "Solve error" when it claims optimality with a ~1e-4 violation of a *shortfall*
        # row, which the recomputed shortfalls make irrelevant): keep it if it really is
        # feasible and beats the heuristic.
        total = (um + ur).sum(axis=0)
        y_rel = np.einsum("jik,jk->ji", g, pb.gain_map[:, None] * um
                          + pb.gain_reduce[:, None] * ur)
        if (x is not None and (total <= _step_capacity(pb) + 1e-7).all()
                and (y_rel <= ub_y + 1e-7).all()):
            cand = objective(pb, um, ur)
            if cand <= obj:
                obj, status = cand, f"feasible: {name}"
        if not status.startswith("feasible"):
            um, ur = fb_m, fb_r
    y = _progress(pb, um, ur, resp)
    ct, gt, ref = _tracked(pb, *resp)
    short = np.maximum(ref - _progress(pb, um, ur, (ct, gt)), 0.0)
    return RhcSolution(um, ur, y, short, obj, status, time.perf_counter() - t0)

def _clarabel(hess: sp.csc_matrix, q: FloatArray, a: sp.csc_matrix, row_lo: FloatArray,
              row_hi: FloatArray, lower: FloatArray, upper: FloatArray,
              time_limit: float) -> tuple[FloatArray | None, bool, str]:
    import clarabel

    inf = highspy.kHighsInf
    # columns fixed by their bounds (lower = upper = 0: shortfalls without a row, reduce
    # allocations of jobs in their map phase) leave the problem
    free = np.flatnonzero(upper > lower)
    m = free.shape[0]
    # lower-triangular H (HiGHS's form) -> the symmetric matrix's upper triangle
    hf = hess[free][:, free]
    p_up = sp.triu(hf.T, format="csc")
    af = a[:, free].tocsr()
    blocks, rhs = [], []
    hi = row_hi < inf
    lo = row_lo > -inf
    blocks += [af[hi], -af[lo]]
    rhs += [row_hi[hi] - 0.0, -row_lo[lo]]
    up = upper[free]
    ub = up < inf
    eye = sp.identity(m, format="csr")
    blocks += [eye[ub], -eye]
    rhs += [up[ub], -lower[free]]
    big = sp.vstack(blocks, format="csc")
    b = np.concatenate(rhs)
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.time_limit = float(time_limit)
    sol = clarabel.DefaultSolver(p_up, q[free], big, b,
                                 [clarabel.NonnegativeConeT(b.shape[0])], settings).solve()
    xf = np.asarray(sol.x, dtype=np.float64)
    status = str(sol.status)
    if xf.size != m or not np.isfinite(xf).all():
        return None, False, status
    x = lower.copy()
    x[free] = xf
    return x, status == "Solved", status
