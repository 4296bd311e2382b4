"""Capacity planning (``utilon.plan``, ``utilon plan``): targets, sizes, the search, the early
proof of failure, and the command's outputs and errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from utilon.cli import app
from utilon.errors import UtilonError
from utilon.plan import Target, evaluate, group_counts, parse_target, plan, sized_cluster
from utilon.scenario import load_workload

ROOT = Path(__file__).resolve().parent.parent
FB = ROOT / "examples" / "facebook-mix.yaml"
SMALL_GEN = ROOT / "examples" / "multi-resource.yaml"  # 40 generated jobs: seeds differ
runner = CliRunner()


@pytest.mark.parametrize(("text", "want"), [
    ("misses<=1%", Target("miss_rate", "<=", 0.01, "misses<=1%")),
    ("misses <= 3", Target("misses", "<=", 3.0, "misses <= 3")),
    ("p99 delta <= 0", Target("delta", "<=", 0.0, "p99 delta <= 0", 0.99)),
    ("utility_min>=0.5", Target("utility_min", ">=", 0.5, "utility_min>=0.5")),
    ("penalty < 1e2", Target("penalty", "<", 100.0, "penalty < 1e2")),
])
def test_targets_are_read(text: str, want: Target) -> None:
    assert parse_target(text) == want


@pytest.mark.parametrize(("text", "why"), [
    ("misses", "expected METRIC OP VALUE"), ("misses == 3", "expected METRIC OP VALUE"),
    ("latency<=3", "unknown metric 'latency'"), ("penalty<=5%", "misses only"),
    ("p0 delta<=0", "bad quantile"), ("p50 delta<=1%", "bad quantile"),
])
def test_bad_targets_say_what_is_wrong(text: str, why: str) -> None:
    with pytest.raises(UtilonError, match=why) as e:
        parse_target(text)
    assert e.value.where == "--target" and "misses<=1%" in e.value.fix


def test_miss_budget() -> None:
    assert parse_target("misses<=1%").miss_budget(300) == 3
    assert parse_target("misses<1%").miss_budget(300) == 2
    assert parse_target("misses<=2").miss_budget(300) == 2
    assert parse_target("misses<2.5").miss_budget(300) == 2
    assert parse_target("utility_min>=0.5").miss_budget(300) is None
    assert parse_target("misses>=3").miss_budget(300) is None


@given(st.lists(st.integers(1, 50), min_size=1, max_size=5), st.integers(0, 400))
def test_sizes_split_in_proportion(counts: list[int], n: int) -> None:
    got = group_counts(counts, n)
    assert sum(got) == n and all(c >= 0 for c in got)
    total = sum(counts)
    for c, g in zip(counts, got, strict=True):
        assert abs(g - c * n / total) < 1  # largest remainders: off by less than one
    assert group_counts(counts, total) == counts


def test_a_sized_cluster_has_the_scenario_kinds() -> None:
    wl = load_workload(FB)
    cl = sized_cluster(wl, 25)
    kinds = [dict(m.attributes)["kind"] for m in cl.machines]
    assert (kinds.count("small"), kinds.count("large")) == (20, 5)
    assert len(sized_cluster(wl, 1).machines) == 1


def test_the_early_proof_agrees_with_the_full_run() -> None:
    """A run stopped at the proof of failure fails; the same size run to the end fails too,
    with at least as many misses as the proof counted."""
    wl = load_workload(FB)
    target = parse_target("misses<=5%")
    early = evaluate(wl, ("edf-p", {}, target, 30))
    assert not early.holds and early.at_least and early.stopped.startswith("target failed")
    full = evaluate(wl, ("edf-p", {}, parse_target("misses<=100%"), 30))
    assert full.stopped == "" and full.value >= early.value > 0.05


def test_the_search_finds_the_boundary() -> None:
    """The answer holds, the size below it fails, and every size evaluated above the answer
    holds (the search assumes monotonicity; here it is checked)."""
    wl = load_workload(FB)
    res = plan(wl, "edf-p", parse_target("misses<=5%"), jobs=2)
    assert res.answer is not None
    assert res.points[res.answer].holds
    assert not res.points[res.answer - 1].holds
    assert all(p.holds == (n >= res.answer) for n, p in res.points.items())
    serial = plan(wl, "edf-p", parse_target("misses<=5%"), jobs=1)
    assert serial.answer == res.answer


def test_an_impossible_target_says_so(tmp_path: Path) -> None:
    res = runner.invoke(app, ["plan", str(FB), "-p", "fifo", "-t", "utility_min>=100",
                              "--max", "60", "--jobs", "1", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "the target does not hold on up to 60 machines" in res.stdout
    doc = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    # with --max the search starts there: if the largest size fails, no smaller one is tried
    assert doc["answer"] is None and [p["machines"] for p in doc["points"]] == [60]


def test_plan_command_writes_table_json_and_plot(tmp_path: Path) -> None:
    res = runner.invoke(app, ["plan", str(FB), "-p", "fair", "-t", "p95 delta <= 0",
                              "--min", "45", "--jobs", "1", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    assert doc["answer"] is not None and (
        f"smallest cluster on every seed: {doc['answer']} machines" in res.stdout)
    assert "1 seed (" in res.stdout and doc["seeds"] == [doc["per_seed"][0]["seed"]]
    assert (tmp_path / "plan.png").stat().st_size > 10_000
    assert set(doc["timing"]) == {str(p["machines"]) for p in doc["points"]}
    assert all(not math.isnan(p["value"]) for p in doc["points"] if p["value"] is not None)


@pytest.mark.parametrize(("args", "line"), [
    (["-p", "fiffo", "-t", "misses<=1%"], "unknown policy 'fiffo'"),
    (["-p", "fifo", "-t", "misses=1"], "--target: cannot read the target"),
    (["-p", "fifo", "-t", "misses<=1%", "--min", "9", "--max", "3"], "empty range of sizes"),
    (["-p", "fifo", "-t", "misses<=1%", "--jobs", "0"], "--jobs must be at least 1"),
])
def test_plan_bad_input_is_one_line(tmp_path: Path, args: list[str], line: str) -> None:
    res = runner.invoke(app, ["plan", str(FB), *args, "--out", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert line in res.stderr and "Traceback" not in res.output
    assert res.stderr.count("error:") == 1


def test_a_cluster_that_changes_over_time_is_refused(tmp_path: Path) -> None:
    res = runner.invoke(app, ["plan", str(ROOT / "examples" / "capacity-changes.yaml"), "-p",
                              "fifo", "-t", "misses<=1%", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "capacity-changes.yaml: cluster: the cluster's capacity changes over time" in (
        res.stderr)


def test_plan_over_seeds_answers_for_every_seed(tmp_path: Path) -> None:
    """Issue 47: one draw's answer is not a plan.  With --seeds 3 the answer is the largest of
    the per-seed answers (each checked: the target holds there on its seed, and fails one
    machine below), the output says how many seeds were used, and plan.json lists each."""
    res = runner.invoke(app, ["plan", str(SMALL_GEN), "-p", "fifo", "-t", "misses<=0",
                              "--seeds", "3", "--seed", "5", "--jobs", "1",
                              "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    assert doc["seeds"] == [5, 6, 7] and [s["seed"] for s in doc["per_seed"]] == [5, 6, 7]
    answers = [s["answer"] for s in doc["per_seed"]]
    assert None not in answers and doc["answer"] == max(answers)
    for s in doc["per_seed"]:
        holds = {p["machines"]: p["holds"] for p in s["points"]}
        assert holds[s["answer"]] and holds.get(s["answer"] - 1, False) is False
    assert "3 seeds (5–7)" in res.stdout
    assert f"smallest cluster on every seed: {doc['answer']} machines" in res.stdout
    assert runner.invoke(app, ["plan", str(SMALL_GEN), "-p", "fifo", "-t", "misses<=0",
                               "--seeds", "0"]).exit_code == 2
