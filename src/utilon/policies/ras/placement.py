"""RAS's placement algorithm (§3.4, Algorithm 1): job slots on multi-resource TaskTrackers.

One control cycle turns the jobs' profiles, pending work and required map slots into two
placement matrices, maps and reducers per (job, TaskTracker):

1. **Reducers first**, spread evenly: for each job, TaskTrackers in increasing order of
   reducers placed (all jobs), then of this job's reducers, one reducer each while the job
   has reducers pending and the TaskTracker has room — so no TaskTracker gets two reducers of
   one job in a cycle, and reducers are never collocated while another TaskTracker has fewer.
2. **Maps, in rounds over the TaskTrackers**: on each TaskTracker, take map slots away from
   the job with the highest utility while it stays above the utility the poorest job had
   (lines 13–19: the last removal, which would cross it, is undone), then fill the
   TaskTracker by giving one map slot at a time to the job with the lowest utility that fits
   (lines 20–23).  Rounds stop after ``rounds`` or when a round changes nothing.

**room_for_new_job_slot** is exact: one more task must keep every resource of the
TaskTracker within capacity — and a map also raises the demand of the same job's reducers in
shuffle (I/O per map placed, up to ``parallel_copies`` maps, Table 2), on every TaskTracker
that hosts one, so those are checked too.  A job never gets more map slots than it has
pending maps, nor reducers than pending reducers.  A job whose map phase ends this cycle
(``reduce_phase``) has its reducers sized with the reduce profile instead of the shuffle one
(line 26–27).  Utility (Eqs. 1–3) and tie-breaking are those of ``utility.py``.

The paper starts each cycle from the previous placement; ``place`` takes it as
``start_map`` (maps only: reducers are re-spread every cycle from the reducers still
pending, as lines 1–8 do).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from utilon.policies.ras.utility import OrderKey, job_utility, order_key

EPS = 1e-9


@dataclass(frozen=True)
class PlacementJob:
    """One job as the placement algorithm sees it; demands are vectors over the resources,
    in the same units as the TaskTrackers' capacities."""

    id: str
    map_demand: NDArray[np.float64]
    reduce_demand: NDArray[np.float64]
    shuffle_per_map: NDArray[np.float64]
    s_pend: int
    s_req: int
    r_pend: int
    reduce_phase: bool = False
    parallel_copies: int = 5


@dataclass
class Placement:
    maps: NDArray[np.int64]  # (jobs, TaskTrackers)
    reducers: NDArray[np.int64]
    utility: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    rounds: int = 0


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
    n, t = st.maps.shape
    per_tt = np.zeros(t, dtype=np.int64)
    for j in range(n):
        if st.jobs[j].r_pend <= 0:
            continue
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
                st.move_map(rich, tt, -1)
                if st.key(rich) < floor:
                    st.move_map(rich, tt, +1)  # P <- P_old: the last move crossed the floor
                    break
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
    cand = st.map_room(tt)
    return None if not len(cand) else _pick(st, cand)
