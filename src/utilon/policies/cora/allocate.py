"""The allocation CORA returns once every deadline is final (section 5 of ``exact``'s
docstring): each slot is filled in EDF order, every job taking as much as it can while the
remaining deadlines stay feasible, so slot 0 — the one a policy applies — is work-conserving.

Two exact shortcuts keep this cheap on long plans (a full SWIM day re-solves ~50,000 times):
a slot where every job can take all it can (min(p, rem)) needs no greedy, and once every live
job can run at its full rate to its end — within its deadline and the capacity of every slot —
the rest of the plan is written in closed form (the greedy would take exactly that, slot after
slot).  Both are tested against the plain greedy on random instances.
"""

from __future__ import annotations

import numpy as np

from utilon.policies.cora.feasibility import Resource, violation


def _edf_order(dl: np.ndarray, jobs: np.ndarray) -> np.ndarray:
    return jobs[np.lexsort((jobs, dl[jobs]))]


def _alloc_uncapped(res: Resource, dl: np.ndarray, out: np.ndarray) -> None:
    """Plain EDF from the front: job k occupies [W_{k-1}, W_k) of the cumulative work line."""
    order = _edf_order(dl, res.jobs)
    if order.size == 0:
        return
    w_hi = np.cumsum(res.dem_all[order])
    w_lo = w_hi - res.dem_all[order]
    c_hi = res.cum
    c_lo = c_hi - res.cap_t
    x = np.minimum(w_hi[:, None], c_hi[None, :]) - np.maximum(w_lo[:, None], c_lo[None, :])
    out[order] = np.maximum(0.0, x).round().astype(np.int64)


def _alloc_capped(res: Resource, dl: np.ndarray, out: np.ndarray) -> None:
    """Slot by slot, EDF order, each job as much as it can while the rest stays feasible."""
    jobs = res.jobs
    rem = res.dem.copy()
    d = dl[jobs]
    for s in range(res.t_n):
        live = np.flatnonzero(rem > 0)
        if live.size == 0:
            break
        if _rest_at_full_rate(rem[live], res.p[live], d[live] - s, res.cap_t[s:],
                              out, jobs[live], s):
            rem[live] = 0.0
            break
        order = live[np.lexsort((jobs[live], d[live]))]
        tail = res.cap_t[s + 1:]
        if bool((np.diff(tail) >= 0).all()):
            amounts = _fill_slot_prefix(rem[order], res.p[order], d[order] - s - 1,
                                        float(res.cap_t[s]), tail)
        else:
            amounts = _fill_slot_general(rem[order], res.p[order], d[order] - s - 1,
                                         float(res.cap_t[s]), tail)
        rem[order] -= amounts
        out[jobs[order], s] = amounts.round().astype(np.int64)
    if (rem > 0).any():  # pragma: no cover - guaranteed by feasibility of the deadlines
        raise RuntimeError("capped allocation left demand unserved")


def _rest_at_full_rate(rem: np.ndarray, p: np.ndarray, dleft: np.ndarray, cap: np.ndarray,
                       out: np.ndarray, rows: np.ndarray, s: int) -> bool:
    """If every live job can run at its full rate p from slot ``s`` on — each meets its
    deadline (``dleft`` slots after this one) and no slot is over capacity — write that
    schedule into ``out`` and say so.  It is what the slot-by-slot greedy gives then: at each
    slot every job taking all it can (min(p, rem)) is feasible, so the greedy takes exactly
    that (``_fill_slot_prefix``'s shortcut), slot after slot.  Most plans end like this, and
    the greedy's slots were most of CORA's time on a full day."""
    if bool((p <= 0).any()):
        return False
    k = np.ceil(rem / p - 1e-9).astype(np.int64)  # slots each job needs at full rate
    if bool((k - 1 > dleft).any()) or int(k.max()) > cap.shape[0]:
        return False
    last = rem - p * (k - 1)  # the last slot's (partial) amount
    t_n = cap.shape[0]
    use = (np.bincount(k - 1, weights=-p + last, minlength=t_n + 1)[:t_n]
           + np.cumsum(np.bincount(np.zeros_like(k), weights=p, minlength=t_n + 1)[:t_n]
                       - np.bincount(k, weights=p, minlength=t_n + 1)[:t_n]))
    if bool((use > cap).any()):
        return False
    for row, ki, pi, li in zip(rows, k, p, last, strict=True):
        out[row, s:s + ki - 1] = round(pi)
        out[row, s + ki - 1] = round(li)
    return True


