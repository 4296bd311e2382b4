"""The league (issue 45): its file, its workload recipes, the targets, and a tiny league end
to end.  The held-out set is only parsed and resolved here, never run."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from utilon.cli import app
from utilon.errors import ScenarioError
from utilon.league import SETS, read_league, setup
from utilon.league.spec import Targets
from utilon.league.targets import Cell, cell_of, evaluate
from utilon.league.workloads import Where, digest, generate, problems, target

ROOT = Path(__file__).resolve().parents[1]
LEAGUE = ROOT / "league.yaml"
DATA = ROOT.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"no trace data at {DATA}")


# ------------------------------------------------------------------------ the league file
def test_the_league_file_parses_and_names_both_sets() -> None:
    league, base = read_league(LEAGUE)
    assert base == ROOT and set(league.sets) == set(SETS)
    names = [c.name for c in league.competitor_list()]
    for must in ("fifo", "fair", "fair-slots", "edf-n", "edf-p", "rrh", "cora", "cora-ct",
                 "cora-lp", "rds", "ras", "alsched", "ras-reduce-aware", "alsched-spread",
                 "cora-ct-sum"):
        assert must in names
    assert league.seeds >= 5 and set(league.estimates) == {"realistic", "exact"}
    tuning = {w.name for w in league.sets["tuning"]}
    held = {w.name for w in league.sets["held-out"]}
    assert not tuning & held


@needs_data
@pytest.mark.parametrize("set_name", SETS)
def test_every_workload_of_the_league_resolves(set_name: str, tmp_path: Path) -> None:
    """Every scenario and trace file is there, every competitor and its parameters are
    accepted, and the seeds are as documented (the demo at 7-11 and, from the first held-out
    set, at 100-104, from the second at 300-304; held out at 500-504)."""
    s = setup(LEAGUE, set_name, out=tmp_path)
    for w in s.workloads:
        assert problems(w, s.where) == []
        assert len(s.seeds[w.name]) == 5
    if set_name == "tuning":
        assert s.seeds["demo"] == (7, 8, 9, 10, 11)
        assert s.seeds["demo-seeds-100"] == (100, 101, 102, 103, 104)
        assert s.seeds["demo-seeds-300"] == (300, 301, 302, 303, 304)
    else:
        assert s.seeds["demo-seeds-500"] == (500, 501, 502, 503, 504)
        # a held-out workload is never also a tuning one
        tuning = setup(LEAGUE, "tuning", out=tmp_path)
        assert not {w.name for w in s.workloads} & {w.name for w in tuning.workloads}
    assert s.candidate.name == "default"
    assert "default" not in {c.name for c in s.competitors}


@needs_data
def test_a_recipe_at_seed_0_is_the_example_it_names(tmp_path: Path) -> None:
    """The solar recipe (a swim import, then a solar import --with it) gives
    examples/traces/swim-fb2009-1h-solar.yaml's jobs and cluster; another seed draws other
    classes; the file is generated once."""
    from utilon.scenario.load import read_data

    league, base = read_league(LEAGUE)
    entry = next(w for w in league.sets["tuning"] if w.name == "fb2009-solar")
    where = Where(base, (base / league.data).resolve(), tmp_path)
    p0 = generate(entry, 0, where)
    assert p0 == target(entry, 0, where) and digest(entry) in str(p0)
    got, want = read_data(p0), read_data(ROOT / "examples/traces/swim-fb2009-1h-solar.yaml")
    assert got["workload"] == want["workload"] and got["cluster"] == want["cluster"]
    stamp = p0.stat().st_mtime_ns
    assert generate(entry, 0, where).stat().st_mtime_ns == stamp
    p1 = generate(entry, 1, where)
    jobs0, jobs1 = got["workload"]["jobs"], read_data(p1)["workload"]["jobs"]
    assert [j["submit"] for j in jobs0] == [j["submit"] for j in jobs1]
    assert [j.get("class") for j in jobs0] != [j.get("class") for j in jobs1]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "league.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(("body", "message"), [
    ("      scenario: a.yaml\n      trace: {kind: swim, file: x}\n", "exactly one of"),
    ("      scenario: a.yaml\n      exclude: {fifo: ''}\n", "needs a reason"),
    ("      scenario: a.yaml\n      wall_limt: 3\n", "unknown field"),
])
def test_league_file_errors_are_one_line(tmp_path: Path, body: str, message: str) -> None:
    p = _write(tmp_path, "competitors: [fifo]\nsets:\n  tuning:\n    - name: w\n" + body)
    with pytest.raises(ScenarioError) as e:
        read_league(p)
    assert message in str(e.value) and str(p) in e.value.one_line()


def test_league_setup_refuses_what_cannot_run(tmp_path: Path) -> None:
    small = ROOT / "examples" / "small-mapreduce.yaml"
    head = f"competitors: [fifo, fair]\nsets:\n  tuning:\n    - name: w\n      scenario: {small}\n"
    with pytest.raises(ScenarioError, match="not a competitor"):
        setup(_write(tmp_path, head + "      exclude: {edf-n: slow}\n"), "tuning",
              candidate="rrh")
    with pytest.raises(ScenarioError, match="no set 'held-out'"):
        setup(_write(tmp_path, head), "held-out", candidate="rrh")
    with pytest.raises(Exception, match="unknown policy 'nope'"):
        setup(_write(tmp_path, head), "tuning", candidate="nope")
    with pytest.raises(ScenarioError, match="no scenario file"):
        setup(_write(tmp_path, head.replace(str(small), "missing.yaml")), "tuning",
              candidate="rrh")
    bad = "competitors: [fifo, {name: k0, policy: fair-slots, params: {k: -1}}]\n"
    with pytest.raises(Exception, match="k0"):
        setup(_write(tmp_path, bad + head.split("\n", 1)[1]), "tuning", candidate="rrh")


# ------------------------------------------------------------------------------ the targets
def _cell(name: str, misses: list[float], usum: list[float], pen: list[float],
          umin: list[float], stopped: int = 0) -> Cell:
    return Cell(name, {"misses": misses, "utility_sum": usum, "penalty": pen,
                       "utility_min": umin}, stopped)


def test_targets_on_synthetic_numbers() -> None:
    t = Targets()
    others = [_cell("fifo", [4, 6], [90, 90], [8, 8], [0.30, 0.30]),
              _cell("edf-p", [3, 3], [95, 97], [2, 2], [0.50, 0.50]),
              _cell("cora", [1, 1], [99, 99], [1, 1], [0.90, 0.90]),      # not a baseline
              _cell("ras", [0, 0], [200, 200], [0, 0], [1.0, 1.0], stopped=1)]  # no reference
    cand = _cell("c", [1, 1], [99, 99], [2.5, 2.5], [0.46, 0.44])
    r = evaluate(cand, others, t)
    assert r["misses"].holds and r["misses"].by == "cora" and r["misses"].bound == 1
    assert r["utility_sum"].holds and r["utility_sum"].reference == 99
    assert r["penalty"].holds and r["penalty"].bound == pytest.approx(2.5)  # 1.25 x edf-p's 2
    assert r["penalty"].by == "edf-p"
    assert r["utility_min"].holds and r["utility_min"].bound == pytest.approx(0.45)
    assert r["misses"].text() == "✓ 1 ≤ 1 (cora)"
    worse = evaluate(_cell("c", [2, 1], [98, 99], [2.6, 2.6], [0.44, 0.44]), others, t)
    assert [worse[k].holds for k in ("misses", "utility_sum", "penalty", "utility_min")] == [
        False, False, False, False]
    assert worse["penalty"].text().startswith("✗ 2.600 ≤ 2.500 (edf-p)")
    # a stopped candidate meets no target; with no reference left a target is undecided
    stopped = evaluate(_cell("c", [0, 0], [500, 500], [0, 0], [1, 1], stopped=1), others, t)
    assert not any(x.holds for x in stopped.values())
    alone = evaluate(cand, [Cell("fair", excluded="too slow")], t)
    assert all(x.holds is None for x in alone.values())
    assert alone["misses"].text().startswith("–")


def test_cells_from_summaries() -> None:
    s = {"misses": 2, "utility_sum": 1.5, "penalty": 0.0, "utility_min": 0.1, "unfinished": 0,
         "response_mean": 3.0, "stopped_early": ""}
    c = cell_of("p", [s, {**s, "misses": 4, "stopped_early": "wall-clock limit"}])
    assert c.values["misses"] == [2.0, 4.0] and c.mean("misses") == 3.0 and c.stopped == 1
    assert not c.reference
    assert cell_of("q", [None], excluded="why").excluded == "why"
    assert math.isnan(Cell("r").mean("misses"))


# ------------------------------------------------------------------------------ end to end
def test_a_tiny_league_end_to_end(tmp_path: Path) -> None:
    """Two workloads (a scenario file and a trace recipe cut to 5 jobs), two seeds, both
    estimate modes; a stand-in candidate; one exclusion; a workload whose runs all stop."""
    small = ROOT / "examples" / "small-mapreduce.yaml"
    league = _write(tmp_path, f"""
