"""The ``rds`` policy: case study, job management (Algorithm 1, fast path), invariants,
determinism, outputs and errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from builders import change, check_run_invariants, make_cluster, make_job, run, running_at
from utilon.core.snapshot import JobView, StageView
from utilon.errors import ParameterError
from utilon.model.lifecycle import JobState
from utilon.model.utility import Constant, SoftHard
from utilon.policies import make_policy
from utilon.policies.rds.capacity import CapacityProfile
from utilon.policies.rds.order import lateness_weight, remaining_time, wmdd_key
from utilon.policies.rds.slots import dynamic_slot_grants, whole_slots
from utilon.repro import rds as R
from utilon.runner import run_policy


def _view(jid: str, running: int, ready: int, goal: float = 100.0, submit: float = 0.0
          ) -> JobView:
    st = StageView("map", 0, "map", running + ready, 0, ready, running, 0, 10.0,
                   None, 1.0, False)  # type: ignore[arg-type]
    return JobView(jid, "t", submit, 1.0, 0, "", SoftHard(submit, goal, 2 * goal),
                   JobState.RUNNING, 0.0, (st,))


def test_algorithm1_orders_by_deficit_and_caps_at_target() -> None:
    jobs = [_view("a", running=4, ready=10), _view("b", running=0, ready=10),
            _view("c", running=6, ready=10), _view("w", running=0, ready=5, goal=50.0)]
    d = dynamic_slot_grants(jobs, {"a": 5.0, "b": 3.0, "c": 2.0}, [], r_slot=1.0)
    assert [g.job for g in d.grants] == ["b", "a", "c", "w"]  # deficits 3, 1, -4; then waiting
    assert [g.slots for g in d.grants] == [3, 5, 2, 0]
    assert d.backfill
    strict = dynamic_slot_grants(jobs, {"a": 5.0, "b": 3.0, "c": 2.0}, [], r_slot=1.0,
                                 work_conserving=False)
    assert "w" not in [g.job for g in strict.grants]


def test_algorithm1_by_deadline_keeps_the_targets_and_orders_by_soft_bound() -> None:
    """The deadline-aware variant: the same targets, the running queue by soft bound."""
    jobs = [_view("a", running=4, ready=10, goal=300.0), _view("b", running=0, ready=10,
                                                               goal=200.0),
            _view("c", running=6, ready=10, goal=100.0)]
    d = dynamic_slot_grants(jobs, {"a": 5.0, "b": 3.0, "c": 2.0}, [], r_slot=1.0,
                            by_deadline=True)
    assert [g.job for g in d.grants] == ["c", "b", "a"]
    assert [g.slots for g in d.grants] == [2, 3, 5]


def test_algorithm1_priority_orders_running_and_waiting_queues() -> None:
    """The variants' order (smaller key first) replaces the deficit order, the targets stay
    the caps, and waiting jobs follow in the same order (work conservation)."""
    jobs = [_view("a", running=4, ready=10, goal=100.0), _view("b", running=0, ready=10),
            _view("c", running=6, ready=10), _view("w1", running=0, ready=5, goal=50.0),
            _view("w2", running=0, ready=5, goal=60.0)]
    key = {"a": 3.0, "b": 1.0, "c": 2.0, "w1": 9.0, "w2": 8.0}
    d = dynamic_slot_grants(jobs, {"a": 5.0, "b": 3.0, "c": 2.0}, [], r_slot=1.0,
                            priority=key)
    assert [g.job for g in d.grants] == ["b", "c", "a", "w2", "w1"]
    assert [g.slots for g in d.grants] == [3, 2, 5, 0, 0]
    assert d.backfill


def test_remaining_time_is_the_fluid_time_scaled_by_the_model() -> None:
    """p_j of the WMDD order: remaining task-seconds over the capacity the job can fill,
    per phase, times the fluid law's gain over the model's."""
    st = (StageView("map", 0, "map", 100, 0, 60, 20, 20, 30.0, None, 1.0,  # type: ignore
                    False),
          StageView("reduce", 1, "reduce", 10, 10, 0, 0, 0, 60.0, None, 1.0,  # type: ignore
                    False))
    job = JobView("j", "t", 0.0, 1.0, 0, "", SoftHard(0.0, 1000.0, 2000.0),
                  JobState.RUNNING, 0.0, st)
    # 80 maps x 30 s on 40 slots, then 10 reduces x 60 s on the 10 slots they can fill
    assert remaining_time(job, 40.0, 1.0) == pytest.approx(60.0 + 60.0)
    assert remaining_time(job, 40.0, 1.0, (2.0, 0.5)) == pytest.approx(120.0 + 30.0)
    # scale-up at speed 2: the same 40 slots deliver 80 units of capacity
    assert remaining_time(job, 80.0, 2.0) == pytest.approx(30.0 + 30.0)


def test_wmdd_key_serves_the_short_late_job_before_the_long_earlier_one() -> None:
    """The domino effect of EDF under Eq. 1 and the weighted modified due date that avoids it:
    a long job due first would make the short one behind it late as well."""
    def job(jid: str, soft: float, tasks: int) -> JobView:
        st = StageView("map", 0, "map", tasks, 0, tasks, 0, 0, 60.0, None, 1.0,  # type: ignore
                       False)
        return JobView(jid, "t", 0.0, 1.0, 0, "", SoftHard(0.0, soft, 2 * soft),
                       JobState.RUNNING, None, (st,))

    long, short = job("long", 360.0, 100), job("short", 420.0, 10)  # 600 s and 60 s on 10
    assert lateness_weight(long) == pytest.approx(1 / 360.0)
    p_long, p_short = remaining_time(long, 10.0, 1.0), remaining_time(short, 10.0, 1.0)
    assert (p_long, p_short) == (pytest.approx(600.0), pytest.approx(60.0))
    assert long.goal < short.goal  # EDF serves the long job first ...
    assert wmdd_key(short, 0.0, p_short) < wmdd_key(long, 0.0, p_long)  # ... WMDD the short
    # with slack left for both, WMDD is EDF scaled by the allowed time
    assert wmdd_key(long, 0.0, 60.0) == pytest.approx(360.0 * 360.0)


def test_wmdd_puts_jobs_eq1_never_charges_last() -> None:
    """Weight 0 or no deadline: w_j = 0, the job goes last (found by the property tests as a
    ZeroDivisionError)."""
    base = _view("a", running=0, ready=10)
    assert wmdd_key(base._replace(weight=0.0), 0.0, 10.0) == math.inf
    no_deadline = base._replace(utility=Constant(1.0))
    assert wmdd_key(no_deadline, 0.0, 10.0) == math.inf
    assert wmdd_key(base, 0.0, 10.0) < math.inf


@pytest.mark.parametrize(("policy", "params", "finish"), [
    # EDF: the long job, due first, holds the cluster; the short one is late behind it
    ("edf-p", {}, {"long": 600.0, "short": 660.0}),
    # the deadline variant's plan splits the cluster: the short job is late as well
    ("rds", {"objective": "deadline"}, {"long": 660.0, "short": 480.0}),
    # WMDD: the short job first (60 s), the long one 60 s later than under EDF
    ("rds", {"objective": "tardiness"}, {"long": 660.0, "short": 60.0})])
def test_tardiness_objective_avoids_the_domino_effect(policy: str, params: dict,
                                                       finish: dict) -> None:
    cluster = make_cluster(1, slots=10, cpu=10, mem=10)
    jobs = [make_job("long", maps=100, reduces=0, dur=60.0,
                     utility=SoftHard(0.0, 360.0, 720.0)),
            make_job("short", maps=10, reduces=0, dur=60.0,
                     utility=SoftHard(0.0, 420.0, 840.0))]
    result = run(cluster, jobs, policy, **({"interval": 300.0, "predictor": "last"}
                                           if policy == "rds" else {}), **params)
    check_run_invariants(result, cluster, jobs)
    assert {k: j.finish for k, j in result.core.jobs.items()} == pytest.approx(finish)
    # Eq. 1: 240/360 + 240/420 = 1.24 under EDF, 300/360 = 0.83 under WMDD


def test_tardiness_objective_serves_a_newcomer_between_control_steps() -> None:
    """The sequence covers every active job: a job that arrives between two control steps
    with the smallest WMDD key takes the next slots that free, as under EDF-P."""
    cluster = make_cluster(1, slots=10, cpu=10, mem=10)
    jobs = [make_job("long", maps=200, reduces=0, dur=60.0,
                     utility=SoftHard(0.0, 1000.0, 2000.0)),
            make_job("short", submit=130.0, maps=10, reduces=0, dur=60.0,
                     utility=SoftHard(130.0, 430.0, 730.0))]
    result = run(cluster, jobs, "rds", interval=600.0, predictor="last",
                 objective="tardiness")
    check_run_invariants(result, cluster, jobs)
    short = result.core.jobs["short"]
    assert (short.start, short.finish) == (pytest.approx(180.0), pytest.approx(240.0))


def test_tardiness_objective_is_work_conserving() -> None:
    """No slot idles while a submitted job has a task not yet started, whatever the plan's
    targets: capped and waiting jobs take what the plan leaves, in the variant's order."""
    cluster = make_cluster(2, slots=4, cpu=4, mem=4)
    jobs = [make_job(f"j{i}", submit=40.0 * i, maps=30 - 5 * i, reduces=0, dur=50.0 + 7 * i,
                     utility=SoftHard(40.0 * i, 40.0 * i + 500.0 + 300 * i,
                                      40.0 * i + 1000.0 + 600 * i))
            for i in range(4)]
    policy = make_policy("rds", {"interval": 200.0, "predictor": "last",
                                 "objective": "tardiness"})
    result = run(cluster, jobs, policy)
    check_run_invariants(result, cluster, jobs)
    # a sequence: the QP is not solved, its plan would split the cluster
    assert policy.report()["optimizer"]["calls"] == 0
    attempts = result.core.attempts
    for t in sorted({a.start for a in attempts} | {a.end for a in attempts}):
        pending = sum(len(j.stages[0].tasks) for j in jobs if j.submit <= t) - sum(
            1 for a in attempts if a.start <= t)
        if pending > 0:
            assert running_at(result, t) == 8, t


