"""Estimate models (``sim.estimates``): policies see priors, the simulator runs the truth.

The modes parse to one canonical spelling, priors are deterministic for a seed, the
``realistic`` error reproduces what ``benchmarks/calibrate_estimates.py`` measured, and every
path that simulates a scenario (``simulate``, ``plan``) honours the mode.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from builders import make_job
from utilon.cli import app
from utilon.errors import ScenarioError
from utilon.runner import run_policy
from utilon.scenario import load_scenario
from utilon.scenario.build import Workload
from utilon.scenario.digest import scenario_digest
from utilon.sim.estimates import (
    CALIBRATION,
    LOG_ERROR_KNOTS,
    canonical,
    parse_mode,
    prior_error,
    priors,
    with_priors,
)

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "examples" / "small-mapreduce.yaml"
# benchmarks/results-estimates-calibration.json: the model is off by >= 2x on 26.9% of draws
REALISTIC_OFF_2X = (0.25, 0.29)
runner = CliRunner()


def jobs(n: int, reduces: int = 1) -> list[Any]:
    return [make_job(f"j{i}", submit=i, maps=2, reduces=reduces, dur=10 + i % 7)
            for i in range(n)]


def estimates_of(js: Any) -> list[float]:
    return [st.expected_duration for j in js for st in j.stages]


def load(estimates: str | None = None, seed: int | None = None) -> Workload:
    wl = load_scenario(SMALL, seed=seed, estimates=estimates)
    assert isinstance(wl, Workload)
    return wl


# ------------------------------------------------------------------------------ the modes
@pytest.mark.parametrize(("text", "stored", "learning"), [
    ("exact", "declared", "declared"), ("declared", "declared", "declared"),
    ("online", "online", "online"), ("realistic", "realistic", "online"),
    ("lognormal:0.5", "lognormal:0.5", "online"), ("lognormal: 1", "lognormal:1.0", "online"),
])
def test_modes_parse_to_one_spelling(text: str, stored: str, learning: str) -> None:
    mode = parse_mode(text)
    assert (mode.text, mode.learning, canonical(text)) == (stored, learning, stored)


@pytest.mark.parametrize("text", ["perfect", "Realistic", "", "lognormal", "lognormal:",
                                  "lognormal:x", "lognormal:-1", "lognormal:nan",
                                  "lognormal:9", "online:2"])
def test_bad_modes_are_one_line_naming_the_accepted_ones(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_mode(text)
    msg = str(info.value)
    assert "\n" not in msg
    assert "estimates must be one of exact" in msg or "lognormal:SIGMA needs" in msg


def test_the_constants_are_the_calibrations_result() -> None:
    result = json.loads((ROOT / CALIBRATION).read_text(encoding="utf-8"))
    assert list(LOG_ERROR_KNOTS) == result["model"]["log_error_knots"]
    assert REALISTIC_OFF_2X[0] <= result["model"]["off_2x"] <= REALISTIC_OFF_2X[1]
    assert list(LOG_ERROR_KNOTS) == sorted(LOG_ERROR_KNOTS)


# ------------------------------------------------------------------------------ the priors
def test_priors_are_deterministic_for_a_seed() -> None:
    js = jobs(50)
    mode = parse_mode("realistic")
    a, b = with_priors(js, mode, 7), with_priors(js, mode, 7)
    assert [repr(x) for x in estimates_of(a)] == [repr(x) for x in estimates_of(b)]
    assert estimates_of(with_priors(js, mode, 8)) != estimates_of(a)
    # the truth is untouched: same tasks, same everything but the estimate
    for j, p in zip(js, a, strict=True):
        assert [s.tasks for s in j.stages] == [s.tasks for s in p.stages]
        assert (j.id, j.submit, j.utility) == (p.id, p.submit, p.utility)


@pytest.mark.parametrize("text", ["exact", "declared", "online"])
def test_declared_modes_leave_the_estimates_alone(text: str) -> None:
    js = jobs(5)
    out = with_priors(js, parse_mode(text), 3)
    assert all(a is b for a, b in zip(js, out, strict=True))


def test_one_error_per_job_shared_by_its_stages() -> None:
    js = [make_job(f"j{i}", maps=3, reduces=2, dur=10, reduce_dur=40) for i in range(20)]
    for j in with_priors(js, parse_mode("realistic"), 1):
        m, r = j.stages
        assert m.expected_duration * 4 == pytest.approx(r.expected_duration)


@pytest.fixture(scope="module")
def many() -> list[Any]:
    """10,000 one-stage jobs: a share of 0.27 is measured within +-0.005 (one sd)."""
    return jobs(10_000, reduces=0)


def test_realistic_is_off_by_2x_as_often_as_the_trace(many: list[Any]) -> None:
    err = prior_error(with_priors(many, parse_mode("realistic"), 0))
    assert err["stages"] == 10_000
    assert REALISTIC_OFF_2X[0] <= err["off_2x"] <= REALISTIC_OFF_2X[1]
    # both ways, about evenly (14.1% under, 13.1% over in the trace)
    assert 0.11 <= err["underestimated_2x"] <= 0.17


def test_lognormal_error_has_its_sigma(many: list[Any]) -> None:
    assert prior_error(with_priors(many, parse_mode("lognormal:0"), 0))["off_2x"] == 0.0
    err = prior_error(with_priors(many, parse_mode("lognormal:0.5"), 0))
    expect = math.erfc(math.log(2) / 0.5 / math.sqrt(2))  # P(|N(0, 0.5^2)| >= ln 2)
    assert err["off_2x"] == pytest.approx(expect, abs=0.015)


# ------------------------------------------------------------------------------ scenarios
def test_scenario_field_and_override(tmp_path: Path) -> None:
    assert load().spec.simulation.estimates == "declared"
    assert load("exact").spec.simulation.estimates == "declared"
    wl = load("realistic")
    assert wl.spec.simulation.estimates == "realistic"
    # a mode is part of what a scenario is; exact and declared are one mode
    assert scenario_digest(wl.spec) != scenario_digest(load().spec)
    assert scenario_digest(load("exact").spec) == scenario_digest(load().spec)
    data = yaml.safe_load(SMALL.read_text(encoding="utf-8"))
    data["simulation"] = {"estimates": "lognormal:0.3"}
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert load_scenario(f).spec.simulation.estimates == "lognormal:0.3"
    assert load_scenario(f, estimates="online").spec.simulation.estimates == "online"
    data["simulation"] = {"estimates": "perfect"}
    f.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_scenario(f)
    assert "simulation.estimates" in info.value.where
    assert "exact (or declared), online, realistic, lognormal:SIGMA" in info.value.message


def test_override_errors_name_the_option() -> None:
    with pytest.raises(ScenarioError) as info:
        load("perfect")
    assert info.value.where == "--estimates"
    cloud = ROOT / "examples" / "cloud-own-jobs.yaml"
    with pytest.raises(ScenarioError, match="cloud scenario"):
        load_scenario(cloud, estimates="realistic")


def test_summary_records_the_mode_only_when_not_exact() -> None:
    assert "estimates" not in run_policy(load(), "fifo").summary
    wl = load("realistic", seed=3)
    out = run_policy(wl, "edf-p")
    about = out.summary["estimates"]
    assert about == {"mode": "realistic", "learning": "online", **prior_error(priors(wl).jobs)}
    assert list(out.summary)[-1] == "timing"
    assert run_policy(wl, "edf-p").summary["estimates"] == about  # deterministic


def test_plan_simulates_with_the_priors(monkeypatch: pytest.MonkeyPatch) -> None:
    import utilon.plan as plan_module
    from utilon.plan import evaluate, parse_target

    seen: list[str] = []
    real = plan_module.priors

    def spy(wl: Workload) -> Any:
        known = real(wl)
        seen.append(known.learning)
        return known

    monkeypatch.setattr(plan_module, "priors", spy)
    point = evaluate(load("realistic"), ("edf-p", {}, parse_target("misses<=100%"), 5))
    assert seen == ["online"] and point.holds


# ------------------------------------------------------------------------------ the CLI
def test_simulate_estimates_realistic_end_to_end(tmp_path: Path) -> None:
    outs = []
    for k in range(2):
        d = tmp_path / str(k)
        res = runner.invoke(app, ["simulate", str(SMALL), "-p", "cora", "--estimates",
                                  "realistic", "--out", str(d)])
        assert res.exit_code == 0, res.output
        summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
        summary.pop("timing")
        outs.append(summary)
        prov = json.loads((d / "provenance.json").read_text(encoding="utf-8"))
        assert prov["estimates"]["mode"] == "realistic"
        assert CALIBRATION in prov["estimates"]["prior"]
    assert outs[0] == outs[1]
    assert outs[0]["estimates"]["mode"] == "realistic"
    assert outs[0]["finished"] == outs[0]["jobs"]


@pytest.mark.parametrize("command", ["simulate", "plan"])
def test_bad_estimates_option_is_one_line(command: str, tmp_path: Path) -> None:
    extra = ["-t", "misses<=0"] if command == "plan" else ["--out", str(tmp_path)]
    res = runner.invoke(app, [command, str(SMALL), "-p", "fifo", "--estimates", "perfect",
                              *extra])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --estimates: "), res.stderr
    assert "exact (or declared), online, realistic, lognormal:SIGMA" in lines[0]
