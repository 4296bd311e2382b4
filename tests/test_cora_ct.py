"""``cora-ct``: CORA's lexicographic max-min over continuous completion times (issue 21).

The fluid feasibility test is checked against a linear program on random instances, the
progressive filling against its own definition (feasible, and no job can rise alone), and the
policy end to end: it runs, reports its plan error, and puts CT-insensitive jobs last."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from utilon.core import JobSubmitted
from utilon.core.scheduler import SchedulerCore
from utilon.errors import ParameterError
from utilon.model.utility import Constant, Sigmoid
from utilon.policies import make_policy
from utilon.policies.cora.continuous import (
    Pieces,
    fluid_feasible,
    fluid_finish,
    protected_edf_order,
    solve_fluid,
)
from utilon.scenario.build import build_workload
from utilon.scenario.load import parse_scenario
from utilon.sim.engine import Simulation


def lp_feasible(now: float, capacity: float, work: np.ndarray, cap: np.ndarray,
                deadline: np.ndarray) -> bool:
    """Reference: the fluid schedule as an LP over the intervals between deadlines."""
    fin = np.isfinite(deadline)
    ends = np.unique(np.concatenate([[now], deadline[fin]]))
    last = ends[-1] + float(work.sum() / capacity + (work / cap).sum()) + 1.0  # no deadline
    ends = np.append(ends, last)
    n, m = len(work), len(ends) - 1
    lengths = np.diff(ends)
    ub = np.zeros(n * m)
    for i in range(n):
        for j in range(m):
            if not fin[i] or ends[j + 1] <= deadline[i] + 1e-12:
                ub[i * m + j] = cap[i] * lengths[j]
    a_eq = np.zeros((n, n * m))
    for i in range(n):
        a_eq[i, i * m:(i + 1) * m] = 1.0
    a_ub = np.zeros((m, n * m))
    for j in range(m):
        a_ub[j, j::m] = 1.0
    res = linprog(np.zeros(n * m), A_ub=a_ub, b_ub=capacity * lengths, A_eq=a_eq, b_eq=work,
                  bounds=list(zip(np.zeros(n * m), ub, strict=True)), method="highs")
    return bool(res.status == 0)


@st.composite
def fluid_cases(draw: st.DrawFn) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 6))
    capacity = float(draw(st.integers(1, 8)))
    work = np.array([float(draw(st.integers(1, 40))) for _ in range(n)])
    cap = np.array([float(draw(st.integers(1, 8))) for _ in range(n)])
    deadline = np.array([float(draw(st.integers(1, 40))) if draw(st.booleans()) or i == 0
                         else np.inf for i in range(n)])
    return capacity, work, cap, deadline


@settings(max_examples=300, deadline=None)
@given(fluid_cases())
def test_fluid_feasibility_equals_the_lp(case: tuple[float, np.ndarray, np.ndarray,
                                                      np.ndarray]) -> None:
    capacity, work, cap, deadline = case
    assert fluid_feasible(0.0, capacity, work, cap, deadline) == \
        lp_feasible(0.0, capacity, work, cap, deadline)


def _sigmoids(n: int, rng: np.random.Generator) -> list[Sigmoid]:
    return [Sigmoid(d=float(rng.uniform(5, 60)), p=float(rng.uniform(1, 5)),
                    mu=float(rng.uniform(0.05, 1.0))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(12))
def test_progressive_filling_is_feasible_and_no_job_can_rise_alone(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    capacity = float(rng.integers(2, 9))
    utils = _sigmoids(n, rng)
    work = rng.uniform(5, 80, n)
    cap = rng.integers(1, 9, n).astype(float)
    pieces = Pieces(work=np.concatenate([work, np.zeros(n)]),
                    cap=np.concatenate([cap, np.ones(n)]), offset=np.zeros(2 * n))
    earliest = work / cap
    grid = np.arange(1, 401) * 0.5
    times = np.maximum(grid[None, :], earliest[:, None])
    table = np.array([[u.value(t) for t in row] for u, row in zip(utils, times, strict=True)])
    table = np.minimum.accumulate(table, axis=1)
    deadline, level, _, _ = solve_fluid(0.0, capacity, pieces, earliest, table, grid)
    assert fluid_feasible(0.0, capacity, pieces.work, pieces.cap, pieces.deadlines(deadline))
    for i in range(n):
        if np.isfinite(deadline[i]):  # planned utility is what the deadline is worth
            k = int(np.searchsorted(times[i], deadline[i]))
            assert table[i, k] >= level[i] * (1 - 1e-9)
        better = np.flatnonzero(table[i] > level[i] * (1 + 1e-9))
        if not len(better):
            continue  # already at its best
        trial = deadline.copy()
        trial[i] = times[i, better[-1]]
        # rising alone must break someone's deadline (lexicographic max-min: no free gain)
        others_fine = fluid_feasible(0.0, capacity, pieces.work, pieces.cap,
                                     pieces.deadlines(trial))
        assert not others_fine or level[i] >= level.max() - 1e-9


def test_fluid_finish_serves_the_order_by_priority() -> None:
    pieces = Pieces(work=np.array([40.0, 40.0, 0.0, 0.0]), cap=np.array([4.0, 4.0, 1.0, 1.0]),
                    offset=np.zeros(4))
    fin = fluid_finish((1, 0), 0.0, 4.0, pieces, np.zeros(2))
    assert fin[1] == pytest.approx(10.0) and fin[0] == pytest.approx(20.0)


def _doc(jobs: list[dict]) -> dict:
    return {"name": "ct", "cluster": {"machines": [{"id": "m", "count": 1,
                                                    "capacity": {"slots": 4}}]},
            "workload": {"jobs": jobs}}


def test_policy_runs_reports_plan_error_and_puts_insensitive_jobs_last() -> None:
    jobs = [{"id": "flat", "submit": 0, "utility": {"kind": "constant", "value": 1.0},
             "stages": [{"name": "map", "durations": [10.0] * 8}]},
            {"id": "steep", "submit": 0,
             "utility": {"kind": "sigmoid", "deadline": 25.0, "p": 2.0, "mu": 0.5},
             "stages": [{"name": "map", "durations": [10.0] * 8}]}]
    wl = build_workload(parse_scenario(_doc(jobs), "ct.yaml"))
    pol = make_policy("cora-ct")
    res = Simulation(wl.cluster, wl.jobs, pol).run()
    fin = {j: r.finish for j, r in res.core.jobs.items()}
    assert fin["steep"] == pytest.approx(20.0)  # two waves of 4, before the flat job
    assert fin["flat"] == pytest.approx(40.0)
    assert isinstance(wl.jobs[0].utility, Constant)
    report = pol.report()["plan_error"]
    assert report["jobs"] == 2 and report["median_abs_s"] <= 10.0


def test_the_margin_never_writes_off_a_job_that_can_still_beat_its_cliff() -> None:
    """A truncated-linear job that can finish 5 s before its cliff, with a margin of one task
    (10 s): planned with the 5 s it has, it goes first and meets it (Table III's 20% mix
    lost such a job: planned with the full margin it looked doomed and was served last)."""
    jobs = [{"id": "other", "submit": 0,
             "utility": {"kind": "sigmoid", "deadline": 40.0, "p": 2.0, "mu": 0.5},
             "stages": [{"name": "map", "durations": [10.0] * 8}]},
            {"id": "cliff", "submit": 0,
             "utility": {"kind": "truncated_linear", "deadline": 15.0, "slope": 0.001},
             "stages": [{"name": "map", "durations": [10.0] * 4}]}]
    wl = build_workload(parse_scenario(_doc(jobs), "ct.yaml"))
    res = Simulation(wl.cluster, wl.jobs, make_policy("cora-ct")).run()
    fin = {j: r.finish for j, r in res.core.jobs.items()}
    assert fin["cliff"] == pytest.approx(10.0)
    assert fin["other"] == pytest.approx(30.0)


def _two_jobs(poor_goal: float) -> list[dict]:
    """A rich job (p = 5, goal 25) and a poor one (p = 1): served second, the poor job is the
    minimum; a gentle slope lets either order keep some value."""
    return [{"id": "rich", "submit": 0,
             "utility": {"kind": "sigmoid", "deadline": 25.0, "p": 5.0, "mu": 0.05},
             "stages": [{"name": "map", "durations": [10.0] * 8}]},
            {"id": "poor", "submit": 0,
             "utility": {"kind": "sigmoid", "deadline": poor_goal, "p": 1.0, "mu": 0.1},
             "stages": [{"name": "map", "durations": [10.0] * 8}]}]


@pytest.mark.parametrize("above_min", ["leximin", "edf"])
def test_the_max_min_level_moves_up_a_job_edf_would_sink(above_min: str) -> None:
    """EDF serves the rich job first and leaves the poor one 0.27; either objective of
    ``cora-ct`` serves the poor job first (0.73, the rich job still 1.6)."""
    wl = build_workload(parse_scenario(_doc(_two_jobs(30.0)), "ct.yaml"))
    fin = {}
    for name, params in (("edf-p", {}), ("cora-ct", {"above_min": above_min})):
        pol = make_policy(name, params)
        res = Simulation(wl.cluster, wl.jobs, pol).run()
        fin[name] = {j: r.finish for j, r in res.core.jobs.items()}
    assert fin["edf-p"] == {"rich": pytest.approx(20.0), "poor": pytest.approx(40.0)}
    assert fin["cora-ct"] == {"rich": pytest.approx(40.0), "poor": pytest.approx(20.0)}
    report = pol.report()
    if above_min == "edf":
        assert report["edf_overrides"] >= 1 and report["moved_up"] == ["poor"]
    else:
        assert "edf_overrides" not in report


def test_above_the_minimum_the_order_is_edf() -> None:
    """Room for one job at a time: a floor that EDF's order keeps leaves it alone; a floor
    EDF's order misses moves that job ahead of the one whose goal is earlier."""
    wl = build_workload(parse_scenario(_doc(_two_jobs(30.0)), "ct.yaml"))
    core = SchedulerCore(wl.cluster, make_policy("fifo"))
    core.handle(0.0, [JobSubmitted(j) for j in wl.jobs])
    views = core.snapshot().jobs
    pieces = Pieces(work=np.array([80.0, 80.0, 0.0, 0.0]), cap=np.array([4.0, 4.0, 1.0, 1.0]),
                    offset=np.zeros(4))
    earliest = np.array([20.0, 20.0])
    order, finish = protected_edf_order(views, np.array([np.inf, 40.0]), 0.0, 4.0, pieces,
                                        earliest)
    assert [views[i].id for i in order] == ["rich", "poor"]
    assert finish.tolist() == pytest.approx([20.0, 40.0])
    order, finish = protected_edf_order(views, np.array([np.inf, 30.0]), 0.0, 4.0, pieces,
                                        earliest)
    assert [views[i].id for i in order] == ["poor", "rich"]
    assert finish.tolist() == pytest.approx([40.0, 20.0])


@pytest.mark.parametrize("bad", [{"margin": -1}, {"margin": 11}, {"resolution": 0},
                                 {"above_min": "sum"}])
def test_bad_parameters_are_refused(bad: dict) -> None:
    with pytest.raises(ParameterError, match="cora-ct"):
        make_policy("cora-ct", bad)