def test_algorithm1_fast_path_first_and_slot_size() -> None:
    jobs = [_view("a", running=0, ready=10), _view("f", running=0, ready=3)]
    d = dynamic_slot_grants(jobs, {"a": 4.0}, ["f"], r_slot=2.0)
    assert d.grants[0].job == "f" and d.grants[0].slots is None
    assert d.grants[1].slots == 2  # 4 capacity units at 2 per slot (scale-up speed 2)
    assert whole_slots(0.0, 1.0) == 0 and whole_slots(0.2, 1.0) == 1
    assert whole_slots(2.5, 1.0) == 3


def test_capacity_profile_means() -> None:
    cluster = make_cluster(2, slots=2, timeline=[
        change(100, "m0", "speed", 2.0), change(200, "m1", "leave"), change(300, "m1", "join")])
    prof = CapacityProfile.from_cluster(cluster)
    assert prof.at(0) == 4 and prof.at(150) == 6 and prof.at(250) == 4 and prof.at(350) == 6
    np.testing.assert_allclose(prof.means(0, 100, 4), [4, 6, 4, 6])
    np.testing.assert_allclose(prof.means(50, 100, 1), [5])


def _case() -> tuple:
    wl = R.workload_of(R.case_study_document())
    return wl, {j.id: j for j in wl.jobs}


