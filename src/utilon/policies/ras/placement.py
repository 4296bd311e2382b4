"""RAS's placement algorithm (§3.4, Algorithm 1): job slots on multi-resource TaskTrackers.

One control cycle turns the jobs' profiles, pending work and required map slots into two
placement matrices, maps and reducers per (job, TaskTracker):

1. **Reducers first**, spread evenly: for each job (fewest pending reducers first,
   ``reducer_job_order``), TaskTrackers in increasing order of reducers placed (all jobs),
   then of this job's reducers, one reducer each while the job has reducers pending and the
   TaskTracker has room — so no TaskTracker gets two reducers of one job in a cycle, and
   reducers are never collocated while another TaskTracker has fewer.
2. **Maps, in rounds over the TaskTrackers**: on each TaskTracker, take map slots away from
   the job with the highest utility while it stays above the utility the poorest job had
   (lines 13–19: the last removal, which would cross it, is undone), then fill the
   TaskTracker by giving one map slot at a time to the job with the lowest utility that fits
   (lines 20–23).  Rounds stop after ``rounds`` or when a round changes nothing.
   Line 11 asks for the poorest job *with room* on the TaskTracker; on a full TaskTracker no
   job has room, so read literally nothing could ever be rebalanced and a newcomer would
   wait until the incumbents run out of maps.  We take the poorest job with maps to place
   whose map fits the TaskTracker's capacity: lines 13–18 then make the room for it.

**room_for_new_job_slot** is exact: one more task must keep every resource of the
TaskTracker within capacity — and a map also raises the demand of the same job's reducers in
shuffle (I/O per map placed, up to ``parallel_copies`` maps, Table 2), on every TaskTracker
that hosts one, so those are checked too.  A job never gets more map slots than it has
pending maps, nor reducers than pending reducers.  A job whose map phase ends this cycle
(``reduce_phase``) has its reducers sized with the reduce profile instead of the shuffle one
(line 26–27).  Utility (Eqs. 1–3) and tie-breaking are those of ``utility.py``.

**The order of the TaskTrackers** in the map rounds is not the paper's concern (its line 10
reads "for tt in TT").  It matters on a big cluster: lines 13–19 free room for the poorest
job on the first TaskTracker where it fits, by taking a *planned* slot from the richest, but
that slot's task keeps running there until it ends (the Task Scheduler never preempts,
§3.5).  Visited in index order, a newcomer lands on a busy TaskTracker and waits while idle
ones wait too.  ``place`` therefore takes ``order``: the policy passes the TaskTrackers with
the most free capacity (by what actually runs) first, so the poorest job is offered room
that exists now before any is made for it.  Reducers (lines 1–8) take the same order
where the paper's two criteria tie.

The paper starts each cycle from the previous placement; ``place`` takes it as
``start_map`` (maps only: reducers are re-spread every cycle from the reducers still
pending, as lines 1–8 do).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from utilon.policies.ras.utility import job_utility, order_key

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


_Shuffling = tuple[int, list[float], list[tuple[int, float]], list[float]]


class _State:
    """Mutable placement with incremental bookkeeping, so that each room check costs little
    more than the few jobs and TaskTrackers it touches.

    Per TaskTracker: ``used`` (plain floats, updated with the very same float operations as
    a vectorised ``used += ...`` would, so every comparison is bit-identical to checking the
    matrices afresh) and the jobs holding map slots there.  Per job: its order key (numpy
    arrays, for the vectorised "lowest utility among the jobs with room"), whether it has
    map tasks left, whether one more map grows its shuffling reducers, and the reducer hosts
    that could not take that growth (``bad``).  A job's room for a map on ``tt`` is then

        maps left  and  map_demand <= free(tt)  and  (not growing  or  (no bad host
            other than tt  and, if tt hosts a reducer of the job, tt takes map + growth))

    where the first term is ``ok`` (with ``bad`` folded in), the second is shared by every
    job of one map profile, and the third is only evaluated for the few jobs with a reducer
    on ``tt``.
    """

    def __init__(self, jobs: list[PlacementJob], cap: NDArray[np.float64],
                 maps: NDArray[np.int64], used: NDArray[np.float64]) -> None:
        n, t = len(jobs), cap.shape[0]
        self.n, self.t = n, t
        self.maps = maps
        self.red = np.zeros((n, t), dtype=np.int64)
        self.used: list[list[float]] = used.tolist()
        self.cap: list[list[float]] = cap.tolist()
        self.cap_eps: list[list[float]] = (cap + EPS).tolist()
        self.s_alloc: list[int] = maps.sum(axis=1).tolist()
        self.r_alloc = [0] * n
        self.s_pend = [j.s_pend for j in jobs]
        self.s_req = [j.s_req for j in jobs]
        self.r_pend = [j.r_pend for j in jobs]
        self.reduce_phase = [j.reduce_phase for j in jobs]
        self.copies = [j.parallel_copies for j in jobs]
        self.coupled = [not j.reduce_phase and j.parallel_copies > 0 for j in jobs]
        self.md: list[list[float]] = [np.asarray(j.map_demand, dtype=float).tolist()
                                      for j in jobs]
        self.rd: list[list[float]] = [np.asarray(j.reduce_demand, dtype=float).tolist()
                                      for j in jobs]
        self.spm: list[list[float]] = [np.asarray(j.shuffle_per_map, dtype=float).tolist()
                                       for j in jobs]
        # jobs grouped by map profile: one fit test per profile and TaskTracker
        ids: dict[tuple[float, ...], int] = {}
        self.prof = [ids.setdefault(tuple(m), len(ids)) for m in self.md]
        self.profiles = [list(p) for p in ids]
        self.prof_id = np.array(self.prof, dtype=np.intp)
        self.u = [0.0] * n
        self.tb = [0.0] * n
        self.u_arr = np.zeros(n)
        self.tb_arr = np.zeros(n)
        # holders[tt]: job -> map slots on tt (nonzero entries of the maps column)
        self.holders: list[dict[int, int]] = [{} for _ in range(t)]
        for j, tt in zip(*np.nonzero(maps), strict=True):
            self.holders[int(tt)][int(j)] = maps[j, tt].item()

    # -- keys ---------------------------------------------------------------------------
    def utility(self, j: int) -> float:
        return job_utility(self.s_alloc[j], self.s_req[j], self.s_pend[j], self.r_alloc[j],
                           self.r_pend[j])

    def rekey(self, j: int) -> None:
        k = order_key(self.utility(j), self.s_req[j])
        self.u[j] = self.u_arr[j] = k.utility
        self.tb[j] = self.tb_arr[j] = k.neg_required

    def shuffle_demand(self, j: int, s_alloc: int) -> list[float]:
        m = min(int(s_alloc), self.copies[j])
        return [x * m for x in self.spm[j]]

    # -- reducers (lines 1-8) -------------------------------------------------------------
    def place_reducers(self, visit: list[int]) -> None:
        t = self.t
        seq = np.asarray(visit, dtype=np.intp)
        used, cap_eps, red, r_alloc = self.used, self.cap_eps, self.red, self.r_alloc
        per_tt = np.zeros(t, dtype=np.int64)
        for j in reducer_job_order(self.r_pend):
            r_pend = self.r_pend[j]
            dem = self.rd[j] if self.reduce_phase[j] else self.shuffle_demand(j,
                                                                             self.s_alloc[j])
            # fewest reducers first (this job has none yet this cycle), then in visit order
            for tt in seq[np.argsort(per_tt[seq], kind="stable")].tolist():
                if r_alloc[j] >= r_pend:
                    break
                u = used[tt]
                if all(a + b <= c for a, b, c in zip(u, dem, cap_eps[tt], strict=True)):
                    for r, d in enumerate(dem):
                        u[r] += d
                    red[j, tt] += 1
                    r_alloc[j] += 1
                    per_tt[tt] += 1
        self._freeze()

    def _freeze(self) -> None:
        """The reducers stay put during the map rounds: index the shuffling ones."""
        n, t = self.n, self.t
        # every reducer host of a job (for the shuffle updates of move_map) ...
        self.hosts: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        # ... and, per host, the shuffling reducers: (job, growth per extra map
        # c * shuffle_per_map, its nonzero entries, growth plus the map itself)
        self.on_host: list[list[_Shuffling]] = [[] for _ in range(t)]
        jj, hh = np.nonzero(self.red)
        for j, h, c in zip(jj.tolist(), hh.tolist(), self.red[jj, hh].tolist(), strict=True):
            self.hosts[j].append((h, c))
            if self.coupled[j]:
                grow = [float(c) * x for x in self.spm[j]]
                nz = [(r, g) for r, g in enumerate(grow) if g != 0]
                self.on_host[h].append((j, grow, nz, [g + m for g, m in zip(
                    grow, self.md[j], strict=True)]))
        self.bad: list[set[int]] = [set() for _ in range(n)]
        self.ok = np.zeros(n, dtype=bool)  # room_for_new_job_slot's per-job part
        self.open = np.zeros(n, dtype=bool)  # s_alloc < s_pend
        for h in range(t):
            if self.on_host[h]:
                self.touch(h)
        for j in range(n):
            self.rekey(j)
            self.reok(j)

    # -- incremental state ----------------------------------------------------------------
    def growing(self, j: int) -> bool:
        """One more map of j raises its shuffling reducers' demand."""
        return self.coupled[j] and self.s_alloc[j] < self.copies[j] and self.r_alloc[j] > 0

    def reok(self, j: int) -> None:
        self.open[j] = more = self.s_alloc[j] < self.s_pend[j]
        self.ok[j] = more and not (self.bad[j] and self.growing(j))

    def touch(self, h: int) -> None:
        """used[h] changed: which shuffling reducers on h can (not) take one more map."""
        pairs = self.on_host[h]
        if not pairs:
            return
        u, c = self.used[h], self.cap_eps[h]
        # within capacity, u + 0 <= c holds: only the resources a map's shuffle grows count
        clean = all(a <= k for a, k in zip(u, c, strict=True))
        for j, grow, nz, _ in pairs:
            if not clean:
                fits = all(a + b <= k for a, b, k in zip(u, grow, c, strict=True))
            elif len(nz) == 1:
                r, g = nz[0]
                fits = u[r] + g <= c[r]
            else:
                fits = all(u[r] + g <= c[r] for r, g in nz)
            bad = self.bad[j]
            if fits == (h in bad):
                if fits:
                    bad.discard(h)
                else:
                    bad.add(h)
                self.reok(j)

    def move_map(self, j: int, tt: int, step: int) -> None:
        before = self.s_alloc[j]
        after = before + step
        self.maps[j, tt] += step
        self.s_alloc[j] = after
        hold = self.holders[tt]
        left = hold.get(j, 0) + step
        if left:
            hold[j] = left
        else:
            del hold[j]
        u = self.used[tt]
        for r, m in enumerate(self.md[j]):
            u[r] += step * m
        self.touch(tt)
        if not self.reduce_phase[j] and self.r_alloc[j]:
            b, a = self.shuffle_demand(j, before), self.shuffle_demand(j, after)
            delta = [x - y for x, y in zip(a, b, strict=True)]
            if any(delta):
                for h, c in self.hosts[j]:
                    uh = self.used[h]
                    for r, d in enumerate(delta):
                        uh[r] += c * d
                    self.touch(h)
        self.rekey(j)
        self.reok(j)

    # -- choices --------------------------------------------------------------------------
    def map_room(self, tt: int) -> NDArray[np.bool_] | None:
        """Mask of the jobs with room_for_new_job_slot(job, tt) for a map (None: none)."""
        u, c = self.used[tt], self.cap[tt]
        free = [k - x + EPS for k, x in zip(c, u, strict=True)]
        fit = [all(m <= f for m, f in zip(p, free, strict=True)) for p in self.profiles]
        if not any(fit):
            return None
        mask = self.ok.copy() if all(fit) else np.array(fit)[self.prof_id] & self.ok
        ce = self.cap_eps[tt]
        for j, _, _, grow_map in self.on_host[tt]:
            # a reducer of j here: tt must take the map plus the growth of that reducer
            if fit[self.prof[j]] and self.s_alloc[j] < self.s_pend[j] and self.growing(j):
                bad = self.bad[j]
                mask[j] = (not bad or (len(bad) == 1 and tt in bad)) and all(
                    a + b <= k for a, b, k in zip(u, grow_map, ce, strict=True))
        return mask

    def could_use(self, tt: int) -> NDArray[np.bool_] | None:
        """Mask of the jobs with maps to place whose map fits ``tt``'s capacity, free or
        not: line 11's job_in, for which lines 13-18 make room (see the module docstring)."""
        ce = self.cap_eps[tt]
        fit = [all(m <= c for m, c in zip(p, ce, strict=True)) for p in self.profiles]
        if not any(fit):
            return None
        mask = self.open if all(fit) else np.array(fit)[self.prof_id] & self.open
        return mask if mask.any() else None

    def lowest(self, mask: NDArray[np.bool_] | None) -> int | None:
        """The job of ``mask`` with the lowest key; ties to the lowest index."""
        if mask is None:
            return None
        j = int(np.where(mask, self.u_arr, np.inf).argmin())
        if not mask[j]:
            return None
        if self.u[j] == -math.inf:  # starving jobs: the one that requires more first
            j = int(np.where(mask & (self.u_arr == -math.inf), self.tb_arr, np.inf).argmin())
        return j

    def richest(self, tt: int, but: int) -> int | None:
        """The job holding maps on ``tt`` (other than ``but``) with the highest key; ties
        to the lowest index."""
        best, key = None, (0.0, 0.0)
        for j in sorted(self.holders[tt]):
            if j == but or self.holders[tt][j] <= 0:
                continue
            k = (self.u[j], self.tb[j])
            if best is None or k > key:
                best, key = j, k
        return best


