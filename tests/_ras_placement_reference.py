"""Verbatim copy of src/utilon/policies/ras/placement.py before the speed-up (commit dd89e5f),
kept as the reference the optimised ``place`` must reproduce exactly
(tests/test_ras_placement.py::test_same_as_reference).  Changes since, made in both:
line 11's poorest job is chosen among the jobs whose map fits the TaskTracker's capacity, not
only its free room (see the module docstring of placement.py); and carried-over map slots
make way for the reducers first (``reducers_first``, shared with placement.py); and the removal
that would cross the floor is not made (instead of made and undone: same result, fewer
float operations)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from utilon.policies.ras.placement import (
    Placement,
    PlacementJob,
    reducer_job_order,
    reducers_first,
)
from utilon.policies.ras.utility import OrderKey, job_utility, order_key

EPS = 1e-9


class _State:
    """Mutable placement with incremental per-TaskTracker usage."""

    def __init__(self, jobs: list[PlacementJob], capacity: NDArray[np.float64],
                 maps: NDArray[np.int64]) -> None:
        self.jobs = jobs
        self.cap = capacity
        n, t = len(jobs), capacity.shape[0]
        self.maps = maps.copy()
        self.red = np.zeros((n, t), dtype=np.int64)
        self.s_alloc = self.maps.sum(axis=1)
        self.r_alloc = np.zeros(n, dtype=np.int64)
        self.used = np.zeros_like(capacity)
        for j, job in enumerate(jobs):
            self.used += np.outer(self.maps[j], job.map_demand)
        # vectorised views for the per-slot choices (hot path at 1,000 x 500)
        self.map_dem = (np.array([j.map_demand for j in jobs]) if n
                        else np.zeros((0, capacity.shape[1])))
        self.s_pend = np.array([j.s_pend for j in jobs], dtype=np.int64)
        self.s_req = np.array([j.s_req for j in jobs], dtype=float)
        self.coupled = np.array([not j.reduce_phase and j.parallel_copies > 0 for j in jobs],
                                dtype=bool)
        self.copies = np.array([j.parallel_copies for j in jobs], dtype=np.int64)
        self.u = np.zeros(n)
        self.tb = np.zeros(n)
        for j in range(n):
            self._rekey(j)

    def _rekey(self, j: int) -> None:
        k = order_key(self.utility(j), self.jobs[j].s_req)
        self.u[j], self.tb[j] = k.utility, k.neg_required

    def reducer_demand(self, j: int, s_alloc: int | None = None) -> NDArray[np.float64]:
        job = self.jobs[j]
        if job.reduce_phase:
            return job.reduce_demand
        placed = self.s_alloc[j] if s_alloc is None else s_alloc
        return job.shuffle_per_map * min(int(placed), job.parallel_copies)

    def utility(self, j: int) -> float:
        job = self.jobs[j]
        return job_utility(self.s_alloc[j], job.s_req, job.s_pend, self.r_alloc[j], job.r_pend)

    def key(self, j: int) -> OrderKey:
        return order_key(self.utility(j), self.jobs[j].s_req)

    def fits(self, tt: int, extra: NDArray[np.float64]) -> bool:
        return bool(np.all(self.used[tt] + extra <= self.cap[tt] + EPS))

    def room_for_reducer(self, j: int, tt: int) -> bool:
        return self.r_alloc[j] < self.jobs[j].r_pend and self.fits(tt, self.reducer_demand(j))

    def room_for_map(self, j: int, tt: int) -> bool:
        job = self.jobs[j]
        if self.s_alloc[j] >= job.s_pend or not self.fits(tt, job.map_demand):
            return False
        if job.reduce_phase or self.s_alloc[j] >= job.parallel_copies or not self.r_alloc[j]:
            return True
        # one more map raises every shuffling reducer of this job by shuffle_per_map
        hosts = np.nonzero(self.red[j])[0]
        extra = np.outer(self.red[j][hosts], job.shuffle_per_map)
        extra[hosts == tt] += job.map_demand
        return bool(np.all(self.used[hosts] + extra <= self.cap[hosts] + EPS))

    def add_reducer(self, j: int, tt: int) -> None:
        self.used[tt] += self.reducer_demand(j)
        self.red[j, tt] += 1
        self.r_alloc[j] += 1
        self._rekey(j)

    def freeze_reducers(self) -> None:
        """After the reducers are placed (they stay put during the map rounds): the
        (job, host, count) pairs of shuffling reducers, for the vectorised room check."""
        jobs_, hosts = np.nonzero(self.red)
        keep = self.coupled[jobs_]
        self.pj, self.ph = jobs_[keep], hosts[keep]
        self.pc = self.red[self.pj, self.ph].astype(float)
        # pairs are sorted by job (np.nonzero is row-major): CSR offsets per job
        self.p_start = np.searchsorted(self.pj, np.arange(len(self.jobs)))
        self.p_len = np.searchsorted(self.pj, np.arange(len(self.jobs)), side="right") - \
            self.p_start
        self.spm = (np.array([j.shuffle_per_map for j in self.jobs]) if self.jobs
                    else np.zeros((0, self.cap.shape[1])))

    def map_room(self, tt: int, among: NDArray[np.int64] | None = None) -> NDArray[np.int64]:
        """The jobs (of ``among``, default all) with room_for_new_job_slot(job, tt) for a
        map."""
        idx = np.arange(len(self.jobs)) if among is None else among
        free = self.cap[tt] - self.used[tt] + EPS
        idx = idx[(self.s_alloc[idx] < self.s_pend[idx])
                  & (self.map_dem[idx] <= free).all(axis=1)]
        # jobs whose shuffling reducers grow with one more map: check every reducer host
        grow = self.coupled[idx] & (self.s_alloc[idx] < self.copies[idx]) & (
            self.r_alloc[idx] > 0)
        if grow.any():
            g = idx[grow]
            lens = self.p_len[g]
            firsts = np.repeat(self.p_start[g] - np.cumsum(lens) + lens, lens)
            rows = firsts + np.arange(int(lens.sum()))
            pj, ph = self.pj[rows], self.ph[rows]
            extra = self.pc[rows, None] * self.spm[pj]
            at = ph == tt
            extra[at] += self.map_dem[pj[at]]
            bad = pj[~(self.used[ph] + extra <= self.cap[ph] + EPS).all(axis=1)]
            if len(bad):
                idx = idx[~np.isin(idx, bad)]
        return idx

    def move_map(self, j: int, tt: int, step: int) -> None:
        job = self.jobs[j]
        before = self.reducer_demand(j)
        self.maps[j, tt] += step
        self.s_alloc[j] += step
        self.used[tt] += step * job.map_demand
        if not job.reduce_phase and self.r_alloc[j]:
            delta = self.reducer_demand(j) - before
            if np.any(delta):
                self.used += np.outer(self.red[j], delta)
        self._rekey(j)


def place(jobs: list[PlacementJob], capacity: NDArray[np.float64], *, rounds: int = 3,
          start_map: NDArray[np.int64] | None = None) -> Placement:
    """Algorithm 1 for one control cycle; ``capacity`` is (TaskTrackers, resources)."""
    cap = np.asarray(capacity, dtype=float)
    n, t = len(jobs), cap.shape[0]
    start = np.zeros((n, t), dtype=np.int64) if start_map is None else start_map
    start = np.minimum(start, np.array([[j.s_pend] for j in jobs], dtype=np.int64)
                       if n else start)
    start = reducers_first(jobs, cap, start)  # shared pre-step, see placement.py
    st = _State(jobs, cap, start)
    if n and np.any(st.used > cap + EPS):  # the old placement no longer fits: start afresh
        st = _State(jobs, cap, np.zeros((n, t), dtype=np.int64))
    _place_reducers(st)
    st.freeze_reducers()
    done = 0
    for done in range(1, rounds + 1):  # noqa: B007 - the count is reported
        if not _map_round(st):
            break
    util = np.array([st.utility(j) for j in range(n)])
    return Placement(st.maps, st.red, util, done)


def _place_reducers(st: _State) -> None:
    t = st.maps.shape[1]
    per_tt = np.zeros(t, dtype=np.int64)
    for j in reducer_job_order([job.r_pend for job in st.jobs]):
        # fewest reducers first (this job has none yet this cycle), then by index
        for tt in np.argsort(per_tt, kind="stable"):
            if st.r_alloc[j] >= st.jobs[j].r_pend:
                break
            if st.room_for_reducer(j, int(tt)):
                st.add_reducer(j, int(tt))
                per_tt[tt] += 1


def _map_round(st: _State) -> bool:
    """One round over the TaskTrackers (lines 10–24); True if the placement changed."""
    t = st.maps.shape[1]
    before = st.maps.copy()
    for tt in range(t):
        poorest = _poorest(st, tt)
        if poorest is not None:
            floor = st.key(poorest)
            while True:  # lines 13-19: take from the richest while it stays above the floor
                holders = np.flatnonzero(st.maps[:, tt] > 0)
                holders = holders[holders != poorest]
                if not len(holders):
                    break
                rich = _pick(st, holders, richest=True)
                job = st.jobs[rich]
                after = order_key(job_utility(st.s_alloc[rich] - 1, job.s_req, job.s_pend,
                                              st.r_alloc[rich], job.r_pend), job.s_req)
                if after < floor:
                    break  # P <- P_old: this removal would cross the floor (not made)
                st.move_map(rich, tt, -1)
        # lines 20-23: fill the TaskTracker, poorest job first; placing a map only ever
        # takes room away, so the candidates are re-checked among the previous ones only
        cand = st.map_room(tt)
        while len(cand):
            j = _pick(st, cand)
            st.move_map(j, tt, +1)
            cand = st.map_room(tt, cand)
    return not np.array_equal(before, st.maps)


def _pick(st: _State, cand: NDArray[np.int64], *, richest: bool = False) -> int:
    """The job of ``cand`` with the lowest (or highest) key; ties to the lowest index."""
    sign = -1.0 if richest else 1.0
    u = sign * st.u[cand]
    cand = cand[u == u.min()]
    if len(cand) > 1:
        tb = sign * st.tb[cand]
        cand = cand[tb == tb.min()]
    return int(cand[0])


def _poorest(st: _State, tt: int) -> int | None:
    """Line 11's job_in: the poorest job with maps to place whose map fits the TaskTracker's
    capacity (free or not)."""
    idx = np.arange(len(st.jobs))
    cand = idx[(st.s_alloc < st.s_pend) & (st.map_dem <= st.cap[tt] + EPS).all(axis=1)]
    return None if not len(cand) else _pick(st, cand)
