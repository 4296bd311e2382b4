"""Exact branch-and-bound over minimal requirement sets, built on monotonicity (§4: "the
composed result has the monotonicity property.  This allows us to use branch and bound").

**Candidates.**  Every node's utility is a monotone step function of the integer vector
``D`` (units per class), so it equals ``max{u_c : D >= req_c}`` over a finite set of
*candidates* ``(req_c, u_c)``, ``req_c`` a map class -> minimum units.  ``candidates``
builds the set bottom-up: ``nck`` -> ``{}`` (utility 0) and ``{cls: k}`` (``u``); ``lnck``
-> one per integer count ``0..ceil(k)``; ``scale`` multiplies; ``barrier`` keeps the
candidates reaching its level (worth the level) plus ``{}`` (0); ``max`` is the union;
``sum`` / ``min`` the cross product, requirements merged by per-class max, utilities summed /
min'd.  By induction each set is exact (for ``sum``: the best candidates of the operands
below ``D`` merge into one below ``D`` worth the sum, and no merged one is worth more).
Counts beyond a class's capacity or the job's ``limit`` can never be met and are dropped at
the leaves, and dominated candidates (another one needs no more anywhere and is worth as
much) are pruned.  More than ``CAP`` candidates at a node raise ``UtilonError`` (use
``milp`` or ``greedy`` for such expressions).

**Feasibility** of one chosen candidate per job.  If a candidate's classes form a laminar
family (any two nested or disjoint; equal sets are merged), it becomes *floating demands*:
class ``c`` needs ``need(c) = max(req(c), sum of need(children))`` units, of which
``need(c) - sum need(children)`` may sit on any machine of ``c``.  A job meets its
requirements iff its floating demands can be placed (bottom-up, each class takes what its
subtree needs from units inside it, and ``need(c)`` units are always there), so a set of
candidates is feasible iff a transportation problem demands -> machines is, which a max-flow
decides exactly (``scipy.sparse.csgraph.maximum_flow``, integer capacities); the job's units
are ``sum need(roots)``, checked against its limit.  A non-laminar candidate (overlapping
classes neither nested nor disjoint) makes the check a small HiGHS feasibility MILP over
``X[job, machine]`` with one row per requirement, machine and limit -- exact but slower.
Before either, a greedy placement into the capacity left by the path (least-free machines
first, to keep big machines whole) proves most feasible candidates in microseconds, and a
cache of failed demands (valid while the path prefix it failed under is unchanged) skips
repeats: adding demands never makes an infeasible set feasible.

**Search.**  Jobs by ``weight * upper`` descending; depth-first over each job's candidates in
descending utility (ties: fewer units).  The first incumbent is greedy's allocation (as an
option per job: the best one its units meet), improved by greedy on up to ``RESTARTS``
slightly perturbed job orders (seeded) until it meets the root bound.  A node's bound is the
smaller of two, both valid for any placement of the path's options:

* *cores*: its value plus a fractional-knapsack bound of the remaining jobs: job ``j`` with
  ``x_j`` units is worth at most ``weight_j * min(upper_j, ratio_j * x_j)`` (``ratio_j`` its
  best utility per unit over its candidates) and ``sum x_j`` is at most the free units the
  path has not claimed;
* *machines* (``relax.py``): the LP relaxation over the options, with each option's units
  flowing only to its classes' machines, is solved once at the root; at its machine prices
  every option has a reduced profit (utility minus what its demands pay at the cheapest
  price of each set) and a subtree is worth at most the path's reduced profits plus the
  prices times the capacity plus the best reduced profits of the remaining jobs (weak
  duality).  This is the bound that knows a job wanting a 32-core machine cannot use the
  8-core ones.

Exactness: the best allocation meets, per job, the candidate its utility comes from; that set
is feasible and the search only prunes subtrees whose bound cannot beat the incumbent.

``time_limit`` / ``node_limit`` stop the search with status ``time_limit``: the incumbent
and, as ``bound``, the largest bound of the subtrees not yet explored.  The chosen candidates
become a machine allocation through one final flow (or MILP), which is then trimmed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow

from utilon.errors import UtilonError
from utilon.highs import new_highs
from utilon.policies.alsched.lang.ast import (
    TOL,
    Barrier,
    LnCk,
    Max,
    Min,
    NCk,
    Node,
    Scale,
    Sum,
    num_value,
)
from utilon.policies.alsched.solvers.greedy import job_order, solve_greedy
from utilon.policies.alsched.solvers.problem import Problem, Request, Solution, make_solution
from utilon.policies.alsched.solvers.relax import (
    JobOptions,
    lp_prices,
    option_cost,
    relaxed_demands,
)
from utilon.policies.alsched.solvers.trim import trim

CAP = 5000
"""Most candidates a node may have (after pruning)."""
RAW_CAP = 50_000
"""Most combinations a ``sum`` / ``min`` may form before pruning."""
EPS = 1e-9
RESTARTS = 256
"""Most perturbed greedy runs tried for the first incumbent (``_incumbent``)."""
RESTART_SHARE = 0.25
"""Share of the time limit they may take."""
NOISE = (0.01, 0.02, 0.05, 0.1)
"""Standard deviations of the perturbations of greedy's order, as shares of its length."""