def place(jobs: list[PlacementJob], capacity: NDArray[np.float64], *, rounds: int = 3,
          start_map: NDArray[np.int64] | None = None,
          order: list[int] | None = None) -> Placement:
    """Algorithm 1 for one control cycle; ``capacity`` is (TaskTrackers, resources);
    ``order``: the TaskTrackers in the order the map rounds visit them (default: index)."""
    cap = np.asarray(capacity, dtype=float)
    n, t = len(jobs), cap.shape[0]
    visit = list(range(t)) if order is None else list(order)
    if sorted(visit) != list(range(t)):
        raise ValueError("order must list every TaskTracker exactly once")
    start = np.zeros((n, t), dtype=np.int64) if start_map is None else start_map
    start = np.minimum(start, np.array([[j.s_pend] for j in jobs], dtype=np.int64)
                       if n else start)
    maps = reducers_first(jobs, cap, start, visit)
    used = _map_usage(jobs, maps, cap)
    if n and np.any(used > cap + EPS):  # the old placement no longer fits: start afresh
        maps = np.zeros((n, t), dtype=np.int64)
        used = _map_usage(jobs, maps, cap)
    st = _State(jobs, cap, maps, used)
    st.place_reducers(visit)
    done = 0
    for done in range(1, rounds + 1):  # noqa: B007 - the count is reported
        if not _map_round(st, visit):
            break
    util = np.array([st.utility(j) for j in range(n)])
    return Placement(st.maps, st.red, util, done)