seeds: 2
estimates: [realistic, exact]
candidate: rrh
wall_limit: 60
data: {ROOT / 'tests' / 'data' / 'traces'}
competitors: [fifo, fair, edf-p, rrh, {{name: fair-k2, policy: fair-slots, params: {{k: 2}}}}]
sets:
  tuning:
    - name: small
      scenario: {small}
      exclude: {{fair-k2: "a test of exclusions"}}
    - name: synth
      trace: {{kind: synth, file: synth-small.json, max_jobs: 5}}
    - name: stopped
      scenario: {small}
      wall_limit: 0.000001
    - name: cpu-stopped
      scenario: {small}
      cpu_limit: 0.000001
""")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["league", "--league", str(league), "--out", str(out),
                                   "--jobs", "1"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "tuning" / "league.json").read_text())
    assert doc["candidate"] == "rrh" and doc["seeds"] == 2
    assert [c["name"] for c in doc["competitors"]] == ["fifo", "fair", "edf-p", "fair-k2"]
    w = {x["name"]: x for x in doc["workloads"]}
    assert w["small"]["seeds"] == [1, 2] and w["synth"]["seeds"] == [0, 1]
    assert set(w["small"]["modes"]) == {"realistic", "exact"}
    assert w["small"]["modes"]["exact"]["players"]["fair-k2"] == {
        "excluded": "a test of exclusions"}
    synth = w["synth"]["modes"]["realistic"]
    assert synth["players"]["fair-k2"]["misses"]["n"] == 2
    assert set(synth["targets"]) == {"misses", "utility_sum", "penalty", "utility_min"}
    # every run stopped: the candidate meets no target, and the table says what stopped
    stop = w["stopped"]["modes"]["realistic"]
    assert stop["players"]["rrh"]["stopped"] == 2
    assert all(t["holds"] is not True for t in stop["targets"].values())
    md = (out / "tuning" / "league.md").read_text()
    assert "| workload | estimates | misses ≤ best other |" in md
    assert "| synth | realistic | " in md and ("✓" in md or "✗" in md)
    assert "stopped: fifo 2/2" in md and "fair-k2 not run: a test of exclusions" in md
    with (out / "tuning" / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    # 4 workloads x 2 modes x 2 seeds x 5 players, less fair-k2 on small
    assert len(rows) == 4 * 2 * 2 * 5 - 2 * 2
    # a CPU-time limit stops the runs and says which clock stopped them
    cpu = [r for r in rows if r["workload"] == "cpu-stopped"]
    assert cpu and all("CPU-time limit" in r["stopped_early"] for r in cpu)
    assert w["cpu-stopped"]["cpu_limit"] == 0.000001
    assert "league, tuning set: candidate rrh" in res.output
    assert "targets held:" in res.output
    assert (out / "tuning" / "league-details.md").read_text().count("## ") == 8
    assert list((out / "workloads").glob("synth-*/seed-1.yaml"))
