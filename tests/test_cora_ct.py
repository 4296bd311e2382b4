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
    loss_rate_order,
    protect_floors,
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


@pytest.mark.parametrize("above_min", ["leximin", "edf", "sum"])
def test_the_max_min_level_moves_up_a_job_edf_would_sink(above_min: str) -> None:
    """EDF serves the rich job first and leaves the poor one 0.27; every objective of
    ``cora-ct`` serves the poor job first (0.73, the rich job still 1.6) -- with ``sum``
    because no job has finished yet, so the run's first level is the present jobs' one, and
    the loss-rate order (rich first: it loses 0.06 a second, the poor job 0.02) would miss
    the poor job's floor."""
    wl = build_workload(parse_scenario(_doc(_two_jobs(30.0)), "ct.yaml"))
    fin = {}
    for name, params in (("edf-p", {}), ("cora-ct", {"above_min": above_min})):
        pol = make_policy(name, params)
        res = Simulation(wl.cluster, wl.jobs, pol).run()
        fin[name] = {j: r.finish for j, r in res.core.jobs.items()}
    assert fin["edf-p"] == {"rich": pytest.approx(20.0), "poor": pytest.approx(40.0)}
    assert fin["cora-ct"] == {"rich": pytest.approx(40.0), "poor": pytest.approx(20.0)}
    report = pol.report()
    if above_min == "leximin":
        assert "edf_overrides" not in report
    else:
        assert report["edf_overrides"] >= 1 and report["moved_up"] == ["poor"]
    if above_min == "sum":
        assert report["floor_repairs"] >= 1


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


def _after_a_low_job() -> list[dict]:
    """A job that finishes at 10 s worth 0.003 (its goal was 5 s), then, submitted at 10 s,
    two jobs of two waves each: ``flat`` (p = 2, goal 50, hardly falls: 1.10 first, 1.00
    second) and ``falling`` (p = 3, goal 65, already falling: 2.91 first, 2.45 second).
    EDF and the max-min both serve ``flat`` first (its goal is earlier; it is the lower of
    the two); the sum is 0.36 higher the other way round."""
    wave = {"name": "map", "durations": [10.0] * 8}
    return [{"id": "low", "submit": 0, "stages": [{"name": "map", "durations": [10.0] * 4}],
             "utility": {"kind": "sigmoid", "deadline": 5.0, "p": 0.5, "mu": 1.0}},
            {"id": "flat", "submit": 10, "stages": [wave],
             "utility": {"kind": "sigmoid", "deadline": 40.0, "p": 2.0, "mu": 0.01}},
            {"id": "falling", "submit": 10, "stages": [wave],
             "utility": {"kind": "sigmoid", "deadline": 55.0, "p": 3.0, "mu": 0.1}}]


def test_above_the_runs_minimum_the_order_maximises_the_sum() -> None:
    """``above_min: sum`` serves ``falling`` first: it loses 0.023 a second over the two
    task durations after its earliest finish, ``flat`` 0.005, with equal work (Smith's rule);
    the run's minimum (``low``, 0.003, already final) is far below what either keeps, so no
    floor stops it.  EDF and the leximin serve ``flat`` first and get a 0.36 lower sum."""
    wl = build_workload(parse_scenario(_doc(_after_a_low_job()), "ct.yaml"))
    fin, total = {}, {}
    for label, name, params in (("edf", "edf-p", {}), ("leximin", "cora-ct", {}),
                                ("sum", "cora-ct", {"above_min": "sum"})):
        pol = make_policy(name, params)
        res = Simulation(wl.cluster, wl.jobs, pol).run()
        fin[label] = {j: r.finish for j, r in res.core.jobs.items()}
        total[label] = sum(j.utility.value(fin[label][j.id]) for j in wl.jobs)
    for label in ("edf", "leximin"):
        assert fin[label] == {"low": pytest.approx(10.0), "flat": pytest.approx(30.0),
                              "falling": pytest.approx(50.0)}
    assert fin["sum"] == {"low": pytest.approx(10.0), "flat": pytest.approx(50.0),
                          "falling": pytest.approx(30.0)}
    assert total["sum"] > total["edf"] + 0.3
    report = pol.report()
    assert report["run_min"] == pytest.approx(0.5 / (1 + np.exp(5.0)), abs=1e-6)
    assert report["floor_repairs"] == 0 and report["moved_up"] == ["falling"]