def reducer_job_order(r_pend: list[int]) -> list[int]:
    """The jobs with reducers pending, in the order lines 1–8 place them: fewest pending
    reducers first (ties: index).  The paper's "for job in J" leaves J's order open; in index
    order one job with hundreds of reducers takes every TaskTracker with room, and a job
    with one reducer waits behind it for a whole reduce wave."""
    return sorted((j for j, r in enumerate(r_pend) if r > 0), key=lambda j: (r_pend[j], j))


def reducers_first(jobs: list[PlacementJob], cap: NDArray[np.float64],
                   start: NDArray[np.int64], visit: list[int] | None = None
                   ) -> NDArray[np.int64]:
    """Reducers are placed before maps (lines 1–8), also before the map slots carried over
    from the last cycle: reserve every pending reducer where lines 1–8 would put it on
    TaskTrackers without maps, then drop carried-over map slots that no longer fit beside
    the reservations, on each TaskTracker from the job with the most slots there (ties: the
    lowest index).  Without this a cluster kept full of maps would never have room for a
    reducer, and a job whose maps are done would wait for its reduce phase until the other
    jobs ran out of maps."""
    n, t = start.shape
    if not n or not any(j.r_pend > 0 for j in jobs) or not start.any():
        return start.copy()
    need = np.zeros_like(cap)
    per_tt = np.zeros(t, dtype=np.int64)
    seq = np.arange(t) if visit is None else np.asarray(visit, dtype=np.intp)
    for j in reducer_job_order([job.r_pend for job in jobs]):
        job = jobs[j]
        d = job.reduce_demand if job.reduce_phase else job.shuffle_per_map * min(
            int(start[j].sum()), job.parallel_copies)
        placed = 0
        for tt in seq[np.argsort(per_tt[seq], kind="stable")]:
            if placed >= job.r_pend:
                break
            if np.all(need[tt] + d <= cap[tt] + EPS):
                need[tt] += d
                per_tt[tt] += 1
                placed += 1
    maps = start.copy()
    demand = np.array([j.map_demand for j in jobs], dtype=float)
    for tt in range(t):
        used = maps[:, tt] @ demand + need[tt]
        while np.any(used > cap[tt] + EPS) and maps[:, tt].any():
            j = int(np.argmax(maps[:, tt]))
            maps[j, tt] -= 1
            used -= demand[j]
    return maps