Req = tuple[tuple[str, int], ...]
Cand = tuple[Req, float]


class TooLarge(UtilonError):
    """An expression has too many candidates for branch-and-bound."""


# -- candidates ----------------------------------------------------------------------------------
def candidates(node: Node, room: Mapping[str, int]) -> list[Cand]:
    """The pruned candidate set of ``node``; ``room[c]``: the most units class ``c`` can
    ever give (its capacity, capped by the job's limit)."""
    t = type(node)
    if t is NCk or t is LnCk:
        assert isinstance(node, (NCk, LnCk))
        return _prim_candidates(node, room[node.cls])
    if t is Scale:
        assert isinstance(node, Scale)
        return [(r, node.factor * u) for r, u in candidates(node.arg, room)]
    if t is Barrier:
        assert isinstance(node, Barrier)
        level = num_value(node.level)
        kept = [(r, level) for r, u in candidates(node.arg, room) if u >= level - TOL]
        return _prune([*kept, ((), 0.0)])
    if t is Max:
        return _prune([c for a in node.children for c in candidates(a, room)])
    assert t is Sum or t is Min
    combine = sum if t is Sum else min
    acc = candidates(node.children[0], room)
    for a in node.children[1:]:
        other = candidates(a, room)
        if len(acc) * len(other) > RAW_CAP:
            raise _too_large(len(acc) * len(other))
        acc = _prune([(_merge(r1, r2), combine((u1, u2)))
                      for (r1, u1), (r2, u2) in product(acc, other)])
    return acc


def _too_large(n: int) -> TooLarge:
    return TooLarge(f"the expression is too large for branch-and-bound ({n} candidate "
                    f"requirement sets, at most {CAP}); use solver milp or greedy")


def _prim_candidates(node: NCk | LnCk, room: int) -> list[Cand]:
    k, u = num_value(node.k), num_value(node.u)
    if k <= 0 or u <= 0:
        return [((), max(u, 0.0) if k <= 0 else 0.0)]
    need = math.ceil(k - TOL)
    if type(node) is NCk:
        full: list[Cand] = [(((node.cls, need),), u)] if need <= room else []
        return [((), 0.0), *full]
    top = min(need, room)
    return [((), 0.0)] + [(((node.cls, n),), u * min(n / k, 1.0)) for n in range(1, top + 1)]


def _merge(a: Req, b: Req) -> Req:
    if not a:
        return b
    if not b:
        return a
    d = dict(a)
    for c, n in b:
        if n > d.get(c, 0):
            d[c] = n
    return tuple(sorted(d.items()))