@pytest.mark.parametrize(("policy", "params", "j2_met"), [
    ("fifo", {}, False), ("fair", {}, False), ("rds", {"predictor": "oracle"}, True),
    # the deadline-aware variant meets both with ARIMA, which sees only the past: when the
    # cluster slows down unexpectedly, J2, due first, keeps its planned slots
    ("rds", {"predictor": "arima", "objective": "deadline"}, True),
    ("rds", {"predictor": "arima", "objective": "tardiness"}, True)])
def test_case_study_table1(policy: str, params: dict, j2_met: bool) -> None:
    wl, _ = _case()
    res = run_policy(wl, policy, params)
    met = {r["id"]: not r["missed"] for r in res.rows}
    assert met["J2"] is j2_met
    if policy == "rds":
        assert met["J1"], res.rows  # the ideal scheduler meets both deadlines (Fig. 2d)


def test_rds_invariants_scale_out_with_leaving_machines() -> None:
    tl = [change(t, f"m{i}", a) for t, a in ((150, "leave"), (900, "join")) for i in (2, 3)]
    tl += [change(900, "m0", "speed", 0.5), change(2100, "m0", "speed", 1.0)]
    cluster = make_cluster(4, slots=2, timeline=tl)
    jobs = [make_job(f"j{i}", submit=i * 200.0, maps=24, reduces=2, dur=100.0,
                     utility=SoftHard(i * 200.0, i * 200.0 + 2500, i * 200.0 + 5000))
            for i in range(5)]
    jobs.append(make_job("short", submit=180.0, maps=2, reduces=0, dur=30.0,
                         utility=SoftHard(180.0, 280.0, 380.0)))
    result = run(cluster, jobs, "rds", interval=300.0, predictor="last")
    check_run_invariants(result, cluster, jobs)
    assert all(j.finish is not None for j in result.core.jobs.values())
    # the fast path: a job due before the next control instant (300) gets the first free slot
    assert result.core.jobs["short"].start == pytest.approx(200.0)  # first slot freed
    assert result.core.jobs["short"].finish <= 280.0
    assert result.core.stats.lost > 0  # tasks on leaving machines are lost and re-run
    slow = run(cluster, jobs, "rds", interval=300.0, predictor="last", fast_path=False)
    assert slow.core.jobs["short"].start >= 300.0


