"""Cura's online VM-aware scheduler (§3.1.2, Appendix A, Algorithm 1).

Jobs wait in ``W`` (unreserved), hold a tentative reservation in ``R``, or run.  For every VM
pool one *time-window deciding* job fixes the pool's reservation time window (the end of its
reservation, at most ``window_bound`` ahead); other jobs are reserved only if they can start
within the windows, one by one in decreasing priority, each at its lowest-cost configuration
that meets its deadline given what is already reserved, at the earliest time.  A newly arrived
job that outranks reserved ones cancels them; one that outranks a window-deciding job resets the
windows too.  Reservations that reach their start time are run.

**Priority.**  ``pair(a, b)`` is the lowest cost of reserving ``a`` and then ``b`` on the book
(each at its cheapest feasible configuration; a job that cannot meet its deadline costs a
penalty, twice its most expensive configuration).  The highest-priority job maximises
``Σ_j pair(j, i) − pair(i, j)``: what deferring it behind each other job costs more than
putting it first.  Since ``pair(a, b) = c_a + c_{b|a}``, this equals
``Σ_j Δ(i|j) − Σ_j Δ(j|i)`` with ``Δ(x|y) = c_{x|y} − c_x`` the extra cost ``y`` inflicts on
``x``; ``Δ`` is zero unless the two compete for one pool at overlapping times, which a
vectorised filter rules out for most pairs before any exact re-planning.

**Readings of the paper** (it is inconsistent in places; see docs/policies.md#cura):

* §3.1.2 defines ``Cost(J_i, J_j)`` as ``J_i`` reserved *after* ``J_j`` but Appendix A as
  ``J_i`` *before* ``J_j``; only the latter makes the priority formula prefer the job whose
  deferral costs most, which is what the text says, so ``pair(first, second)`` is used
  throughout and "n outranks r" means ``pair(r, n) > pair(n, r)``.
* Line 12 redoes reservations when a new job merely ties a reserved one; with ties (no
  interaction) that changes nothing but costs O(n²) per arrival.  We redo when a new job's
  cheapest feasible cost is raised by the current reservations (without them it would outrank
  nobody); re-reserving in priority order then settles who wins.
* The early ``return`` of line 15 would also skip line 33 (run due reservations) and leave new
  jobs unreserved; here new and waiting jobs are still reserved within the windows, and due
  reservations always run.
* Waiting jobs (``W``) are reconsidered at every decision, not only when windows reset: capacity
  freed by cancellations or early finishes can fit them, and otherwise a waiting job could miss
  its deadline while VMs sit idle.
* Window-deciding picks use priorities computed once against the running jobs (the paper
  recomputes after each pool's pick, which only matters for jobs competing across pools).
* A window expires when time reaches it; the windows are then reset as on a deciding arrival.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any

import numpy as np

from utilon.cloud.model import CloudJob, Command, Drop, Finished, PoolView, Start
from utilon.cloud.policy import CloudPolicy
from utilon.cloud.profile import ProfileStore
from utilon.policies.base import register
from utilon.policies.cura.book import EPS, Book, Slot

_CHUNK = 1024


@register
class VMAware(CloudPolicy):
    name = "vm-aware"
    summary = "Cura's VM-aware scheduler (reservations in time windows, pairwise cost priority)"

    def __init__(self, store: ProfileStore, window_bound: float = 600.0) -> None:
        super().__init__(store)
        if window_bound <= 0:
            raise ValueError("window_bound must be positive")
        self.window_bound = window_bound
        self.book = Book(self.cloud.k)
        self.jobs: dict[str, CloudJob] = {}
        self.waiting: dict[str, CloudJob] = {}      # W: arrived, not reserved
        self.reserved: dict[str, Slot] = {}         # R: tentative reservations
        self.running: set[str] = set()
        self.deciders: dict[int, str] = {}          # pool -> its window-deciding job
        self.windows: list[float] = [0.0] * self.cloud.k
        self.target: list[int] | None = None
        self._wake: float | None = None
        self.started: list[tuple[float, str, int, int, float]] = []   # (t, job, k, n, cost)
        self.stats = {"decisions": 0, "window_resets": 0, "re_reservations": 0,
                      "cancelled": 0, "pair_checks": 0, "pair_replans": 0, "dropped": 0}
        self.priority_ms: list[float] = []

    # -- the policy interface ------------------------------------------------------------
    def decide(self, now: float, view: PoolView, arrived: list[CloudJob],
               finished: list[Finished]) -> list[Command]:
        self.stats["decisions"] += 1
        self.book.set_now(now)
        ready = [s - b for s, b in zip(view.size, view.booting, strict=True)]
        if self.target is not None:
            ready = [min(r, t) for r, t in zip(ready, self.target, strict=True)]
        self.book.set_cap(ready)
        for f in finished:
            self.running.discard(f.job)
            self.book.remove(f.job)
        out: list[Command] = []
        new: list[CloudJob] = []
        for j in arrived:
            self.jobs[j.id] = j
            if self._hopeless(j, now):
                out.append(self._drop(j, "no configuration meets the deadline"))
            else:
                new.append(j)
        for j in list(self.waiting.values()):
            if self._hopeless(j, now):
                del self.waiting[j.id]
                out.append(self._drop(j, "waited past the last start that meets the deadline"))

        expired = any(w <= now + EPS for w in self.windows) or self._decider_gone()
        if expired or self._outranks_decider(new):
            self._reset_windows(now, new)
        elif new and self._hurt(new):
            self._re_reserve(new)
        else:
            self._reserve_within(list(self.waiting.values()) + new)
        out += self._run_due(now, view)
        starts = [s.start for s in self.reserved.values()]
        busy = self.waiting or self.reserved or self.running
        wins = [w for w in self.windows if w > now + EPS] if busy else []
        self._wake = min(starts + wins) if starts or wins else None
        return out

    def wakeup(self) -> float | None:
        return self._wake

    def report(self) -> dict[str, Any]:
        return dict(self.stats)

    # -- helpers -------------------------------------------------------------------------
    def _drop(self, j: CloudJob, why: str) -> Drop:
        self.stats["dropped"] += 1
        return Drop(j.id, why)

    def _hopeless(self, j: CloudJob, now: float) -> bool:
        """No configuration could meet the deadline even on an empty pool."""
        t = self.store.configs(j)
        cap = np.asarray(self._pool_limit())
        ok = (j.deadline - t.t_run >= now - EPS) & (t.n <= cap[t.k])
        return not bool(ok.any())

    def _pool_limit(self) -> list[int]:
        return self.book.cap if self.target is None else [max(c, t) for c, t in
                                                         zip(self.book.cap, self.target,
                                                             strict=True)]

    def _decider_gone(self) -> bool:
        return any(d not in self.reserved and d not in self.running
                   for d in self.deciders.values())

    def _best(self, j: CloudJob, **kw: Any) -> Slot | None:
        return self.book.best(j, self.store.configs(j), **kw)

    def _penalty(self, j: CloudJob) -> float:
        return 2.0 * float(self.store.configs(j).cost.max())

    def _cost(self, j: CloudJob, s: Slot | None) -> float:
        return s.cost if s is not None else self._penalty(j)

    def _pair(self, a: CloudJob, b: CloudJob, **kw: Any) -> float:
        """Lowest cost of reserving ``a`` and then ``b``."""
        sa = self._best(a, **kw)
        sb = self._best(b, extra=sa, **kw)
        return self._cost(a, sa) + self._cost(b, sb)

    def _cancel(self, ids: Iterable[str]) -> list[CloudJob]:
        back = []
        for jid in list(ids):
            if jid in self.reserved:
                del self.reserved[jid]
                self.book.remove(jid)
                self.stats["cancelled"] += 1
                back.append(self.jobs[jid])
        return back

    def _reserve(self, s: Slot) -> None:
        self.reserved[s.job] = s
        self.book.add(s)
        self.waiting.pop(s.job, None)

    # -- when to redo --------------------------------------------------------------------
    def _outranks_decider(self, new: list[CloudJob]) -> bool:
        """Line 13: a new job strictly outranks a window-deciding job."""
        for d in list(self.deciders.values()):
            if d not in self.reserved or not new:
                continue
            held = self.book.remove(d)
            assert held is not None
            try:
                dj = self.jobs[d]
                if any(self._pair(dj, n) > self._pair(n, dj) + EPS for n in new):
                    return True
            finally:
                self.book.add(held)
        return False

    def _hurt(self, new: list[CloudJob]) -> bool:
        """Line 12 (see the module notes): do current reservations raise a new job's cost?
        Like line 12's ``Cost``, this is the lowest cost at any start that meets the deadline,
        not only within the windows: a job that can simply wait is not outranking anyone."""
        others = [self.reserved[r] for r in self.reserved if r not in self.deciders.values()]
        for s in others:
            self.book.remove(s.job)
        try:
            alone = [self._cost(n, self._best(n)) for n in new]
        finally:
            for s in others:
                self.book.add(s)
        return any(self._cost(n, self._best(n)) > a + EPS for n, a in zip(new, alone,
                                                                           strict=True))

    # -- the three ways of (re)reserving -------------------------------------------------
    def _reset_windows(self, now: float, new: list[CloudJob]) -> None:
        """Lines 17-24: cancel everything, pick each pool's window-deciding job, then fill."""
        self.stats["window_resets"] += 1
        cj = self._cancel(list(self.reserved)) + list(self.waiting.values()) + new
        for j in cj:
            self.waiting[j.id] = j
        self.deciders = {}
        self.windows = [now + self.window_bound] * self.cloud.k
        if not cj:
            return
        base = self._priorities(cj, None, windows=None)
        for k in range(self.cloud.k):
            on_k = [self._best(j, pool=k) for j in cj]
            cost = np.array([self._cost(j, s) for j, s in zip(cj, on_k, strict=True)])
            own = np.array([self._cost(j, self._best(j)) for j in cj])
            # Σ_j pair(j, i) − pair(i on k, j) = base_i − m·(c_i^k − c_i) − Σ_j Δ(j | i on k)
            hurt = self._inflicted(cj, on_k)
            score = base - len(cj) * (cost - own) - hurt
            for i in _order(score, cj):
                s = on_k[i]
                if s is None or cj[i].id in self.reserved:
                    continue
                s = self._best(cj[i], pool=k)      # the book has earlier picks by now
                if s is None:
                    continue
                self._reserve(s)
                self.deciders[k] = s.job
                self.windows[k] = min(s.end, now + self.window_bound)
                break
        self._reserve_within([j for j in cj if j.id not in self.reserved])

    def _re_reserve(self, new: list[CloudJob]) -> None:
        """Lines 26-27: cancel all but the window-deciding reservations, then fill."""
        self.stats["re_reservations"] += 1
        keep = set(self.deciders.values())
        back = self._cancel([r for r in self.reserved if r not in keep])
        for j in back:
            self.waiting[j.id] = j
        self._reserve_within(list(self.waiting.values()) + new)

    def _reserve_within(self, cj: list[CloudJob]) -> None:
        """Lines 29-32: reserve in decreasing priority, each within the windows if it can.
        Jobs with no configuration starting within the windows cannot be reserved now and
        cannot delay anyone else's reservation, so priorities are computed among the rest."""
        for j in cj:
            self.waiting[j.id] = j
        room = np.array(self._room_within())
        slots = [self._best(j, windows=self.windows) if self._may_fit(j, room) else None
                 for j in cj]
        live = [i for i, s in enumerate(slots) if s is not None]
        if not live:
            return
        jobs = [cj[i] for i in live]
        firsts = [slots[i] for i in live]
        score = self._priorities(jobs, firsts, windows=self.windows)
        for i in _order(score, jobs):
            f = firsts[i]
            assert f is not None
            s = self._best(jobs[i], windows=self.windows, first=f.idx)
            if s is not None:
                self._reserve(s)

    def _room_within(self) -> list[int]:
        """Per pool, the most VMs free at any instant of its window: a configuration needing
        more can not be reserved now (a cheap filter before the exact search)."""
        out = []
        for k in range(self.cloud.k):
            T, U = self.book.profile(k)
            hi = bisect_right(T, self.windows[k])
            out.append(self.book.cap[k] - min(U[:max(1, hi)]))
        return out

    def _may_fit(self, j: CloudJob, room: np.ndarray) -> bool:
        t = self.store.configs(j)
        return bool(((j.deadline - t.t_run >= self.book.now - EPS) & (t.n <= room[t.k])).any())

    def _run_due(self, now: float, view: PoolView) -> list[Command]:
        """Line 33: start the reservations that begin now (a pool short of VMs, e.g. still
        booting after a reconfiguration, sends its job back to wait).  ``view`` is from before
        this decision's commands: a pool shrunk by a reconfiguration decided in the same call
        loses its idle VMs above the target first, so those are not counted as idle."""
        idle = list(view.idle)
        if self.target is not None:
            idle = [i - max(0, min(s - t, i)) for i, s, t in zip(view.idle, view.size,
                                                                  self.target, strict=True)]
        out: list[Command] = []
        for jid, s in sorted(self.reserved.items(), key=lambda x: (x[1].start, x[0])):
            if s.start > now + EPS:
                continue
            del self.reserved[jid]
            if idle[s.k] < s.n:
                self.book.remove(jid)
                self.waiting[jid] = self.jobs[jid]
                continue
            idle[s.k] -= s.n
            self.running.add(jid)               # its slot stays in the book until it ends
            self.started.append((now, jid, s.k, s.n, s.cost))
            out.append(Start(jid, s.k, s.n))
        return out

    # -- priorities ----------------------------------------------------------------------
    def _priorities(self, cj: list[CloudJob], slots: list[Slot | None] | None,
                    windows: list[float] | None) -> np.ndarray:
        """``Σ_j Δ(i|j) − Σ_j Δ(j|i)`` for every job of ``cj`` on the current book."""
        t0 = time.perf_counter()
        if slots is None:
            slots = [self._best(j, windows=windows) for j in cj]
        suffer, inflict = self._deltas(cj, slots, slots, windows)
        self.priority_ms.append((time.perf_counter() - t0) * 1e3)
        return suffer - inflict

    def _inflicted(self, cj: list[CloudJob], firsts: list[Slot | None]) -> np.ndarray:
        """``Σ_j Δ(j | i placed at firsts[i])`` for every ``i``."""
        slots = [self._best(j) for j in cj]
        return self._deltas(cj, firsts, slots, None)[1]

    def _deltas(self, cj: list[CloudJob], firsts: list[Slot | None],
                seconds: list[Slot | None], windows: list[float] | None
                ) -> tuple[np.ndarray, np.ndarray]:
        """``(suffer, inflict)``: ``suffer[j] = Σ_i Δ(j|i)`` and ``inflict[i] = Σ_j Δ(j|i)``
        where ``i`` is placed at ``firsts[i]`` and ``j``'s own best is ``seconds[j]``."""
        m = len(cj)
        suffer = np.zeros(m)
        inflict = np.zeros(m)
        if m < 2:
            return suffer, inflict
        fa = _arrays(firsts)
        sa = _arrays(seconds)
        room = np.array([self.book.headroom(s) if s is not None else -1 for s in seconds])
        base = np.array([self._cost(j, s) for j, s in zip(cj, seconds, strict=True)])
        for lo in range(0, m, _CHUNK):           # rows: the job placed first
            hi = min(m, lo + _CHUNK)
            hit = ((fa["k"][lo:hi, None] == sa["k"][None, :]) & (fa["k"][lo:hi, None] >= 0)
                   & (fa["s"][lo:hi, None] < sa["e"][None, :] - EPS)
                   & (fa["e"][lo:hi, None] > sa["s"][None, :] + EPS)
                   & (fa["n"][lo:hi, None] > room[None, :]))
            hit[np.arange(hi - lo), np.arange(lo, hi)] = False
            self.stats["pair_checks"] += (hi - lo) * m
            for a, b in zip(*np.nonzero(hit), strict=True):
                i, j = lo + int(a), int(b)
                self.stats["pair_replans"] += 1
                own = seconds[j]
                assert own is not None
                last = cj[j].deadline - (own.end - own.start)
                if windows is not None:
                    last = min(last, windows[own.k])
                if self.book.earliest(own.k, own.n, own.end - own.start, last,
                                      firsts[i]) is not None:
                    continue                     # same configuration, later start: Δ = 0
                moved = self._best(cj[j], windows=windows, extra=firsts[i], first=own.idx)
                d = self._cost(cj[j], moved) - base[j]
                if d > EPS:
                    suffer[j] += d
                    inflict[i] += d
        return suffer, inflict


def _arrays(slots: list[Slot | None]) -> dict[str, np.ndarray]:
    return {"k": np.array([s.k if s else -1 for s in slots]),
            "n": np.array([s.n if s else 0 for s in slots]),
            "s": np.array([s.start if s else 0.0 for s in slots]),
            "e": np.array([s.end if s else 0.0 for s in slots])}


def _order(score: np.ndarray, cj: list[CloudJob]) -> list[int]:
    """Highest score first; ties by deadline, arrival, id (deterministic)."""
    return sorted(range(len(cj)), key=lambda i: (-round(float(score[i]), 6), cj[i].deadline,
                                                 cj[i].arrival, cj[i].id))
