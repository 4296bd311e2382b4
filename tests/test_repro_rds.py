"""``utilon reproduce rds`` over seeds (issue 44): the held-out solar days, the per-seed
claims (``repro.rds_claims``) and the reproduction end to end on a shrunken workload."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from utilon.model.utility import SoftHard
from utilon.repro import rds as R
from utilon.repro import rds_claims as C
from utilon.repro.claims import summarize


# ------------------------------------------------------------------------------ days
def test_seeds_take_distinct_held_out_cloudy_days() -> None:
    pool = R.held_out_days()
    var = R.day_variability()
    assert not set(pool) & set(R.DAYS)  # never a development day
    assert all(R.FIRST_DAY <= d <= R.LAST_DAY and var[d] >= R.CLOUDY for d in pool)
    # the rule keeps every cloudy day it may: the development days would pass it too
    assert all(var[d] >= R.CLOUDY for d in R.DAYS)
    assert {"2016-08-25", "2016-10-05"} <= set(pool)  # the days issue 44 tried
    days = [R.day_of_seed(s) for s in range(10)]
    assert len(set(days)) == 10 and days == [pool[s] for s in range(10)]
    assert R.day_of_seed(len(pool)) == pool[0]


# ------------------------------------------------------------------------------ claims
def _run(penalty: float, misses: dict[str, tuple[int, int]] | None = None,
         nrmse: float | None = 0.05, planned: float | None = 0.3) -> Any:
    """A stand-in for ``repro.rds.Run``: penalty, soft/hard misses per kind, NRMSEs."""
    rows: list[dict[str, Any]] = []
    jobs: list[Any] = []
    for kind, (soft, hard) in (misses or {}).items():
        for i in range(3):
            missed = i < soft
            late = i < hard
            rows.append({"missed": missed, "finish": 300.0 if late else 150.0 if missed
                         else 50.0})
            jobs.append(SimpleNamespace(job_class=kind, utility=SoftHard(0.0, 100.0, 200.0)))
    report = {"completion_prediction": {"nrmse_completion": nrmse},
              "completion_prediction_planned": {"nrmse_completion": planned}}
    return R.Run("x", "p", {"penalty": penalty, "policy_report": report}, rows, tuple(jobs))


def _sample(**by_label: tuple[Any, Any]) -> dict[str, dict[str, Any]]:
    """label=(scale-up run, scale-out run) -> mode -> label -> run."""
    return {m: {lb: runs[i] for lb, runs in by_label.items()}
            for i, m in enumerate(("scale-up", "scale-out"))}


def _by(obs: list[Any]) -> dict[tuple[str, str], Any]:
    return {(o.claim, o.system): o for o in obs}


def test_fig7_holds_only_below_the_baseline_in_both_modes() -> None:
    ok = {"wordcount": (2, 1)}
    sample = _sample(**{"edf-p": (_run(4.0), _run(4.0)), "edf-n": (_run(5.0), _run(5.0)),
                        "fair": (_run(10.0), _run(10.0)),
                        "rds": (_run(5.0, ok), _run(3.0, ok)),
                        "rds-tardiness": (_run(2.0, ok, planned=None),
                                          _run(3.0, ok, planned=None))})
    got = _by(C.observe(sample, seed=7, extra={"day": "d"}))
    # rds: 25% more than EDF-P in scale-up, 25% less in scale-out -> not in both modes
    o = got[("fig7.edf-p", "rds")]
    assert not o.holds and o.value == pytest.approx(0.0) and o.seed == 7
    assert o.extra["by_mode"] == {"scale-up": pytest.approx(-25.0),
                                  "scale-out": pytest.approx(25.0)}
    assert o.extra["day"] == "d"
    assert not got[("fig7.edf-n", "rds")].holds  # equal in scale-up is not less
    assert got[("fig7.fair", "rds")].holds
    t = got[("fig7.edf-p", "rds-tardiness")]
    assert t.holds and t.value == pytest.approx(37.5)
    # no green run and no plan: those claims are not observed, not failed
    assert ("fig11.green", "rds") not in got
    assert ("fig10.nrmse_planned", "rds-tardiness") not in got
    assert got[("fig10.nrmse_planned", "rds")].value == pytest.approx(30.0)
    assert not got[("fig10.nrmse_planned", "rds")].holds
    assert got[("fig10.nrmse", "rds")].holds  # 5% <= 15%
    assert ("fig7.edf-p", "rds-deadline") not in got  # a system that did not run


def test_fig9_needs_hard_misses_at_most_half_the_soft_ones_for_every_kind() -> None:
    few = {"wordcount": (2, 1), "grep": (2, 0), "terasort": (0, 0)}
    many = {"wordcount": (2, 1), "grep": (2, 2)}
    base = {b: (_run(1.0), _run(1.0)) for b in ("edf-p", "edf-n", "fair")}
    got = _by(C.observe(_sample(**base, rds=(_run(1.0, few), _run(1.0, few)),
                                **{"rds-tardiness": (_run(1.0, many), _run(1.0, few))}), 0))
    o = got[("fig9.hard", "rds")]
    assert o.holds and o.value == pytest.approx(100.0 * 2 / 8)
    assert o.extra["by_mode"]["hard"] == {"wordcount": 2, "grep": 0, "terasort": 0}
    # grep pooled over the modes: 2 hard of 4 soft is half -> holds; 3 of 4 would not
    assert got[("fig9.hard", "rds-tardiness")].holds
    worse = {"grep": (3, 3)}
    got = _by(C.observe(_sample(**base, rds=(_run(1.0, worse), _run(1.0, few))), 0))
    assert not got[("fig9.hard", "rds")].holds


def test_green_claim_and_summary_over_seeds() -> None:
    base = {b: (_run(9.0), _run(9.0)) for b in ("edf-p", "edf-n", "fair")}
    obs = []
    for seed, green in enumerate((4.0, 4.0, 4.0, 4.0, 6.0)):
        obs += C.observe(_sample(**base, rds=(_run(5.0), _run(5.0)),
                                 **{"rds-green": (_run(green), _run(4.0))}), seed)
    summary = {c["key"]: c for c in summarize(C.CLAIMS, obs, C.SYSTEMS)}
    row = summary["fig11.green"]["systems"][0]
    assert row["system"] == "rds" and row["held"] == 4 and row["n"] == 5
    assert row["verdict"] == "held"  # 4/5 = 80%
    assert row["max"] == pytest.approx(20.0) and row["min"] == pytest.approx(-0.0)
    assert summary["fig7.edf-p"]["systems"][0]["verdict"] == "held"


# ------------------------------------------------------------------------------ end to end
def _shrink(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three small jobs (one of each kind), fewer variants, persistence instead of ARIMA's
    fits and no case study (tested in test_rds_policy.py): seconds, not minutes."""
    monkeypatch.setattr(R, "TABLE3", tuple(j for j in R.TABLE3 if j.label in ("J3", "J6",
                                                                               "J9")))
    monkeypatch.setattr(R, "DAYS", R.DAYS[:1])
    full = R.variants

    def variants(prof: Path, quick: bool) -> dict[str, tuple[str, dict[str, Any]]]:
        return {k: (pol, {**params, "predictor": "last"}
                    if pol == "rds" and params.get("predictor", "arima") == "arima"
                    else params)
                for k, (pol, params) in full(prof, quick).items()
                if k in (*R.HELD_OUT_LABELS, "rds-h1", "rds-err35")}

    monkeypatch.setattr(R, "variants", variants)
    monkeypatch.setattr(R, "case_study", lambda out, fan: {"rows": {}, "paper": {}})


