"""RDS receding-horizon QP (utilon.policies.rds.optimizer): optimality against brute force
and SLSQP, feasibility invariants, the paper's two-job case study, validation."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from scipy.optimize import minimize

from utilon.policies.rds.optimizer import RhcProblem, RhcSolution, objective, solve_rhc

P3 = np.array([0.0107, 0.0096, 0.0132])
Q3 = np.array([0.0173, 0.0168, 0.0194])


def random_problem(rng: np.random.Generator, j: int, hp: int, hc: int, *,
                   reduce: bool = True, **over: Any) -> RhcProblem:
    """A random instance whose free response stays below 1 (so Y <= 1 is the plain bound)."""
    size = rng.uniform(20, 200, j)
    cap = rng.uniform(10, 40, hp)
    kw: dict[str, Any] = dict(
        progress=rng.uniform(0, 0.5, j),
        last_step=rng.uniform(0, 0.1, j),
        reference=None,
        weight=rng.choice([0.0, 0.5, 1.0, 2.0], size=(j, hp), p=[0.1, 0.3, 0.4, 0.2]),
        offset=rng.uniform(0, 0.02, j),
        gain_map=rng.uniform(0.5, 1.5, j) / size,
        gain_reduce=(rng.uniform(0.3, 1.0, j) / size) if reduce else np.zeros(j),
        gain_prev=rng.uniform(0, 0.4, j),
        cap_map=rng.uniform(5, 40, j),
        cap_reduce=rng.uniform(0, 20, (j, hc)) if reduce else np.zeros((j, hc)),
        current_map=rng.uniform(0, 20, j),
        current_reduce=rng.uniform(0, 10, j) if reduce else np.zeros(j),
        capacity=cap,
        P=P3[:hc] * rng.uniform(1, 30),
        Q=Q3[:hc] * rng.uniform(1, 30),
        deadline_step=rng.integers(-1, hp, j),
        scale=float(cap.mean()),
        miss_weight=float(rng.choice([0.0, 1.0, 3.0])),
    )
    slope = rng.uniform(0.1, 0.5, j)
    kw["reference"] = np.minimum(kw["progress"][:, None] + slope[:, None]
                                 * np.arange(1, hp + 1), 1.0)
    kw.update(over)
    return RhcProblem(**kw)


def simulate(pb: RhcProblem, um: np.ndarray, ur: np.ndarray) -> np.ndarray:
    """Cumulative progress by direct recurrence; um/ur are (..., J, Hc) (batched)."""
    hc = pb.control_horizon
    y_prev = np.broadcast_to(pb.last_step, um.shape[:-1]).astype(float)
    big = np.broadcast_to(pb.progress, um.shape[:-1]).astype(float)
    out = []
    for i in range(pb.horizon):
        k = min(i, hc - 1)
        y = (pb.offset + pb.gain_map * um[..., k] + pb.gain_reduce * ur[..., k]
             + pb.gain_prev * y_prev)
        big = big + y
        out.append(big)
        y_prev = y
    return np.stack(out, axis=-1)


def delta_cost(pb: RhcProblem, um: np.ndarray, ur: np.ndarray) -> np.ndarray:
    """Σ P_k((um_k − um_{k−1})/scale)² + Q_k(...)², from the current allocation."""
    def one(u: np.ndarray, cur: np.ndarray, w: np.ndarray) -> np.ndarray:
        first = np.broadcast_to(cur[:, None], (*u.shape[:-1], 1))
        du = np.diff(np.concatenate([first, u], axis=-1), axis=-1) / pb.scale
        return (du * du * w).sum(axis=(-1, -2))

    return one(um, pb.current_map, pb.P) + one(ur, pb.current_reduce, pb.Q)


def tracked_shortfall(pb: RhcProblem, big: np.ndarray) -> np.ndarray:
    """max(0, reference − Y), or per interval (``tracking: interval``): each step's progress
    against the reference's increment."""
    if pb.tracking == "cumulative":
        return np.maximum(pb.reference - big, 0.0)
    start = np.broadcast_to(pb.progress[:, None], (*big.shape[:-1], 1))
    y = np.diff(np.concatenate([start, big], axis=-1), axis=-1)
    ref = np.diff(np.concatenate([pb.progress[:, None], pb.reference], axis=-1), axis=-1)
    return np.maximum(ref - y, 0.0)


def cost_direct(pb: RhcProblem, um: np.ndarray, ur: np.ndarray) -> np.ndarray:
    """Independent (batched) evaluation of the objective."""
    s = tracked_shortfall(pb, simulate(pb, um, ur))
    c = (pb.weight * s * s).sum(axis=(-1, -2))
    for j, d in enumerate(pb.deadline_step):
        if d >= 0:
            c = c + pb.miss_weight * pb.weight[j, d] * s[..., j, d]
    return c + delta_cost(pb, um, ur)


