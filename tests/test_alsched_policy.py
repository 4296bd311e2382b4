"""The ``alsched`` policy in the simulator: Soft / Hard / None, requests, placement speedup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import attempts_of, check_run_invariants, run
from utilon.core.feasibility import Unrunnable
from utilon.errors import ParameterError, UtilonError
from utilon.model.cluster import Cluster, Machine
from utilon.model.job import Job, Stage, Task
from utilon.model.resources import Resources
from utilon.policies import make_policy
from utilon.policies.alsched.jobs import make_job, request_for, workload
from utilon.policies.alsched.lang import Request
from utilon.repro import alsched as R
from utilon.scenario.build import build_workload
from utilon.scenario.load import parse_scenario


def _cluster(large: int = 1, small: int = 4) -> Cluster:
    return R.cluster(large, small)


def test_nbody_soft_takes_the_large_machine_and_gets_the_speedup() -> None:
    cl = _cluster(1, 4)
    jobs = [make_job("a", "nbody", 12, 100.0, speedup=4.0)]  # only the 32-core machine fits
    res = run(cl, jobs, "alsched")
    check_run_invariants(res, cl, jobs)
    att = attempts_of(res, "a")
    assert {a.machine for a in att} == {"L00"}
    assert res.end_time == pytest.approx(25.0)  # 100 / f


@pytest.mark.parametrize("constraints", ["soft", "hard"])
def test_nbody_desired_machines_are_those_that_hold_all_its_tasks(constraints: str) -> None:
    """§5.2: "one of the desired machines, i.e., one of the machines with enough cores to
    accommodate all tasks": an 8-task job co-locates on an 8-core machine and gets the
    speedup while the 32-core machine is busy; with ``desired="large"`` (the ablation) Hard
    waits for the 32-core machine instead."""
    cl = _cluster(1, 4)
    jobs = [make_job("big", "nbody", 32, 100.0, speedup=4.0),
            make_job("small", "nbody", 8, 100.0, speedup=4.0)]
    res = run(cl, jobs, "alsched", constraints=constraints)
    check_run_invariants(res, cl, jobs)
    att = attempts_of(res, "small")
    assert len({a.machine for a in att}) == 1 and att[0].machine.startswith("S")
    assert res.end_time == pytest.approx(25.0)
    large_only = [make_job(j.id, "nbody", len(j.stages[0].tasks), 100.0, speedup=4.0,
                           desired="large") for j in jobs]
    hard = run(cl, large_only, "alsched", constraints="hard")
    assert hard.end_time == pytest.approx(50.0)  # "small" waits for L00
    with pytest.raises(ValueError, match="desired"):
        request_for("nbody", "gpu")


def test_table1_mixed_under_none_costs_at_most_the_lost_speedup() -> None:
    """The experiment of docs/reproduction-alsched.md (MIXED, None not 2x Soft): with its
    cores spread (the reading before issue 44) None on MIXED takes exactly what the workload
    takes with no speedup at all, under any policy; first-fit (the faithful reading) it may
    co-locate by chance, so it takes no longer than that."""
    cl = R.cluster(8, 64)
    flat = workload(("pi", "nbody", "local"), 100, duration=10.0, speedup=1.0, seed=0)
    no_speedup = {R.total_runtime(flat, cl, p) for p in R.POLICIES}
    assert len(no_speedup) == 1
    for seed in (0, 1):
        jobs = workload(("pi", "nbody", "local"), 100, duration=10.0, speedup=2.0, seed=seed)
        flat = workload(("pi", "nbody", "local"), 100, duration=10.0, speedup=1.0, seed=seed)
        lost = R.total_runtime(flat, cl, "none")
        assert R.total_runtime(jobs, cl, "none", fill="spread") == lost
        assert R.total_runtime(jobs, cl, "none") <= lost
        assert R.total_runtime(jobs, cl, "soft") < lost


def test_soft_falls_back_hard_waits_none_takes_cores_first_fit() -> None:
    cl = _cluster(1, 4)
    # two 20-task jobs: only one fits the 32-core machine at a time
    jobs = [make_job("a", "nbody", 20, 100.0, speedup=4.0),
            make_job("b", "nbody", 20, 100.0, speedup=4.0)]
    soft = run(cl, jobs, "alsched", constraints="soft")
    hard = run(cl, jobs, "alsched", constraints="hard")
    none = run(cl, jobs, "alsched", constraints="none")
    for r in (soft, hard, none):
        check_run_invariants(r, cl, jobs)
    # Soft: a on the large machine (25), b on the small ones at once, slow (100)
    assert soft.end_time == pytest.approx(100.0)
    assert min(a.start for a in attempts_of(soft, "b")) == 0.0
    # Hard: b waits for the large machine: 25 + 25
    assert hard.end_time == pytest.approx(50.0)
    assert all(a.machine == "L00" for a in attempts_of(hard))
    # None ignores the preference: units first-fit in machine order, so a lands whole on
    # L00 by chance (speedup: 25) and b straddles L00 and S000 (no speedup: 100)
    assert none.end_time == pytest.approx(100.0)
    machines = {j: {a.machine for a in attempts_of(none, j)} for j in ("a", "b")}
    assert machines == {"a": {"L00"}, "b": {"L00", "S000"}}
    assert max(a.end for a in attempts_of(none, "a")) == pytest.approx(25.0)
    # the reading before issue 44 (fill="spread"): never co-located, no speedup for anyone
    spread = run(cl, jobs, "alsched", constraints="none", fill="spread")
    check_run_invariants(spread, cl, jobs)
    assert all(len({a.machine for a in attempts_of(spread, j)}) > 1 for j in ("a", "b"))
    assert min(a.end for a in attempts_of(spread)) == pytest.approx(100.0)


def test_hard_refuses_a_request_that_can_never_be_met() -> None:
    cl = _cluster(1, 4)
    jobs = [make_job("big", "nbody", 40, 10.0, speedup=2.0)]  # more than 32 cores
    with pytest.raises(Unrunnable) as ei:
        run(cl, jobs, "alsched", constraints="hard")
    line = ei.value.one_line()
    assert "job big: stage 'nbody'" in line and "never be met" in line
    assert "constraints=hard" in line and "policy 'alsched'" in line
    soft = run(cl, jobs, "alsched", constraints="soft")
    assert not soft.stopped_early  # Soft falls back to the whole cluster


def test_local_must_run_on_one_machine_under_every_policy() -> None:
    cl = _cluster(1, 4)
    jobs = [make_job(f"l{i}", "local", 6, 10.0) for i in range(6)]
    for p in ("soft", "hard", "none"):
        res = run(cl, jobs, "alsched", constraints=p)
        check_run_invariants(res, cl, jobs)
        for j in jobs:
            assert len({a.machine for a in attempts_of(res, j.id)}) == 1


def test_pi_takes_partial_allocations_and_resubmits_the_rest() -> None:
    cl = _cluster(0, 2)  # 16 cores
    jobs = [make_job("pi", "pi", 24, 10.0)]
    pol = make_policy("alsched")
    res = run(cl, jobs, pol)
    check_run_invariants(res, cl, jobs)
    assert res.end_time == pytest.approx(20.0)
    rep = pol.report()
    assert rep["submissions"] == 1 and rep["resubmissions"] >= 1


def test_zero_utility_job_stays_pending_until_its_class_frees_up() -> None:
    cl = _cluster(1, 2)
    expr = "nck(L00, tasks, tasks)"  # only the large machine will do
    jobs = [Job(n, 0.0, (Stage("s", Task.many([10.0] * 20, Resources(cpu=1.0)),
                               request=Request.from_spec(expr, where="t")),))
            for n in ("x", "y")]
    res = run(cl, jobs, "alsched")
    starts = sorted({a.start for a in attempts_of(res)})
    assert starts == [0.0, 10.0]  # y waits with utility 0 rather than run elsewhere


def test_periodic_mode_and_parameter_errors() -> None:
    cl = _cluster(1, 4)
    jobs = [make_job("a", "pi", 10, 7.0), make_job("b", "nbody", 8, 10.0, speedup=2.0)]
    res = run(cl, jobs, "alsched", interval=5.0)
    check_run_invariants(res, cl, jobs)
    assert all(a.start % 5.0 == 0 for a in attempts_of(res))
    for params, text in (({"interval": 0}, "interval"), ({"constraints": "soft-ish"}, "soft"),
                         ({"solver": "cplex"}, "greedy"), ({"unit": -1}, "unit")):
        with pytest.raises(ParameterError, match=text):
            make_policy("alsched", params)


@pytest.mark.parametrize("solver", ["bnb", "milp"])
def test_exact_solvers_drive_the_policy_too(solver: str) -> None:
    cl = _cluster(1, 3)
    jobs = workload(("nbody", "pi", "local"), 12, duration=10.0, speedup=2.0, seed=3)
    greedy = run(cl, jobs, "alsched")
    exact = run(cl, jobs, "alsched", solver=solver)
    check_run_invariants(exact, cl, jobs)
    assert not exact.stopped_early and not greedy.stopped_early


def test_runs_without_requests_on_a_generic_workload() -> None:
    """Jobs with no request get 'any units, linear'; multi-stage jobs resubmit per stage."""
    from builders import make_cluster
    from builders import make_job as mk

    cl = make_cluster(3, cpu=4)
    jobs = [mk(f"j{i}", submit=float(i), maps=5, reduces=2, dur=3.0) for i in range(6)]
    res = run(cl, jobs, "alsched")
    check_run_invariants(res, cl, jobs)
    assert not res.stopped_early


def test_deterministic() -> None:
    cl = _cluster(2, 6)
    jobs = workload(("nbody", "pi", "local"), 40, duration=10.0, speedup=3.0, seed=7)
    a = run(cl, jobs, "alsched")
    b = run(cl, jobs, "alsched")
    assert [(x.task, x.machine, x.start) for x in a.core.attempts] == \
        [(x.task, x.machine, x.start) for x in b.core.attempts]


def test_colocate_speedup_needs_the_whole_stage_on_one_machine() -> None:
    """The simulator's placement-dependent duration (§5.1), under a policy that spreads."""
    cl = Cluster((Machine("m0", Resources(cpu=2.0)), Machine("m1", Resources(cpu=2.0))))
    st = Stage("s", Task.many([10.0] * 4, Resources(cpu=1.0)), colocate_speedup=5.0)
    res = run(cl, [Job("j", 0.0, (st,))], "fifo")
    assert res.end_time == pytest.approx(10.0)  # 4 tasks on 2 machines: no speedup
    one = Stage("s", Task.many([10.0] * 2, Resources(cpu=1.0)), colocate_speedup=5.0)
    res = run(cl, [Job("j", 0.0, (one,))], "fifo")
    assert res.end_time == pytest.approx(2.0)  # both on m0 (first fit): 10 / 5