def _prune(cands: Sequence[Cand]) -> list[Cand]:
    """Drop duplicates and dominated candidates; best utility first (ties: fewer units)."""
    best: dict[Req, float] = {}
    for r, u in cands:
        if u > best.get(r, -1.0):
            best[r] = u
    items = sorted(best.items(), key=lambda it: (-it[1], sum(n for _, n in it[0]), it[0]))
    names = sorted({c for r, _ in items for c, _ in r})
    col = {c: i for i, c in enumerate(names)}
    mat = np.zeros((len(items), len(names)), dtype=np.int64)
    for i, (r, _) in enumerate(items):
        for c, n in r:
            mat[i, col[c]] = n
    kept: list[int] = []
    km = np.empty_like(mat)  # the kept rows, in order
    for i in range(len(items)):  # earlier items are worth at least as much
        if kept and bool(np.any(np.all(km[:len(kept)] <= mat[i], axis=1))):
            continue
        km[len(kept)] = mat[i]
        kept.append(i)
        if len(kept) > CAP:
            raise _too_large(len(kept))
    return [items[i] for i in kept]


# -- demands -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Option:
    """A candidate of a job, ready for the search: ``raw`` its requirements as (machines,
    units); ``demands`` its floating demands bottom-up if laminar, else ``None``; ``units``
    the units it needs (a lower bound if not laminar)."""

    utility: float
    raw: tuple[tuple[tuple[int, ...], int], ...]
    demands: tuple[tuple[tuple[int, ...], int], ...] | None
    units: int
    key: tuple[tuple[tuple[int, ...], int], ...] = field(default=())


def make_option(r: Request, req: Req, u: float) -> Option:
    sets: dict[tuple[int, ...], int] = {}
    for cls, n in req:  # equal machine sets: one requirement, the larger
        ms = tuple(sorted(set(r.classes[cls])))
        sets[ms] = max(sets.get(ms, 0), n)
    raw = tuple(sorted(sets.items(), key=lambda it: (len(it[0]), it[0])))
    demands = _floating(raw)
    units = sum(d for _, d in demands) if demands is not None else max(
        (n for _, n in raw), default=0)
    return Option(u, raw, demands, units, tuple(sorted(raw)))


def _floating(raw: Sequence[tuple[tuple[int, ...], int]]) -> tuple[
        tuple[tuple[int, ...], int], ...] | None:
    """Floating demands of a laminar family (``raw`` sorted by set size), else ``None``."""
    sets = [frozenset(ms) for ms, _ in raw]
    parent: list[int | None] = []
    for i, s in enumerate(sets):
        par = None
        for j in range(i + 1, len(sets)):
            t = sets[j]
            if s <= t:
                par = j
                break
            if s & t:
                return None  # overlapping, neither nested nor disjoint
        parent.append(par)
    for i, s in enumerate(sets):  # a later (larger) set must not cut an earlier one either
        for j in range(i):
            if sets[j] & s and not sets[j] <= s:
                return None
    need = [n for _, n in raw]
    inner = [0] * len(raw)
    for i in range(len(raw)):  # children come first (smaller sets)
        need[i] = max(need[i], inner[i])
        p = parent[i]
        if p is not None:
            inner[p] += need[i]
    return tuple((ms, need[i] - inner[i]) for i, (ms, _) in enumerate(raw)
                 if need[i] - inner[i] > 0)


