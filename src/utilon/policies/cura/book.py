"""The VM-aware scheduler's reservation book: who holds how many VMs of which pool, when.

Each pool's usage is a step function of time built from its intervals (running jobs until
their predicted end, reservations from start to end).  ``earliest`` finds the first start at
which ``n`` more VMs are free for ``d`` seconds, and ``best`` a job's *lowest-cost cluster
configuration that can meet its deadline given availability* (§3.1.2): configurations are
tried cheapest first, each at its earliest feasible start.  Cost does not depend on the start,
so the first configuration with a start early enough is the answer.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from utilon.cloud.model import CloudJob, ConfigTable

EPS = 1e-9


@dataclass(frozen=True)
class Slot:
    """A job's place in the book: ``n`` VMs of pool ``k`` over ``[start, end)``; ``idx`` is
    the configuration's row in the job's cost-ordered table."""

    job: str
    k: int
    n: int
    start: float
    end: float
    cost: float
    idx: int = 0


Profile = tuple[list[float], list[int]]


class Book:
    def __init__(self, pools: int) -> None:
        self.cap = [0] * pools
        self.slots: dict[str, Slot] = {}
        self._by_pool: list[dict[str, Slot]] = [{} for _ in range(pools)]
        self._prof: dict[int, Profile] = {}
        self.now = 0.0

    def set_now(self, now: float) -> None:
        if now != self.now:
            self.now = now
            self._prof.clear()

    def set_cap(self, cap: list[int]) -> None:
        self.cap = list(cap)

    def add(self, s: Slot) -> None:
        self.slots[s.job] = s
        self._by_pool[s.k][s.job] = s
        self._prof.pop(s.k, None)

    def remove(self, job: str) -> Slot | None:
        s = self.slots.pop(job, None)
        if s is not None:
            del self._by_pool[s.k][job]
            self._prof.pop(s.k, None)
        return s

    def profile(self, k: int) -> Profile:
        """``(T, U)``: usage ``U[i]`` on ``[T[i], T[i+1])``, ``T[0] = now``, 0 after the last."""
        got = self._prof.get(k)
        if got is None:
            got = self._prof[k] = _profile(self._by_pool[k].values(), self.now)
        return got

    def earliest(self, k: int, n: int, d: float, latest: float,
                 extra: Slot | None = None) -> float | None:
        """First start in ``[now, latest]`` with ``n`` VMs of pool ``k`` free for ``d``."""
        if n > self.cap[k] or latest < self.now - EPS:
            return None
        T, U = self.profile(k)
        if extra is not None and extra.k == k and extra.end > self.now:
            T, U = _with(T, U, extra)
        return _earliest(T, U, self.cap[k] - n, d, self.now, latest)

    def best(self, job: CloudJob, table: ConfigTable, *, windows: list[float] | None = None,
             pool: int | None = None, extra: Slot | None = None, first: int = 0
             ) -> Slot | None:
        """The cheapest configuration that meets ``job``'s deadline at its earliest start
        (within ``windows[k]`` when given, on ``pool`` only when given), trying rows from
        ``first`` on: filling the book never makes a cheaper configuration feasible, so a
        re-plan may start from the configuration a job had."""
        now, cap, rows = self.now - EPS, self.cap, table.rows
        for i in range(first, len(rows)):
            k, n, d, c = rows[i]
            last = job.deadline - d
            if last < now or n > cap[k] or (pool is not None and k != pool):
                continue
            if windows is not None and windows[k] < last:
                last = windows[k]
            s = self.earliest(k, n, d, last, extra)
            if s is not None:
                return Slot(job.id, k, n, s, s + d, c, i)
        return None

    def headroom(self, s: Slot) -> int:
        """VMs of ``s``'s pool still free throughout ``s`` (with ``s`` itself placed)."""
        T, U = self.profile(s.k)
        lo = max(0, bisect_right(T, s.start) - 1)
        hi = max(lo + 1, bisect_left(T, s.end))
        return self.cap[s.k] - s.n - max(U[lo:hi])


def _profile(slots: Iterable[Slot], now: float) -> Profile:
    delta: dict[float, int] = {}
    for s in slots:
        if s.end <= now + EPS:
            continue
        a = max(s.start, now)
        delta[a] = delta.get(a, 0) + s.n
        delta[s.end] = delta.get(s.end, 0) - s.n
    T = [now]
    U = [delta.pop(now, 0)]
    for t in sorted(delta):
        T.append(t)
        U.append(U[-1] + delta[t])
    return T, U


def _with(T: list[float], U: list[int], x: Slot) -> Profile:
    """The profile with one more interval ``x``."""
    T2, U2 = list(T), list(U)
    a = max(x.start, T[0])
    for t in (a, x.end):
        i = bisect_right(T2, t) - 1
        if T2[i] != t:
            T2.insert(i + 1, t)
            U2.insert(i + 1, U2[i])
    lo, hi = bisect_left(T2, a), bisect_left(T2, x.end)
    for i in range(lo, hi):
        U2[i] += x.n
    return T2, U2


def _earliest(T: list[float], U: list[int], room: int, d: float, now: float,
              latest: float) -> float | None:
    """Scan the step function for the first run of segments with usage <= room that starts
    by ``latest`` and lasts ``d`` (the last segment lasts for ever)."""
    if room < 0:
        return None
    start: float | None = None
    for t, u in zip(T, U, strict=True):
        if u <= room:
            if start is None:
                start = t if t > now else now
                if start > latest + EPS:
                    return None
        elif start is not None:
            if t - start >= d - EPS:
                return start
            start = None
    return start