def test_scenario_requests_load_and_bad_ones_are_one_line_errors(tmp_path: Path) -> None:
    doc = {
        "name": "t",
        "cluster": {"machines": [{"count": 1, "capacity": {"cpu": 32}, "id": "big",
                                  "attributes": {"kind": "large"}},
                                 {"count": 4, "capacity": {"cpu": 8}, "id": "small",
                                  "attributes": {"kind": "small"}}]},
        "workload": {"jobs": [{"id": "nb", "submit": 0, "stages": [{
            "name": "nbody", "tasks": 8, "duration": 100, "demand": {"cpu": 1},
            "colocate_speedup": 4,
            "request": {"expr": R_NBODY, "each": {"i": {"kind": "large"}}}}]}]},
        "policy": {"name": "alsched"},
    }
    spec = parse_scenario(doc, "s.yaml")
    wl = build_workload(spec, source="s.yaml")
    assert isinstance(wl.jobs[0].stages[0].request, Request)
    res = run(wl.cluster, wl.jobs, "alsched")
    assert res.end_time == pytest.approx(25.0)
    doc["workload"]["jobs"][0]["stages"][0]["request"]["expr"] = "(max (nck(i, 8 8)))"
    with pytest.raises(UtilonError) as exc:
        build_workload(parse_scenario(doc, "s.yaml"), source="s.yaml")
    line = exc.value.one_line()
    assert "s.yaml" in line and "request" in line and "col" in line and "\n" not in line