def _fill_slot_prefix(rem: np.ndarray, p: np.ndarray, dres: np.ndarray, cap_s: float,
                      tail: np.ndarray) -> np.ndarray:
    """One slot's EDF-greedy amounts (jobs already in EDF order) when the later capacities
    are non-decreasing, in closed form.

    With need_j(m) = rem_j - p_j max(0, dres_j + 1 - m), what job j must do in this slot and
    the next m, the remaining deadlines stay feasible after amounts a_j iff (Lemma B on the
    remaining slots, with this slot in Q)  sum_j max(a_j, need_j(m)) <= cap_s + C(next m)
    for every m, undecided jobs counting with a_j = 0.  Raising a_i from 0 to a costs
    max(a, need_i(m)) - max(0, need_i(m)) at m, so the largest amount is
    min(min(p_i, rem_i), min_m (room_m + max(0, need_i(m)))).
    """
    ms = np.arange(tail.shape[0] + 1)
    need = rem[:, None] - p[:, None] * np.maximum(0, dres[:, None] + 1 - ms[None, :])
    npos = np.maximum(0.0, need)
    cap = cap_s + np.concatenate(([0.0], np.cumsum(tail)))
    want = np.minimum(p, rem)
    # Every job taking all it can is feasible: then that is what the greedy below gives (each
    # job's maximum, given the others at theirs, is ``want``), without its loop.  Most slots
    # of a lightly loaded plan are like this.
    if bool((np.maximum(want[:, None], npos).sum(axis=0) <= cap).all()):
        return want
    room = cap - npos.sum(axis=0)
    amounts = npos[:, 0].copy()  # forced amounts; what the loop below does not raise
    for i in range(rem.shape[0]):
        if room[0] <= 0:
            break  # the slot is full: the others keep their forced amounts
        a = min(float(want[i]), float((room + npos[i]).min()))
        if a > amounts[i]:
            room -= np.maximum(a, need[i]) - npos[i]
            amounts[i] = a
    return amounts


def _fill_slot_general(rem: np.ndarray, p: np.ndarray, dres: np.ndarray, cap_s: float,
                       tail: np.ndarray) -> np.ndarray:
    """``_fill_slot_prefix`` for arbitrary later capacities: the same greedy, each maximum
    found by bisection on Lemma A's DP (the test is monotone in the amount and in the
    length of an EDF prefix that takes its maxima)."""
    n = rem.shape[0]

    def case_a(amounts: np.ndarray, upto: int, slot_left: float) -> bool:
        dem = rem.copy()
        dem[:upto] -= amounts[:upto]
        return violation(dem, p, dres, tail, False) <= slot_left

    amounts = np.zeros(n)
    left = cap_s
    pos = 0
    while pos < n and left > 0:
        want = np.minimum(p[pos:], rem[pos:])
        take = np.minimum(want, np.maximum(0.0, left - np.concatenate(
            ([0.0], np.cumsum(want)[:-1]))))
        lo, hi = 0, n - pos
        while lo < hi:  # longest EDF prefix that can all take their maximum
            mid = (lo + hi + 1) // 2
            amounts[pos:pos + mid] = take[:mid]
            if case_a(amounts, pos + mid, left - float(take[:mid].sum())):
                lo = mid
            else:
                hi = mid - 1
        amounts[pos:pos + lo] = take[:lo]
        amounts[pos + lo:] = 0.0
        left -= float(take[:lo].sum())
        pos += lo
        if pos >= n or left <= 0:
            break
        a_lo, a_hi = 0, max(0, int(take[lo]) - 1)  # its largest feasible amount (0 is)
        while a_lo < a_hi:
            mid = (a_lo + a_hi + 1) // 2
            amounts[pos] = mid
            if case_a(amounts, pos + 1, left - mid):
                a_lo = mid
            else:
                a_hi = mid - 1
        amounts[pos] = a_lo
        left -= a_lo
        pos += 1
    return amounts


def allocate(resources: list[Resource], n: int, t_n: int, dl: np.ndarray) -> np.ndarray:
    """An integral allocation x[i, r, t] meeting the final deadlines ``dl`` (section 5)."""
    alloc = np.zeros((n, len(resources), t_n), dtype=np.int64)
    for r, res in enumerate(resources):
        out = np.zeros((n, t_n), dtype=np.int64)
        if res.capped:
            _alloc_capped(res, dl, out)
        else:
            _alloc_uncapped(res, dl, out)
        alloc[:, r, :] = out
    return alloc