@pytest.mark.parametrize("floors", ["run", "present", "none"])
def test_the_run_minimum_is_what_lets_the_sum_order_through(floors: str) -> None:
    """The same two jobs with no low job before them: the run's first level is the present
    jobs' max-min level (``flat``'s value first), which the sum order would break, so the
    floors put ``flat`` first -- the guarantee the sum order never trades.  Without floors
    (the ablation) ``falling`` goes first and ``flat`` ends below that level."""
    jobs = _after_a_low_job()[1:]
    for j in jobs:
        j["submit"] = 0
        j["utility"]["deadline"] -= 10.0
    wl = build_workload(parse_scenario(_doc(jobs), "ct.yaml"))
    pol = make_policy("cora-ct", {"above_min": "sum", "floors": floors})
    res = Simulation(wl.cluster, wl.jobs, pol).run()
    first, second = ("falling", "flat") if floors == "none" else ("flat", "falling")
    assert {j: r.finish for j, r in res.core.jobs.items()} == {
        first: pytest.approx(20.0), second: pytest.approx(40.0)}
    report = pol.report()
    assert (report["floor_repairs"] == 0) == (floors == "none")
    assert report.get("floors_broken", 0) == 0 and ("floors_broken" in report) == (
        floors != "none")


def test_loss_rate_order_and_floor_repair() -> None:
    """Smith's rule on the utilities: per container-second, the job losing more per second
    goes first; a floor the order misses moves that job up, one floor it cannot keep even
    first gives None."""
    wl = build_workload(parse_scenario(_doc(_after_a_low_job()[1:]), "ct.yaml"))
    core = SchedulerCore(wl.cluster, make_policy("fifo"))
    core.handle(10.0, [JobSubmitted(j) for j in wl.jobs])
    views = core.snapshot().jobs
    assert [v.id for v in views] == ["flat", "falling"]
    pieces = Pieces(work=np.array([80.0, 80.0, 0.0, 0.0]), cap=np.array([4.0, 4.0, 1.0, 1.0]),
                    offset=np.zeros(4))
    earliest = np.array([30.0, 30.0])
    order = loss_rate_order(views, 10.0, 4.0, pieces, earliest, np.array([20.0, 20.0]))
    assert [views[i].id for i in order] == ["falling", "flat"]
    # ten times the work for the falling job: 0.023 / 10 per container-second is below
    # flat's 0.005
    big = Pieces(work=np.array([80.0, 800.0, 0.0, 0.0]), cap=pieces.cap, offset=pieces.offset)
    order = loss_rate_order(views, 10.0, 4.0, big, np.array([30.0, 210.0]),
                            np.array([20.0, 20.0]))
    assert [views[i].id for i in order] == ["flat", "falling"]
    kept = protect_floors((1, 0), np.array([40.0, np.inf]), 10.0, 4.0, pieces, earliest)
    assert kept is not None and kept[0] == (0, 1)
    assert kept[1].tolist() == pytest.approx([30.0, 50.0])
    assert protect_floors((1, 0), np.array([20.0, np.inf]), 10.0, 4.0, pieces,
                          earliest) is None


@pytest.mark.parametrize("bad", [{"margin": -1}, {"margin": 11}, {"resolution": 0},
                                 {"above_min": "max"}, {"window": 0}, {"window": 11},
                                 {"floors": "all"}])
def test_bad_parameters_are_refused(bad: dict) -> None:
    with pytest.raises(ParameterError, match="cora-ct"):
        make_policy("cora-ct", bad)


def test_one_container_needs_no_margin_and_the_order_is_the_optimum() -> None:
    """Issue 44's two-job instance: one container; A (p = 5, μ = 0.01, goal 250) and B
    (p = 5, μ = 0.1, goal 240), one 100 s task each.  EDF serves B first: min 3.11, sum 8.11;
    A first gives min 4.09, sum 9.00, the optimum of both.  A full task of margin read each
    job 100 s late and made B first look better; on one container the fluid schedule is the
    real one (Graham's bound: (1 - 1/C) of a task duration), so no margin, and both
    ``cora-ct`` and ``cora-ct-sum`` serve A first."""
    jobs = [{"id": "A", "submit": 0, "stages": [{"name": "map", "durations": [100.0]}],
             "utility": {"kind": "sigmoid", "deadline": 250.0, "p": 5.0, "mu": 0.01}},
            {"id": "B", "submit": 0, "stages": [{"name": "map", "durations": [100.0]}],
             "utility": {"kind": "sigmoid", "deadline": 240.0, "p": 5.0, "mu": 0.1}}]
    doc = {"name": "two", "cluster": {"machines": [{"id": "m", "count": 1,
                                                    "capacity": {"slots": 1}}]},
           "workload": {"jobs": jobs}}
    wl = build_workload(parse_scenario(doc, "two.yaml"))
    got = {}
    for label, name, params in (("edf", "edf-p", {}), ("ct", "cora-ct", {}),
                                ("sum", "cora-ct", {"above_min": "sum"})):
        res = Simulation(wl.cluster, wl.jobs, make_policy(name, params)).run()
        u = [j.utility.value(res.core.jobs[j.id].finish) for j in wl.jobs]
        got[label] = (round(min(u), 2), round(sum(u), 2))
    assert got["edf"] == (3.11, 8.11)
    assert got["ct"] == got["sum"] == (4.09, 9.0)
