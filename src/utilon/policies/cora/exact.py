"""Exact solver of CORA's intended objective: lexicographic max-min of U_i(T_i), without an LP.

The feasibility tests of section 2 live in ``feasibility.py``, the search of sections 3-4 in
``search.py``, the allocation of section 5 in ``allocate.py``; this module holds the whole
argument (below) and the public API: ``solve_exact`` and ``ExactSession``.

The problem (paper §II, eq. 1-5): choose integral x[i, r, t] with sum_i x[i, r, t] <= C[r, t]
(eq. 3), sum_t x[i, r, t] = R[i, r] (eq. 4), optionally x[i, r, t] <= cap[i, r], so that the
vector of utilities u[i, T_i] (T_i = last slot with a positive allocation, eq. 2) is
lexicographically max-min: the smallest utility as large as possible, then the second
smallest, and so on.

1. From completion slots to deadlines
-------------------------------------
Give every job a *deadline* D_i and ask only that it finishes by D_i.  Because u[i, .] is
non-increasing, finishing earlier never hurts, so the lexicographic optimum over allocations
equals the lexicographic optimum of (u[i, D_i])_i over *feasible deadline vectors*, and any
allocation meeting an optimal deadline vector is optimal.  In fact every job of such an
allocation has utility exactly u[i, D_i]: its utilities are componentwise >= those of the
deadlines, their sorted vector cannot be lexicographically larger than the optimum, so the
two sorted vectors (and, by equal sums, the two vectors) coincide.  Utilities enter only
through their order, so they are replaced by integer ranks (levels) once, up front; a row is
first made monotone with a running minimum (the instance tolerates increases up to 1e-12).

2. Feasibility of a deadline vector (one resource)
--------------------------------------------------
Resources are coupled only through T_i, so a deadline vector is feasible iff it is feasible
for every resource on its own (jobs with zero demand for a resource take no part).  For one
resource it is a transportation problem: source -> job i (R_i) -> slot t <= D_i (edge
capacity p_i) -> sink (C_t), feasible iff the max flow saturates every job.  Let
p_i = min(cap_i, R_i) (a cap >= the demand is no cap) and g_i(k) = max(0, R_i - p_i k): the
part of job i that cannot be done in k slots of its window.

*Lemma A (min cut).*  Feasible iff for every set Q of slots
    sum_i g_i(|[0, D_i] minus Q|) <= sum_{t in Q} C_t.
Proof: an s-t cut keeps a set S of jobs and a set Q of slots on the source side and costs
sum_{i not in S} R_i + sum_{i in S} p_i |[0, D_i] minus Q| + C(Q); for a fixed Q the cheapest
S keeps exactly the jobs with R_i > p_i |[0, D_i] minus Q|; max-flow = min-cut.  QED.
The left side depends on Q only through the counts q_i = |Q ∩ [0, D_i]|, i.e. through the
running count M_t = |Q ∩ [0, t]|, so the maximum violation over all 2^T sets is a dynamic
program over slots with state M (O(N T + T^2), ``_dp_violation``).

*Lemma B (prefix sets suffice when C_t is non-decreasing, e.g. constant).*  If t in Q and
s < t is not, Q' = Q - t + s costs C_s - C_t <= 0 more and raises q_i for the jobs with
s <= D_i < t, which can only raise their g_i; repeating the swap turns Q into a prefix
[0, m).  So the test is the closed form
    for m = 0..T:   sum_i max(0, R_i - p_i * max(0, D_i + 1 - m)) <= C_0 + ... + C_{m-1},
"what a job cannot do in slots m..D_i at its cap must be done in the first m slots"
(``_prefix_violation``, O(N T), vectorised).  Without caps (p_i = R_i) g_i(k) = R_i [k = 0],
Q must contain the whole window, the cheapest such Q is a prefix whatever C is, and the test
is the classic EDF condition: for every d, the demand due by d <= C_0 + ... + C_d (O(N + T)).
``resource_feasible`` exposes the test; the tests compare it with a max flow.

3. Progressive filling, and where it is exact
---------------------------------------------
The state is a deadline bound b_i per job (b_i = |T| - 1 at the start; the job is worth at
least u[i, b_i]) and a set of fixed jobs (deadline final).  Progressive filling raises a
common level l; every unfixed job follows D_i(l) = last slot with rank >= l, *saturated* at
its top value u[i, 0] (a job that cannot rise further simply stays, fixed).  A round:

a) *Level.*  The largest l* such that every unfixed job at min(b_i, D_i(l*)) is feasible.
   Without caps it is computed directly: job i enters prefix constraint d exactly when l
   passes u[i, d+1], so with the jobs sorted by u[., d+1] (once per solve) the first
   prefix of the sorted list whose demand exceeds the slack of d is the largest level d
   allows; l* is the minimum over d and resources (``_lambda_level``, O(R N T)).  With caps
   it is a galloping-then-binary search over the ranks, each test O(N) (Lemma B evaluated
   with ramps, ``_prefix_need``) for the jobs that move plus a share of the others computed
   once per round.
b) Every unfixed job gets b_i = min(b_i, D_i(l*)); saturated jobs are fixed; *candidates*
   are the jobs now valued exactly l*.  Every lexicographic optimum (of the current state)
   has all unfixed jobs >= l*, so this tightening loses nothing.
c) *Blocked jobs are fixed.*  A job whose next improvement (deadline E_i = last slot worth
   more than its current value) is infeasible even with every other job at its loosest
   bound can never improve in any optimum.  This is tested for *all* unfixed jobs at once
   (range minima of the prefix slacks without caps; Lemma B with caps and non-decreasing
   capacity), which fixes now every job that a level-by-level filling would fix later.
d) If the remaining candidates can all improve together, the next round rises above l*.
   l* is limited by a constraint overflowing at the next level, i.e. by the joint move of
   the candidates crossing it, so every round fixes a job unless it is *stuck*: each
   candidate can improve alone, not all together (section 4).

If no round is ever stuck the result *is* the lexicographic optimum: the minimum of every
optimum is l* (a higher level is infeasible, l* is a utility value), the fixed jobs cannot
exceed their value in any optimum, and the others exceed l* simultaneously.  With distinct
utility values no round can be stuck (a lone candidate that could improve would make the
next level feasible), so for generic real-valued utilities the solver stays polynomial.

*Fast path without caps: one pass, last prefix first* (``top_down``).  Take rows that are
strictly decreasing below their top run (sigmoids are): every improvement then moves a job by
one slot, from D to D - 1, crossing the single prefix constraint D - 1, at the level u[i, D].
With the jobs ordered by level, this is a greedy: a job crosses iff its demand fits in what
the earlier crossers left of that prefix's slack, else it is blocked for good (slacks only
shrink).  Whether job i crosses prefix d depends only on the slack of d and on the jobs that
attempt d before it (smaller u[., d+1]); the jobs that attempt d are those that crossed d+1;
and nothing done at prefixes below d changes the slack of d (a job crossing them already
counts there).  So the prefixes can be decided one after the other from d = |T| - 2 down to
0, each by a first fit in key order: O(N log N) per prefix, one pass for the whole
progressive filling, regardless of how many bottlenecks there are.  Jobs with equal keys at a
prefix are candidates of one level and are decided as a group (those that do not fit alone
are blocked; the rest cross together or the round is stuck).  The pass hands over to the
rounds above, in a valid intermediate state, when a row is flat below its top (a move would
cross several prefixes at once) or a group is stuck; it is tried again after every stuck
round.  Short lists are scanned in plain Python (numpy's per-call cost dominates there).

4. Stuck rounds: why a search is unavoidable, and the branch and bound
----------------------------------------------------------------------
Progressive filling (fix those that cannot improve individually) is exact for convex
problems but not here: two jobs of demand 1 with u = [1, 0], one unit of capacity per slot.
Each can finish in slot 0 on its own, not both; the optimum is (0, 1) and someone has to be
chosen.  The intended objective is NP-hard in general, so no polynomial exact algorithm is
to be expected:
* two resources: jobs with u = [1, 0] and demands (M + x_i, M - x_i), slot-0 capacities
  (nM + S, nM - S), ample slot 1.  n jobs fit in slot 0 iff n of the x_i sum to exactly S
  (equal-cardinality partition), and the optimum maximises the number of jobs in slot 0.
* one resource, no caps, unit capacity: u_i = 2 up to a due date, 1 up to a deadline, 0
  after, encodes 1 | T_max <= l, sum U_j <= k |, strongly NP-complete (Heeger, Hermelin,
  Pinedo, Shabtay, "Minimizing the number of tardy jobs and maximal tardiness on a single
  machine is NP-hard", 2024) with |T| = total processing time, polynomial in unary.

So a stuck round branches.  In every optimum of the state, each candidate is either exactly
at l* or improved, and the number improved is as large as possible (it is the count of jobs
at l* that the lexicographic order minimises first).  The search:
* finds the largest feasible number m* of simultaneously improved candidates by depth-first
  search with a monotone feasibility test and an upper bound (for every prefix and resource,
  the candidates not crossing it plus the most crossing ones that fit in its slack, smallest
  demands first: a relaxation without caps);
* reduces symmetry: candidates with identical utility rows, bounds and next deadlines are
  ordered by *dominance* (a before b if for every resource the drops g_a(k) - g_a(k+1) are
  <= those of b for all k, e.g. the same cap and a smaller demand; swapping their deadlines
  never breaks Lemma A's inequalities and leaves the utility multiset unchanged), so only
  "the first k of each chain" are enumerated;
* solves the state of every maximum choice recursively and keeps the lexicographically best.
``node_limit`` caps the number of feasibility tests of the search; when it is reached the
best solution found so far is returned and ``info["optimal"]`` is False (default: no limit,
exact).  Ties between real-valued utilities are what trigger the search: step ("deadline")
utilities, constant utilities of equal value, or jobs with identical sigmoid parameters.

5. The allocation
-----------------
Any allocation meeting the final deadlines is optimal (section 1); the one returned is chosen
for a scheduler that applies only slot 0 and re-solves at every event.  Rule, per resource:
*every slot, in order, is filled in EDF order (earliest final deadline first, ties by lower
job index), each job taking as much as it can (its remaining demand, its cap, the capacity
left) while the remaining deadlines stay feasible.*  Every slot is therefore
work-conserving: it is full unless every job already gets all it can use there (if slot s
had room and job i could take one more unit, moving one of its later units to s would keep
the schedule feasible, so the greedy would have taken it).
* Without caps this is plain EDF filled from the front (always feasible), in closed form from
  cumulative demands and capacities (O(N T)).
* With caps and non-decreasing later capacities (``_fill_slot_prefix``): with
  need_j(m) = what job j must do in this slot and the next m ones, the remaining deadlines
  stay feasible after amounts a_j iff sum_j max(a_j, need_j(m)) <= C_s + C(next m) for all
  m (Lemma B on the remaining slots, this slot in Q; the case "slot not in Q" only gets
  easier as a_j grows and holds at the largest amount once some amount is feasible).  Each
  job's largest amount is then a closed form, O(T) per job.
* With caps and arbitrary capacities the same greedy uses Lemma A's DP, each maximum found
  by bisection (``_fill_slot_general``).

6. Complexity (N jobs, T slots, R resources, L distinct utility values)
----------------------------------------------------------------------
Set-up O(N T log(N T)) (ranks).  Without caps and without ties: one top-down pass,
O(T N log N) (plus O(R N T) for the allocation).  Rounds (flat rows, ties): O(R N T) each;
each fixes at least one job and usually many.  With caps and non-decreasing capacity:
O(N log L) per round plus O(N T) for the blocked test; with arbitrary capacity blocked jobs
are tested one by one with the DP, O(N (N T + T^2)) per round.  Stuck rounds add the search
of section 4, exponential in the worst case (the problem is NP-hard), usually small.
"""