def _map_usage(jobs: list[PlacementJob], maps: NDArray[np.int64],
               cap: NDArray[np.float64]) -> NDArray[np.float64]:
    used = np.zeros_like(cap)
    for j, job in enumerate(jobs):
        if maps[j].any():
            used += np.outer(maps[j], job.map_demand)
    return used


def _map_round(st: _State, visit: list[int]) -> bool:
    """One round over the TaskTrackers (lines 10–24); True if the placement changed."""
    before = st.maps.copy()
    for tt in visit:
        room, fresh = None, False
        if st.holders[tt]:
            room, fresh = st.map_room(tt), True
            poorest = st.lowest(st.could_use(tt))
            if poorest is not None:
                floor = (st.u[poorest], st.tb[poorest])
                while True:  # lines 13-19: take from the richest while it stays above
                    rich = st.richest(tt, poorest)
                    if rich is None:
                        break
                    k = order_key(job_utility(st.s_alloc[rich] - 1, st.s_req[rich],
                                              st.s_pend[rich], st.r_alloc[rich],
                                              st.r_pend[rich]), st.s_req[rich])
                    if (k.utility, k.neg_required) < floor:
                        break  # P <- P_old: this removal would cross the floor
                    fresh = False  # the state changes: recompute the room
                    st.move_map(rich, tt, -1)
        # lines 20-23: fill the TaskTracker, poorest job first; placing a map only ever
        # takes room away, so the candidates are re-checked among the previous ones only
        cand = room if fresh else st.map_room(tt)
        j = st.lowest(cand)
        while j is not None:
            st.move_map(j, tt, +1)
            now = st.map_room(tt)
            cand = None if now is None or cand is None else now & cand
            j = st.lowest(cand)
    return not np.array_equal(before, st.maps)