@pytest.mark.parametrize("objective", ["deadline", "tardiness"])
def test_variants_keep_the_invariants_when_machines_leave(objective: str) -> None:
    tl = [change(t, f"m{i}", a) for t, a in ((150, "leave"), (900, "join")) for i in (2, 3)]
    tl += [change(900, "m0", "speed", 0.5), change(2100, "m0", "speed", 1.0)]
    cluster = make_cluster(4, slots=2, timeline=tl)
    jobs = [make_job(f"j{i}", submit=i * 200.0, maps=24 - 3 * i, reduces=2, dur=100.0,
                     utility=SoftHard(i * 200.0, i * 200.0 + 1500 + 300 * i,
                                      i * 200.0 + 3000 + 600 * i))
            for i in range(5)]
    result = run(cluster, jobs, "rds", interval=300.0, predictor="last", objective=objective)
    check_run_invariants(result, cluster, jobs)
    assert all(j.finish is not None for j in result.core.jobs.values())
    again = run(cluster, jobs, "rds", interval=300.0, predictor="last", objective=objective)
    assert [a.start for a in result.core.attempts] == [a.start for a in again.core.attempts]


def test_rds_deterministic_and_reports(tmp_path: Path) -> None:
    wl, _ = _case()
    a = run_policy(wl, "rds", {"predictor": "arima"}, out_dir=tmp_path / "a")
    run_policy(wl, "rds", {"predictor": "arima"}, out_dir=tmp_path / "b")
    for name in ("jobs.csv", "allocation.csv", "capacity.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    sa = json.loads((tmp_path / "a" / "summary.json").read_text())
    sb = json.loads((tmp_path / "b" / "summary.json").read_text())
    sa.pop("timing"), sb.pop("timing")
    assert sa == sb
    rep = sa["policy_report"]
    assert rep["optimizer"]["calls"] >= 4 and rep["optimizer"]["fallbacks"] == 0
    assert {"1", "2"} <= set(rep["capacity_prediction"]["nrmse_by_step"])
    assert rep["progress_model"]["updates"] > 0
    assert rep["progress_model"]["step_nrmse"] is not None
    assert "hard_misses" in sa
    assert a.summary["timing"]["solver_calls"] == rep["optimizer"]["calls"]


def test_rds_parameter_errors(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="unknown predictor 'psychic'"):
        make_policy("rds", {"predictor": "psychic"})
    with pytest.raises(ParameterError, match="horizon"):
        make_policy("rds", {"horizon": 0})
    with pytest.raises(ParameterError, match="not found"):
        make_policy("rds", {"profile": str(tmp_path / "nope.json")})
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ParameterError, match="not a progress-model profile"):
        make_policy("rds", {"profile": str(bad)})
    with pytest.raises(ParameterError,
                       match="objective must be one of paper, deadline, tardiness"):
        make_policy("rds", {"objective": "edf"})
    with pytest.raises(ParameterError, match="urgency must be >= 1"):
        make_policy("rds", {"urgency": 0.5})
    with pytest.raises(ParameterError, match="tracking must be one of cumulative, interval"):
        make_policy("rds", {"tracking": "total"})