from __future__ import annotations

import copy
import time

import numpy as np

from utilon.policies.cora.allocate import allocate
from utilon.policies.cora.feasibility import (
    deadlines_feasible,
    resource_feasible,
    slots_needed,
)
from utilon.policies.cora.instance import CoraInstance, CoraSolution, InfeasibleInstance
from utilon.policies.cora.search import Ranks, Solver

__all__ = ["ExactSession", "deadlines_feasible", "resource_feasible", "slots_needed",
           "solve_exact"]


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------

def _infeasible_message(inst: CoraInstance) -> str:
    msg = (f"the {inst.jobs} jobs cannot all finish within the {inst.slots} slots "
           "(every job due in the last slot is infeasible)")
    cap_t = inst.capacity
    if cap_t.shape[1] and (cap_t == cap_t[:, :1]).all():
        try:
            need = slots_needed(cap_t[:, 0], inst.demand, inst.cap)
        except InfeasibleInstance as err:
            return f"{msg}: {err}"
        msg += f"; at this capacity per slot they need {need} slots"
    return msg


def solve_exact(inst: CoraInstance, *, node_limit: int | None = None) -> CoraSolution:
    """The lexicographically max-min utility vector (the intended CORA objective), exactly.

    See the module docstring for the algorithm and its proof.  ``node_limit`` bounds the
    branch and bound that ties between utility values can require (section 4); when it is hit
    the result is the best found and ``info["optimal"]`` is False.  ``info`` also holds the
    final ``deadlines``, the number of ``rounds`` and of ``branchings`` and ``nodes``.
    Raises ``InfeasibleInstance`` if the jobs cannot all finish within the slots.
    """
    return _solve(inst, node_limit, None, time.perf_counter())