def check_feasible(pb: RhcProblem, sol: RhcSolution, tol: float = 1e-7) -> None:
    hc = pb.control_horizon
    assert sol.u_map.shape == sol.u_reduce.shape == (pb.jobs, hc)
    assert (sol.u_map >= 0).all() and (sol.u_reduce >= 0).all()
    assert (sol.u_map <= pb.cap_map[:, None] + tol).all()
    assert (sol.u_reduce <= pb.cap_reduce + tol).all()
    total = (sol.u_map + sol.u_reduce).sum(axis=0)
    for i in range(pb.horizon):
        assert total[min(i, hc - 1)] <= pb.capacity[i] + tol
    y = simulate(pb, sol.u_map, sol.u_reduce)
    np.testing.assert_allclose(sol.progress, y, atol=1e-9)
    assert (sol.progress <= 1 + 1e-6).all()
    assert (sol.shortfall >= 0).all()
    np.testing.assert_allclose(sol.shortfall, tracked_shortfall(pb, y), atol=1e-9)


def grid_min(pb: RhcProblem, points: int) -> float:
    """Minimum of the objective over a grid of the free allocation variables."""
    j, hc = pb.jobs, pb.control_horizon
    axes, slots = [], []
    for jj, k in itertools.product(range(j), range(hc)):
        axes.append(np.linspace(0, pb.cap_map[jj], points))
        slots.append(("m", jj, k))
        if pb.gain_reduce[jj] > 0 and pb.cap_reduce[jj, k] > 0:
            axes.append(np.linspace(0, pb.cap_reduce[jj, k], points))
            slots.append(("r", jj, k))
    mesh = np.meshgrid(*axes, indexing="ij")
    um = np.zeros((*mesh[0].shape, j, hc))
    ur = np.zeros_like(um)
    for (kind, jj, k), m in zip(slots, mesh, strict=True):
        (um if kind == "m" else ur)[..., jj, k] = m
    ok = simulate(pb, um, ur).max(axis=(-1, -2)) <= 1 + 1e-12
    tot = (um + ur).sum(axis=-2)
    for i in range(pb.horizon):
        ok &= tot[..., min(i, hc - 1)] <= pb.capacity[i] + 1e-12
    return float(cost_direct(pb, um, ur)[ok].min())


def slsqp_min(pb: RhcProblem, starts: int, rng: np.random.Generator) -> float:
    """SLSQP on the smooth form (u, s) with s >= ref − Y, s >= 0."""
    j, hc, hp = pb.jobs, pb.control_horizon, pb.horizon
    n_u = j * hc

    def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (x[:n_u].reshape(j, hc), x[n_u:2 * n_u].reshape(j, hc),
                x[2 * n_u:].reshape(j, hp))

    def fun(x: np.ndarray) -> float:
        um, ur, s = split(x)
        c = float((pb.weight * s * s).sum()) + float(delta_cost(pb, um, ur))
        for jj, d in enumerate(pb.deadline_step):
            if d >= 0:
                c += pb.miss_weight * pb.weight[jj, d] * s[jj, d]
        return c

    def cons(x: np.ndarray) -> np.ndarray:
        um, ur, s = split(x)
        y = simulate(pb, um, ur)
        tot = (um + ur).sum(axis=0)
        capc = [pb.capacity[i] - tot[min(i, hc - 1)] for i in range(hp)]
        return np.concatenate([(s + y - pb.reference).ravel(), (1 - y).ravel(), capc])

    bounds = ([(0, float(c)) for c in np.repeat(pb.cap_map, hc)]
              + [(0, float(c)) for c in pb.cap_reduce.ravel()] + [(0, None)] * (j * hp))
    best = np.inf
    for _ in range(starts):
        x0 = np.concatenate([rng.uniform(0, 1, n_u) * np.repeat(pb.cap_map, hc) * 0.3,
                             rng.uniform(0, 1, n_u) * pb.cap_reduce.ravel() * 0.3,
                             np.ones(j * hp)])
        res = minimize(fun, x0, method="SLSQP", bounds=bounds,
                       constraints=[{"type": "ineq", "fun": cons}],
                       options={"maxiter": 500, "ftol": 1e-12})
        if res.success and (cons(res.x) >= -1e-7).all():
            best = min(best, float(res.fun))
    return best


@pytest.mark.parametrize(("seed", "hp", "hc", "reduce"),
                         [(1, 2, 2, False), (2, 2, 2, False), (3, 2, 2, False),
                          (4, 3, 1, True), (5, 3, 1, True), (6, 3, 1, True)])
