"""Reading run directories back for reports.

A run directory is what ``utilon simulate``/``run`` writes (``summary.json``, ``jobs.csv``,
``provenance.json`` and the timeline files); a comparison directory (``utilon compare``) holds
one run directory per policy.  ``load_runs`` accepts either kind, any number of them.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from utilon.errors import UtilonError


class ReportError(UtilonError):
    """A run directory cannot be reported on."""


def _float(x: str) -> float:
    return float(x) if x != "" else float("nan")


@dataclass(frozen=True)
class Jobs:
    """``jobs.csv`` as columns (NaN where a cell is empty)."""

    id: list[str]
    job_class: list[str]
    submit: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    goal: np.ndarray
    utility: np.ndarray
    delta: np.ndarray
    missed: np.ndarray
    penalty: np.ndarray

    @property
    def classes(self) -> list[str]:
        return list(dict.fromkeys(self.job_class))

    def of_class(self, name: str) -> np.ndarray:
        return np.asarray([c == name for c in self.job_class], dtype=bool)


@dataclass(frozen=True)
class Steps:
    """Rows of ``allocation.csv``: ``key`` held ``value`` over ``[start, end)``."""

    start: np.ndarray
    end: np.ndarray
    key: list[str]
    value: np.ndarray


@dataclass(frozen=True)
class RunData:
    path: Path
    label: str
    summary: dict[str, Any]
    provenance: dict[str, Any]
    jobs: Jobs
    allocation: Steps | None = None
    capacity: dict[str, np.ndarray] | None = None
    attempts: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def policy(self) -> str:
        return str(self.summary.get("policy", self.path.name))

    @property
    def scenario(self) -> str:
        return str(self.summary.get("scenario", ""))


def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as f:
        r = csv.reader(f)
        try:
            header = next(r)
        except StopIteration:
            raise ReportError("file is empty", where=str(path),
                              fix="re-run the simulation to rewrite it") from None
        return header, list(r)


def _columns(path: Path, need: Iterable[str]) -> dict[str, list[str]]:
    header, rows = _read_csv(path)
    missing = [c for c in need if c not in header]
    if missing:
        raise ReportError(f"missing column(s) {', '.join(missing)}", where=str(path),
                          fix="this file was not written by this version of utilon; re-run")
    cols: dict[str, list[str]] = {h: [] for h in header}
    for n, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise ReportError(f"line {n} has {len(row)} fields, expected {len(header)}",
                              where=str(path), fix="re-run the simulation to rewrite it")
        for h, v in zip(header, row, strict=True):
            cols[h].append(v)
    return cols


def _jobs(path: Path) -> Jobs:
    c = _columns(path, ("id", "class", "submit", "start", "finish", "goal", "utility",
                        "delta", "missed", "penalty"))

    def num(name: str) -> np.ndarray:
        try:
            return np.asarray([_float(x) for x in c[name]], dtype=float)
        except ValueError as e:
            raise ReportError(f"column {name!r}: {e}", where=str(path),
                              fix="re-run the simulation to rewrite it") from None

    return Jobs(id=c["id"], job_class=c["class"], submit=num("submit"), start=num("start"),
                finish=num("finish"), goal=num("goal"), utility=num("utility"),
                delta=num("delta"), missed=np.asarray([x == "true" for x in c["missed"]]),
                penalty=num("penalty"))


def _allocation(path: Path) -> Steps | None:
    if not path.exists():
        return None
    c = _columns(path, ("start", "end", "job", "slots"))
    return Steps(np.asarray(c["start"], float), np.asarray(c["end"], float), c["job"],
                 np.asarray(c["slots"], float))


def _capacity(path: Path) -> dict[str, np.ndarray] | None:
    if not path.exists():
        return None
    c = _columns(path, ("time", "machines", "effective"))
    return {k: np.asarray(v, float) for k, v in c.items()}


def _attempts(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    c = _columns(path, ("job", "machine", "start", "end", "outcome"))
    return {"job": c["job"], "machine": c["machine"], "outcome": c["outcome"],
            "stage": c.get("stage", [""] * len(c["job"])),
            "start": np.asarray(c["start"], float), "end": np.asarray(c["end"], float)}


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ReportError(f"not valid JSON ({e.msg}, line {e.lineno})", where=str(path),
                          fix="re-run the simulation to rewrite it") from None
    if not isinstance(data, dict):
        raise ReportError("expected a JSON object", where=str(path),
                          fix="re-run the simulation to rewrite it")
    return data


def _refuse_mixed(runs: list[RunData]) -> None:
    """Runs of different scenarios side by side compare numbers that mean different things
    (a 7 am compare beside a 6 am one of the same trace file shares the scenario's name)."""
    by: dict[tuple[str, str], list[RunData]] = {}
    for r in runs:  # runs from before digests were recorded are told apart by name only
        key = (r.scenario, str(r.summary.get("scenario_digest", "")))
        by.setdefault(key, []).append(r)
    if len(by) > 1:
        kinds = "; ".join(f"{name}{'@' + dig if dig else ''}: "
                          + ", ".join(str(r.path) for r in rs[:3])
                          + (f" and {len(rs) - 3} more" if len(rs) > 3 else "")
                          for (name, dig), rs in by.items())
        raise ReportError(f"the runs are of {len(by)} different scenarios ({kinds})",
                          fix="report runs of one scenario, or pass --allow-mixed")


def load_run(path: Path, label: str | None = None) -> RunData:
    """One run directory (``summary.json`` + ``jobs.csv`` at least)."""
    for name in ("summary.json", "jobs.csv"):
        if not (path / name).exists():
            raise ReportError(f"no {name}", where=str(path),
                              fix="give a directory written by utilon simulate, compare or run")
    summary = _json(path / "summary.json")
    prov = _json(path / "provenance.json") if (path / "provenance.json").exists() else {}
    return RunData(path=path, label=label or str(summary.get("policy", path.name)),
                   summary=summary, provenance=prov, jobs=_jobs(path / "jobs.csv"),
                   allocation=_allocation(path / "allocation.csv"),
                   capacity=_capacity(path / "capacity.csv"),
                   attempts=_attempts(path / "attempts.csv"))


def run_dirs(path: Path) -> list[Path]:
    """``path`` itself if it is a run directory, else its run subdirectories (a comparison),
    in the comparison's order when it has a ``comparison.json``."""
    if not path.is_dir():
        raise ReportError("not a directory", where=str(path),
                          fix="give a run directory (utilon simulate/run --out) or a "
                              "comparison directory (utilon compare --out)")
    if (path / "summary.json").exists():
        return [path]
    order: list[str] = []
    if (path / "comparison.json").exists():
        data = json.loads((path / "comparison.json").read_text(encoding="utf-8"))
        runs = data.get("runs", data) if isinstance(data, dict) else data
        if isinstance(runs, list):
            order = [str(r.get("policy")) for r in runs if isinstance(r, dict)]
    subs = sorted(p for p in path.iterdir() if (p / "summary.json").exists())
    if not subs:
        raise ReportError("no run found (no summary.json here or in a subdirectory)",
                          where=str(path), fix="run utilon simulate or compare first")
    rank = {name: i for i, name in enumerate(order)}
    return sorted(subs, key=lambda p: (rank.get(p.name, len(rank)), p.name))


def load_runs(paths: Iterable[Path], *, allow_mixed: bool = True) -> list[RunData]:
    """Every run under ``paths``; labels are the policy names, made unique with the scenario
    (or the directory) when two runs share a policy.  With ``allow_mixed=False``, runs of
    different scenarios (``scenario_digest`` in their summaries) are an error."""
    dirs = [d for p in paths for d in run_dirs(Path(p))]
    if not dirs:
        raise ReportError("no run directory given", fix="utilon report RUN_DIR...")
    runs = [load_run(d) for d in dirs]
    if not allow_mixed:
        _refuse_mixed(runs)
    labels = [r.policy for r in runs]
    if len(set(labels)) < len(labels):
        scen = [f"{r.scenario}/{r.policy}" for r in runs]
        labels = scen if len(set(scen)) == len(scen) else [str(r.path) for r in runs]
    return [RunData(r.path, lab, r.summary, r.provenance, r.jobs, r.allocation, r.capacity,
                    r.attempts) for r, lab in zip(runs, labels, strict=True)]


@dataclass(frozen=True)
class SeedComparison:
    """A comparison over seeds (``utilon compare --seeds`` or several scenarios): its
    statistics (``comparison-seeds.json``), the scenario a report is about (``None``: all of
    them) and the run directory whose runs the report's figures draw (the first seed's)."""

    doc: dict[str, Any]
    scenario: str | None
    runs: Path
    seed: str


def seed_comparison(path: Path) -> SeedComparison | None:
    """The comparison over seeds that ``path`` is (its folder holds ``comparison-seeds.json``)
    or is one scenario of (its parent does, and names it), else ``None``."""
    for home, label in ((path, None), (path.parent, path.name)):
        f = home / "comparison-seeds.json"
        if not f.is_file():
            continue
        doc = _json(f)
        layout = doc.get("layout")
        if not isinstance(layout, dict) or not layout:
            continue
        if label is None:
            scenario = next(iter(layout)) if len(layout) == 1 else None
            first = layout[scenario or next(iter(layout))]
        elif label in layout:
            scenario, first = label, layout[label]
        else:
            continue
        seed, rel = next(iter(first.items()))
        return SeedComparison(doc, scenario, home / rel, seed)
    return None
