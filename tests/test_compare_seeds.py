"""``utilon compare`` over several scenarios and seeds (issue 45): the statistics on
hand-made numbers, and the command end to end."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from utilon.cli import app
from utilon.metrics.stats import (
    WTL,
    ci_rows,
    mean_ci,
    outcome,
    seed_statistics,
    t_quantile,
    tied,
    wins_ties_losses,
    wtl_rows,
)
from utilon.report.data import seed_comparison

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "examples" / "small-mapreduce.yaml"


# ------------------------------------------------------------------------------ statistics
def test_mean_ci_against_a_known_t_value() -> None:
    # t(0.975, 4) = 2.7764451051977987 (tables give 2.776); s of 1..5 is sqrt(2.5)
    assert t_quantile(0.95, 4) == pytest.approx(2.7764451051977987, rel=1e-12)
    ci = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert ci.mean == 3.0 and ci.n == 5
    assert ci.std == pytest.approx(math.sqrt(2.5))
    assert ci.half == pytest.approx(2.7764451051977987 * math.sqrt(2.5) / math.sqrt(5))
    assert (ci.low, ci.high) == pytest.approx((3.0 - ci.half, 3.0 + ci.half))
    # two values: t(0.975, 1) = 12.706...; a 90% interval is narrower
    two = mean_ci([10.0, 12.0])
    assert two.half == pytest.approx(12.706204736174707 * math.sqrt(2.0) / math.sqrt(2.0))
    assert mean_ci([10.0, 12.0], level=0.9).half < two.half


def test_mean_ci_of_one_value_has_no_interval_and_nans_are_left_out() -> None:
    one = mean_ci([4.0])
    assert one.mean == 4.0 and one.n == 1 and math.isnan(one.half)
    assert one.as_dict()["ci_half"] is None  # JSON has no NaN
    assert mean_ci([1.0, math.nan, 3.0]).n == 2
    assert math.isnan(mean_ci([]).mean)
    same = mean_ci([2.0, 2.0, 2.0])
    assert same.half == 0.0


def test_ties_are_within_a_relative_tolerance() -> None:
    assert tied(830.01, 830.02)          # 1e-5 relative: a tie
    assert tied(1000.0, 1000.9)          # 0.09%: a tie
    assert not tied(1000.0, 1002.0)      # 0.2%: not
    assert tied(0.0, 1e-12) and not tied(0.0, 1e-3)
    assert outcome(3, 5, "lower") == 1 and outcome(3, 5, "higher") == -1
    assert outcome(5, 5, "lower") == 0


def test_wins_ties_losses_count_paired_runs() -> None:
    misses = {"a": [1.0, 2.0, 3.0, 0.0], "b": [2.0, 2.0, 1.0, math.nan], "c": [9.0] * 4}
    m = wins_ties_losses(misses, "lower")
    assert m["a"]["b"] == WTL(1, 1, 1)   # the NaN pair is not counted
    assert m["b"]["a"] == WTL(1, 1, 1)
    assert m["a"]["c"] == WTL(4, 0, 0) and m["c"]["a"] == WTL(0, 0, 4)
    assert "a" not in m["a"]
    util = wins_ties_losses({"x": [10.0, 10.0], "y": [9.0, 10.001]}, "higher")
    assert util["x"]["y"] == WTL(1, 1, 0) and str(util["y"]["x"]) == "0/1/1"
    with pytest.raises(ValueError):
        wins_ties_losses({"x": [1.0], "y": [1.0, 2.0]}, "lower")


def test_seed_statistics_document() -> None:
    def s(misses: int, usum: float, stopped: str = "") -> dict[str, object]:
        return {"misses": misses, "utility_sum": usum, "penalty": 0.0, "utility_min": 0.5,
                "utility_mean": 1.0, "unfinished": 0, "response_mean": 1.0,
                "response_p95": 2.0, "makespan": 3.0, "stopped_early": stopped}

    runs = {"A": {1: {"p": s(1, 10.0), "q": s(2, 9.0)},
                  2: {"p": s(3, 10.0), "q": s(3, 11.0, "wall-clock limit")}},
            "B": {5: {"p": s(0, 1.0), "q": s(1, 1.0)}}}
    doc = seed_statistics(runs)
    assert doc["pairs"] == 3 and doc["policies"] == ["p", "q"]
    pa = doc["scenarios"]["A"]["policies"]["p"]
    assert pa["misses"]["values"] == [1.0, 3.0] and pa["misses"]["mean"] == 2.0
    assert pa["misses"]["ci_half"] == pytest.approx(t_quantile(0.95, 1) * math.sqrt(2) / 2 ** 0.5)
    assert doc["scenarios"]["A"]["policies"]["q"]["stopped"] == 1
    assert doc["scenarios"]["B"]["policies"]["p"]["misses"]["ci_half"] is None
    # over every pair: p beats q on misses twice (1<2, 0<1) and ties once (3=3)
    assert doc["wtl"]["misses"]["p"]["q"] == {"wins": 2, "ties": 1, "losses": 0}
    assert doc["scenarios"]["A"]["wtl"]["utility_sum"]["p"]["q"] == {"wins": 1, "ties": 0,
                                                                     "losses": 1}
    assert doc["key_metrics"] == ["misses", "utility_sum", "penalty"]
    json.dumps(doc, allow_nan=False)
    rows = ci_rows(doc)
    assert len(rows) == 2 * 2 * len(doc["metrics"])
    assert {r["metric"] for r in wtl_rows(doc)} == set(doc["metrics"])


# ------------------------------------------------------------------------------ the command
def _other(tmp_path: Path) -> Path:
    """A second scenario: the small one under another name, with its first job later."""
    text = SMALL.read_text().replace("name: small-mapreduce", "name: small-later")
    text = text.replace("submit: 0\n", "submit: 5\n", 1)
    p = tmp_path / "later.yaml"
    p.write_text(text)
    return p


def test_compare_two_scenarios_two_seeds(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    res = CliRunner().invoke(app, ["compare", str(SMALL), str(_other(tmp_path)), "--seeds", "2",
                                   "--seed", "3", "--policies", "fifo,edf-p", "--jobs", "1",
                                   "--estimates", "realistic", "--out", str(out)])
    assert res.exit_code == 0, res.output
    for scen in ("small-mapreduce", "small-later"):
        for seed in (3, 4):
            d = out / scen / f"seed-{seed}"
            assert (d / "comparison.csv").is_file()
            for p in ("fifo", "edf-p"):
                summary = json.loads((d / p / "summary.json").read_text())
                assert summary["seed"] == seed and summary["policy"] == p
    doc = json.loads((out / "comparison-seeds.json").read_text())
    assert list(doc["scenarios"]) == ["small-mapreduce", "small-later"]
    assert doc["scenarios"]["small-later"]["seeds"] == [3, 4]
    assert doc["pairs"] == 4 and doc["estimates"] == "realistic"
    assert doc["layout"]["small-later"]["4"] == "small-later/seed-4"
    with (out / "comparison-seeds.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {(r["scenario"], r["policy"]) for r in rows} == {
        (s, p) for s in ("small-mapreduce", "small-later") for p in ("fifo", "edf-p")}
    with (out / "comparison-wtl.csv").open() as f:
        wtl = list(csv.DictReader(f))
    row = next(r for r in wtl if r["metric"] == "misses" and r["policy"] == "fifo")
    assert int(row["wins"]) + int(row["ties"]) + int(row["losses"]) == 4
    # the printed tables: mean ± CI per scenario, the wins/ties/losses matrices
    assert "small-later: 5 jobs, 3 machines, seeds 3, 4: mean ± 95% CI" in res.output
    assert " ± " in res.output
    for m in ("misses", "utility_sum", "penalty"):
        assert f"{m} (" in res.output and "over 4 paired run(s)" in res.output


def test_compare_one_scenario_over_seeds_with_a_report(tmp_path: Path) -> None:
    out = tmp_path / "one"
    res = CliRunner().invoke(app, ["compare", str(SMALL), "--seeds", "2", "--policies",
                                   "fifo,fair", "--jobs", "1", "--out", str(out), "--report"])
    assert res.exit_code == 0, res.output
    assert (out / "seed-1" / "fifo" / "summary.json").is_file()  # the scenario's seed first
    assert (out / "seed-2" / "fair" / "jobs.csv").is_file()
    html = (out / "report.html").read_text()
    assert "Over seeds" in html and "wins/ties/losses" in html and "±" in html
    assert "seed 1, the first" in html
    # what `utilon report <out>` draws it again from: the folder alone
    found = seed_comparison(out)
    assert found is not None and found.scenario == "small-mapreduce"
    assert found.runs == out / "seed-1" and found.seed == "1"
    assert seed_comparison(out / "seed-1") is None


def test_compare_with_one_seed_keeps_its_layout(tmp_path: Path) -> None:
    out = tmp_path / "plain"
    res = CliRunner().invoke(app, ["compare", str(SMALL), "--policies", "fifo", "--jobs", "1",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "fifo" / "summary.json").is_file() and (out / "comparison.csv").is_file()
    assert not (out / "comparison-seeds.json").exists()


def test_compare_seeds_refuses_a_cloud_scenario(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["compare", str(ROOT / "examples" / "cloud-own-jobs.yaml"),
                                   "--seeds", "2", "--jobs", "1", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "cloud scenario" in res.output