def job_options(r: Request, capacity: Sequence[int]) -> list[Option]:
    """The job's candidates as options, best utility first, infeasible-alone ones dropped."""
    held = [c // r.size for c in capacity]  # the job's units each machine can hold
    limit = r.limit if r.limit is not None else sum(held)
    room = {c: min(sum(held[m] for m in set(ms)), limit) for c, ms in r.classes.items()}
    out = []
    for req, u in candidates(r.expr, room):
        if u <= 0 and req:
            continue
        o = make_option(r, req, u)
        if o.units > limit or any(n > sum(held[m] for m in ms) for ms, n in o.raw):
            continue
        out.append(o)
    out.sort(key=lambda o: (-o.utility, o.units))
    if not any(not o.raw for o in out):
        out.append(make_option(r, (), 0.0))
    return out


# -- feasibility ---------------------------------------------------------------------------------
def place_greedy(o: Option, free: np.ndarray, limit: int | None,
                 size: int = 1) -> np.ndarray | None:
    """Place ``o`` into ``free`` (least-free machines first); the job's units per machine
    (each takes ``size`` machine units) or None."""
    x = np.zeros_like(free)
    left = free.copy()
    for ms, n in (o.demands if o.demands is not None else o.raw):
        idx = np.asarray(ms, dtype=np.intp)
        want = n if o.demands is not None else n - int(x[idx].sum())
        if want <= 0:
            continue
        avail = left[idx] // size
        if int(avail.sum()) < want:
            return None
        order = np.argsort(np.where(avail > 0, avail, np.iinfo(np.int64).max), kind="stable")
        got = np.minimum(avail[order], np.maximum(want - np.concatenate(
            ([0], np.cumsum(avail[order])[:-1])), 0))
        x[idx[order]] += got
        left[idx[order]] -= got * size
    if limit is not None and int(x.sum()) > limit:
        return None
    return x


def flow_alloc(chosen: Sequence[tuple[int, Option]], capacity: np.ndarray, jobs: int,
               split: bool = True) -> np.ndarray | None:
    """Units per (job, machine) meeting every (laminar) option, by max-flow; None if none.

    Floating demands on the same machine set are interchangeable, so the network has one
    node per distinct set (their amounts summed) and its flow is split among the jobs
    afterwards; with ``split=False`` only row 0 is filled, with the units used per machine
    (all the search needs)."""
    groups: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for j, o in chosen:
        for ms, d in o.demands or ():
            groups.setdefault(ms, []).append((j, d))
    nm = len(capacity)
    out = np.zeros((jobs if split else 1, nm), dtype=np.int64)
    if not groups:
        return out
    sets = list(groups)
    amounts = [sum(d for _, d in groups[ms]) for ms in sets]
    nd = len(sets)
    sink = nd + nm + 1
    heads = [np.asarray(ms, dtype=np.int64) for ms in sets]
    rows = np.concatenate([np.zeros(nd, np.int64)]
                          + [np.full(len(h), 1 + i) for i, h in enumerate(heads)]
                          + [np.arange(1 + nd, 1 + nd + nm)])
    cols = np.concatenate([np.arange(1, nd + 1)] + [1 + nd + h for h in heads]
                          + [np.full(nm, sink)])
    data = np.concatenate([np.asarray(amounts)]
                          + [np.full(len(h), a) for h, a in zip(heads, amounts, strict=True)]
                          + [np.asarray(capacity)]).astype(np.int32)
    g = sp.csr_matrix((data, (rows, cols)), shape=(sink + 1,) * 2)
    res = maximum_flow(g, 0, sink)
    if res.flow_value < sum(amounts):
        return None
    f = res.flow.tocsr()[1:nd + 1, 1 + nd:1 + nd + nm].toarray().clip(min=0)
    if not split:
        out[0] = f.sum(axis=0)
        return out
    for i, ms in enumerate(sets):  # each job draws its amount from the group's flow
        row = f[i]
        for j, d in groups[ms]:
            before = np.cumsum(row) - row
            take = np.minimum(row, np.maximum(d - before, 0))
            row = row - take
            out[j] += take
    return out


def milp_alloc(chosen: Sequence[tuple[int, Option]], capacity: np.ndarray, jobs: int,
               limits: Sequence[int | None], time_limit: float,
               sizes: Sequence[int] | None = None) -> np.ndarray | None:
    """Units per (job, machine) meeting every option's raw requirements, by a HiGHS
    feasibility MILP (job ``j``'s unit takes ``sizes[j]`` machine units); None if infeasible.
    Raises ``_Timeout`` if HiGHS runs out of time."""
    size = list(sizes) if sizes is not None else [1] * jobs
    out = np.zeros((jobs, len(capacity)), dtype=np.int64)
    cols: list[tuple[int, int]] = []
    for j, o in chosen:
        for m in sorted({m for ms, _ in o.raw for m in ms}):
            cols.append((j, m))
    if not cols:
        return out
    h = new_highs()
    h.setOptionValue("time_limit", max(time_limit, 0.01))
    n = len(cols)
    h.addVars(n, np.zeros(n), np.asarray([float(capacity[m] // size[j]) for j, m in cols]))
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32),
                            np.full(n, highspy.HighsVarType.kInteger))
    inf = highspy.kHighsInf
    where = {c: i for i, c in enumerate(cols)}

    def row(lo: float, hi: float, idx: list[int], coef: list[float] | None = None) -> None:
        if idx:
            h.addRow(lo, hi, len(idx), np.asarray(idx, dtype=np.int32),
                     np.asarray(coef) if coef is not None else np.ones(len(idx)))

    for j, o in chosen:
        for ms, k in o.raw:
            row(k, inf, [where[(j, m)] for m in ms])
        if limits[j] is not None:
            row(-inf, float(limits[j] or 0), [i for i, (jj, _) in enumerate(cols) if jj == j])
    for m in range(len(capacity)):
        on = [i for i, (_, mm) in enumerate(cols) if mm == m]
        row(-inf, float(capacity[m]), on, [float(size[cols[i][0]]) for i in on])
    h.run()
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return None
    if status != highspy.HighsModelStatus.kOptimal:
        raise _Timeout
    vals = np.asarray(h.getSolution().col_value)
    for i, (j, m) in enumerate(cols):
        out[j, m] += round(vals[i])
    return out


class _Timeout(Exception):
    pass


# -- search --------------------------------------------------------------------------------------
class _Knapsack:
    """Fractional-knapsack bounds of every suffix of the job order (precomputed)."""

    def __init__(self, value: np.ndarray, units: np.ndarray) -> None:
        ratio = np.divide(value, units, out=np.full(len(value), np.inf), where=units > 0)
        order = np.argsort(-ratio, kind="stable")
        n = len(value)
        self.ratio = ratio[order]
        self.cum_u: list[np.ndarray] = []
        self.cum_v: list[np.ndarray] = []
        self.plain = np.concatenate((np.cumsum(value[::-1])[::-1], [0.0]))
        for d in range(n + 1):
            keep = order >= d  # jobs d.. of the search order, in ratio order
            u = np.where(keep, units[order], 0)
            v = np.where(keep, value[order], 0.0)
            self.cum_u.append(np.concatenate(([0], np.cumsum(u))))
            self.cum_v.append(np.concatenate(([0.0], np.cumsum(v))))

    def bound(self, d: int, free: int) -> float:
        if free < 0:
            return -math.inf
        cu, cv = self.cum_u[d], self.cum_v[d]
        i = int(np.searchsorted(cu, free, side="right")) - 1
        if i >= len(self.ratio):
            return float(cv[-1])
        return float(cv[i] + self.ratio[i] * (free - cu[i]))


@dataclass
class _Frame:
    depth: int
    value: float
    free_units: int
    free: np.ndarray
    stamp: int
    reduced: float = 0.0  # the path's reduced profits at the LP prices (``relax.py``)
    next: int = 0


@dataclass(frozen=True)
class _Duals:
    """The LP-price bound (``relax.py``): ``reduced[d][k]`` option ``k`` of depth ``d``'s
    reduced profit, ``mu[d]`` the sum of the best ones of depths ``d..``, ``base`` the
    prices times the capacity.  A subtree below a path is worth at most
    ``sum of the path's reduced profits + base + mu[depth]``."""

    reduced: list[list[float]]
    mu: np.ndarray
    base: float


@dataclass
class _Search:
    problem: Problem
    order: list[int]
    options: list[list[Option]]
    knap: _Knapsack
    duals: _Duals
    capacity: np.ndarray
    deadline: float
    node_limit: int | None
    laminar_only: bool
    incumbent: float = 0.0
    best_path: list[int] = field(default_factory=list)
    nodes: int = 0
    stamps: list[int] = field(default_factory=list)
    failed: dict[tuple[object, ...], list[tuple[int, int, tuple[int, ...]]]] = field(
        default_factory=dict)
    counter: int = 0

    def weight(self, d: int) -> float:
        return self.problem.requests[self.order[d]].weight

    def size(self, d: int) -> int:
        return self.problem.requests[self.order[d]].size

    def option_bound(self, f: _Frame, k: int) -> float:
        """Bound of the subtree where depth ``f.depth`` takes its option ``k``: the smaller
        of the core-count knapsack and the LP-price bounds."""
        d, o = f.depth, self.options[f.depth][k]
        knap = (f.value + self.weight(d) * o.utility
                + self.knap.bound(d + 1, f.free_units - o.units * self.size(d)))
        lp = f.reduced + self.duals.reduced[d][k] + self.duals.base + self.duals.mu[d + 1]
        return min(knap, lp)

    def run(self, incumbent: float = 0.0, path: list[int] | None = None) -> tuple[float, bool]:
        """Search from an incumbent (``path``: an option per depth worth ``incumbent``);
        returns (bound, finished).  ``stack[d]`` is the frame of depth ``d``; the option it
        is exploring is ``stack[d].next - 1``."""
        n = len(self.order)
        self.stamps = [0] * (n + 1)
        stack = [self._frame(0, 0.0, int(self.capacity.sum()), self.capacity, 0.0)]
        self.incumbent = incumbent
        self.best_path = list(path) if path is not None else [
            len(self.options[d]) - 1 for d in range(n)]
        try:
            while stack:
                f = stack[-1]
                if f.depth == n or f.next >= len(self.options[f.depth]):
                    stack.pop()
                    continue
                self._check_limits()
                k = f.next
                o = self.options[f.depth][k]
                f.next += 1
                if self.option_bound(f, k) <= self.incumbent + EPS:
                    continue
                free = self._feasible(stack, o)
                if free is None:
                    continue
                self.nodes += 1
                value = f.value + self.weight(f.depth) * o.utility
                if f.depth + 1 == n:
                    self.incumbent, self.best_path = value, [g.next - 1 for g in stack]
                    continue
                stack.append(self._frame(f.depth + 1, value,
                                         f.free_units - o.units * self.size(f.depth), free,
                                         f.reduced + self.duals.reduced[f.depth][k]))
        except _Timeout:
            return self._open_bound(stack), False
        return self.incumbent, True

    def _open_bound(self, stack: list[_Frame]) -> float:
        """The largest bound of the subtrees not yet explored: the untried options of every
        frame (and, at the deepest frame, the option being checked when time ran out)."""
        bound = self.incumbent
        for f in stack:
            first = f.next - 1 if f is stack[-1] else f.next
            for k in range(max(first, 0), len(self.options[f.depth])):
                bound = max(bound, self.option_bound(f, k))
        return bound

    def _frame(self, depth: int, value: float, free_units: int, free: np.ndarray,
               reduced: float) -> _Frame:
        self.counter += 1
        self.stamps[depth] = self.counter
        return _Frame(depth, value, free_units, free, self.counter, reduced)

    def _check_limits(self) -> None:
        if time.perf_counter() > self.deadline or (
                self.node_limit is not None and self.nodes >= self.node_limit):
            raise _Timeout

    def _feasible(self, stack: list[_Frame], o: Option) -> np.ndarray | None:
        """The free capacity after adding ``o`` to the path at the deepest frame, or None."""
        f = stack[-1]
        if not o.raw:
            return f.free
        r = self.problem.requests[self.order[f.depth]]
        x = place_greedy(o, f.free, r.limit, r.size)
        if x is not None:
            return f.free - x * r.size
        sig = (r.limit, *(ms for ms, _ in o.key))
        if self._known_failure(f, sig, o):
            return None
        chosen = [(d, self.options[d][stack[d].next - 1]) for d in range(f.depth)]
        chosen.append((f.depth, o))
        alloc = self.allocate(chosen, time_left=self.deadline - time.perf_counter(),
                              split=False)
        if alloc is None:
            self._record_failure(f, sig, o)
            return None
        if len(alloc) == 1:  # the flow's summed row (unit sizes) or a single job
            return self.capacity - alloc[0] * self.size(0)
        sizes = np.asarray([self.size(d) for d in range(len(alloc))], dtype=np.int64)
        return self.capacity - sizes @ alloc

    def allocate(self, chosen: Sequence[tuple[int, Option]], time_left: float,
                 split: bool = True) -> np.ndarray | None:
        """Units per (search depth, machine) for ``chosen``, exactly; None if infeasible.
        (``split=False``: only the units used per machine matter, see ``flow_alloc``.)"""
        n = len(self.order)
        sizes = [self.size(d) for d in range(n)]
        unit = all(sizes[d] == 1 for d, _ in chosen)  # the flow counts machine units
        if unit and (self.laminar_only or all(o.demands is not None for _, o in chosen)):
            return flow_alloc(chosen, self.capacity, n, split)
        limits = [self.problem.requests[i].limit for i in self.order]
        return milp_alloc(chosen, self.capacity, n, limits, time_left, sizes)

    def _known_failure(self, f: _Frame, sig: tuple[object, ...], o: Option) -> bool:
        """Did ``o``'s demands, or smaller ones on the same classes, fail under a prefix of
        the current path?  (More demands never make an infeasible set feasible.)"""
        amounts = tuple(n for _, n in o.key)
        live = [e for e in self.failed.get(sig, [])
                if e[0] <= f.depth and self.stamps[e[0]] == e[1]]
        self.failed[sig] = live
        return any(all(a <= b for a, b in zip(e[2], amounts, strict=True)) for e in live)

    def _record_failure(self, f: _Frame, sig: tuple[object, ...], o: Option) -> None:
        self.failed.setdefault(sig, []).append((f.depth, f.stamp, tuple(n for _, n in o.key)))


def solve_bnb(problem: Problem, *, time_limit: float = 10.0,
              node_limit: int | None = None) -> Solution:
    """The best allocation by branch-and-bound (see the module docstring)."""
    start = time.perf_counter()
    options = {i: job_options(r, problem.capacity) for i, r in enumerate(problem.requests)}
    useful = [i for i in options if options[i][0].utility > 0]
    order = sorted(useful, key=lambda i: (-problem.requests[i].weight * options[i][0].utility,
                                          i))
    opts = [options[i] for i in order]
    value = np.asarray([problem.requests[i].weight * options[i][0].utility for i in order])
    units = np.asarray([_best_units(options[i]) * problem.requests[i].size for i in order],
                       dtype=float)
    knap = _Knapsack(value, units)
    capacity = np.asarray(problem.capacity, dtype=np.int64)
    reqs = [problem.requests[i] for i in order]
    duals = _lp_duals(reqs, opts, capacity, time_limit)
    search = _Search(problem, order, opts, knap, duals, capacity, start + time_limit,
                     node_limit,
                     laminar_only=all(o.demands is not None for os in opts for o in os))
    root = min(knap.bound(0, int(capacity.sum())), duals.base + float(duals.mu[0]))
    incumbent, path = _incumbent(problem, reqs, opts, root, start + time_limit * RESTART_SHARE)
    bound, finished = search.run(incumbent, path)
    chosen = [(d, opts[d][k]) for d, k in enumerate(search.best_path)]
    x = search.allocate(chosen, time_left=math.inf)
    assert x is not None  # the incumbent passed the same check
    alloc = {problem.requests[i].job: {int(m): int(x[d, m]) for m in np.flatnonzero(x[d])}
             for d, i in enumerate(order)}
    return make_solution(problem, trim(problem, alloc), bound=bound,
                         status="optimal" if finished else "time_limit", solver="bnb",
                         seconds=time.perf_counter() - start, nodes=search.nodes)


def price_bound(problem: Problem, prices: Sequence[float] | None = None) -> float:
    """The LP-price upper bound of the whole problem (``relax.py``) at ``prices`` (one per
    machine, >= 0) or, by default, at the LP relaxation's duals."""
    capacity = np.asarray(problem.capacity, dtype=np.int64)
    reqs = list(problem.requests)
    opts = [job_options(r, problem.capacity) for r in reqs]
    given = None if prices is None else np.clip(np.asarray(prices, dtype=float), 0.0, None)
    duals = _lp_duals(reqs, opts, capacity, 10.0, given)
    return duals.base + float(duals.mu[0])


def _lp_duals(reqs: Sequence[Request], opts: Sequence[Sequence[Option]], capacity: np.ndarray,
              time_limit: float, prices: np.ndarray | None = None) -> _Duals:
    """Reduced profits of every option at ``prices`` (default: the LP relaxation's duals)."""
    jobs = [JobOptions(r.weight, r.size,
                       tuple((o.utility, relaxed_demands(o.raw, o.demands)) for o in os))
            for r, os in zip(reqs, opts, strict=True)]
    if prices is None:
        prices = lp_prices(capacity, jobs, time_limit)
    reduced = [[r.weight * u - option_cost(prices, dem, r.size) for u, dem in job.options]
               for r, job in zip(reqs, jobs, strict=True)]
    best = np.asarray([max(0.0, *red) for red in reduced], dtype=float)
    mu = np.concatenate((np.cumsum(best[::-1])[::-1], [0.0]))
    return _Duals(reduced, mu, float(prices @ capacity))


def _incumbent(problem: Problem, reqs: Sequence[Request], opts: Sequence[Sequence[Option]],
               root: float, until: float) -> tuple[float, list[int]]:
    """The search's first incumbent: greedy's allocation, then greedy on up to ``RESTARTS``
    perturbed job orders (a seeded generator: same problem, same orders) until one reaches
    the root bound -- which proves it optimal before any branching -- or ``until``.  Ties
    in greedy's order (jobs alike but for which machine they land on) are what leave a
    unit of a bin-packing unfilled; shuffling them a little is cheaper than branching."""
    best, path = _greedy_path(reqs, opts, solve_greedy(problem).alloc)
    base = job_order(problem)
    rng = np.random.default_rng(0)
    n = len(base)
    for t in range(RESTARTS):
        if best >= root - EPS or time.perf_counter() > until or n < 2:
            break
        key = np.arange(n) + rng.normal(0.0, NOISE[t % len(NOISE)] * n, n)
        order = [base[i] for i in np.argsort(key, kind="stable")]
        value, p = _greedy_path(reqs, opts, solve_greedy(problem, order).alloc)
        if value > best + EPS:
            best, path = value, p
    return best, path


def _greedy_path(reqs: Sequence[Request], opts: Sequence[Sequence[Option]],
                 alloc: Mapping[str, Mapping[int, int]]) -> tuple[float, list[int]]:
    """An allocation as a search path: per job the best option its units meet (its
    utility comes from one), and the path's value (the allocation's total)."""
    path, value = [], 0.0
    for r, os in zip(reqs, opts, strict=True):
        units = alloc.get(r.job, {})
        k = next(k for k, o in enumerate(os)
                 if all(sum(units.get(m, 0) for m in ms) >= n for ms, n in o.raw))
        path.append(k)
        value += r.weight * os[k].utility
    return value, path


def _best_units(options: Sequence[Option]) -> float:
    """Units at which the job's best ratio reaches its upper: ``upper / ratio``."""
    upper = options[0].utility
    ratio = max((o.utility / o.units if o.units else math.inf) for o in options
                if o.utility > 0)
    return 0.0 if math.isinf(ratio) else upper / ratio
