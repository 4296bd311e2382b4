"""alsched's ``auto`` solver (issue 47): the MILP within a time budget where the instance is
small enough, greedy otherwise, never worse than greedy, and the gap it accepted reported."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from builders import check_run_invariants, run
from test_alsched_solvers import bench_instance, problems
from utilon.errors import ParameterError
from utilon.model.cluster import Cluster, Machine
from utilon.model.job import Job, Stage, Task
from utilon.model.resources import Resources
from utilon.policies import make_policy
from utilon.policies.alsched.lang import Request as Spec
from utilon.policies.alsched.lang import parse
from utilon.policies.alsched.lang.ast import Barrier, Lit, LnCk, Max, NCk, Scale
from utilon.policies.alsched.policy import Alsched
from utilon.policies.alsched.solvers import (
    DEFAULT_MAX_SIZE,
    Problem,
    Request,
    check,
    milp_size,
    solve,
    solve_auto_outcome,
)

# Issue 47: one machine of 2 units, one of 1; greedy gives j2 the 2-unit machine (0.5) where
# j1 on all three units is worth 2 x 5 = 10.
J1 = "(barrier 5 (max (scale 2 nck(all,1,2)) lnck(all,3,5)))"
J2 = "(max lnck(m0,4,2) nck(all,4,2))"


def three_units() -> Problem:
    return Problem((2, 1), (Request("j1", parse(J1), {"all": (0, 1)}, weight=2.0),
                            Request("j2", parse(J2), {"all": (0, 1), "m0": (0,)}, weight=0.5)))


def test_the_three_unit_instance_reaches_the_optimum() -> None:
    p = three_units()
    assert solve(p, "greedy").total == pytest.approx(0.5)
    out = solve_auto_outcome(p)
    check(p, out.solution)
    assert out.solution.total == pytest.approx(10.0)
    assert out.solution.alloc == {"j1": {0: 2, 1: 1}}
    assert (out.how, out.gap, out.greedy_total) == ("optimal", 0.0, pytest.approx(0.5))
    assert out.exact and not out.fallback
    assert solve(p, "auto").total == pytest.approx(10.0)  # the registry's face of it


def three_unit_run(**params: object) -> Alsched:
    cl = Cluster((Machine("m0", Resources(cpu=2.0)), Machine("m1", Resources(cpu=1.0))))

    def job(name: str, tasks: int, expr: str, weight: float) -> Job:
        stage = Stage("s", Task.many([10.0] * tasks, Resources(cpu=1.0)),
                      request=Spec.from_spec(expr, where="t"))
        return Job(name, 0.0, (stage,), weight=weight)

    jobs = [job("j1", 3, J1, 2.0), job("j2", 4, J2, 0.5)]
    pol = make_policy("alsched", params)
    assert isinstance(pol, Alsched)
    res = run(cl, jobs, pol)
    check_run_invariants(res, cl, jobs)
    assert not res.stopped_early
    return pol


def test_the_policy_decides_the_three_unit_instance_exactly_and_reports_it() -> None:
    greedy = three_unit_run()
    assert greedy.solve_log[0].total == pytest.approx(0.5)
    pol = three_unit_run(solver="auto")
    first = pol.solve_log[0]
    assert (first.total, first.how, first.gap) == (pytest.approx(10.0), "optimal", 0.0)
    rep = pol.report()
    assert rep["exact_solves"] == rep["solves"] == rep["optimal_solves"] >= 2
    assert (rep["fallbacks"], rep["gap_max"], rep["gap_mean"], rep["gap_unknown"]) == \
        (0, 0.0, 0.0, 0)
    assert rep["gap_worst"] is None
    # greedy proves no bound of its own: its gaps are unknown, but for a solve where every
    # request reached its best (the trivial bound): 0
    rep = greedy.report()
    assert rep["exact_solves"] == 0 and rep["gap_unknown"] >= 1
    assert greedy.solve_log[0].gap is None


def test_above_the_size_threshold_it_falls_back_to_greedy_and_says_so() -> None:
    p = three_units()
    out = solve_auto_outcome(p, max_size=milp_size(p) - 1)
    assert (out.how, out.gap, out.solution.status) == ("size", None, "heuristic")
    assert out.fallback and not out.exact
    assert out.solution.alloc == solve(p, "greedy").alloc
    big = bench_instance("nbody", 40)  # 40 n-body jobs on 88 machines: 4,120 columns
    assert milp_size(big) > DEFAULT_MAX_SIZE
    assert solve_auto_outcome(big).how == "size"
    pol = three_unit_run(solver="auto", max_size=5)
    rep = pol.report()
    assert pol.solve_log[0].total == pytest.approx(0.5)
    assert rep["fallbacks"] == rep["fallbacks_size"] == rep["solves"] >= 1
    assert (rep["exact_solves"], rep["gap_unknown"], rep["gap_max"], rep["gap_mean"]) == \
        (0, rep["solves"], None, None)


def test_out_of_budget_it_keeps_the_better_of_the_two_with_the_milps_bound() -> None:
    # 40 n-body jobs: HiGHS proves nothing in 10 ms (measured: not in 1 s either)
    p = bench_instance("nbody", 40)
    greedy = solve(p, "greedy")
    out = solve_auto_outcome(p, budget=0.01, max_size=10**6)
    check(p, out.solution)
    assert out.how in ("budget", "improved") and out.exact
    assert out.solution.total >= greedy.total - 1e-9
    assert out.solution.bound >= out.solution.total
    assert out.gap is None or 0.0 <= out.gap < 1.0


@settings(max_examples=40, deadline=None)
@given(problems())
def test_auto_is_never_worse_than_greedy_and_exact_when_it_proves_it(p: Problem) -> None:
    greedy = solve(p, "greedy")
    out = solve_auto_outcome(p, budget=5.0)
    check(p, out.solution)
    assert out.solution.total >= greedy.total - 1e-9
    assert out.how == "optimal" and out.gap == 0.0  # these small instances always finish
    assert out.solution.total == pytest.approx(solve(p, "milp").total, abs=1e-6)
    if out.solution.total <= greedy.total + 1e-6:
        assert out.solution.alloc == greedy.alloc  # a tie keeps greedy's placement


def random_instance(seed: int) -> Problem:
    """Issue 47's family: machines of 1-3 units, jobs whose functions mix a barrier over a
    max of an ``nck`` and an ``lnck`` with a per-machine preference."""
    rng = np.random.default_rng(seed)
    machines = int(rng.integers(2, 5))
    cap = tuple(int(c) for c in rng.integers(1, 4, machines))
    every = tuple(range(machines))
    reqs = []
    for j in range(int(rng.integers(2, 5))):
        m = int(rng.integers(machines))
        k = float(rng.integers(1, 4))
        expr = Barrier(Lit(float(rng.integers(1, 6))),
                       Max((Scale(2.0, NCk("all", Lit(1.0), Lit(float(rng.integers(1, 3))))),
                            LnCk("all", Lit(k), Lit(float(rng.integers(1, 6)))),
                            LnCk(f"m{m}", Lit(k), Lit(float(rng.integers(1, 4)))))))
        reqs.append(Request(f"j{j}", expr, {"all": every, f"m{m}": (m,)},
                            weight=float(rng.choice([0.5, 1.0, 2.0]))))
    return Problem(cap, tuple(reqs))


def test_on_random_instances_auto_meets_the_optimum_where_greedy_falls_short() -> None:
    short = 0
    for seed in range(14):
        p = random_instance(seed)
        greedy, auto = solve(p, "greedy"), solve_auto_outcome(p)
        check(p, auto.solution)
        assert auto.how == "optimal"
        assert auto.solution.total >= greedy.total - 1e-9
        assert auto.solution.total == pytest.approx(solve(p, "milp").total, abs=1e-6)
        short += greedy.total < auto.solution.total - 1e-6
    assert short >= 1  # greedy is not exact on this family (the point)


def test_parameters() -> None:
    for params, text in (({"solver": "auto", "budget": 0}, "budget"),
                         ({"max_size": -1}, "max_size"), ({"solver": "cplex"}, "auto")):
        with pytest.raises(ParameterError, match=text):
            make_policy("alsched", params)
