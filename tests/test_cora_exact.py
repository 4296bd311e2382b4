"""CORA's exact solver (``policies.cora.exact``) against the MILP reference, its feasibility
test against a max flow, its allocations against eq. (3)-(4), and hand-made instances."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from utilon.policies.cora.exact import (
    ExactSession,
    deadlines_feasible,
    resource_feasible,
    slots_needed,
    solve_exact,
)
from utilon.policies.cora.instance import CoraInstance, CoraSolution, InfeasibleInstance
from utilon.policies.cora.milp import solve_milp_reference

# -- helpers -----------------------------------------------------------------------------------

def check_solution(inst: CoraInstance, sol: CoraSolution) -> None:
    """Eq. (3), (4), (5), the caps, and completion/utility consistency (eq. 2)."""
    x = sol.allocation
    n, r_n, t_n = inst.jobs, inst.resources, inst.slots
    assert x.shape == (n, r_n, t_n)
    assert x.dtype.kind == "i"
    assert (x >= 0).all(), "eq. (5): allocations are non-negative integers"
    assert (x.sum(axis=0) <= inst.capacity).all(), "eq. (3): capacity exceeded"
    assert (x.sum(axis=2) == inst.demand).all(), "eq. (4): demand not met exactly"
    if inst.cap is not None:
        assert (x <= inst.cap[:, :, None]).all(), "per-slot cap exceeded"
    used = x.sum(axis=1) > 0
    for i in range(n):
        assert used[i].any()
        assert sol.completion[i] == np.flatnonzero(used[i]).max(), "completion != last slot"
        assert sol.utility[i] == inst.utility[i, sol.completion[i]]


def max_flow_feasible(capacity: np.ndarray, demand: np.ndarray, cap: np.ndarray | None,
                      deadlines: np.ndarray) -> bool:
    """Source -> job (demand) -> slot <= deadline (cap) -> sink (capacity), by scipy."""
    n, t_n = demand.shape[0], capacity.shape[0]
    src, sink = 0, n + t_n + 1
    rows, cols, vals = [], [], []
    for i in range(n):
        rows.append(src)
        cols.append(1 + i)
        vals.append(int(demand[i]))
        for t in range(deadlines[i] + 1):
            rows.append(1 + i)
            cols.append(1 + n + t)
            vals.append(int(demand[i] if cap is None else min(cap[i], demand[i])))
    for t in range(t_n):
        rows.append(1 + n + t)
        cols.append(sink)
        vals.append(int(capacity[t]))
    graph = csr_matrix((np.array(vals, dtype=np.int32), (rows, cols)),
                       shape=(n + t_n + 2, n + t_n + 2))
    return bool(maximum_flow(graph, src, sink).flow_value == int(demand.sum()))


def random_utility(rng: np.random.Generator, n: int, t: int) -> np.ndarray:
    """Non-increasing tables with many ties: small integers, shared-parameter sigmoids,
    steps, or plain sorted random values."""
    kind = int(rng.integers(0, 4))
    ts = np.arange(t)
    if kind == 0:
        u = rng.integers(0, 4, size=(n, t)).astype(np.float64)
        return -np.sort(-u, axis=1)
    if kind == 1:
        p = rng.choice([1.0, 2.0], size=n)
        mu = rng.choice([0.5, 2.0, 5.0], size=n)
        d = rng.integers(0, t, size=n).astype(np.float64)
        return p[:, None] / (1.0 + np.exp(mu[:, None] * (ts[None, :] - d[:, None])))
    if kind == 2:
        due = rng.integers(0, t, size=n)
        value = rng.choice([1.0, 2.0, 3.0], size=n)
        return np.where(ts[None, :] <= due[:, None], value[:, None], 0.0)
    return -np.sort(-rng.random((n, t)), axis=1)


def random_instance(rng: np.random.Generator, resources: int, capped: bool) -> CoraInstance:
    """A small instance that can finish within its slots (regenerated until it can)."""
    while True:
        n = int(rng.integers(1, 6))
        t = int(rng.integers(1, 7))
        if rng.random() < 0.5:  # the same capacity in every slot
            capacity = np.repeat(rng.integers(1, 6, size=(resources, 1)), t, axis=1)
        else:  # a capacity that changes from slot to slot, zeros included
            capacity = rng.integers(0, 6, size=(resources, t))
        demand = rng.integers(0, 4, size=(n, resources))
        demand[demand.sum(axis=1) == 0, 0] = 1
        cap = rng.integers(1, 4, size=(n, resources)) if capped else None
        inst = CoraInstance(capacity, demand, random_utility(rng, n, t), cap)
        if deadlines_feasible(inst, np.full(n, t - 1)):
            return inst


FAMILIES = [(1, False), (1, True), (2, False), (2, True)]


# -- exactness against the MILP reference ------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize(("resources", "capped"), FAMILIES)
def test_exact_equals_milp_reference(resources: int, capped: bool) -> None:
    """250 instances per family, 1,000 in all: the sorted utility vectors coincide."""
    rng = np.random.default_rng(20240 + 10 * resources + capped)
    branched = 0
    for _ in range(250):
        inst = random_instance(rng, resources, capped)
        exact = solve_exact(inst)
        ref = solve_milp_reference(inst)
        check_solution(inst, exact)
        check_solution(inst, ref)
        np.testing.assert_allclose(exact.sorted_utilities, ref.sorted_utilities, atol=1e-9,
                                   err_msg=f"{inst}")
        assert exact.info["optimal"] is True
        branched += int(exact.info["branchings"] > 0)  # type: ignore[operator]
    assert branched > 0, "no instance exercised the branch and bound"


def test_exact_and_milp_agree_on_infeasibility() -> None:
    rng = np.random.default_rng(7)
    seen = 0
    for _ in range(200):
        n, t = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        inst = CoraInstance(rng.integers(0, 3, size=(1, t)), rng.integers(1, 4, size=(n, 1)),
                            random_utility(rng, n, t), rng.integers(1, 3, size=(n, 1)))
        if deadlines_feasible(inst, np.full(n, t - 1)):
            continue
        seen += 1
        with pytest.raises(InfeasibleInstance):
            solve_exact(inst)
        with pytest.raises(InfeasibleInstance):
            solve_milp_reference(inst)
    assert seen > 20


# -- the feasibility test -----------------------------------------------------------------------

@pytest.mark.parametrize("monotone", [True, False])
def test_cap_feasibility_matches_max_flow(monotone: bool) -> None:
    rng = np.random.default_rng(11 + monotone)
    answers = set()
    for _ in range(600):
        n, t = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        capacity = rng.integers(0, 6, size=t)
        if monotone:
            capacity = np.sort(capacity)
        demand = rng.integers(0, 8, size=n)
        cap = rng.integers(1, 5, size=n) if rng.random() < 0.8 else None
        deadlines = rng.integers(0, t, size=n)
        got = resource_feasible(capacity, demand, cap, deadlines)
        assert got == max_flow_feasible(capacity, demand, cap, deadlines), (
            capacity, demand, cap, deadlines)
        answers.add(got)
    assert answers == {True, False}


def test_deadlines_feasible_needs_every_resource() -> None:
    # resource 0 is fine with job 0 due in slot 0, resource 1 is not
    inst = CoraInstance(np.array([[2, 2], [1, 1]]), np.array([[1, 2], [1, 0]]),
                        np.ones((2, 2)))
    assert deadlines_feasible(inst, np.array([1, 0]))
    assert not deadlines_feasible(inst, np.array([0, 1]))


# -- infeasible instances and slots_needed ------------------------------------------------------

def test_too_few_slots_is_infeasible_and_says_how_many() -> None:
    inst = CoraInstance(np.full((1, 3), 2), np.array([[4], [3]]), np.ones((2, 3)))
    with pytest.raises(InfeasibleInstance, match="need 4 slots"):
        solve_exact(inst)


def test_slots_needed_is_minimal() -> None:
    rng = np.random.default_rng(3)
    for k in range(150):
        r = 1 + k % 2
        n = int(rng.integers(1, 6))
        per_slot = rng.integers(1, 6, size=r)
        demand = rng.integers(0, 9, size=(n, r))
        demand[demand.sum(axis=1) == 0, 0] = 1
        cap = rng.integers(1, 4, size=(n, r)) if k % 3 else None
        t = slots_needed(per_slot, demand, cap)

        def inst(slots: int, per_slot: np.ndarray = per_slot, demand: np.ndarray = demand,
                 cap: np.ndarray | None = cap, n: int = n) -> CoraInstance:
            return CoraInstance(np.repeat(per_slot[:, None], slots, axis=1), demand,
                                np.ones((n, slots)), cap)

        assert t >= 1
        check_solution(inst(t), solve_exact(inst(t)))
        if t > 1:
            with pytest.raises(InfeasibleInstance):
                solve_exact(inst(t - 1))


def test_slots_needed_without_capacity_raises() -> None:
    with pytest.raises(InfeasibleInstance):
        slots_needed(np.array([4, 0]), np.array([[1, 1]]))
    assert slots_needed(np.array([4, 0]), np.array([[5, 0]])) == 2


# -- hand-made instances ------------------------------------------------------------------------

def test_edf_fails_example_from_the_introduction() -> None:
    """Job 0 has the earlier target but tolerates delay; job 1's later target is critical.
    EDF runs job 0 first and job 1 misses its target (utility 0); CORA runs job 1 first."""
    u = np.array([[1.0, 0.9, 0.8],    # early target, tolerant
                  [1.0, 1.0, 0.0]])   # later target, critical
    inst = CoraInstance(np.ones((1, 3), dtype=np.int64), np.array([[1], [2]]), u)
    sol = solve_exact(inst)
    check_solution(inst, sol)
    assert list(sol.completion) == [2, 1]
    np.testing.assert_allclose(sol.utility, [0.8, 1.0])
    assert list(sol.allocation[:, 0, 0]) == [0, 1]  # slot 0 goes to the critical job


def test_tie_that_progressive_filling_cannot_break() -> None:
    """Two identical jobs, one unit per slot: each can finish first on its own, not both.
    Fixing only the jobs that cannot improve would fix nobody; the optimum is (0, 1)."""
    inst = CoraInstance(np.ones((1, 2), dtype=np.int64), np.ones((2, 1), dtype=np.int64),
                        np.array([[1.0, 0.0], [1.0, 0.0]]))
    sol = solve_exact(inst)
    check_solution(inst, sol)
    np.testing.assert_allclose(sol.sorted_utilities, [0.0, 1.0])
    assert sol.info["branchings"] == 1
    np.testing.assert_allclose(solve_milp_reference(inst).sorted_utilities, [0.0, 1.0])


def test_tie_choice_decides_a_later_level() -> None:
    """Jobs 0 and 1 tie at 0 and only one can finish in slot 0; choosing job 1 leaves room
    for job 2 to finish in slot 1 (worth 3 instead of 2): optimum (0, 3, 5)."""
    u = np.array([[5.0, 0.0, 0.0],
                  [5.0, 0.0, 0.0],
                  [4.0, 3.0, 2.0]])
    capacity = np.array([[2, 2, 2]])
    demand = np.array([[2], [1], [3]])
    inst = CoraInstance(capacity, demand, u)
    sol = solve_exact(inst)
    check_solution(inst, sol)
    np.testing.assert_allclose(sol.sorted_utilities, [0.0, 3.0, 5.0])
    np.testing.assert_allclose(solve_milp_reference(inst).sorted_utilities, [0.0, 3.0, 5.0])


def test_cap_spreads_a_job_over_slots() -> None:
    inst = CoraInstance(np.full((1, 3), 4), np.array([[4]]), np.array([[1.0, 0.5, 0.1]]),
                        cap=np.array([[2]]))
    sol = solve_exact(inst)
    check_solution(inst, sol)
    assert list(sol.allocation[0, 0]) == [2, 2, 0]
    assert sol.utility[0] == 0.5


def test_resources_are_coupled_through_completion_only() -> None:
    # job 0 needs resource 1, which slot 0 does not have: it cannot finish before slot 1
    inst = CoraInstance(np.array([[3, 3], [0, 2]]), np.array([[1, 1], [2, 0]]),
                        np.array([[1.0, 0.2], [1.0, 0.1]]))
    sol = solve_exact(inst)
    check_solution(inst, sol)
    assert list(sol.completion) == [1, 0]


@pytest.mark.parametrize(("resources", "capped"), FAMILIES)
def test_allocation_fills_every_slot_greedily(resources: int, capped: bool) -> None:
    """Work conservation: every slot is full unless each job already gets all it can use
    there (its cap and what it still needs)."""
    rng = np.random.default_rng(99 + resources + 2 * capped)
    for _ in range(60):
        inst = random_instance(rng, resources, capped)
        sol = solve_exact(inst)
        check_solution(inst, sol)
        x = sol.allocation
        done = np.concatenate([np.zeros((inst.jobs, resources, 1), dtype=np.int64),
                               np.cumsum(x, axis=2)[:, :, :-1]], axis=2)
        left = inst.demand[:, :, None] - done
        usable = left if inst.cap is None else np.minimum(left, inst.cap[:, :, None])
        np.testing.assert_array_equal(x.sum(axis=0),
                                      np.minimum(inst.capacity, usable.sum(axis=0)))


def test_uncapped_slot_zero_follows_edf_order() -> None:
    rng = np.random.default_rng(5)
    for _ in range(100):
        inst = random_instance(rng, 1, False)
        sol = solve_exact(inst)
        dl = np.asarray(sol.info["deadlines"])
        assert (sol.completion <= dl).all()
        np.testing.assert_allclose(sol.utility, inst.utility[np.arange(inst.jobs), dl])
        left = int(inst.capacity[0, 0])
        for i in np.lexsort((np.arange(inst.jobs), dl)):
            take = min(int(inst.demand[i, 0]), left)
            assert sol.allocation[i, 0, 0] == take
            left -= take


def test_node_limit_returns_a_valid_possibly_suboptimal_solution() -> None:
    u = np.tile([1.0, 0.0], (6, 1))
    inst = CoraInstance(np.array([[3, 6]]), np.array([[1], [1], [2], [2], [1], [2]]), u)
    full = solve_exact(inst)
    assert full.info["optimal"] is True
    limited = solve_exact(inst, node_limit=0)
    check_solution(inst, limited)
    assert limited.info["optimal"] is False
    np.testing.assert_allclose(full.sorted_utilities, solve_milp_reference(inst).sorted_utilities)


def test_constant_utilities_finish_anywhere() -> None:
    inst = CoraInstance(np.full((1, 4), 3), np.array([[5], [4], [3]]), np.full((3, 4), 2.0))
    sol = solve_exact(inst)
    check_solution(inst, sol)
    np.testing.assert_allclose(sol.utility, 2.0)


def test_empty_instance() -> None:
    inst = CoraInstance(np.full((1, 3), 2), np.zeros((0, 1), dtype=np.int64), np.zeros((0, 3)))
    sol = solve_exact(inst)
    assert sol.completion.shape == (0,)
    assert sol.allocation.shape == (0, 1, 3)


def test_large_instance_without_ties_stays_on_the_fast_path() -> None:
    rng = np.random.default_rng(1)
    n, t = 2000, 12
    demand = rng.integers(1, 30, size=(n, 1))
    per_slot = np.array([int(demand.sum()) // (t - 2)])
    ts = np.arange(t)
    p, mu, d = rng.uniform(1, 10, n), rng.uniform(0.2, 5, n), rng.uniform(0, t, n)
    u = p[:, None] / (1 + np.exp(mu[:, None] * (ts[None, :] - d[:, None])))
    inst = CoraInstance(np.repeat(per_slot[:, None], t, axis=1), demand, u)
    sol = solve_exact(inst)
    check_solution(inst, sol)
    assert sol.info["branchings"] == 0
    assert sol.info["rounds"] == 1  # one top-down pass decided everything


# -- warm re-solves ----------------------------------------------------------------------------

@pytest.mark.parametrize(("resources", "capped"), FAMILIES)
def test_session_resolve_equals_a_fresh_solve(resources: int, capped: bool) -> None:
    """A session re-solved after tasks finish gives exactly ``solve_exact``'s answer on a
    fresh instance with the same demands (ties, caps and branchings included)."""
    rng = np.random.default_rng(21 + resources + 2 * capped)
    for _ in range(60):
        inst = random_instance(rng, resources, capped)
        session = ExactSession(inst)
        session.resolve()
        for _ in range(4):
            left = np.argwhere(session.demand >= 2)
            if not left.size:
                break
            i, r = left[int(rng.integers(0, len(left)))]
            session.task_finished(int(i), resource=int(r))
            warm = session.resolve()
            fresh = solve_exact(CoraInstance(inst.capacity, session.demand.copy(),
                                             inst.utility, inst.cap))
            check_solution(session.inst, warm)
            assert np.array_equal(warm.completion, fresh.completion)
            assert np.array_equal(warm.allocation, fresh.allocation)


def test_session_refuses_finishing_more_than_is_left() -> None:
    inst = CoraInstance(np.array([[2, 2]]), np.array([[2], [1]]),
                        np.array([[1.0, 0.5], [1.0, 0.2]]))
    session = ExactSession(inst)
    with pytest.raises(ValueError, match="job 1 has 1 units"):
        session.task_finished(1)
    with pytest.raises(IndexError, match="job 5 is not in the instance"):
        session.task_finished(5)
    session.task_finished(0)
    assert session.resolve().completion.tolist() == [0, 0]
    assert inst.demand[:, 0].tolist() == [2, 1]  # the caller's instance is not changed


def test_milp_reference_runs_after_another_highs_model() -> None:
    """HiGHS has one task scheduler per process: a model that asks for its own thread count
    after another model has run fails with status "Not Set" (the old flaky MILP tests)."""
    import highspy

    other = highspy.Highs()
    other.setOptionValue("output_flag", False)
    other.addVars(1, np.zeros(1), np.ones(1))
    other.run()
    inst = CoraInstance(np.array([[1, 1]]), np.array([[1], [1]]),
                        np.array([[1.0, 0.0], [1.0, 0.0]]))
    np.testing.assert_allclose(solve_milp_reference(inst).sorted_utilities, [0.0, 1.0])


def _greedy_slot_reference(rem: np.ndarray, p: np.ndarray, dres: np.ndarray, cap_s: float,
                           tail: np.ndarray) -> np.ndarray:
    """The one-slot EDF greedy of ``allocate._fill_slot_prefix``, job by job, no shortcut."""
    ms = np.arange(tail.shape[0] + 1)
    need = rem[:, None] - p[:, None] * np.maximum(0, dres[:, None] + 1 - ms[None, :])
    npos = np.maximum(0.0, need)
    room = cap_s + np.concatenate(([0.0], np.cumsum(tail))) - npos.sum(axis=0)
    want = np.minimum(p, rem)
    amounts = npos[:, 0].copy()
    for i in range(rem.shape[0]):
        if room[0] <= 0:
            break
        a = min(float(want[i]), float((room + npos[i]).min()))
        if a > amounts[i]:
            room -= np.maximum(a, need[i]) - npos[i]
            amounts[i] = a
    return amounts


@pytest.mark.parametrize("seed", range(300))
def test_the_slot_fill_shortcut_gives_the_greedy_amounts(seed: int) -> None:
    """When every job can take all it can, ``_fill_slot_prefix`` skips the greedy loop; on
    random slots (loose and tight, EDF-ordered, non-decreasing later capacity) its amounts are
    the loop's."""
    from utilon.policies.cora.allocate import _fill_slot_prefix

    rng = np.random.default_rng(seed)
    n, t = int(rng.integers(1, 8)), int(rng.integers(0, 6))
    p = rng.integers(1, 5, n).astype(float)
    dres = np.sort(rng.integers(-1, t + 1, n)).astype(float)
    rem = np.minimum(rng.integers(1, 12, n), p * (dres + 2)).astype(float)
    tail = np.sort(rng.integers(0, 8, t)).astype(float)
    cap_s = float(rng.integers(0, 10))
    got = _fill_slot_prefix(rem, p, dres, cap_s, tail)
    assert np.array_equal(got, _greedy_slot_reference(rem, p, dres, cap_s, tail))


