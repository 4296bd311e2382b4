"""A class-aware upper bound on the allocation problem: the LP relaxation over candidates.

Branch-and-bound (``bnb.py``) turns every job into *options*: its candidate requirement sets,
each with the floating demands (machine set, units) that meet it.  Relaxing "one option per
job" to fractions ``lam[j, o] >= 0`` with ``sum_o lam[j, o] <= 1`` and letting the demands'
units flow to the machines of their sets gives a small LP whose optimum bounds every
allocation -- and, unlike a count of free cores, it knows that a job wanting one of the 32-core
machines cannot be served by the 8-core ones::

    max  sum w_j u_o lam[j, o]
    s.t. sum_o lam[j, o] <= 1                                   (job j;  dual mu_j)
         sum_{j,o} a[o, S] size_j lam[j, o] <= sum_{m in S} f[S, m]    (set S;  dual sigma_S)
         sum_S f[S, m] <= free_m                                (machine m;  dual pi_m)

(a set of one machine charges its machine row directly; a non-laminar option, whose
requirements overlap without nesting, is relaxed to one demand: its largest requirement on
the union of its sets.)

**Prices, not the LP's value.**  The search needs a bound for every node, i.e. for any
capacity the path leaves and any placement of the path's options.  Weak duality gives one
from a single solve: for *any* prices ``pi >= 0``, set ``sigma_S = min_{m in S} pi_m`` and

    cost_o = sum over o's demands (S, a) of  a * size_j * min_{m in S} pi_m
    mu_j   = max(0, max_o (w_j u_o - cost_o))          (the job's best *reduced profit*)

then every allocation of jobs ``J`` into capacity ``c`` is worth at most
``pi . c + sum_{j in J} mu_j``: each job's option pays for its units at no less than
``cost_o`` and is worth at most ``mu_j + cost_o``.  Because ``mu`` is recomputed from ``pi``
here (never read off the solver), the bound is valid whatever the LP's numerical accuracy;
HiGHS's machine duals only make it tight (equal to the LP optimum at optimal duals).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import highspy
import numpy as np

from utilon.highs import new_highs

Demands = tuple[tuple[tuple[int, ...], int], ...]
INF = highspy.kHighsInf
SNAP = 2.0 ** 20
"""Prices are rounded to multiples of 1/SNAP (any prices are valid; round ones keep the
bound's sums free of LP noise, so a proven optimum is recognised as one)."""


@dataclass(frozen=True)
class JobOptions:
    """A job as the relaxation sees it: its weight, machine units per unit, and per option
    its utility and demands (laminar floating demands, or the relaxed one)."""

    weight: float
    size: int
    options: tuple[tuple[float, Demands], ...]


def relaxed_demands(raw: Demands, demands: Demands | None) -> Demands:
    """The demands an option charges: its floating demands if laminar, else its largest
    requirement on the union of its sets (the job needs at least that many units there)."""
    if demands is not None:
        return demands
    if not raw:
        return ()
    union = tuple(sorted({m for ms, _ in raw for m in ms}))
    return ((union, max(n for _, n in raw)),)


def lp_prices(capacity: np.ndarray, jobs: Sequence[JobOptions],
              time_limit: float = 10.0) -> np.ndarray:
    """Machine prices ``pi >= 0`` from the LP relaxation's duals (zeros if HiGHS fails)."""
    nm = len(capacity)
    sets: dict[tuple[int, ...], int] = {}
    for job in jobs:
        for u, dem in job.options:
            if u > 0:
                for ms, _ in dem:
                    if len(ms) > 1:
                        sets.setdefault(ms, len(sets))
    nj, ns = len(jobs), len(sets)
    # rows: jobs, then sets, then machines
    row_hi = np.concatenate((np.ones(nj), np.zeros(ns), np.asarray(capacity, dtype=float)))
    cost: list[float] = []
    starts: list[int] = []
    index: list[int] = []
    value: list[float] = []
    for j, job in enumerate(jobs):
        for u, dem in job.options:
            if u <= 0:
                continue
            entries: dict[int, float] = {j: 1.0}
            for ms, a in dem:
                r = nj + sets[ms] if len(ms) > 1 else nj + ns + ms[0]
                entries[r] = entries.get(r, 0.0) + float(a * job.size)
            _column(starts, index, value, entries)
            cost.append(job.weight * u)
    lam = len(cost)
    for ms, s in sets.items():
        for m in ms:
            _column(starts, index, value, {nj + s: -1.0, nj + ns + m: 1.0})
            cost.append(0.0)
    if lam == 0:
        return np.zeros(nm)
    h = new_highs()
    h.setOptionValue("time_limit", max(float(time_limit), 0.01))
    nr = len(row_hi)
    h.addRows(nr, np.full(nr, -INF), row_hi, 0, np.zeros(0, dtype=np.int32),
              np.zeros(0, dtype=np.int32), np.zeros(0))
    nc = len(cost)
    upper = np.concatenate((np.ones(lam), np.full(nc - lam, INF)))
    h.addCols(nc, np.asarray(cost), np.zeros(nc), upper, len(index),
              np.asarray(starts, dtype=np.int32), np.asarray(index, dtype=np.int32),
              np.asarray(value))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return np.zeros(nm)
    duals = np.asarray(h.getSolution().row_dual)[nj + ns:]
    return np.round(np.clip(duals, 0.0, None) * SNAP) / SNAP


def _column(starts: list[int], index: list[int], value: list[float],
            entries: dict[int, float]) -> None:
    starts.append(len(index))
    for r in sorted(entries):
        index.append(r)
        value.append(entries[r])


def option_cost(prices: np.ndarray, demands: Demands, size: int) -> float:
    """What an option's demands pay at ``prices`` (each unit at its set's cheapest price)."""
    return sum(a * size * float(prices[np.asarray(ms, dtype=np.intp)].min())
               for ms, a in demands)
