"""Greedy allocation: the paper's choice for its simulation (§4: "we use greedy assignment to
speed up the performance of the scheduler proper").  A heuristic, not exact; ``bound`` is the
sum of the weighted upper bounds of the jobs (an upper bound of any allocation).

Jobs are served one at a time, in order of ``weight * best achievable utility per unit``
(descending), where the ratio is estimated bottom-up from the expression with the classes'
capacities and the job's limit (``_estimate``).  Among equal ratios (the common case: a
LOCAL job, a PI job and an n-body job on a large machine are all worth one per core), jobs
that may use fewer machines go first, then those with more to lose if those machines are
taken, then those needing more units together on one machine, then larger ones, then request
order (``job_order``; measured on ``benchmarks/bench_alsched.py``'s mixed workload, request
order left greedy 9-18% below the optimum).  Each job gets a good allocation of *its own*
expression against the capacity the earlier jobs left:

* ``max``: every branch is tried from the same state; the branch reaching the highest
  utility wins (ties: fewer units, then the tightest fit -- the fewest free units left on the
  machines it takes, so a LOCAL job of 6 takes a small machine, not a large one -- then the
  first branch);
* ``sum`` / ``min``: the operands are allocated in turn (``sum`` asks each operand only for
  what the sum still lacks, ``min`` asks each for the whole target);
* ``barrier``: the operand is asked for just enough to reach the level; if it cannot, its
  units are given back (they would be worth nothing);
* ``scale``: the operand is asked for ``target / factor``;
* ``nck``: ``k`` units from the class or nothing; ``lnck``: as many as the target needs (up
  to ``k``), partial if the class runs short.  Units come from the class's machines
  first-fit, in machine order (``Problem.fill = "first-fit"``, ``first_fit``): no preference
  for or against co-location, so a job is co-located when its expression asks for it (e.g.
  ``nck`` on a one-machine class) or by chance, when the first machine with room holds it
  all (issue 44: the paper's None, which ignores the preference, still co-locates some
  n-body jobs -- its Table 1 NBODY entry, 17, is below PI's 22).  ``fill = "spread"`` (one
  unit per machine in turn, most free first: never co-located by chance) is the reading
  before issue 44.

``limit`` caps the units a job takes.  The job's allocation is trimmed (``trim``) and
committed only if its utility is > 0: a job worth nothing stays pending with nothing (§4).
A job whose allocation is worth less per unit than its estimated best (an n-body job that
only gets its half-value fallback) is deferred to a second pass, after every job that reached
its own best ratio.

Speed (500 n-body requests on 88 machines in ~25 ms, 500 mixed in ~50 ms): expressions are
compiled once into closures reading the job's units per machine (shared by requests with
equal expressions and classes), ``max`` plans primitive branches without taking anything,
other branches are undone through a log of takes, unit counts are taken in bulk
(``first_fit``, ``spread``), and a request equal to one that got nothing (or was deferred)
is skipped (or deferred) while nothing was committed since (same inputs, same result).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

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
from utilon.policies.alsched.solvers.problem import (
    Problem,
    Request,
    Solution,
    make_solution,
    upper,
)
from utilon.policies.alsched.solvers.trim import trim_job

IntArray = np.ndarray


Index = int | IntArray
Step = tuple[Index, int | IntArray, int]


@dataclass
class _State:
    """One job's tentative allocation: ``x`` its units per machine, ``free`` what is left of
    the cluster (in machine units: each of the job's units takes ``size`` of them),
    ``budget`` the units it may still take (its limit).  Every take is logged, so trying a
    branch and undoing it costs only what the branch took."""

    x: IntArray
    free: IntArray
    budget: int
    size: int = 1
    fill: str = "first-fit"  # a key of FILL
    log: list[Step] = field(default_factory=list)

    def take(self, idx: Index, amount: int | IntArray, n: int) -> None:
        self.x[idx] += amount
        self.free[idx] -= amount * self.size
        self.budget -= n
        self.log.append((idx, amount, n))

    def room(self, idx: Index) -> IntArray:
        """The job's units that fit in what is free on ``idx``."""
        free: IntArray = self.free[idx]
        return free // self.size if self.size != 1 else free

    def undo(self, mark: int) -> list[Step]:
        """Undo the takes after ``mark``; returns them (oldest first) for ``redo``."""
        steps = self.log[mark:]
        for idx, amount, n in reversed(steps):
            self.x[idx] -= amount
            self.free[idx] += amount * self.size
            self.budget += n
        del self.log[mark:]
        return steps

    def redo(self, steps: list[Step]) -> None:
        for step in steps:
            self.take(*step)


Eval = Callable[[IntArray], float]


class _Job:
    """A request with its classes as index arrays and, per node (keyed by ``id``: the
    request keeps the nodes alive), its upper bound and a compiled evaluator reading the
    job's units per machine directly (no ``D`` dict: the greedy evaluates thousands of
    times)."""

    def __init__(self, r: Request, arrays: dict[tuple[int, ...], IntArray]) -> None:
        self.r = r
        self.single = {c: ms[0] for c, ms in r.classes.items() if len(ms) == 1}
        self.idx = {c: _array(ms, arrays) for c, ms in r.classes.items() if len(ms) != 1}
        self.upper: dict[int, float] = {}
        self.prim: dict[int, tuple[float, float]] = {}  # id -> (k, u) of the primitives
        self.fn: dict[int, Eval] = {}
        self._compile(r.expr)

    def _compile(self, node: Node) -> Eval:
        if isinstance(node, (NCk, LnCk)):
            fn, up = self._compile_prim(node)
        else:
            fns = [self._compile(c) for c in node.children]
            ups = [self.upper[id(c)] for c in node.children]
            fn, up = _compile_op(node, fns, ups)
        self.fn[id(node)] = fn
        self.upper[id(node)] = up
        return fn

    def _compile_prim(self, node: NCk | LnCk) -> tuple[Eval, float]:
        k, u = num_value(node.k), num_value(node.u)
        self.prim[id(node)] = (k, u)
        nck = type(node) is NCk
        m = self.single.get(node.cls)
        if m is not None:
            return (lambda x: _prim_value(nck, k, u, int(x[m]))), u
        idx = self.idx[node.cls]
        return (lambda x: _prim_value(nck, k, u, int(x[idx].sum()))), u

    def units(self, cls: str, x: IntArray) -> int:
        m = self.single.get(cls)
        return int(x[m]) if m is not None else int(x[self.idx[cls]].sum())

    def avail(self, cls: str, st: _State) -> int:
        m = self.single.get(cls)
        return int(st.room(m)) if m is not None else int(st.room(self.idx[cls]).sum())

    def value(self, node: Node, x: IntArray) -> float:
        return self.fn[id(node)](x)


def _compile_op(node: Node, fns: list[Eval], ups: list[float]) -> tuple[Eval, float]:
    """The evaluator and upper bound of an operator node from its children's."""
    t = type(node)
    if t is Scale:
        assert isinstance(node, Scale)
        f, s = fns[0], node.factor
        return (lambda x: s * f(x)), s * ups[0]
    if t is Barrier:
        assert isinstance(node, Barrier)
        f, b = fns[0], num_value(node.level)
        return (lambda x: b if f(x) >= b - TOL else 0.0), (b if ups[0] >= b - TOL else 0.0)
    if len(fns) == 1:
        return fns[0], ups[0]
    if t is Max:
        return (lambda x: max([f(x) for f in fns])), max(ups)
    if t is Min:
        return (lambda x: min([f(x) for f in fns])), min(ups)
    return (lambda x: sum([f(x) for f in fns])), sum(ups)


def _array(ms: tuple[int, ...], arrays: dict[tuple[int, ...], IntArray]) -> IntArray:
    """``ms`` as an index array, shared by the jobs naming the same machines."""
    a = arrays.get(ms)
    if a is None:
        a = arrays[ms] = np.unique(np.asarray(ms, dtype=np.intp))
    return a


def first_fit(avail: IntArray, n: int) -> IntArray:
    """Take ``n`` units from ``avail`` machine by machine in the class's order (the cluster's
    machine order), each machine giving all it has before the next is touched: the scheduler
    takes spare capacity where it finds it first (§5.3: None "schedules as soon as it finds
    spare capacity"), with no preference for or against co-location.  A job therefore lands
    whole on one machine exactly when the first machine with room holds all of it -- by
    chance, not by request (``fill="first-fit"``, the default)."""
    cum = np.cumsum(avail)
    before = cum - avail
    take: IntArray = np.clip(n - before, 0, avail).astype(avail.dtype, copy=False)
    return take


def spread(avail: IntArray, n: int) -> IntArray:
    """Take ``n`` units from ``avail`` one per machine in turn, the machines with the most
    free units first (ties: first): every machine gets ``R`` units (or all it has), where
    ``R`` is the most full rounds ``n`` pays for; the rest go one each to the fullest
    machines that still have room.  This avoids co-location (a placement preference of its
    own, against it): a None NBODY job is then never co-located by accident.  The reading
    before issue 44, kept as ``fill="spread"`` (the ``alsched-spread`` variant of
    docs/reproduction-alsched.md)."""
    lo, hi = 0, int(avail.max())  # largest R with sum(min(avail, R)) <= n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if int(np.minimum(avail, mid).sum()) <= n:
            lo = mid
        else:
            hi = mid - 1
    take = np.minimum(avail, lo)
    rest = n - int(take.sum())
    if rest > 0:
        room = np.flatnonzero(avail > lo)
        order = room[np.argsort(-avail[room], kind="stable")][:rest]
        take[order] += 1
    return take


FILL: dict[str, Callable[[IntArray, int], IntArray]] = {"first-fit": first_fit,
                                                       "spread": spread}
"""How a class's fungible units are taken from its machines (``Problem.fill``)."""


def _prim_value(nck: bool, k: float, u: float, d: int) -> float:
    if k <= 0:
        return u
    if nck:
        return u if d >= k - TOL else 0.0
    return u * min(d / k, 1.0)


def _prim_plan(job: _Job, node: NCk | LnCk, target: float, st: _State) -> tuple[float, int]:
    """What the primitive would be worth, and how many units of its class it would take,
    if asked to reach ``target``: ``nck`` takes ``k`` or nothing, ``lnck`` what it can."""
    nck = type(node) is NCk
    k, u = job.prim[id(node)]
    have = job.units(node.cls, st.x)
    can = 0
    if target > 0 and k > 0 and u > 0:
        need = math.ceil(k - TOL) if nck else math.ceil(k * min(target, u) / u - TOL)
        want = need - have
        if want > 0:
            can = min(want, job.avail(node.cls, st), st.budget)
            if can < want and nck:
                can = 0
    return _prim_value(nck, k, u, have + max(can, 0)), max(can, 0)


def _take(job: _Job, cls: str, n: int, st: _State) -> None:
    """Give the job ``n`` more units of ``cls`` (it has them free), one per machine in turn."""
    m = job.single.get(cls)
    if m is not None:
        st.take(m, n, n)
    else:
        idx = job.idx[cls]
        st.take(idx, FILL[st.fill](st.room(idx), n), n)


def _alloc(job: _Job, node: Node, target: float, st: _State) -> None:
    """Allocate for ``node`` until it reaches ``target`` (``inf``: its best)."""
    t = type(node)
    if t is NCk or t is LnCk:
        assert isinstance(node, (NCk, LnCk))
        _, n = _prim_plan(job, node, target, st)
        if n > 0:
            _take(job, node.cls, n, st)
    elif t is Scale:
        assert isinstance(node, Scale)
        if node.factor > 0:
            _alloc(job, node.arg, target / node.factor, st)
    elif t is Barrier:
        assert isinstance(node, Barrier)
        _alloc_barrier(job, node, target, st)
    elif t is Max:
        assert isinstance(node, Max)
        _alloc_max(job, node, target, st)
    elif t is Sum:
        assert isinstance(node, Sum)
        for c in node.args:
            lack = target - job.value(node, st.x)
            if lack <= TOL:
                break
            _alloc(job, c, job.value(c, st.x) + lack, st)
    else:
        assert isinstance(node, Min)
        for c in node.args:
            _alloc(job, c, target, st)


def _alloc_barrier(job: _Job, node: Barrier, target: float, st: _State) -> None:
    level = num_value(node.level)
    if target <= 0 or level <= 0:
        return  # (if the operand is already at the level, asking it again takes nothing)
    mark = len(st.log)
    _alloc(job, node.arg, level, st)
    if job.value(node.arg, st.x) < level - TOL:
        st.undo(mark)  # short of the level: the units would be worth nothing


def _alloc_max(job: _Job, node: Max, target: float, st: _State) -> None:
    """Try every branch from the same state; keep the best (ties: fewer units, first).
    Primitive branches are planned without taking anything (the common case: ``max`` over
    ``nck``s on single machines)."""
    mark = len(st.log)
    best: tuple[float, int, int] | None = None
    best_steps: list[Step] | NCk | LnCk = []
    plan: list[Step] | NCk | LnCk
    best_units = 0
    for c in node.args:
        if best is not None and job.upper[id(c)] < -best[0] - TOL:
            continue  # cannot beat the best branch so far
        if isinstance(c, (NCk, LnCk)):
            value, n = _prim_plan(job, c, target, st)
            key, plan = (-value, n, _slack_plan(job, c.cls, n, st)), c
        else:
            budget = st.budget
            _alloc(job, c, target, st)
            n = budget - st.budget
            key = (-job.value(c, st.x), n, _slack_taken(st, mark))
            plan = st.undo(mark)
        if best is None or key < best:
            best, best_steps, best_units = key, plan, n
    if isinstance(best_steps, list):
        st.redo(best_steps)
    elif best_units > 0:
        _take(job, best_steps.cls, best_units, st)


def _slack_plan(job: _Job, cls: str, n: int, st: _State) -> int:
    """Free machine units a primitive's ``n`` units of ``cls`` would leave on its class."""
    if n <= 0:
        return 0
    m = job.single.get(cls)
    left = int(st.free[m]) if m is not None else int(st.free[job.idx[cls]].sum())
    return left - n * st.size


def _slack_taken(st: _State, mark: int) -> int:
    """Free machine units left on the machines the takes after ``mark`` touched."""
    touched: set[int] = set()
    for idx, amount, _ in st.log[mark:]:
        if isinstance(idx, int | np.integer):
            if int(np.asarray(amount)) > 0:
                touched.add(int(idx))
        else:
            touched.update(np.asarray(idx)[np.asarray(amount) > 0].tolist())
    return int(st.free[sorted(touched)].sum()) if touched else 0


@dataclass(frozen=True, slots=True)
class Point:
    """What ``_estimate`` finds a node can reach alone: ``utility`` with ``units``, placed
    on ``machines`` (over a ``max``'s equally good branches, so a LOCAL job's "any one
    machine" counts all of them), at least ``chunk`` of them together on one machine."""

    utility: float
    units: int
    machines: frozenset[int]
    chunk: int


NOTHING = Point(0.0, 0, frozenset(), 0)


def _estimate(node: Node, cap: Mapping[str, int], limit: int,
              where: Mapping[str, frozenset[int]]) -> Point:
    """A point the node can reach alone at a good utility per unit (see ``Point``)."""
    t = type(node)
    if t is NCk or t is LnCk:
        assert isinstance(node, (NCk, LnCk))
        k, u = num_value(node.k), num_value(node.u)
        if k <= 0:
            return Point(u, 0, frozenset(), 0)
        n = math.ceil(k - TOL)
        room = min(cap[node.cls], limit)
        if t is NCk and n > room:
            return NOTHING
        if t is LnCk:
            n, u = min(n, room), u * min(min(n, room) / k, 1.0)
        ms = where[node.cls]
        return Point(u, n, ms, n if len(ms) == 1 else 1)
    if t is Scale:
        assert isinstance(node, Scale)
        p = _estimate(node.arg, cap, limit, where)
        return Point(node.factor * p.utility, p.units, p.machines, p.chunk)
    if t is Barrier:
        assert isinstance(node, Barrier)
        p = _estimate(node.arg, cap, limit, where)
        level = num_value(node.level)
        if p.utility >= level - TOL and level > 0:
            return Point(level, p.units, p.machines, p.chunk)
        return NOTHING
    points = [_estimate(c, cap, limit, where) for c in node.children]
    if t is Max:
        best = max(points, key=lambda p: (_ratio(p.utility, p.units), p.utility))
        ties = [p for p in points if (p.utility, p.units) == (best.utility, best.units)]
        return Point(best.utility, best.units, frozenset().union(*(p.machines for p in ties)),
                     max(p.chunk for p in ties))
    units = sum(p.units for p in points)
    machines = frozenset().union(*(p.machines for p in points))
    chunk = max(p.chunk for p in points)
    if t is Sum:
        return Point(sum(p.utility for p in points), units, machines, chunk)
    low = min(p.utility for p in points)
    return Point(low, units, machines, chunk) if low > 0 else NOTHING


def _ratio(u: float, n: int) -> float:
    if u <= 0:
        return 0.0
    return math.inf if n == 0 else u / n


def _kinds(problem: Problem) -> list[int]:
    """An id per request; requests with equal expressions and classes share it (and their
    compiled form).  Node hashes are not cached and an n-body expression has a hundred
    nodes, so an expression is hashed once per distinct object (the policy submits the same
    bound objects), not once per request; the requests keep the objects, and their ids,
    alive."""
    exprs: dict[Node, int] = {}
    by_id: dict[int, int] = {}
    ids: dict[tuple[object, ...], int] = {}
    out = []
    for r in problem.requests:
        e = by_id.get(id(r.expr))
        if e is None:
            e = by_id[id(r.expr)] = exprs.setdefault(r.expr, len(exprs))
        out.append(ids.setdefault((e, tuple(sorted(r.classes.items())), r.size), len(ids)))
    return out


Estimate = tuple[float, int, int, float, int]


def _estimates(problem: Problem, kinds: list[int]) -> list[Estimate]:
    """Per request: its best utility per machine unit (``_estimate``, unweighted), the
    machine units of that point, how many machines it may use, and its *regret*: how much
    of that ratio it loses if those machines are taken (the ratio of its best point on the
    other machines subtracted; an n-body job falls back to spreading at half, a LOCAL job
    to nothing), and its ``chunk`` in machine units."""
    caps: dict[tuple[tuple[int, ...], int], int] = {}  # shared by equal (machines, size)
    sets: dict[tuple[int, ...], frozenset[int]] = {}
    seen: dict[tuple[int, int | None], Estimate] = {}
    out = []
    for i, r in enumerate(problem.requests):
        key = (kinds[i], r.limit)
        if key not in seen:
            cap, where = {}, {}
            for c, ms in r.classes.items():
                if (ms, r.size) not in caps:
                    caps[(ms, r.size)] = sum(problem.capacity[m] // r.size for m in set(ms))
                cap[c] = caps[(ms, r.size)]
                where[c] = sets.setdefault(ms, frozenset(ms))
            limit = r.limit if r.limit is not None else sum(cap.values())
            p = _estimate(r.expr, cap, limit, where)
            ratio = _ratio(p.utility, p.units * r.size)
            rest = {c: ms - p.machines for c, ms in where.items()}
            other = {c: sum(problem.capacity[m] // r.size for m in ms) for c, ms in rest.items()}
            q = _estimate(r.expr, other, limit, rest)
            regret = ratio - _ratio(q.utility, q.units * r.size) if math.isfinite(ratio) else 0.0
            seen[key] = (ratio, p.units * r.size, len(p.machines), max(regret, 0.0),
                         p.chunk * r.size)
        out.append(seen[key])
    return out


def job_order(problem: Problem, kinds: list[int] | None = None,
              est: list[Estimate] | None = None) -> list[int]:
    """Request indices by ``weight * utility per unit`` (descending); among equals, the jobs
    that may use fewer machines first (they have fewer ways to be served), then those with
    more to lose (``regret``), then those needing more units together on one machine (a
    LOCAL job before a PI job, which can take what is left anywhere), then the larger ones
    (first-fit decreasing: small jobs fill the gaps), then request order."""
    kinds = _kinds(problem) if kinds is None else kinds
    est = _estimates(problem, kinds) if est is None else est
    keys = [(-r.weight * ratio, breadth, -r.weight * regret, -chunk, -units, i)
            for i, (r, (ratio, units, breadth, regret, chunk)) in enumerate(
                zip(problem.requests, est, strict=True))]
    return [k[-1] for k in sorted(keys)]


def solve_greedy(problem: Problem, order: Sequence[int] | None = None) -> Solution:
    """Serve the jobs one by one (see the module docstring), in ``job_order`` unless an
    ``order`` of the request indices is given."""
    start = time.perf_counter()
    free = np.asarray(problem.capacity, dtype=np.int64)
    alloc: dict[str, dict[int, int]] = {}
    arrays: dict[tuple[int, ...], IntArray] = {}
    kinds = _kinds(problem)
    est = _estimates(problem, kinds)
    jobs: dict[int, _Job] = {}
    failed: dict[tuple[int, int | None], int] = {}  # -> commits when it last got nothing
    commits = 0
    deferred: list[int] = []
    below: dict[tuple[int, int | None], int] = {}  # -> commits when it was last deferred
    order = job_order(problem, kinds, est) if order is None else order
    for final, queue in ((False, order), (True, deferred)):
        for i in queue:
            r = problem.requests[i]
            job = jobs.get(kinds[i])
            if job is None:
                job = jobs[kinds[i]] = _Job(r, arrays)
            if failed.get((kinds[i], r.limit)) == commits:
                continue  # the same request against the same free capacity: nothing again
            if not final and below.get((kinds[i], r.limit)) == commits:
                deferred.append(i)  # likewise: below its best ratio again
                continue
            budget = r.limit if r.limit is not None else int(free.sum()) // r.size
            st = _State(np.zeros_like(free), free.copy(), budget, r.size, problem.fill)
            root = job.r.expr  # equal to r.expr; the compiled evaluators are keyed by its nodes
            _alloc(job, root, math.inf, st)
            value = job.value(root, st.x)
            if value <= 0:
                failed[(kinds[i], r.limit)] = commits
                continue
            kept = trim_job(r, {int(m): int(st.x[m]) for m in np.flatnonzero(st.x)})
            if not final and _ratio(value, sum(kept.values()) * r.size) < est[i][0] * (1 - 1e-9):
                deferred.append(i)  # below its best ratio: after the jobs that reach theirs
                below[(kinds[i], r.limit)] = commits
                continue
            for m, u in kept.items():
                free[m] -= u * r.size
            alloc[r.job] = kept
            commits += 1
    bound = sum(r.weight * jobs[k].upper[id(jobs[k].r.expr)]
                for r, k in zip(problem.requests, kinds, strict=True) if k in jobs)
    bound += sum(r.weight * upper(r.expr)
                 for r, k in zip(problem.requests, kinds, strict=True) if k not in jobs)
    return make_solution(problem, alloc, bound=bound, status="heuristic", solver="greedy",
                         seconds=time.perf_counter() - start)
