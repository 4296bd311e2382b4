"""The CORA policies (slotted mapping, grants), RRH, `utilon solve cora` and the reproduction."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from builders import make_cluster, make_job, single_stage_job
from utilon.cli import app
from utilon.core.snapshot import ClusterSnapshot
from utilon.model import Resources
from utilon.model.utility import Sigmoid
from utilon.policies import make_policy, policy_names
from utilon.policies.cora.exact import slots_needed
from utilon.policies.cora.policy import Cora, grants_from, slotted_instance
from utilon.policies.rrh import decay_rate
from utilon.repro import cora as R
from utilon.repro.cora_claims import CLAIMS as CORA_CLAIMS
from utilon.repro.cora_claims import SYSTEMS as CORA_SYSTEMS
from utilon.runner import run_policy
from utilon.scenario import load_workload
from utilon.sim.engine import Simulation

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def test_registered() -> None:
    assert {"cora", "cora-lp", "rrh"} <= set(policy_names())
    assert make_policy("cora", {"slot": 5}).slot == 5


@pytest.mark.parametrize("policy", ["cora", "cora-lp", "rrh"])
def test_runs_to_completion_with_invariants(policy: str) -> None:
    wl = load_workload(EXAMPLES / "capacity-changes.yaml")
    out = run_policy(wl, policy, validate=True)  # core invariants after every event
    assert out.summary["finished"] == out.summary["jobs"]
    assert not out.summary["stopped_early"]
    if policy.startswith("cora"):
        assert out.summary["timing"]["solver_calls"] > 0


def test_slotted_instance_and_grants() -> None:
    cluster = make_cluster(2, slots=4, cpu=4, mem=16)
    jobs = [make_job("a", submit=0, maps=10, reduces=2, dur=10, deadline=60),
            make_job("b", submit=0, maps=3, reduces=0, dur=10, deadline=200)]
    seen: list[tuple[ClusterSnapshot, object]] = []
    policy = Cora()

    def record(now: float, snap: ClusterSnapshot, decision: object) -> None:
        seen.append((snap, decision))

    res = Simulation(cluster, jobs, policy, on_decision=record, validate=True).run()
    assert all(j.finish is not None for j in res.core.jobs.values())
    snap, _decision = seen[0]
    slotted = slotted_instance(snap)
    assert slotted is not None
    inst = slotted.instance
    assert slotted.slot == 10.0  # median task duration
    assert inst.capacity[0, 0] == 8
    # remaining work in slot units: 12 tasks x 10 s / 10 s and 3 tasks
    assert inst.demand[:, 0].tolist() == [12, 3]
    assert inst.cap[:, 0].tolist() == [8, 3]  # no more containers than tasks left (or C)
    need = slots_needed(np.array([8]), inst.demand, inst.cap)
    assert inst.slots >= need
    # u_it = U(max(end of slot t, earliest finish)); a's earliest finish is map + reduce = 20 s
    u_a = jobs[0].utility
    assert inst.utility[0, 0] == pytest.approx(u_a.value(20.0))
    assert inst.utility[0, 3] == pytest.approx(u_a.value(40.0))
    sol = policy.solve(inst)
    grants = grants_from(slotted, sol)
    assert sum(g.slots or 0 for g in grants) <= 8
    first = {g.job: g.slots for g in grants}
    assert first == {"a": int(sol.allocation[0, 0, 0]), "b": int(sol.allocation[1, 0, 0])}


def test_rrh_decay_and_order() -> None:
    u = Sigmoid(p=4.0, mu=0.5, d=100.0)
    assert decay_rate(u, 0.0) == pytest.approx(4.0 * 0.5 / 4, rel=1e-3)  # p mu / 4
    cluster = make_cluster(1, slots=2, cpu=2, mem=8)
    # a tolerant job that arrived first and a critical one: RRH serves the critical one first
    tolerant = make_job("tolerant", submit=0, maps=6, reduces=0, dur=10, deadline=500)
    critical = make_job("critical", submit=1, maps=4, reduces=0, dur=10,
                        utility=Sigmoid(p=5.0, mu=1.0, d=31.0))
    res = Simulation(cluster, [tolerant, critical], make_policy("rrh")).run()
    jobs = res.core.jobs
    assert jobs["critical"].finish < jobs["tolerant"].finish


# ------------------------------------------------------------------ utilon solve cora
def test_solve_cli_edf_trap() -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["solve", "cora", str(EXAMPLES / "solve" / "cora-edf-trap.json")])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    by = {j["id"]: j for j in d["jobs"]}
    assert by["late-critical"]["completion_slot"] == 2
    assert by["early-tolerant"]["completion_slot"] == 4
    assert d["sorted_utilities"] == sorted(j["utility"] for j in d["jobs"])
    assert d["allocation"]["late-critical"]["units"] == [2, 2, 2, 0, 0]
    assert set(d) == {"solver", "jobs", "sorted_utilities", "min_utility", "sum_utility",
                      "allocation", "timing"}
    lp = json.loads(runner.invoke(app, ["solve", "cora", str(EXAMPLES / "solve" /
                                                           "cora-edf-trap.json"),
                                        "--solver", "cora-lp"]).stdout)
    assert lp["min_utility"] < d["min_utility"]  # the FINAL LP as written is not max-min


@pytest.mark.parametrize(("doc", "message"), [
    ({"slots": 2, "capacity": 1, "jobs": [{"id": "a", "demand": 5, "utility": [1, 0.5]}]},
     "jobs[0].demand: demands 5 units but the 2 slots can give it at most 2"),
    ({"slots": 2, "capacity": 1, "jobs": [{"id": "a", "demand": 2, "utility": [1, 0.5]},
                                          {"id": "b", "demand": 2, "utility": [1, 0.5]}]},
     "slots: the 2 jobs cannot all finish"),
    ({"slots": 2, "capacity": 1, "jobs": [{"id": "a", "demand": 1, "utility": [1, 2]}]},
     "jobs[0].utility: increases"),
    ({"slots": 2, "capacity": 1, "jobs": [{"id": "a", "demand": 1, "utility": [1]}]},
     "jobs[0].utility: 1 value(s) for 2 slots"),
    ({"slots": 2, "capacity": [1, 1], "jobs": [{"id": "a", "demand": [1], "utility": [1, 1]}]},
     "jobs[0].demand: 1 value(s) for 2 resource(s)"),
    ({"slots": 2, "capacity": 1, "jobs": [{"id": "a", "demand": 1, "utility": [1, 1],
                                          "extra": 1}]}, "jobs.0.extra"),
])
def test_solve_cli_errors_are_one_line(tmp_path: Path, doc: dict, message: str) -> None:
    f = tmp_path / "i.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    res = CliRunner().invoke(app, ["solve", "cora", str(f)])
    assert res.exit_code == 2
    assert message in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_solve_schema_is_published() -> None:
    res = CliRunner().invoke(app, ["solve", "cora", "--schema"])
    assert res.exit_code == 0
    published = json.loads((ROOT / "docs" / "solve-cora.schema.json").read_text())
    assert json.loads(res.stdout) == published


# ------------------------------------------------------------------ reproduction
def test_cora_workload_follows_section_3c() -> None:
    wl = R.cora_workload(40, {"critical": 0.2, "sensitive": 0.6, "insensitive": 0.2}, 3)
    classes = [j.job_class for j in wl.jobs]
    assert classes.count("critical") == 8 and classes.count("insensitive") == 8
    gaps = np.diff([j.submit for j in wl.jobs])
    assert 60 < float(np.mean(gaps)) < 260  # Poisson, mean 130 s
    for j in wl.jobs:
        maps, reds = (len(s.tasks) for s in j.stages)
        assert 40 <= maps <= 100 and 5 <= reds <= 20
        u = j.utility
        assert isinstance(u, Sigmoid) and 1 <= u.p <= 5 and j.weight == pytest.approx(u.p)
        mu_min = u.mu * R.CALIBRATED["mu_unit"]  # μ in the calibrated unit
        lo, hi = {"critical": (4, 6), "sensitive": (0.01, 1), "insensitive": (0, 0)}[
            j.job_class]
        assert lo - 1e-6 <= mu_min <= hi + 1e-6
        assert u.d > j.submit + wl.standalone[j.id]  # ≥ 1.25 × standalone (± noise) × ≥ 1 job


def test_cora_is_never_beaten_on_its_own_instances(tmp_path: Path) -> None:
    """Fig. 3's per-event comparison doubles as an exactness check: on every slotted
    instance CORA met, no baseline's (integral) allocation has a higher minimum utility."""
    t = R.table1(12, 2, tmp_path, schedulers=("cora",))
    assert len(t.recorder.rows) > 50
    for b in t.recorder.baselines:
        assert all(c >= o[b] - 1e-9 for _, c, o in t.recorder.rows), b