def _alloc_capped_reference(res: object, dl: np.ndarray, out: np.ndarray) -> None:
    """``allocate._alloc_capped`` slot by slot to the end (no closed-form tail)."""
    from utilon.policies.cora.allocate import _fill_slot_general, _fill_slot_prefix

    jobs = res.jobs  # type: ignore[attr-defined]
    rem = res.dem.copy()  # type: ignore[attr-defined]
    d = dl[jobs]
    for s in range(res.t_n):  # type: ignore[attr-defined]
        live = np.flatnonzero(rem > 0)
        if live.size == 0:
            break
        order = live[np.lexsort((jobs[live], d[live]))]
        tail = res.cap_t[s + 1:]  # type: ignore[attr-defined]
        fill = _fill_slot_prefix if bool((np.diff(tail) >= 0).all()) else _fill_slot_general
        amounts = fill(rem[order], res.p[order], d[order] - s - 1,  # type: ignore[attr-defined]
                       float(res.cap_t[s]), tail)  # type: ignore[attr-defined]
        rem[order] -= amounts
        out[jobs[order], s] = amounts.round().astype(np.int64)


@pytest.mark.parametrize("seed", range(400))
def test_the_full_rate_tail_is_what_the_greedy_gives(seed: int) -> None:
    """The capped allocation ends in closed form once every live job can run at its full
    rate to the end; on random feasible instances (loose and tight, constant and changing
    capacity) it is the slot-by-slot greedy's, slot for slot."""
    from utilon.policies.cora.allocate import _alloc_capped
    from utilon.policies.cora.feasibility import Resource

    rng = np.random.default_rng(seed)
    n, t_n = int(rng.integers(1, 7)), int(rng.integers(1, 9))
    cap = rng.integers(1, 9, t_n).astype(float)
    if seed % 2:
        cap = np.sort(cap)
    p = rng.integers(1, 4, n).astype(float)
    dem = rng.integers(1, 14, n).astype(float)
    dem[0] = p[0] + 1  # at least one job is capped (slower than the capacity allows)
    res = Resource(cap, dem, p)
    dl = rng.integers(0, t_n, n)
    if not res.feasible(dl):
        dl = np.full(n, t_n - 1)
        if not res.feasible(dl):
            return  # nothing to allocate on an infeasible instance
    got = np.zeros((n, t_n), dtype=np.int64)
    want = np.zeros((n, t_n), dtype=np.int64)
    _alloc_capped(res, dl, got)
    _alloc_capped_reference(res, dl, want)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("seed", range(200))
def test_a_checker_of_few_moving_jobs_agrees_with_the_difference_form(seed: int,
                                                                      monkeypatch: Any) -> None:
    """``Resource.checker`` builds few moving jobs' ramps directly; with that path switched
    off (``_SMALL = 0``) it answers every trial the same."""
    import utilon.policies.cora.feasibility as F

    rng = np.random.default_rng(seed)
    n, t_n = int(rng.integers(2, 8)), int(rng.integers(2, 9))
    cap = np.sort(rng.integers(1, 9, t_n).astype(float))
    p = rng.integers(1, 4, n).astype(float)
    dem = rng.integers(1, 14, n).astype(float)
    dem[0] = p[0] + 1
    res = F.Resource(cap, dem, p)
    dl = np.full(n, t_n - 1)
    if not res.feasible(dl):
        return
    moving = np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
    trials = [dl.copy() for _ in range(20)]
    for tr in trials:
        tr[moving] = rng.integers(-1, t_n, moving.size)
    fast = res.checker(dl, moving)
    monkeypatch.setattr(F, "_SMALL", 0)
    slow = res.checker(dl, moving)
    assert [fast(tr) for tr in trials] == [slow(tr) for tr in trials]
