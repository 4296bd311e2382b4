"""Timeline recording (allocation.csv, capacity.csv, attempts.csv) and reports (issue 5)."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from typer.testing import CliRunner

from utilon.cli import app
from utilon.core.snapshot import ClusterSnapshot
from utilon.metrics.outputs import job_rows, summarize, write_outputs
from utilon.metrics.timeline import ATTEMPT_ROWS, ordinal, write_timeline
from utilon.policies import make_policy
from utilon.policies.fifo import Fifo
from utilon.report import MAX_HTML_BYTES, ReportError, build_report, load_runs
from utilon.runner import provenance, run_policy
from utilon.scenario import load_workload
from utilon.scenario.build import build_workload
from utilon.scenario.load import parse_scenario
from utilon.sim.engine import Simulation

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FIGURES = ("delta-box", "delta-cdf", "utility", "misses", "allocation", "latency")


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def held_seconds(path: Path) -> float:
    return sum((float(r["end"]) - float(r["start"])) * float(r["slots"]) for r in rows(path))


# ------------------------------------------------------------------ timeline files
def test_exact_allocation_integrates_to_the_busy_slot_seconds(tmp_path: Path) -> None:
    wl = load_workload(EXAMPLES / "small-mapreduce.yaml")
    out = run_policy(wl, "fair", out_dir=tmp_path)
    core = out.result.core
    busy = core.busy[core.names.index(core.slot_resource)]
    assert held_seconds(tmp_path / "allocation.csv") == pytest.approx(busy, rel=1e-9)
    assert out.summary["timeline"]["allocation"]["resolution"] == "exact"
    # per job: the level never exceeds the job's slot demand at once, intervals never overlap
    by_job: dict[str, list[tuple[float, float, float]]] = {}
    for r in rows(tmp_path / "allocation.csv"):
        by_job.setdefault(r["job"], []).append((float(r["start"]), float(r["end"]),
                                                 float(r["slots"])))
    assert set(by_job) == {j.id for j in wl.jobs}
    for spans in by_job.values():
        for (_, e0, x0), (s1, _, x1) in itertools.pairwise(spans):
            assert s1 >= e0 - 1e-9
            assert not (s1 == e0 and x0 == x1)  # equal neighbours are merged
    attempts = rows(tmp_path / "attempts.csv")
    assert len(attempts) == out.summary["tasks"]["launched"]
    assert {a["outcome"] for a in attempts} == {"done"}


def test_bucketed_allocation_keeps_the_total_and_the_row_budget(tmp_path: Path) -> None:
    wl = load_workload(EXAMPLES / "facebook-mix.yaml")
    res = run_policy(wl, "fifo").result
    exact = write_timeline(tmp_path, res.core, res.end_time)
    total = held_seconds(tmp_path / "allocation.csv")
    assert exact["allocation"]["resolution"] == "exact"
    small = tmp_path / "small"
    small.mkdir()
    about = write_timeline(small, res.core, res.end_time, allocation_rows=500,
                           attempt_rows=300)
    width = about["allocation"]["resolution"]
    assert isinstance(width, float) and width > 0
    assert 0 < about["allocation"]["rows"] <= 500
    assert held_seconds(small / "allocation.csv") == pytest.approx(total, rel=1e-4)
    mantissa = width / 10 ** np.floor(np.log10(width))
    assert round(mantissa, 9) in (1.0, 2.0, 5.0)  # a round width a reader can trust
    # the Gantt sample: whole machines, within the budget, and it says so
    att = about["attempts"]
    assert att["sampled"] and att["rows"] <= 300 and att["of"] > 300
    sampled = rows(small / "attempts.csv")
    assert len(sampled) == att["rows"]
    assert len({r["machine"] for r in sampled}) == att["machines"] < att["of_machines"]


def test_capacity_file_follows_the_timeline(tmp_path: Path) -> None:
    wl = load_workload(EXAMPLES / "capacity-changes.yaml")
    run_policy(wl, "fifo", out_dir=tmp_path)
    cap = [(float(r["time"]), int(r["machines"]), float(r["slots"]), float(r["effective"]))
           for r in rows(tmp_path / "capacity.csv")]
    assert cap[0] == (0.0, 12, 48.0, 48.0)
    assert (600.0, 8, 32.0, 32.0) in cap
    at_1200 = [c for c in cap if c[0] == 1200.0]
    assert at_1200 == [(1200.0, 12, 48.0, 48.0)]  # simultaneous events: one row
    assert (1800.0, 12, 48.0, 24.0) in cap  # half speed: same slots, half the effect
    assert cap[-1][3] == 48.0


def test_timeline_files_are_deterministic(tmp_path: Path) -> None:
    wl = load_workload(EXAMPLES / "capacity-changes.yaml")
    for d in ("a", "b"):
        run_policy(wl, "edf-p", out_dir=tmp_path / d)
    for name in ("allocation.csv", "capacity.csv", "attempts.csv", "jobs.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    a = json.loads((tmp_path / "a" / "summary.json").read_text())
    b = json.loads((tmp_path / "b" / "summary.json").read_text())
    a.pop("timing"), b.pop("timing")
    assert a == b
    assert list(json.loads((tmp_path / "a" / "summary.json").read_text()))[-1] == "timing"


def test_lost_tasks_are_in_the_attempts(tmp_path: Path) -> None:
    wl = load_workload(EXAMPLES / "capacity-changes.yaml")
    out = run_policy(wl, "fifo", out_dir=tmp_path)
    lost = [r for r in rows(tmp_path / "attempts.csv") if r["outcome"] == "lost"]
    assert len(lost) == out.summary["tasks"]["lost"] > 0
    assert {r["end"] for r in lost} == {"600.0"}


def test_ordinal() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]


# ------------------------------------------------------------------ reports
class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.tags: set[str] = set()
        self.imgs = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.imgs += tag == "img"
        self.refs += [v or "" for k, v in attrs if k in ("src", "href", "srcset", "data",
                                                          "action", "poster")]


def assert_offline(html: str) -> int:
    """Nothing in the page is fetched: no scripts, stylesheets or frames; every reference is
    an inline data URI or an in-page anchor."""
    p = _Refs()
    p.feed(html)
    assert not p.tags & {"script", "link", "iframe", "object", "embed", "base"}
    assert all(r.startswith(("data:", "#")) for r in p.refs), p.refs
    style = "".join(re.findall(r"<style>(.*?)</style>", html, flags=re.S))
    assert "url(" not in style and "@import" not in style
    return p.imgs


def assert_png_drawn(path: Path) -> None:
    assert path.stat().st_size > 2_000
    img = imread(path)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 400
    assert float(img[..., :3].std()) > 0.02  # not a blank canvas


def test_report_of_a_comparison_has_every_figure(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["compare", str(EXAMPLES / "small-mapreduce.yaml"),
                                   "--policies", "fifo,fair,edf-p", "--out",
                                   str(tmp_path), "--report"])
    assert res.exit_code == 0, res.output
    html_file = tmp_path / "report.html"
    html = html_file.read_text(encoding="utf-8")
    stems = [*FIGURES, "gantt-fifo", "gantt-fair", "gantt-edf-p"]
    for stem in stems:
        assert_png_drawn(tmp_path / f"report-{stem}.png")
        assert f"report-{stem}.png" in html
    assert assert_offline(html) == len(stems)
    for policy in ("fifo", "fair", "edf-p"):
        assert f"<td>{policy}</td>" in html
    assert "Provenance" in html and "small-mapreduce" in html
    assert "report: " in res.output


def test_report_of_one_simulation_and_of_several_dirs(tmp_path: Path) -> None:
    r = CliRunner()
    for p in ("fifo", "edf-n"):
        res = r.invoke(app, ["simulate", str(EXAMPLES / "small-mapreduce.yaml"), "-p", p,
                             "--out", str(tmp_path / p), "--report"])
        assert res.exit_code == 0, res.output
        assert (tmp_path / p / "report.html").exists()
        assert_png_drawn(tmp_path / p / f"report-gantt-{p}.png")
    res = r.invoke(app, ["report", str(tmp_path / "fifo"), str(tmp_path / "edf-n"),
                         "--out", str(tmp_path / "both.html"), "--title", "two runs"])
    assert res.exit_code == 0, res.output
    html = (tmp_path / "both.html").read_text(encoding="utf-8")
    assert "<h1>two runs</h1>" in html and "<td>edf-n</td>" in html


def test_report_errors_are_one_line(tmp_path: Path) -> None:
    r = CliRunner()
    res = r.invoke(app, ["report", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "not a directory" in res.output
    res = r.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "no run found" in res.output
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text("{", encoding="utf-8")
    (tmp_path / "run" / "jobs.csv").write_text("id\n", encoding="utf-8")
    res = r.invoke(app, ["report", str(tmp_path / "run")])
    assert res.exit_code == 2 and "summary.json" in res.output and "Traceback" not in res.output
    with pytest.raises(ReportError, match="missing column"):
        (tmp_path / "run" / "summary.json").write_text("{}", encoding="utf-8")
        load_runs([tmp_path / "run"])


class _TimedFifo(Fifo):
    """FIFO that reports a solver time, as optimization policies do."""

    def decide(self, snapshot: ClusterSnapshot):  # type: ignore[no-untyped-def]
        return dataclasses.replace(super().decide(snapshot), solver_seconds=0.002)


def test_solver_time_is_reported_and_plotted(tmp_path: Path) -> None:
    wl = load_workload(EXAMPLES / "small-mapreduce.yaml")
    policy = _TimedFifo()
    res = Simulation(wl.cluster, wl.jobs, policy).run()
    rws = job_rows(res, wl.jobs)
    summary = write_outputs(tmp_path / "timed", rws, summarize(res, wl, policy, rws),
                            provenance(wl), res)
    t = summary["timing"]
    assert t["solver_calls"] == summary["decisions"] > 0
    assert t["solver_ms_p50"] == t["solver_ms_max"] == 2.0
    run_policy(wl, "fifo", out_dir=tmp_path / "plain")
    rep = build_report([tmp_path / "timed", tmp_path / "plain"], tmp_path / "r.html")
    assert "solver p50 ms" in rep.html.read_text(encoding="utf-8")
    assert_png_drawn(next(p for p in rep.pngs if p.name.endswith("latency.png")))


@pytest.mark.slow
def test_report_of_a_large_run_stays_under_the_size_limit(tmp_path: Path) -> None:
    doc = {
        "name": "large", "seed": 5,
        "cluster": {"machines": [{"id": "n", "count": 80, "capacity": {"slots": 8}}]},
        "workload": {"generate": [{
            "count": 1600, "arrival": {"process": "poisson", "mean_interarrival": 3},
            "templates": [
                {"name": "small", "class": "critical", "share": 3,
                 "utility": {"kind": "deadline", "deadline": "3x"},
                 "stages": [{"name": "map", "tasks": {"dist": "uniform", "low": 2, "high": 12},
                             "duration": {"dist": "uniform", "low": 5, "high": 30}}]},
                {"name": "big", "class": "insensitive", "share": 1,
                 "utility": {"kind": "deadline", "deadline": "4x"},
                 "stages": [{"name": "map", "tasks": 40, "duration": 20},
                            {"name": "reduce", "tasks": 4, "duration": 30}]}]}]},
    }
    wl = build_workload(parse_scenario(doc, "large"))
    out = run_policy(wl, "fair", out_dir=tmp_path / "fair")
    assert out.summary["tasks"]["launched"] > ATTEMPT_ROWS  # the Gantt must sample
    rep = build_report([tmp_path / "fair"], tmp_path / "fair" / "report.html")
    size = rep.html.stat().st_size
    assert size < MAX_HTML_BYTES, f"report of a large run is {size / 1e6:.1f} MB"
    html = rep.html.read_text(encoding="utf-8")
    assert_offline(html)
    for p in rep.pngs:
        assert_png_drawn(p)
    assert out.summary["timeline"]["attempts"]["sampled"]
    assert json.loads((tmp_path / "fair" / "summary.json").read_text())["timeline"] == \
        out.summary["timeline"]
    assert make_policy("fair").name == "fair"


def test_report_refuses_runs_of_different_scenarios_unless_allowed(tmp_path: Path) -> None:
    """Issue 47: two imports of one trace share a name; their runs have different digests, go
    to different default folders, and one report over both is refused unless --allow-mixed."""
    import os

    import yaml

    base = yaml.safe_load((EXAMPLES / "small-mapreduce.yaml").read_text())
    other = {**base, "cluster": {**base["cluster"],
                                 "machines": [{**base["cluster"]["machines"][0], "count": 1}]}}
    paths = []
    for i, doc in enumerate((base, other)):
        paths.append(tmp_path / f"s{i}.yaml")
        paths[-1].write_text(yaml.safe_dump(doc), encoding="utf-8")
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for p in paths:
            res = runner.invoke(app, ["simulate", str(p), "-p", "fifo"])
            assert res.exit_code == 0, res.output
    finally:
        os.chdir(cwd)
    dirs = sorted((tmp_path / "runs").iterdir())
    assert len(dirs) == 2 and all(d.name.startswith(base["name"] + "-") for d in dirs)
    runs = [str(d / "fifo") for d in dirs]
    res = runner.invoke(app, ["report", *runs, "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "2 different scenarios" in res.stderr
    assert "--allow-mixed" in res.stderr and not (tmp_path / "r.html").exists()
    res = runner.invoke(app, ["report", *runs, "--out", str(tmp_path / "r.html"),
                              "--allow-mixed"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r.html").exists()


def test_figures_say_what_they_show(tmp_path: Path) -> None:
    """Issue 47: the allocation chart's area, capacity line and axis share one unit (cpu on a
    cluster without slots); utility sums that bars from 0 would show as equal get a zoomed axis
    that says so; a Gantt chart of more jobs than colours colours by class; no empty panel."""
    from utilon.report import allocation_figure, gantt_figure, latency_figure, utility_figure

    wl = load_workload(EXAMPLES / "multi-resource.yaml")
    for p in ("fifo", "fair"):
        run_policy(wl, p, out_dir=tmp_path / p)
    runs = load_runs([tmp_path / "fifo", tmp_path / "fair"])
    ax = allocation_figure(runs).axes[0]
    assert ax.get_ylabel() == "cpu"
    assert "capacity (cpu)" in [t.get_text() for t in ax.get_legend().get_texts()]
    g = gantt_figure(runs[0])
    classes = set(runs[0].jobs.job_class)
    assert "colour = job class" in g.axes[0].get_title(loc="left")
    assert len({tuple(c) for c in g.axes[0].collections[0].get_facecolors()}) == len(classes)
    assert len(latency_figure(runs).axes) == 1  # no policy here solves: no solver panel
    sums = [r.summary["utility_sum"] for r in runs]
    a2 = utility_figure(runs).axes[1]
    if max(sums) - min(sums) < 0.2 * max(sums) and max(sums) > min(sums):
        assert a2.get_ylim()[0] > 0 and "does not start at 0" in a2.get_title()
    close = [dataclasses.replace(r, summary={**r.summary, "utility_sum": s})
             for r, s in zip(runs, (815.0, 830.0), strict=True)]
    a2 = utility_figure(close).axes[1]
    assert 0 < a2.get_ylim()[0] < 815 and "does not start at 0" in a2.get_title()
    far = [dataclasses.replace(r, summary={**r.summary, "utility_sum": s})
           for r, s in zip(runs, (100.0, 830.0), strict=True)]
    assert utility_figure(far).axes[1].get_ylim()[0] == 0