@pytest.mark.slow
def test_reproduce_quick_prints_tables_beside_the_paper(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`utilon reproduce cora --quick` end to end, on smaller tables (the quick run itself
    takes half a minute; the tables' contents are tested above)."""
    monkeypatch.setitem(R.SIZES, "table1_quick", 16)
    monkeypatch.setitem(R.SIZES, "mix", 8)
    monkeypatch.setitem(R.SIZES, "percents_quick", (10, 60))
    res = CliRunner().invoke(app, ["reproduce", "cora", "--quick", "--seeds", "2", "--jobs", "1",
                                   "--seed", "3", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    for title in ("Table I", "Fig. 3", "Table II", "Table III", "headroom",
                  "CORA's claims over 2 seed(s) (3–4)"):
        assert title in res.stdout
    assert "241.8" in res.stdout  # the paper's CORA sum utility, printed beside ours
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["seeds"] == [3, 4] and set(results["per_seed"]) == {"3", "4"}
    claims = {c["key"]: c for c in results["claims"]}
    assert set(claims) == {c.key for c in CORA_CLAIMS}
    for c in claims.values():  # the faithful system first, each on both seeds
        assert [r["system"] for r in c["systems"]] == list(CORA_SYSTEMS)
        assert all(r["n"] == 2 for r in c["systems"])
    head = claims["table1.sum"]["systems"][0]["extra"][0]
    assert head["alone_sum"] >= head["best_baseline_sum"] - 1e-9  # the bound bounds
    assert set(results["table1"]["rows"]) == set(R.SCHEDULERS)
    assert results["table1"]["rows"]["cora"]["solver_ms_mean"] > 0
    for f in results["figures"]:
        assert (tmp_path / f).stat().st_size > 5000
    assert math.isfinite(results["fig3"]["fifo"]["median"])


def test_vectorised_sigmoid_table_equals_the_utility() -> None:
    from utilon.policies.cora.table import utility_table

    cluster = make_cluster(1, slots=2, cpu=2, mem=8)
    us = [Sigmoid(p=3.0, mu=0.2, d=50.0), Sigmoid(p=1.0, mu=0.0, d=10.0),
          Sigmoid(p=5.0, mu=9.0, d=5.0)]
    jobs = [make_job(f"j{i}", utility=u) for i, u in enumerate(us)]
    jobs.append(make_job("step", deadline=40))
    snaps: list[ClusterSnapshot] = []
    Simulation(cluster, jobs, Cora(), on_decision=lambda n, s, d: snaps.append(s)).run()
    views = list(snaps[0].jobs)
    times = np.tile(np.linspace(0, 400, 41), (len(views), 1))
    table = utility_table(views, times)
    for i, v in enumerate(views):
        assert table[i] == pytest.approx(v.utility.values(times[i]), abs=0, rel=1e-15)


# ------------------------------------------------------------------ plan vs execution
def test_the_plan_error_of_an_exactly_planned_job_is_zero() -> None:
    """One slot, a job of two 10 s tasks: at its last decision (t = 10) CORA plans it to end
    with slot 0, at 20 s, and it does; the report says so."""
    cluster = make_cluster(1, slots=1, cpu=1, mem=1)
    job = make_job("a", submit=0, maps=2, reduces=0, dur=10, deadline=100)
    policy = Cora()
    res = Simulation(cluster, [job], policy).run()
    assert res.core.jobs["a"].finish == pytest.approx(20.0)
    assert policy.plan_log == [("a", 20.0, 20.0, 10.0)]
    err = policy.report()["plan_error"]
    assert err["jobs"] == 1 and err["median_abs_s"] == 0.0 and err["within_one_slot"] == 1.0


def test_the_plan_error_is_in_the_summary_for_every_job() -> None:
    wl = load_workload(EXAMPLES / "capacity-changes.yaml")
    out = run_policy(wl, "cora")
    err = out.summary["policy_report"]["plan_error"]
    assert err["jobs"] == out.summary["finished"] > 0
    assert err["median_abs_slots"] >= 0 and 0 <= err["late_share"] <= 1
    again = run_policy(wl, "cora").summary["policy_report"]
    assert again == out.summary["policy_report"]  # deterministic: no wall-clock inside


def test_running_tasks_report_their_elapsed_work() -> None:
    """StageView.elapsed(now): seconds the running tasks have run, from a cached sum."""
    cluster = make_cluster(1, slots=2, cpu=2, mem=2)
    job = single_stage_job("a", [(10.0, Resources(slots=1)), (20.0, Resources(slots=1)),
                                 (30.0, Resources(slots=1))])
    seen: list[ClusterSnapshot] = []
    Simulation(cluster, [job], Cora(), on_decision=lambda now, s, d: seen.append(s)).run()
    at10 = next(s for s in seen if s.now == 10.0)  # the 10 s task ended; the 20 s one runs
    stage = at10.jobs[0].stages[0]
    assert stage.running == 1 and stage.elapsed(10.0) == 10.0 and stage.elapsed(14.0) == 14.0


def test_steep_slots_bound_the_fall_of_a_sigmoid_inside_one_slot() -> None:
    from utilon.policies.cora.policy import _slot_length

    cluster = make_cluster(1, slots=4, cpu=4, mem=4)
    job = make_job("a", submit=0, maps=4, reduces=0, dur=60, deadline=100)
    steep = Sigmoid(2.0, 0.1, 100.0)  # falls at most p mu / 4 = 0.05 per second
    job = job.__class__(job.id, job.submit, job.stages, utility=steep)
    seen: list[ClusterSnapshot] = []
    Simulation(cluster, [job], Cora(), on_decision=lambda now, s, d: seen.append(s)).run()
    jobs = list(seen[0].jobs)
    assert _slot_length(jobs, 0.0, 0.0) == 60.0  # one task wave
    assert _slot_length(jobs, 0.0, 0.25) == pytest.approx(10.0)  # 4 x 0.25 / 0.1
    assert _slot_length(jobs, 30.0, 0.25) == 30.0  # an explicit slot wins
    with pytest.raises(ValueError, match="steep"):
        Cora(steep=1.0)


def test_front_loaded_grants_keep_the_order_and_drop_the_counts() -> None:
    cluster = make_cluster(2, slots=4, cpu=4, mem=16)
    jobs = [make_job("a", submit=0, maps=10, reduces=2, dur=10, deadline=60),
            make_job("b", submit=0, maps=3, reduces=0, dur=10, deadline=200)]
    seen: list[ClusterSnapshot] = []
    Simulation(cluster, jobs, Cora(), on_decision=lambda now, s, d: seen.append(s)).run()
    slotted = slotted_instance(seen[0])
    assert slotted is not None
    sol = Cora().solve(slotted.instance)
    counted, front = grants_from(slotted, sol), grants_from(slotted, sol, front_load=True)
    assert [g.job for g in front] == [g.job for g in counted]
    assert all(g.slots is None for g in front)


def test_calibration_knobs_of_the_table1_workload() -> None:
    """`standalone` and `mu_unit` change only what they say: targets become multiples of a
    benchmarked runtime, decay factors change unit; the default is the calibrated reading."""
    mix = {"critical": 0.2, "sensitive": 0.6, "insensitive": 0.2}
    calibrated = R.cora_workload(12, mix, 4)
    also = R.cora_workload(12, mix, 4, **R.CALIBRATED)
    assert [j.utility for j in calibrated.jobs] == [j.utility for j in also.jobs]
    # every target is reachable by the job alone: d >= its own standalone (factor >= 0.5
    # only where N(1.25, 0.1) x active falls that low, never here)
    alone = R.alone_bound(calibrated, ("critical", "sensitive", "insensitive"))
    assert alone["min"] > 0
    today = R.cora_workload(12, mix, 4, scale=1.0, standalone="bound", mu_unit=60.0)
    per_s = R.cora_workload(12, mix, 4, scale=1.0, standalone="template", mu_unit=1.0)
    bench = R.template_standalone()
    for a, b in zip(today.jobs, per_s.jobs, strict=True):
        assert a.stages == b.stages and a.submit == b.submit
        assert b.utility.mu == pytest.approx(60 * a.utility.mu, rel=1e-6)
        ratio = (b.utility.d - b.submit) / bench[b.id.split("-", 1)[1]]
        assert ratio > 0.5  # N(1.25, 0.1) x active jobs, over the template's benchmark
    with pytest.raises(ValueError, match="standalone"):
        R.cora_workload(4, mix, 1, standalone="nope")


# ------------------------------------------------------------------ standing plans
@pytest.mark.parametrize("policy", ["cora", "cora-ct"])
def test_a_plan_stands_between_task_completions_inside_its_slot(policy: str) -> None:
    """``replan: slot`` solves at every event the plan did not expect and follows the plan
    on task completions inside its first slot; ``replan: event`` solves at every event."""
    from utilon.core.messages import Trigger

    wl = load_workload(EXAMPLES / "capacity-changes.yaml")
    seen: dict[str, list[tuple[frozenset, bool]]] = {}
    for replan in ("slot", "event"):
        pol = make_policy(policy, {"replan": replan})
        log = seen[replan] = []
        res = Simulation(wl.cluster, wl.jobs, pol, validate=True,
                         on_decision=lambda now, s, d, log=log: log.append(
                             (s.triggers, d.solver_seconds is not None))).run()
        assert all(j.finish is not None for j in res.core.jobs.values())
        assert pol.report()["solves"] == sum(solved for _, solved in log)
        assert len(res.core.stats.solver_seconds) == pol.report()["solves"]
    assert all(solved for _, solved in seen["event"])
    slot = seen["slot"]
    assert 0 < sum(solved for _, solved in slot) < len(slot)
    for triggers, solved in slot:
        if not triggers <= {Trigger.TASK_FINISHED}:
            assert solved, f"{set(triggers)} must re-plan"


def test_replan_must_be_slot_or_event() -> None:
    from utilon.errors import UtilonError

    for policy in ("cora", "cora-ct"):
        with pytest.raises(UtilonError, match="replan must be one of slot, event"):
            make_policy(policy, {"replan": "never"})


def test_solve_schema_refuses_what_the_loader_refuses() -> None:
    """Issue 47: the schema allowed `demand: 0`, which `utilon solve cora` refuses."""
    import jsonschema

    schema = json.loads((ROOT / "docs" / "solve-cora.schema.json").read_text())
    inst = json.loads((ROOT / "examples" / "solve" / "cora-edf-trap.json").read_text())
    jsonschema.validate(inst, schema)
    for demand in (0, [0], [0, 0], []):
        bad = {**inst, "jobs": [{**inst["jobs"][0], "demand": demand}, *inst["jobs"][1:]]}
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