R_NBODY = ("(max (*1 (bar tasks (max (nck(i,tasks,tasks))))))"
           "(*0.5 (bar tasks (LnCk(all,tasks,tasks))))")


def test_request_for_each_kind_binds() -> None:
    cl = _cluster(1, 2)
    for kind in ("nbody", "pi", "local"):
        b = request_for(kind).bind(list(cl.machines), [32.0, 8.0, 8.0], 6, where="t")
        assert b is not None and b.expr.upper() > 0
    with pytest.raises(ValueError):
        request_for("gpu")


def test_solve_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from utilon.cli.app import app

    inst = {"machines": [{"prefix": "L", "count": 2, "units": 32,
                          "attributes": {"kind": "large"}},
                         {"prefix": "S", "count": 4, "units": 8,
                          "attributes": {"kind": "small"}}],
            "jobs": [{"id": f"j{i}", "tasks": 20, "request": {
                "expr": R_NBODY, "each": {"i": {"kind": "large"}}}} for i in range(3)]}
    p = tmp_path / "i.json"
    p.write_text(json.dumps(inst))
    r = CliRunner().invoke(app, ["solve", "alsched", str(p), "--compare"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["compare"]["bnb"]["status"] == "optimal"
    assert out["compare"]["milp"]["total_utility"] == pytest.approx(
        out["compare"]["bnb"]["total_utility"])
    assert out["total_utility"] == pytest.approx(20 + 20 + 10)  # two large machines + rest
    j0 = out["jobs"][0]
    assert j0["units"] == 20 and sum(j0["classes"].values()) >= 20
    inst["jobs"][0]["request"] = "(max nck(i, 3,"
    p.write_text(json.dumps(inst))
    r = CliRunner().invoke(app, ["solve", "alsched", str(p)])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "jobs[0].request" in r.output and "col" in r.output
    r = CliRunner().invoke(app, ["solve", "alsched", "--schema"])
    assert r.exit_code == 0 and "machines" in r.output


def test_published_solve_schema_is_current() -> None:
    from utilon.policies.alsched import oneshot

    root = Path(__file__).resolve().parents[1]
    published = json.loads((root / "docs" / "solve-alsched.schema.json").read_text())
    assert oneshot.schema() == published


def test_example_instance_solves_with_every_solver() -> None:
    from utilon.policies.alsched import oneshot

    root = Path(__file__).resolve().parents[1]
    out = oneshot.solve_file(root / "examples" / "solve" / "alsched-nbody.json", compare=True)
    assert out["compare"]["bnb"]["status"] == "optimal"
    assert out["compare"]["bnb"]["total_utility"] == pytest.approx(
        out["compare"]["milp"]["total_utility"])
    assert 0.0 <= out["greedy_gap"] < 1.0
    assert set(out) >= {"jobs", "total_utility", "timing"}


def test_reproduce_cli_prints_table1_and_the_sweeps(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`utilon reproduce alsched --quick --seed 5 --seeds 2`, at a reduced size (the real
    one takes minutes): the tables, and every claim over both seeds for each system."""
    from typer.testing import CliRunner

    from utilon.cli.app import app
    from utilon.repro.alsched_claims import CLAIMS

    monkeypatch.setattr(R, "FIG_JOBS", 60)
    monkeypatch.setattr(R, "TABLE_JOBS", 30)
    monkeypatch.setattr(R, "SPEEDUPS_QUICK", (2.0, 10.0))
    r = CliRunner().invoke(app, ["reproduce", "alsched", "--quick", "--seed", "5", "--seeds",
                                 "2", "--jobs", "1", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    for text in ("Table 1", "22 /", "Fig. 7", "Figs. 8-9", "Hard overtakes Soft",
                 "claims", "paper", "alsched-spread", "holds on", "2/2", "(5–6)"):
        assert text in r.output
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["seeds"] == [5, 6]
    assert set(res["fig7"]["runtime"]) == {"soft", "hard", "none"}
    assert len(res["fig7"]["runtime"]["soft"]) == 2
    assert set(res["fig7"]["per_seed"]) == {"5", "6"}
    assert (res["fig7"]["large"], res["fig7"]["small"], res["fig7"]["jobs"]) == (4, 40, 30)
    assert [c["key"] for c in res["claims"]] == [c.key for c in CLAIMS]
    for c in res["claims"]:
        systems = [row["system"] for row in c["systems"]]
        assert systems == (["alsched"] if c["key"].startswith("fig") else list(R.SYSTEMS))
        assert all(row["n"] == 2 and row["seeds"] == [5, 6] for row in c["systems"])
    for name in res["figures"]:
        assert (tmp_path / name).stat().st_size > 1000


def test_inflection_interpolates() -> None:
    assert R.inflection([2, 4, 6], [10, 10, 10], [20, 12, 8]) == pytest.approx(5.0)
    assert R.inflection([2, 4], [10, 10], [20, 12]) is None
    assert R.inflection([2, 4], [10, 10], [9, 12]) == 2.0