def test_matches_brute_force_and_slsqp(seed: int, hp: int, hc: int, reduce: bool) -> None:
    rng = np.random.default_rng(seed)
    # tight capacity so that jobs compete
    pb = random_problem(rng, 2, hp, hc, reduce=reduce, capacity=rng.uniform(8, 25, hp))
    sol = solve_rhc(pb)
    assert sol.status == "optimal"
    check_feasible(pb, sol)
    assert objective(pb, sol.u_map, sol.u_reduce) == pytest.approx(sol.objective, abs=1e-6)
    assert float(cost_direct(pb, sol.u_map, sol.u_reduce)) == pytest.approx(sol.objective,
                                                                            abs=1e-6)
    assert sol.objective <= grid_min(pb, 31) + 1e-7
    assert sol.objective <= slsqp_min(pb, 4, rng) + 1e-6


@pytest.mark.parametrize(("seed", "hp", "hc"), [(11, 2, 2), (12, 2, 2), (13, 3, 1), (14, 2, 1)])
def test_interval_tracking_matches_brute_force(seed: int, hp: int, hc: int) -> None:
    """Eq. 3 read per interval (each step's progress against the reference's increment):
    the QP's optimum is the grid's, within the grid's resolution."""
    rng = np.random.default_rng(seed)
    pb = random_problem(rng, 2, hp, hc, reduce=False, capacity=rng.uniform(8, 25, hp),
                        tracking="interval")
    sol = solve_rhc(pb)
    assert sol.status == "optimal"
    check_feasible(pb, sol)
    direct = float(cost_direct(pb, sol.u_map, sol.u_reduce))
    assert objective(pb, sol.u_map, sol.u_reduce) == pytest.approx(sol.objective, abs=1e-6)
    assert direct == pytest.approx(sol.objective, abs=1e-6)
    assert sol.objective <= grid_min(pb, 41) + 1e-7
    cumulative = solve_rhc(random_problem(np.random.default_rng(seed), 2, hp, hc,
                                          reduce=False, capacity=pb.capacity))
    assert cumulative.objective != pytest.approx(sol.objective)  # a different objective


def test_tracking_must_be_known() -> None:
    with pytest.raises(ValueError, match="tracking must be one of cumulative, interval"):
        random_problem(np.random.default_rng(1), 2, 2, 2, tracking="total")


