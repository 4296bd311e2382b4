"""Feasibility of deadlines for the CORA solver: can every job finish by its slot?

Section 2 of ``exact``'s docstring proves the tests implemented here: for one resource, a
deadline vector is feasible iff no set of slots violates Lemma A (min cut);
``_dp_violation`` maximises the violation over all slot sets by dynamic programming,
``_prefix_violation`` is the closed form when only prefix sets matter (Lemma B: capacity
non-decreasing, or no caps).
``Resource`` holds one resource's data for the solver; ``slots_needed`` and
``deadlines_feasible`` are public.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from utilon.policies.cora.instance import CoraInstance, InfeasibleInstance

_INF = float("inf")
_SMALL = 4096  # moving jobs x slots up to which a checker builds their ramps directly


# --------------------------------------------------------------------------------------------
# One resource: violation of Lemma A, its DP and its closed form
# --------------------------------------------------------------------------------------------

def _prefix_need(dem: np.ndarray, p: np.ndarray, dl: np.ndarray, t: int) -> np.ndarray:
    """need[m] = sum_i g_i(|[m, D_i]|) for m = 0..t, in O(N + t) (no N x T matrix).

    As m grows, job i's term max(0, R_i - p_i |[m, D_i]|) is 0, then jumps to the remainder
    r_i = R_i - p_i X_i (X_i = ceil(R_i / p_i) - 1 slots after m still leave some work), then
    grows by p_i per slot until m = D_i + 1, then stays R_i: a ramp, summed with first and
    second differences.  ``dl`` may hold -1 (empty window: R_i for every m).
    """
    x = np.ceil(dem / p) - 1.0
    rest = dem - p * x
    m0 = dl + 1 - x  # the slot where the ramp starts
    early = m0 <= 0
    need0 = float((dem[early] - p[early] * (dl[early] + 1)).sum())  # ramps already running
    jump = np.bincount(m0[~early].astype(np.int64), weights=rest[~early], minlength=t + 2)
    lo = np.maximum(m0, 0).astype(np.int64) + 1
    hi = (dl + 1).astype(np.int64)
    run = lo <= hi
    slope = (np.bincount(lo[run], weights=p[run], minlength=t + 2)
             - np.bincount(hi[run] + 1, weights=p[run], minlength=t + 2))
    step = jump[: t + 1] + np.cumsum(slope)[: t + 1]
    step[0] = 0.0
    return need0 + np.cumsum(step)


def _prefix_violation(dem: np.ndarray, p: np.ndarray, dl: np.ndarray, cum: np.ndarray) -> float:
    """max over prefix sets [0, m) of sum_i g_i(|[m, D_i]|) - C([0, m)) (Lemma B).

    ``dl`` may hold -1 (empty window: the whole demand counts for every m).  ``cum`` is the
    cumulative capacity C_0 + ... + C_t.
    """
    t = cum.shape[0]
    need = _prefix_need(dem, p, dl, t)
    return float((need - np.concatenate(([0.0], cum))).max())


def _dp_violation(dem: np.ndarray, p: np.ndarray, dl: np.ndarray, cap_t: np.ndarray) -> float:
    """max over all slot sets Q of sum_i g_i(|[0, D_i] minus Q|) - C(Q), by DP on |Q ∩ [0, t]|."""
    t_n = cap_t.shape[0]
    empty = dl < 0
    const = float(dem[empty].sum())
    dem, p, dl = dem[~empty], p[~empty], dl[~empty]
    best = np.full(t_n + 2, -_INF)
    best[0] = 0.0
    if dl.size:
        ms = np.arange(t_n + 1)
        g = np.maximum(0.0, dem[:, None] - p[:, None] * (dl[:, None] + 1 - ms[None, :]))
        g[ms[None, :] > dl[:, None] + 1] = 0.0  # unreachable counts; keep them out of the sum
        idx = (dl[:, None] * (t_n + 1) + ms[None, :]).ravel()
        h = np.bincount(idx, weights=g.ravel(), minlength=t_n * (t_n + 1)).reshape(t_n, t_n + 1)
    else:
        h = np.zeros((t_n, t_n + 1))
    for t in range(t_n):
        take = best[:-1] - cap_t[t]
        best[1:] = np.maximum(best[1:], take)
        best[: t_n + 1] += h[t]
    return float(best.max()) + const


def violation(dem: np.ndarray, p: np.ndarray, dl: np.ndarray, cap_t: np.ndarray,
               monotone: bool) -> float:
    if cap_t.shape[0] == 0:
        return float(dem.sum())
    if monotone:
        return _prefix_violation(dem, p, dl, np.cumsum(cap_t, dtype=np.float64))
    return _dp_violation(dem, p, dl, cap_t)


def resource_feasible(capacity: np.ndarray, demand: np.ndarray, cap: np.ndarray | None,
                      deadlines: np.ndarray) -> bool:
    """Can every job i get ``demand[i]`` units in slots 0..deadlines[i] (at most ``cap[i]`` per
    slot, at most ``capacity[t]`` in total per slot)?  One resource; Lemma A / B of the module
    docstring, no max flow."""
    cap_t = np.asarray(capacity, dtype=np.float64)
    dem = np.asarray(demand, dtype=np.float64)
    dl = np.asarray(deadlines, dtype=np.int64)
    act = dem > 0
    dem, dl = dem[act], dl[act]
    if dem.size == 0:
        return True
    if (dl < 0).any() or (dl >= cap_t.shape[0]).any():
        return False
    p = dem if cap is None else np.minimum(np.asarray(cap, dtype=np.float64)[act], dem)
    if (p >= dem).all():
        load = np.bincount(dl, weights=dem, minlength=cap_t.shape[0])
        return bool((np.cumsum(load) <= np.cumsum(cap_t)).all())
    monotone = bool((np.diff(cap_t) >= 0).all())
    return violation(dem, p, dl, cap_t, monotone) <= 0


class Resource:
    """One resource restricted to the jobs that demand it (``jobs``: their global indices)."""

    def __init__(self, cap_t: np.ndarray, dem: np.ndarray, p: np.ndarray) -> None:
        self.cap_t = cap_t.astype(np.float64)
        self.cum = np.cumsum(self.cap_t)
        self.t_n = cap_t.shape[0]
        self.jobs = np.flatnonzero(dem > 0)
        self.dem_all = dem.astype(np.float64)  # zero for jobs that do not take part
        self.dem = self.dem_all[self.jobs]
        self.p_all = p.astype(np.float64)
        self.p = self.p_all[self.jobs]
        self.capped = bool((self.p < self.dem).any())
        self.monotone = bool((np.diff(self.cap_t) >= 0).all())

    def slack(self, dl: np.ndarray) -> np.ndarray:
        """Cumulative capacity minus the demand due by each slot (EDF prefix slack)."""
        load = np.bincount(dl[self.jobs], weights=self.dem, minlength=self.t_n)
        return self.cum - np.cumsum(load)

    def feasible(self, dl: np.ndarray) -> bool:
        d = dl[self.jobs]
        if d.size == 0:
            return True
        if d.min() < 0:
            return False
        if not self.capped:
            return bool(self.slack(dl).min() >= 0)
        return violation(self.dem, self.p, d, self.cap_t, self.monotone) <= 0

    def checker(self, dl: np.ndarray, moving: np.ndarray) -> Callable[[np.ndarray], bool]:
        """A feasibility test for many trials that change only the deadlines of ``moving``
        (jobs not in it keep ``dl``): their share is computed once."""
        part = np.zeros(self.dem_all.shape[0], dtype=bool)
        part[self.jobs] = True
        mov = moving[part[moving]]
        still = np.ones(self.dem_all.shape[0], dtype=bool)
        still[mov] = False
        still &= part
        dem_m = self.dem_all[mov]
        t_n = self.t_n
        if not self.capped:
            base = np.bincount(dl[still], weights=self.dem_all[still], minlength=t_n)

            def check_load(trial: np.ndarray) -> bool:
                d = trial[mov]
                if d.size and d.min() < 0:
                    return False
                load = base + np.bincount(d, weights=dem_m, minlength=t_n)
                return bool((np.cumsum(load) <= self.cum).all())

            return check_load
        if not self.monotone:
            return self.feasible
        pos = np.flatnonzero(still[self.jobs])
        need = _prefix_need(self.dem[pos], self.p[pos], dl[self.jobs[pos]], t_n)
        room = np.concatenate(([0.0], self.cum)) - need
        p_m = np.minimum(self.p_all[mov], dem_m)
        if mov.size * (t_n + 1) <= _SMALL:
            # few moving jobs (the usual trial): their N x T ramps directly, in fewer numpy
            # calls than the O(N + T) difference form
            ms = np.arange(t_n + 1)
            dem_c, p_c = dem_m[:, None], p_m[:, None]

            def check_few(trial: np.ndarray) -> bool:
                d = trial[mov]
                if d.size and d.min() < 0:
                    return False
                need = np.maximum(0.0, dem_c - p_c * np.maximum(0, d[:, None] + 1 - ms))
                return bool((need.sum(axis=0) <= room).all())

            return check_few

        def check_need(trial: np.ndarray) -> bool:
            d = trial[mov]
            if d.size and d.min() < 0:
                return False
            return bool((_prefix_need(dem_m, p_m, d, t_n) <= room).all())

        return check_need

    @property
    def vector_moves(self) -> bool:
        return (not self.capped) or self.monotone

    def movable(self, dl: np.ndarray, idx: np.ndarray, tgt: np.ndarray) -> np.ndarray:
        """For each job idx[j]: is ``dl`` with dl[idx[j]] = tgt[j] (< dl[idx[j]], >= 0) feasible?
        ``dl`` itself must be feasible."""
        dem = self.dem_all[idx]
        ok = np.ones(idx.shape[0], dtype=bool)
        part = dem > 0
        if not part.any():
            return ok
        if not self.capped:
            s = self.slack(dl)
            t_n = self.t_n
            # range minimum of the slack over [tgt, dl - 1], from a T x T table
            tri = np.where(np.arange(t_n)[None, :] >= np.arange(t_n)[:, None], s[None, :], _INF)
            rmin = np.minimum.accumulate(tri, axis=1)
            lo, hi = tgt[part], dl[idx[part]] - 1
            ok[part] = dem[part] <= rmin[lo, hi]
            return ok
        if self.monotone:
            ms = np.arange(self.t_n + 1)
            base = _prefix_need(self.dem, self.p, dl[self.jobs], self.t_n)
            room = np.concatenate(([0.0], self.cum)) - base
            pos = np.searchsorted(self.jobs, idx[part])
            dm, pm = self.dem[pos], self.p[pos]
            k_old = np.maximum(0, dl[idx[part]][:, None] + 1 - ms[None, :])
            k_new = np.maximum(0, tgt[part][:, None] + 1 - ms[None, :])
            extra = (np.maximum(0.0, dm[:, None] - pm[:, None] * k_new)
                     - np.maximum(0.0, dm[:, None] - pm[:, None] * k_old))
            ok[part] = (extra <= room[None, :]).all(axis=1)
            return ok
        sub = np.flatnonzero(part)
        trial = dl.copy()
        for j in sub:
            i = idx[j]
            old = trial[i]
            trial[i] = tgt[j]
            ok[j] = self.feasible(trial)
            trial[i] = old
        return ok

    def relax_bound(self, dl: np.ndarray, cand: np.ndarray, tgt: np.ndarray) -> int:
        """Upper bound on how many of ``cand`` can move to ``tgt`` together (caps relaxed):
        per prefix d, those not crossing d plus the most crossing ones that fit its slack."""
        s = self.slack(dl)
        dem = self.dem_all[cand]
        order = np.argsort(dem, kind="stable")
        dem, lo, hi = dem[order], tgt[order], dl[cand][order]
        ds = np.arange(self.t_n)
        cross = (lo[:, None] <= ds[None, :]) & (ds[None, :] < hi[:, None]) & (dem[:, None] > 0)
        cs = np.cumsum(np.where(cross, dem[:, None], 0.0), axis=0)
        fit = ((cs <= s[None, :]) & cross).sum(axis=0)
        return int((cand.shape[0] - cross.sum(axis=0) + fit).min())


def slots_needed(capacity_per_slot: np.ndarray, demand: np.ndarray,
                 cap: np.ndarray | None = None) -> int:
    """The smallest |T| for which every job can finish with ``capacity_per_slot`` (R,) units of
    each resource in every slot (paper §III-A: "|T| large enough").

    Without caps this is max_r ceil(sum_i R_i^r / C^r); with caps Lemma B is checked for
    growing |T| (a job with cap p needs at least ceil(R / p) slots).  Raises
    ``InfeasibleInstance`` if some demanded resource has no capacity at all.
    """
    c = np.atleast_1d(np.asarray(capacity_per_slot, dtype=np.int64))
    d = np.asarray(demand, dtype=np.int64)
    if d.ndim == 1:
        d = d[:, None]
    pc = None if cap is None else np.asarray(cap, dtype=np.int64).reshape(d.shape)
    if d.shape[1] != c.shape[0]:
        raise ValueError(f"demand has {d.shape[1]} resources, capacity {c.shape[0]}")
    need = 0
    for r in range(c.shape[0]):
        dem = d[:, r][d[:, r] > 0].astype(np.float64)
        if dem.size == 0:
            continue
        if c[r] <= 0:
            raise InfeasibleInstance(f"resource {r} is demanded but has no capacity")
        lo = int(np.ceil(dem.sum() / c[r]))
        if pc is None:
            need = max(need, lo)
            continue
        p = np.minimum(pc[:, r][d[:, r] > 0].astype(np.float64), dem)
        lo = max(lo, int(np.ceil(dem / p).max()))

        def ok(t: int, dem: np.ndarray = dem, p: np.ndarray = p, cr: int = int(c[r])) -> bool:
            dl = np.full(dem.shape[0], t - 1)
            return _prefix_violation(dem, p, dl, np.arange(1, t + 1, dtype=np.float64) * cr) <= 0

        hi = lo
        while not ok(hi):  # exponential then binary search (feasibility grows with |T|)
            lo, hi = hi + 1, 2 * hi
        while lo < hi:
            mid = (lo + hi) // 2
            if ok(mid):
                hi = mid
            else:
                lo = mid + 1
        need = max(need, hi)
    return need


def deadlines_feasible(inst: CoraInstance, deadlines: np.ndarray) -> bool:
    """Can every job i finish by slot ``deadlines[i]`` (all resources, caps included)?"""
    dl = np.asarray(deadlines, dtype=np.int64)
    if dl.shape != (inst.jobs,):
        raise ValueError(f"deadlines must have shape ({inst.jobs},), got {dl.shape}")
    if inst.jobs and (dl.max() >= inst.slots):
        return False
    cap = inst.cap
    return all(resource_feasible(inst.capacity[r], inst.demand[:, r],
                                 None if cap is None else cap[:, r], dl)
               for r in range(inst.resources))