class ExactSession:
    """Re-solve one instance warm as its jobs' tasks finish (``FinalLP``'s counterpart).

    Between two task completions only demands fall; the utility table, and with it
    everything the solver derives from it (integer levels, top runs, per-slot job orders:
    ``search.Ranks``), stays.  A session keeps that and rebuilds only the demand side, so a
    re-solve costs the filling pass alone.  Each ``resolve`` is exact on the current
    demands: the same answer as ``solve_exact`` on a fresh instance (tested).
    """

    def __init__(self, inst: CoraInstance, *, node_limit: int | None = None) -> None:
        self.inst = inst
        self.node_limit = node_limit
        self.demand = inst.demand.copy()
        self._ranks: Ranks | None = None

    def task_finished(self, job: int, amount: int = 1, resource: int = 0) -> None:
        """Job ``job`` needs ``amount`` fewer units of ``resource`` (at least one stays: a job
        with nothing left leaves the instance, which is a new session)."""
        if not 0 <= job < self.inst.jobs:
            raise IndexError(f"job {job} is not in the instance ({self.inst.jobs} jobs)")
        left = int(self.demand[job, resource]) - amount
        if left < 1 or amount < 0:
            raise ValueError(f"job {job} has {int(self.demand[job, resource])} units of "
                             f"resource {resource} left; cannot finish {amount}")
        self.demand[job, resource] = left

    def resolve(self) -> CoraSolution:
        start = time.perf_counter()
        inst = self.inst
        if not np.array_equal(self.demand, inst.demand):
            # only demands fell, each to >= 1 (checked by ``task_finished``): the instance
            # stays valid, so it is copied without validating the utility table again
            inst = self.inst = copy.copy(inst)
            object.__setattr__(inst, "demand", self.demand.copy())
        if self._ranks is None and inst.jobs and inst.slots:
            self._ranks = Ranks(inst.utility)
        return _solve(inst, self.node_limit, self._ranks, start)


