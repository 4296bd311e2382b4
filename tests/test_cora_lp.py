"""The paper's FINAL LP (``utilon.policies.cora.lp``): faithful construction, warm re-solves,
and what it actually optimises (see docs/cora-lp.md)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from utilon.policies.cora.exact import slots_needed, solve_exact
from utilon.policies.cora.instance import CoraInstance, InfeasibleInstance
from utilon.policies.cora.lp import (
    FinalLP,
    _round_allocation,
    integral_exponents,
    objective_value,
    solve_final_lp,
)
from utilon.policies.cora.milp import solve_milp_reference

# -- helpers -------------------------------------------------------------------------------


def sigmoid_instance(n: int, t: int, cap_per_slot: int, seed: int, *, resources: int = 1,
                     vary_capacity: bool = False, with_cap: bool = False) -> CoraInstance:
    """A small random instance with the paper's sigmoid utilities (three decay classes)."""
    rng = np.random.default_rng(seed)
    demand = rng.integers(1, 6, size=(n, resources))
    cap = np.full((resources, t), cap_per_slot)
    if vary_capacity:
        cap = cap + rng.integers(0, 3, size=cap.shape)
    # enough slots in total: raise the last slot's capacity if needed
    short = demand.sum(axis=0) - cap.sum(axis=1)
    cap[:, -1] += np.maximum(short, 0)
    p = rng.uniform(1, 5, n)
    mu = rng.choice([0.0, 0.5, 5.0], size=n)
    d = rng.uniform(1, t, n)
    slots = np.arange(1, t + 1)
    u = p[:, None] / (1 + np.exp(mu[:, None] * (slots[None, :] - d[:, None])))
    capj = rng.integers(1, 4, size=(n, resources)) if with_cap else None
    if capj is not None:
        # keep it feasible: a capped job needs ceil(demand / cap) <= t slots
        capj = np.maximum(capj, -(-demand // t))
    return CoraInstance(capacity=cap, demand=demand, utility=u, cap=capj)


def paper_instance(n: int, seed: int) -> CoraInstance:
    """Like benchmarks/bench_cora.py: C = 40 per 100 jobs, 1..120 tasks, sigmoid utilities of
    the three decay classes, targets scaled by the number of jobs, T = slots_needed."""
    rng = np.random.default_rng(seed)
    c = 40 * math.ceil(n / 100)
    demand = rng.integers(1, 121, size=n)
    p = rng.uniform(1.0, 5.0, n)
    cls = rng.choice(3, size=n, p=[0.2, 0.6, 0.2])
    mu = np.select([cls == 0, cls == 1], [rng.uniform(4, 6, n), rng.uniform(0.01, 1, n)], 0.0)
    d = demand / c * rng.normal(1.25, 0.1, n) * n
    t = np.arange(1, slots_needed(np.array([c]), demand[:, None]) + 1, dtype=float)
    with np.errstate(over="ignore"):
        u = p[:, None] / (1.0 + np.exp(mu[:, None] * (t[None, :] - d[:, None])))
    return CoraInstance(capacity=np.full((1, t.size), c), demand=demand[:, None], utility=u)


def lex_less(a: np.ndarray, b: np.ndarray) -> bool:
    """Sorted vector ``a`` is lexicographically smaller than sorted ``b`` (tolerant)."""
    for x, y in zip(np.sort(a), np.sort(b), strict=True):
        if abs(x - y) > 1e-12:
            return bool(x < y)
    return False


def brute_force_lexmax(inst: CoraInstance) -> np.ndarray:
    """The intended CORA optimum (§I: lexmax of sorted job utilities at completion) of a tiny
    single-resource instance, by enumerating every integral allocation."""
    assert inst.resources == 1
    nt = inst.slots
    c = inst.capacity[0]
    options = []
    for i in range(inst.jobs):
        d = int(inst.demand[i, 0])
        hi = d if inst.cap is None else int(inst.cap[i, 0])
        rows = [v for v in itertools.product(range(min(hi, d) + 1), repeat=nt) if sum(v) == d]
        options.append(rows)
    best: np.ndarray | None = None
    for combo in itertools.product(*options):
        x = np.array(combo)
        if (x.sum(axis=0) > c).any():
            continue
        last = np.array([max(t for t in range(nt) if row[t] > 0) for row in x])
        vec = np.sort(inst.utility[np.arange(inst.jobs), last])
        if best is None or lex_less(best, vec):
            best = vec
    assert best is not None, "infeasible"
    return best


def check_constraints(inst: CoraInstance, sol) -> None:
    x = sol.allocation
    assert x.dtype == np.int64 and (x >= 0).all()
    assert (x.sum(axis=0) <= inst.capacity).all()  # eq. (3)
    assert (x.sum(axis=2) == inst.demand).all()  # eq. (4)
    if inst.cap is not None:
        assert (x <= inst.cap[:, :, None]).all()
    xf = sol.info["x"]
    assert (xf.sum(axis=0) <= inst.capacity + 1e-6).all()
    assert np.allclose(xf.sum(axis=2), inst.demand, atol=1e-6)
    lam0, lam1, lamc = sol.info["lambda0"], sol.info["lambda1"], sol.info["lambdac"]
    c_point = np.maximum(inst.capacity, 1)[None, :, :]
    assert np.allclose(lam1 + c_point * lamc, xf, atol=1e-6)
    assert np.allclose(lam0 + lam1 + lamc, 1.0, atol=1e-6)
    assert min(lam0.min(), lam1.min(), lamc.min(), xf.min()) >= -1e-9
    # completion and utility come from the integer allocation
    used = x.sum(axis=1) > 0
    for i in range(inst.jobs):
        assert sol.completion[i] == np.flatnonzero(used[i]).max()
        assert sol.utility[i] == inst.utility[i, sol.completion[i]]


# the two hand-made disagreement instances of docs/cora-lp.md
ONE_JOB = CoraInstance(capacity=np.array([[2, 2]]), demand=np.array([[2]]),
                       utility=np.array([[1.0, 0.5]]))
CRITICAL_VS_FLAT = CoraInstance(capacity=np.array([[2, 2, 2]]), demand=np.array([[2], [2]]),
                                utility=np.array([[5.0, 0.1, 0.1], [1.0, 1.0, 1.0]]))

RANDOM = [
    sigmoid_instance(4, 4, 3, seed=1),
    sigmoid_instance(6, 5, 4, seed=2, vary_capacity=True),
    sigmoid_instance(5, 4, 3, seed=3, with_cap=True),
    sigmoid_instance(4, 4, 3, seed=4, resources=2, vary_capacity=True, with_cap=True),
    sigmoid_instance(30, 12, 12, seed=5),
]


# -- construction and constraints ----------------------------------------------------------


@pytest.mark.parametrize("inst", RANDOM)
def test_solution_satisfies_eqs_3_4_caps_and_lambda_rows(inst: CoraInstance) -> None:
    sol = solve_final_lp(inst)
    assert sol.solver == "cora-lp"
    assert sol.info["status"] == "Optimal"
    assert sol.info["columns"] == 4 * inst.jobs * inst.slots * inst.resources
    assert sol.info["k"] == inst.jobs * inst.slots * inst.resources  # Lemma 1's k
    assert sol.info["iterations"] >= 0
    assert sol.info["build_seconds"] > 0 and sol.info["solve_seconds"] > 0
    check_constraints(inst, sol)


@pytest.mark.parametrize("inst", RANDOM)
def test_reported_objective_is_the_final_formula(inst: CoraInstance) -> None:
    sol = solve_final_lp(inst)
    i = sol.info
    assert i["objective"] == pytest.approx(
        objective_value(i["weights"], i["lambda0"], i["lambda1"], i["lambdac"]), abs=1e-7)
    # by hand, without the helper: Σ λ0 + k^(-u)(λ1 + λc), with k^(-u) recomputed
    w = float(i["k"]) ** -integral_exponents(inst.utility).astype(float)
    direct = sum(
        i["lambda0"][a, r, t] + w[a, t] * (i["lambda1"][a, r, t] + i["lambdac"][a, r, t])
        for a in range(inst.jobs) for r in range(inst.resources) for t in range(inst.slots))
    assert i["objective"] == pytest.approx(direct, abs=1e-7)
    # and at the integral optimum it equals eq. (6): Σ k^(-u I(x))
    used = sol.allocation > 0
    eq6 = np.where(used, w[:, None, :], 1.0).sum()
    assert i["integral"]
    assert i["objective"] == pytest.approx(eq6, abs=1e-7)


def test_objective_reacts_to_a_wrong_lambda() -> None:
    """The formula check above can fail: λ's from the hint λc = x/C give another value."""
    sol = solve_final_lp(ONE_JOB)
    i = sol.info
    c = ONE_JOB.capacity[None, :, :].astype(float)
    wrong = objective_value(i["weights"], 1 - i["x"] / c, 0 * i["x"], i["x"] / c)
    assert wrong != pytest.approx(i["objective"])


# -- what the LP optimises -----------------------------------------------------------------


@pytest.mark.parametrize("inst", RANDOM)
def test_each_term_is_one_minus_weighted_min_x_1(inst: CoraInstance) -> None:
    """At the optimum each (i, t, r) term equals 1 - (1 - k^-u) min(x, 1) (docs/cora-lp.md)."""
    sol = solve_final_lp(inst)
    i = sol.info
    w = i["weights"][:, None, :]
    term = i["lambda0"] + w * (i["lambda1"] + i["lambdac"])
    assert np.allclose(term, 1 - (1 - w) * np.minimum(i["x"], 1.0), atol=1e-6)


@pytest.mark.parametrize("inst", RANDOM)
def test_final_equals_max_weighted_count_of_used_slots(inst: CoraInstance) -> None:
    """FINAL's optimum = K - max Σ (1 - k^-u) min(x, 1) over eqs. (3)-(4): solved here as an
    independent LP (y <= x, y <= 1) with scipy's linprog."""
    sol = solve_final_lp(inst)
    n, nr, nt = inst.jobs, inst.resources, inst.slots
    kk = n * nr * nt
    w = np.broadcast_to(sol.info["weights"][:, None, :], (n, nr, nt)).ravel()
    # variables [x, y]; maximise Σ (1 - w) y  <=>  minimise -Σ (1 - w) y
    cost = np.concatenate([np.zeros(kk), -(1 - w)])
    a, r, t = (v.ravel() for v in np.indices((n, nr, nt)))
    j = np.arange(kk)
    a_ub = coo_matrix(
        (np.concatenate([np.ones(kk), -np.ones(kk), np.ones(kk)]),
         (np.concatenate([r * nt + t, nr * nt + j, nr * nt + j]),
          np.concatenate([j, j, kk + j]))),
        shape=(nr * nt + kk, 2 * kk))
    b_ub = np.concatenate([inst.capacity.ravel(), np.zeros(kk)])
    a_eq = coo_matrix((np.ones(kk), (a * nr + r, j)), shape=(n * nr, 2 * kk))
    upper = np.full(kk, np.inf) if inst.cap is None else inst.cap[a, r].astype(float)
    res = linprog(cost, A_ub=a_ub.tocsr(), b_ub=b_ub, A_eq=a_eq.tocsr(),
                  b_eq=inst.demand.ravel(),
                  bounds=list(zip(np.zeros(2 * kk), np.concatenate([upper, np.ones(kk)]),
                                  strict=True)), method="highs")
    assert res.status == 0
    assert sol.info["objective"] == pytest.approx(kk + res.fun, abs=1e-6)


def test_one_job_is_spread_instead_of_finished_early() -> None:
    """One job, 2 units, capacity 2: CORA finishes it in slot 0 (utility 1.0); FINAL puts one
    unit in each slot (two used terms beat one) and finishes it in slot 1 (utility 0.5)."""
    assert list(brute_force_lexmax(ONE_JOB)) == [1.0]
    sol = solve_final_lp(ONE_JOB)
    assert sol.allocation[0, 0].tolist() == [1, 1]
    assert sol.completion.tolist() == [1]
    assert sol.utility.tolist() == [0.5]
    # k = 2, ranks 0.5 -> 1, 1.0 -> 2: (1, 1) costs 2^-2 + 2^-1 = 0.75 < (2, 0): 2^-2 + 1
    assert sol.info["objective"] == pytest.approx(0.75)
    assert lex_less(sol.utility, brute_force_lexmax(ONE_JOB))


def test_critical_job_misses_its_deadline_under_final() -> None:
    """A critical job (5 in slot 0, 0.1 after) and a flat one (1.0): CORA runs the critical
    job first, sorted utilities (1, 5); FINAL spreads both and gets (0.1, 1)."""
    best = brute_force_lexmax(CRITICAL_VS_FLAT)
    assert best.tolist() == [1.0, 5.0]
    sol = solve_final_lp(CRITICAL_VS_FLAT)
    assert sol.sorted_utilities.tolist() == [0.1, 1.0]
    assert (sol.allocation[:, 0] <= 1).all()  # nobody gets two units in one slot
    assert lex_less(sol.utility, best)


@pytest.mark.parametrize("inst", [ONE_JOB, CRITICAL_VS_FLAT])
def test_exact_solvers_confirm_the_hand_optimum_and_beat_final(inst: CoraInstance) -> None:
    best = brute_force_lexmax(inst)
    exact, milp = solve_exact(inst), solve_milp_reference(inst)
    assert np.array_equal(exact.sorted_utilities, best)
    assert np.array_equal(milp.sorted_utilities, best)
    assert lex_less(solve_final_lp(inst).utility, exact.utility)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_final_finishes_jobs_late_on_paper_like_instances(seed: int) -> None:
    """Benchmark-style instances (N = 10): FINAL is lexicographically worse than the exact
    solver, its mean completion slot is later, and most jobs end in the last slot."""
    inst = paper_instance(10, seed)
    exact, lp = solve_exact(inst), solve_final_lp(inst)
    assert lex_less(lp.utility, exact.utility)  # (the MILP reference takes ~20-40 s here)
    assert lp.completion.mean() > exact.completion.mean()
    assert (lp.completion == inst.slots - 1).mean() >= 0.5
    # it spreads: every job runs in more slots than under the exact solver
    assert ((lp.allocation > 0).sum(axis=(1, 2)) >= (exact.allocation > 0).sum(axis=(1, 2))).all()


@pytest.mark.parametrize("seed", range(6))
def test_unit_demands_make_final_exact(seed: int) -> None:
    """With every R_i = 1 each job has exactly one used term, so FINAL's lex order over terms
    is CORA's lex order over jobs: here the two agree (a control for the tests above)."""
    rng = np.random.default_rng(seed)
    n, nt = 4, 3
    u = np.sort(rng.integers(1, 9, size=(n, nt)).astype(float), axis=1)[:, ::-1]
    inst = CoraInstance(capacity=np.full((1, nt), 2), demand=np.ones((n, 1), dtype=int),
                        utility=u)
    sol = solve_final_lp(inst)
    assert np.array_equal(sol.sorted_utilities, brute_force_lexmax(inst))
    assert np.array_equal(sol.sorted_utilities, solve_exact(inst).sorted_utilities)


def test_lp_is_lexicographically_worse_on_random_small_instances() -> None:
    """On random sigmoid instances FINAL never beats the brute-force optimum (a sanity check
    of the brute force) and on some it is strictly worse."""
    worse = 0
    for seed in range(8):
        inst = sigmoid_instance(3, 3, 2, seed=100 + seed)
        best = brute_force_lexmax(inst)
        assert np.array_equal(solve_milp_reference(inst).sorted_utilities, best)
        sol = solve_final_lp(inst)
        assert not lex_less(best, sol.utility), "FINAL beat the optimum?"
        worse += lex_less(sol.utility, best)
    assert worse >= 4  # 6 of 8 with HiGHS 1.x; any drop means FINAL changed


# -- warm re-solve -------------------------------------------------------------------------


@pytest.mark.parametrize("inst", RANDOM)
def test_warm_resolve_equals_cold_solve_of_modified_instance(inst: CoraInstance) -> None:
    lp = FinalLP(inst)
    first = lp.solve()
    assert not first.info["warm"]
    rng = np.random.default_rng(7)
    demand = inst.demand.copy()
    for _ in range(3):
        i, r = (int(v) for v in np.argwhere(demand >= 2)[rng.integers(0, (demand >= 2).sum())])
        demand[i, r] -= 1
        lp.task_finished(i, r)
        warm = lp.resolve()
        cold = solve_final_lp(CoraInstance(capacity=inst.capacity, demand=demand,
                                           utility=inst.utility, cap=inst.cap))
        assert warm.info["warm"]
        assert warm.info["objective"] == pytest.approx(cold.info["objective"], abs=1e-7)
        assert (warm.allocation.sum(axis=2) == demand).all()
        check_constraints(
            CoraInstance(capacity=inst.capacity, demand=demand, utility=inst.utility,
                         cap=inst.cap), warm)


def test_resolve_starts_from_the_previous_basis() -> None:
    inst = sigmoid_instance(30, 12, 12, seed=5)
    lp = FinalLP(inst)
    cold = lp.solve()
    lp.task_finished(int(np.argmax(inst.demand[:, 0])))
    warm = lp.resolve()
    assert warm.info["iterations"] < cold.info["iterations"]
    # solve() after events is a genuine cold solve again
    again = lp.solve()
    assert not again.info["warm"]
    assert again.info["objective"] == pytest.approx(warm.info["objective"], abs=1e-7)


def test_task_finished_validates() -> None:
    lp = FinalLP(ONE_JOB)
    with pytest.raises(RuntimeError):
        lp.resolve()
    with pytest.raises(ValueError):
        lp.task_finished(0, 0, units=3)
    with pytest.raises(ValueError, match="would finish"):
        lp.task_finished(0, 0, units=2)
    lp.solve()
    lp.task_finished(0)
    sol = lp.resolve()
    assert sol.allocation.sum() == 1 and sol.completion.tolist() == [0]


# -- integrality ---------------------------------------------------------------------------


def test_integral_solution_is_reported_integral() -> None:
    sol = solve_final_lp(CRITICAL_VS_FLAT)
    assert sol.info["integral"] is True and sol.info["max_fractionality"] <= 1e-6
    assert "repair" not in sol.info


def test_fractional_solution_is_detected_and_repaired() -> None:
    """A fractional x (what FINAL would return if total unimodularity failed to carry over)
    is reported, and the repair keeps eqs. (3)-(4) and stays within floor/ceil."""
    inst = CoraInstance(capacity=np.array([[2, 2, 2]]), demand=np.array([[3], [2]]),
                        utility=np.ones((2, 3)))
    xf = np.array([[[1.5, 0.5, 1.0]], [[0.5, 1.5, 0.0]]])
    alloc, meta = _round_allocation(inst.capacity, inst.demand, xf)
    assert meta["integral"] is False
    assert meta["max_fractionality"] == pytest.approx(0.5)
    assert meta["fractional_entries"] == 4
    assert "repair" in meta
    assert (alloc.sum(axis=2) == inst.demand).all()
    assert (alloc.sum(axis=0) <= inst.capacity).all()
    assert (alloc >= np.floor(xf)).all() and (alloc <= np.ceil(xf)).all()
    # a tiny numerical wobble is not fractional
    alloc2, meta2 = _round_allocation(inst.capacity, inst.demand, np.rint(xf) + 1e-9)
    assert meta2["integral"] is True and alloc2.dtype == np.int64


# -- scaling and numerics ------------------------------------------------------------------


def test_rank_scaling_preserves_order_and_zero() -> None:
    u = np.array([[3.0, 0.5, 0.0], [-1.0, -2.0, -2.0], [0.5, 0.25, 1e-9]])
    e = integral_exponents(u)
    assert e.tolist() == [[4, 3, 0], [-1, -2, -2], [3, 2, 1]]
    flat_u, flat_e = u.ravel(), e.ravel()
    for a in range(flat_u.size):
        for b in range(flat_u.size):
            assert np.sign(flat_u[a] - flat_u[b]) == np.sign(flat_e[a] - flat_e[b])
    assert integral_exponents(u, 10).tolist() == [[30, 5, 0], [-10, -20, -20], [5, 2, 0]]
    with pytest.raises(ValueError):
        integral_exponents(u, "log")
    with pytest.raises(ValueError):
        integral_exponents(u, -1.0)


def test_k_power_underflows_for_a_literal_multiplier() -> None:
    """With the paper's multiplier (e.g. 1000, 3 decimals) k^-u is exactly 0.0 for every
    utility above ~0.3 once k >= 10: the LP then only counts used terms."""
    inst = sigmoid_instance(30, 12, 12, seed=5)
    sol = solve_final_lp(inst, scale=1000.0)
    w = sol.info["weights"]
    assert sol.info["weights_underflowed"] == int((w == 0).sum()) > 0
    decades = integral_exponents(inst.utility, 1000.0) * math.log10(sol.info["k"])
    assert (w[decades > 330] == 0).all() and (w[decades < 300] > 0).all()
    assert sol.info["weights_below_dual_tol"] >= sol.info["weights_underflowed"]
    check_constraints(inst, sol)


def test_per_slot_capacity_and_zero_capacity_slot() -> None:
    inst = CoraInstance(capacity=np.array([[1, 0, 3]]), demand=np.array([[2], [2]]),
                        utility=np.array([[3.0, 2.0, 1.0], [3.0, 3.0, 3.0]]))
    sol = solve_final_lp(inst)
    check_constraints(inst, sol)
    assert sol.allocation[:, 0, 1].tolist() == [0, 0]


def test_infeasible_instance_raises() -> None:
    inst = CoraInstance(capacity=np.array([[1, 1]]), demand=np.array([[3]]),
                        utility=np.array([[1.0, 1.0]]))
    with pytest.raises(InfeasibleInstance):
        solve_final_lp(inst)


def test_explicit_k_changes_the_weights() -> None:
    sol = solve_final_lp(ONE_JOB, k=10)
    assert sol.info["k"] == 10
    assert sol.info["weights"].tolist() == [[0.01, 0.1]]
    with pytest.raises(ValueError):
        solve_final_lp(ONE_JOB, k=1)