@pytest.mark.parametrize("seed", range(8))
def test_invariants_random(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    j = int(rng.integers(1, 51))
    hp = int(rng.integers(1, 5))
    hc = int(rng.integers(1, hp + 1))
    over: dict[str, Any] = {}
    if seed % 2:  # degenerate pieces: zero weights / gains, unbounded caps, no capacity
        w = rng.uniform(0, 2, (j, hp))
        w[: j // 3] = 0.0
        gm = rng.uniform(0, 0.02, j)
        gm[::4] = 0.0
        cm = rng.uniform(0, 30, j)
        cm[::5] = np.inf
        cap = rng.uniform(0, 40, hp)
        cap[0] = 0.0
        over = dict(weight=w, gain_map=gm, cap_map=cm, capacity=cap)
    pb = random_problem(rng, j, hp, hc, **over)
    sol = solve_rhc(pb)
    assert sol.status == "optimal"
    check_feasible(pb, sol)
    assert objective(pb, sol.u_map, sol.u_reduce) == pytest.approx(sol.objective, abs=1e-6)
    # only the optimum's first step would be applied; it can never beat zero shortfall cost
    assert sol.objective >= -1e-9
    assert sol.seconds > 0


def test_free_response_above_one_stays_feasible() -> None:
    rng = np.random.default_rng(7)
    pb = random_problem(rng, 5, 3, 3, progress=np.array([1.0, 0.99, 0.5, 0.2, 0.0]),
                        offset=np.array([0.2, 0.1, 0.0, 0.0, 0.0]))
    sol = solve_rhc(pb)
    assert sol.status == "optimal"
    assert (sol.u_map[:2] <= 1e-7).all() and (sol.u_reduce[:2] <= 1e-7).all()


def test_empty_and_fallback() -> None:
    rng = np.random.default_rng(8)
    empty = random_problem(rng, 0, 3, 2)
    sol = solve_rhc(empty)
    assert sol.u_map.shape == (0, 2) and sol.progress.shape == (0, 3)
    assert sol.objective == 0.0 and sol.status == "optimal"
    pb = random_problem(rng, 30, 3, 3)
    fb = solve_rhc(pb, time_limit=0.0)
    assert fb.status.startswith("fallback: ")
    check_feasible(pb, fb)
    assert fb.objective == pytest.approx(objective(pb, fb.u_map, fb.u_reduce))


def test_stopped_early_is_feasible() -> None:
    """A time limit mid-solve keeps the solver's feasible point or falls back; both feasible."""
    rng = np.random.default_rng(9)
    pb = random_problem(rng, 400, 3, 3, capacity=rng.uniform(400, 800, 3))
    best = solve_rhc(pb)
    for limit in (0.0, 0.05, 0.3):
        sol = solve_rhc(pb, time_limit=limit)
        assert sol.status == "optimal" or sol.status.split(":")[0] in ("feasible", "fallback")
        check_feasible(pb, sol)
        assert sol.objective == pytest.approx(objective(pb, sol.u_map, sol.u_reduce))
        assert sol.objective >= best.objective - 1e-6


def case_study(miss_weight: float) -> RhcProblem:
    """Table 1 of the paper: J1 (size 120) ran alone for the first interval and has progress
    0.25; J2 (size 60) arrives; capacity 60, 30, 60 in the next three intervals.  J2 is due
    at the end of step 1, J1 at the end of step 2; the total work left (90 + 60) equals the
    total capacity, so both deadlines can be met only by a perfect plan."""
    return RhcProblem(
        progress=np.array([0.25, 0.0]), last_step=np.array([0.25, 0.0]),
        reference=np.array([[0.5, 0.75, 1.0], [0.5, 1.0, 1.0]]), weight=np.ones((2, 3)),
        offset=np.zeros(2), gain_map=np.array([1 / 120, 1 / 60]), gain_reduce=np.zeros(2),
        gain_prev=np.zeros(2), cap_map=np.full(2, 60.0), cap_reduce=np.zeros((2, 3)),
        current_map=np.array([30.0, 0.0]), current_reduce=np.zeros(2),
        capacity=np.array([60.0, 30.0, 60.0]), P=P3, Q=Q3, deadline_step=np.array([2, 1]),
        scale=60.0, miss_weight=miss_weight)


def test_case_study_meets_both_deadlines() -> None:
    pb = case_study(1.0)
    sol = solve_rhc(pb)
    assert sol.status == "optimal"
    check_feasible(pb, sol)
    assert sol.progress[1, 1] >= 1 - 1e-6  # J2 by its deadline
    assert sol.progress[0, 2] >= 1 - 1e-6  # J1 by its deadline


def test_case_study_without_deadline_term_misses() -> None:
    """Pure quadratic tracking trades J2's deadline for J1's recoverable lag at step 1."""
    sol = solve_rhc(case_study(0.0))
    assert sol.status == "optimal"
    assert sol.shortfall[1, 1] > 1e-3


@pytest.mark.parametrize(("field", "value"), [
    ("capacity", np.array([10.0, -1.0, 5.0])),
    ("reference", np.zeros((2, 2))),
    ("weight", -np.ones((2, 3))),
    ("cap_reduce", np.zeros((2, 2))),
    ("progress", np.array([0.5, 1.5])),
    ("gain_map", np.array([np.nan, 0.1])),
    ("deadline_step", np.array([3, 0])),
    ("Q", np.zeros(2)),
    ("scale", 0.0),
    ("miss_weight", -1.0),
])
def test_validation_names_field(field: str, value: Any) -> None:
    kw = {name: getattr(case_study(1.0), name) for name in RhcProblem.__dataclass_fields__}
    kw[field] = value
    with pytest.raises(ValueError, match=field):
        RhcProblem(**kw)


def test_properties() -> None:
    pb = case_study(1.0)
    assert (pb.jobs, pb.horizon, pb.control_horizon) == (2, 3, 3)


@pytest.mark.parametrize("seed", range(6))
def test_clarabel_and_highs_reach_the_same_optimum(seed: int) -> None:
    """The default interior-point solver and HiGHS's active-set solver agree on the optimal
    objective (allocations may differ where the optimum is not unique)."""
    rng = np.random.default_rng(300 + seed)
    pb = random_problem(rng, int(rng.integers(2, 60)), 3, int(rng.integers(1, 4)),
                        reduce=bool(seed % 2))
    ours, ref = solve_rhc(pb), solve_rhc(pb, solver="highs")
    assert ours.status == "optimal"
    check_feasible(pb, ours)
    if ref.status == "optimal":
        assert ours.objective == pytest.approx(ref.objective, rel=1e-6, abs=1e-8)
    else:  # HiGHS stopped early: its point can only be worse
        assert ours.objective <= ref.objective + 1e-8


def test_unknown_solver_is_refused() -> None:
    pb = random_problem(np.random.default_rng(1), 2, 2, 2)
    with pytest.raises(ValueError, match="solver must be one of clarabel, highs"):
        solve_rhc(pb, solver="gurobi")