def _solve(inst: CoraInstance, node_limit: int | None, ranks: Ranks | None,
           start: float) -> CoraSolution:
    n, t_n = inst.jobs, inst.slots
    if n == 0:
        return CoraSolution(np.zeros(0, dtype=np.int64), np.zeros(0),
                            np.zeros((0, inst.resources, t_n), dtype=np.int64), "cora",
                            time.perf_counter() - start,
                            {"optimal": True, "rounds": 0, "branchings": 0, "nodes": 0,
                             "deadlines": np.zeros(0, dtype=np.int64)})
    if t_n == 0:
        raise InfeasibleInstance(_infeasible_message(inst))
    solver = Solver(inst, node_limit, ranks)
    dl = np.full(n, t_n - 1, dtype=np.int64)
    if not solver.feasible(dl):
        raise InfeasibleInstance(_infeasible_message(inst))
    fixed = np.zeros(n, dtype=bool)
    dl, fixed = solver.fill(dl, fixed)
    alloc = allocate(solver.res, solver.n, solver.t_n, dl)
    used = alloc.sum(axis=1) > 0  # (N, T)
    completion = t_n - 1 - np.argmax(used[:, ::-1], axis=1)
    utility = inst.utility[np.arange(n), completion]
    info: dict[str, object] = {
        "optimal": not solver.exhausted,
        "deadlines": dl,
        "rounds": solver.rounds,
        "branchings": solver.branchings,
        "nodes": solver.nodes,
    }
    return CoraSolution(completion.astype(np.int64), utility, alloc, "cora",
                        time.perf_counter() - start, info)