def test_deadline_objective_prices_lateness_by_deadline_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``objective: deadline``: every job's reference is as much progress as it can make, and
    its weight is its own times urgency^-k for the k-th earliest soft bound; the paper's
    objective weights by δ and tracks the uniform trajectory to the deadline."""
    import utilon.policies.rds.policy as P

    seen = []
    solve = P.solve_rhc

    def spy(problem, **kw):  # type: ignore[no-untyped-def]
        seen.append(problem)
        return solve(problem, **kw)

    monkeypatch.setattr(P, "solve_rhc", spy)
    cluster = make_cluster(2, slots=2)
    jobs = [make_job(name, submit=0.0, maps=40, reduces=0, dur=60.0,
                     utility=SoftHard(0.0, soft, 2 * soft))
            for name, soft in (("late", 3000.0), ("early", 1500.0), ("mid", 2400.0))]
    run(cluster, jobs, "rds", interval=300.0, predictor="last", objective="deadline",
        urgency=3.0)
    first = next(p for p in seen if p.jobs == 3)
    np.testing.assert_allclose(first.weight[:, 0], [1 / 9, 1.0, 1 / 3])
    # a full interval at all the slots a job can use finishes these jobs: the reference is 1
    np.testing.assert_allclose(first.reference[:, 0], 1.0)
    seen.clear()
    run(cluster, jobs, "rds", interval=300.0, predictor="last")
    paper = next(p for p in seen if p.jobs == 3)
    np.testing.assert_allclose(paper.weight[:, 0], [1.0, 1.0, 1.0])
    assert (paper.reference[:, 0] < 0.5).all()  # the uniform trajectory to the deadline


def test_constant_utility_jobs_still_run() -> None:
    cluster = make_cluster(2, slots=2)
    jobs = [make_job("a", maps=6, reduces=1, dur=50.0, utility=Constant()),
            make_job("b", submit=100.0, maps=4, reduces=0, dur=50.0, utility=Constant())]
    result = run(cluster, jobs, "rds", interval=120.0, predictor="last")
    check_run_invariants(result, cluster, jobs)
    assert all(j.finish is not None for j in result.core.jobs.values())


# ---------------------------------------------------------------------- the reproduction
def test_table3_workload_follows_the_paper() -> None:
    doc = R.table3_document("scale-out", R.DAYS[0], seed=0)
    jobs = doc["workload"]["jobs"]
    assert [j["id"].split("-")[0] for j in jobs] == [f"J{i}" for i in range(1, 10)]
    assert [j["stages"][0]["tasks"] for j in jobs] == [t.maps for t in R.TABLE3]
    assert [j["stages"][1]["tasks"] for j in jobs] == [t.reduces for t in R.TABLE3]
    gaps = np.diff([j["submit"] for j in jobs])
    np.testing.assert_allclose(gaps, R.INTERVAL)  # 10-minute inter-arrival (§5.3)
    for j, t in zip(jobs, R.TABLE3, strict=True):
        assert j["utility"]["soft"] == pytest.approx(2.5 * R.dedicated(t), abs=0.1)
        assert j["utility"]["hard"] == pytest.approx(2 * j["utility"]["soft"], abs=0.2)
        # our assumed task durations put each job near its Table 3 deadline / 2.5
        assert R.dedicated(t) / 60 == pytest.approx(t.deadline_min / 2.5, rel=0.3)
    wl = R.workload_of(doc)
    assert len(wl.cluster.machines) == R.NODES
    # a week of history before the first job, then the experiment
    assert jobs[0]["submit"] == R.HISTORY_DAYS * 86400 + R.START_HOUR * 3600


@pytest.mark.parametrize(("mode", "actions"), [("scale-out", {"join", "leave"}),
                                               ("scale-up", {"speed"})])
def test_solar_cluster_modes(mode: str, actions: set[str]) -> None:
    wl = R.workload_of(R.table3_document(mode, R.DAYS[0], seed=0))
    seen = {c.action.value for c in wl.cluster.timeline}
    assert seen == actions
    prof = CapacityProfile.from_cluster(wl.cluster)
    full = R.NODES * R.SLOTS
    assert prof.values.min() >= 0.5 * full - 1e-9  # half the power is from the grid
    assert prof.values.max() <= full + 1e-9


def test_profile_trains_a_model_per_kind(tmp_path: Path) -> None:
    wl = R.workload_of(R.table3_document("scale-out", R.DAYS[0], seed=0))
    path = R.profile_for(wl, tmp_path / "p.json")
    data = json.loads(path.read_text())
    assert sorted(data["models"]) == ["grep", "terasort", "wordcount"]
    pol = make_policy("rds", {"profile": str(path)})
    assert sorted(pol._models) == ["grep", "terasort", "wordcount"]


@pytest.mark.slow
@pytest.mark.long
def test_reproduce_rds_quick_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`utilon reproduce rds --quick` end to end: 3 seeds' held-out days, the claims of the
    faithful rds and the tardiness variant (tests/test_repro_rds.py runs shrunken ones)."""
    from typer.testing import CliRunner

    from utilon.cli import app

    res = CliRunner().invoke(app, ["reproduce", "rds", "--quick", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    for text in ("Table 1 / Fig. 2", "scale-up", "scale-out", "36%", "43%", "Fig. 9",
                 "Fig. 10", "Fig. 11", "Penalty per seed", "claims over 3 seed(s)",
                 "--quick: held-out days only"):
        assert text in res.output
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["case"]["rows"]["ideal (rds + oracle)"]["J2"]["met"]
    assert not data["case"]["rows"]["fifo"]["J2"]["met"]
    assert data["seeds"] == [0, 1, 2]
    assert [r["system"] for r in data["claims"][0]["systems"]] == ["rds", "rds-tardiness"]
    assert all(r["n"] == 3 for c in data["claims"] for r in c["systems"])


def test_late_weight_and_progress_error_run_deterministically() -> None:
    """The knobs behind the reproduction's no-δ-decay and Fig. 10b variants."""
    cluster = make_cluster(2, slots=2, cpu=2, mem=8)
    jobs = [make_job(f"j{i}", submit=5.0 * i, maps=12, reduces=1, dur=20.0,
                     deadline=200.0 + 40 * i) for i in range(4)]
    base = run(cluster, jobs, "rds", interval=30.0, predictor="last")
    for params in ({"late_weight": 1.0}, {"progress_error": 0.35, "seed": 3}):
        res = run(cluster, jobs, "rds", interval=30.0, predictor="last", **params)
        assert not res.stopped_early
        assert res.core.jobs.keys() == base.core.jobs.keys()
    noisy = run(cluster, jobs, "rds", interval=30.0, predictor="last", progress_error=0.35,
                seed=3)
    again = run(cluster, jobs, "rds", interval=30.0, predictor="last", progress_error=0.35,
                seed=3)
    assert [a.start for a in noisy.core.attempts] == [a.start for a in again.core.attempts]
    with pytest.raises(ParameterError):
        make_policy("rds", {"late_weight": -1.0})