@pytest.mark.slow
def test_reproduce_rds_full_path_on_a_tiny_workload(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The full run's structure: held-out seeds, the in-sample day, Fig. 11b, figures."""
    _shrink(monkeypatch)
    monkeypatch.setattr(R, "google_arima_nrmse", lambda days, refit_every: None)
    res = R.reproduce(tmp_path, seed=3, seeds=2, jobs=1)
    assert res["seeds"] == [3, 4]
    assert res["days"] == {"3": R.day_of_seed(3), "4": R.day_of_seed(4)}
    assert [c["key"] for c in res["claims"]] == [c.key for c in C.CLAIMS]
    fig7 = {c["key"]: c for c in res["claims"]}["fig7.edf-p"]
    assert [r["system"] for r in fig7["systems"]] == list(C.SYSTEMS)  # faithful first
    assert all(r["n"] == 2 for r in fig7["systems"])
    assert res["in_sample"]["days"] == list(R.DAYS)
    assert res["in_sample"]["claims"][0]["systems"][0]["n"] == 1
    assert 1 in res["in_sample"]["horizon"]["scale-up"]
    assert (tmp_path / "held-out" / "scale-up" / f"seed3-{R.day_of_seed(3)}" / "rds"
            / "summary.json").exists()
    assert (tmp_path / "in-sample" / "scale-out" / R.DAYS[0] / "profile.json").exists()
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["claims"] == json.loads(json.dumps(res["claims"]))
    for fig in data["figures"]:
        assert (tmp_path / fig).stat().st_size > 10_000


def test_reproduce_rds_quick_cli_on_a_tiny_workload(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from utilon.cli import app

    _shrink(monkeypatch)
    res = CliRunner().invoke(app, ["reproduce", "rds", "--quick", "--seeds", "2", "-j", "1",
                                   "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    for text in ("Penalty per seed", "claims over 2 seed(s)", "rds-tardiness",
                 "perfect knowledge", "controller planned", "--quick: held-out days only"):
        assert text in res.output
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["quick"] and data["seeds"] == [0, 1] and "in_sample" not in data
    systems = {r["system"] for c in data["claims"] for r in c["systems"]}
    assert systems == {"rds", "rds-tardiness"}  # --quick runs no deadline variant


# ------------------------------------------------------------------------------ planned NRMSE
def test_planned_replay_follows_the_plan_and_holds_its_last_step() -> None:
    """The controller's own forecast (issue 44): the kept model run with the planned
    allocation (H_c steps, the last held), beside the replay with the received one."""
    import numpy as np

    from utilon.policies.rds.accuracy import JobHistory, record_finish, replay_planned
    from utilon.policies.rds.progress import CompletionLog, ProgressModel, ProgressSample

    rng = np.random.default_rng(0)
    samples = []
    for _ in range(200):  # the fluid law y = u * interval / size
        um, size = rng.uniform(1, 30), rng.uniform(2e4, 6e4)
        samples.append(ProgressSample(um, 0.0, size, 0.0, um * 600.0 / size))
    model = ProgressModel.fit(samples, max_rules=2)
    hist = JobHistory(size=30000.0)  # task-seconds: 50 slot-intervals of work
    hist.forecast_point(0.0, 0.0, 0.0, model, plan=(np.array([25.0, 12.5]), np.zeros(2)))
    hist.forecast_point(600.0, 0.5, 0.5, model)  # no plan (objective: tardiness)
    hist.intervals += [(25.0, 0.0, 600.0), (25.0, 0.0, 600.0)]
    # plan: 25 slots (half the work), then 12.5 slots held -> 2 more intervals: t = 1800
    assert replay_planned(model, hist, 0, 600.0) == pytest.approx(1800.0, rel=0.05)
    assert replay_planned(model, hist, 1, 600.0) is None
    hist.forecast_point(0.0, 0.0, 0.0, model, plan=(np.zeros(2), np.zeros(2)))
    assert replay_planned(model, hist, 2, 600.0) == float("inf")  # the plan gives nothing
    received, planned = CompletionLog(), CompletionLog()
    record_finish(received, "j", model, hist, 1200.0, 600.0, planned=planned)
    # the received allocations finish it near 1200 (the third forecast has none left)
    assert received.pairs()[0] == pytest.approx([1200.0, 1200.0], rel=0.05)
    assert planned.pairs()[0] == pytest.approx([1800.0], rel=0.05)
    assert planned.unfinished() == 1


def test_decay_reading_is_checked() -> None:
    from utilon.policies import make_policy
    from utilon.policies.rds.policy import Rds

    for params, decay in (({}, "finish"), ({"decay": "step"}, "step")):  # issue 44: at y_j
        pol = make_policy("rds", params)
        assert isinstance(pol, Rds) and pol.decay == decay
    with pytest.raises(Exception, match="decay"):
        make_policy("rds", {"decay": "never"})
