"""Why a job of a finished run waited, was killed or missed: read from the run's own files.

``explain(run_dir, job)`` reads ``jobs.csv`` (submit, start, finish, goal, missed),
``story.jsonl`` (the job's recorded events: ``core/story.py``) and ``allocation.csv`` (who held
the slots when), and derives:

* the job's waits: the stretches between its submission and its finish (or the end of the run)
  in which it held no slot;
* the holders: the other jobs that held the most slot-seconds during those waits, each with the
  decision that granted it;
* a one-line verdict built only from those facts (docs/explain.md lists its rules).

Nothing is re-run and nothing is estimated: where a file was bounded (``allocation.csv``
averaged over buckets, a story's middle dropped) the explanation says so.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utilon.errors import UtilonError

TOP_HOLDERS = 3
_GAP = 1e-6  # shorter stretches without a slot are float noise, not waits


@dataclass(frozen=True, slots=True)
class Holder:
    """Another job that held slots while this one waited."""

    job: str
    slot_seconds: float
    share: float  # of all slot-seconds other jobs held during the waits
    since: float  # when it first held slots during a wait
    granted: dict[str, Any] | None  # its grant entry in force then


@dataclass(frozen=True, slots=True)
class Explanation:
    job: str
    row: dict[str, str]
    entries: list[dict[str, Any]]
    causes: dict[str, dict[str, Any]]  # cluster entries (capacity changes) by their id
    waits: list[tuple[float, float]]
    holders: list[Holder]
    end: float  # the end of the run, as the timeline shows it
    notes: list[str] = field(default_factory=list)  # where a bounded file limits the story
    verdict: str = ""

    @property
    def waited(self) -> float:
        return sum(b - a for a, b in self.waits)


def _num(s: str) -> float | None:
    return float(s) if s not in ("", None) else None


def _check_run(run_dir: Path) -> None:
    if not run_dir.is_dir() or not (run_dir / "jobs.csv").is_file():
        raise UtilonError("not a run folder (no jobs.csv)", where=str(run_dir),
                          fix="give the folder a run wrote, e.g. runs/demo/fifo")
    if not (run_dir / "story.jsonl").is_file():
        raise UtilonError("the run has no story.jsonl (written by an older utilon)",
                          where=str(run_dir), fix="re-run the simulation to record stories")


def _job_row(run_dir: Path, job: str) -> dict[str, str]:
    with (run_dir / "jobs.csv").open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = {"id", "submit", "start", "finish", "goal", "missed"} - set(
            reader.fieldnames or ())
        if missing:
            raise UtilonError(f"jobs.csv lacks the column(s) {', '.join(sorted(missing))}",
                              where=str(run_dir / "jobs.csv"), fix="re-run the simulation")
        ids = []
        for row in reader:
            if row["id"] == job:
                return row
            ids.append(row["id"])
    import difflib

    close = difflib.get_close_matches(job, ids, n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"it has {len(ids)} jobs"
    raise UtilonError(f"no job {job!r} in this run", where=str(run_dir / "jobs.csv"),
                      fix=f"name a job of its id column; {hint}")


def _story(run_dir: Path, jobs: set[str] | None) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                          dict[str, list[dict[str, Any]]]]:
    """The header, the cluster log and the entries of ``jobs`` (all jobs: ``None``)."""
    path = run_dir / "story.jsonl"
    header: dict[str, Any] = {}
    cluster: list[dict[str, Any]] = []
    by_job: dict[str, list[dict[str, Any]]] = {}
    keys = None if jobs is None else {f'"job":{json.dumps(j)}' for j in jobs}
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if n > 1 and keys is not None and '"job":""' not in line and not any(
                    k in line for k in keys):
                continue  # (a cheap test before parsing: most lines are other jobs')
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                raise UtilonError(f"line {n} is not JSON", where=str(path),
                                  fix="re-run the simulation to rewrite it") from None
            if n == 1:
                header = d
                if d.get("story") != 1:
                    raise UtilonError("not a story file of a known format (first line)",
                                      where=str(path), fix="re-run the simulation")
            elif d.get("job") == "":
                cluster.append(d)
            elif jobs is None or d.get("job") in jobs:
                by_job.setdefault(d["job"], []).append(d)
    return header, cluster, by_job


def _allocation(run_dir: Path) -> list[tuple[float, float, str, float]]:
    path = run_dir / "allocation.csv"
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as f:
        return [(float(r["start"]), float(r["end"]), r["job"], float(r["slots"]))
                for r in csv.DictReader(f)]


def _waits(start: float, end: float, own: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """[start, end) minus the stretches in ``own`` (the job's allocation rows)."""
    out = []
    t = start
    for a, b in sorted(own):
        if a - t > _GAP:
            out.append((t, min(a, end)))
        t = max(t, b)
        if t >= end:
            break
    if end - t > _GAP:
        out.append((t, end))
    return [(a, b) for a, b in out if b - a > _GAP]


def _grant_at(entries: list[dict[str, Any]], t: float) -> dict[str, Any] | None:
    """The job's grant entry in force at ``t`` (None: it held no grant)."""
    held = None
    for e in entries:
        if e["t"] > t:
            break
        if e["kind"] in ("granted", "grant_changed"):
            held = e
        elif e["kind"] == "revoked":
            held = None
    return held


def _holders(job: str, waits: list[tuple[float, float]], rows: list[tuple[float, float, str,
                                                                         float]]
             ) -> list[tuple[str, float, float, float]]:
    """(job, slot-seconds, share, since) of the others' slot-seconds overlapping ``waits``."""
    if not waits:
        return []
    lo, hi = waits[0][0], waits[-1][1]
    held: dict[str, float] = {}
    since: dict[str, float] = {}
    for s, e, j, slots in rows:
        if e <= lo or s >= hi or j == job:
            continue
        for a, b in waits:
            x = (min(e, b) - max(s, a)) * slots
            if x > 0:
                held[j] = held.get(j, 0.0) + x
                since[j] = min(since.get(j, b), max(s, a))
    total = sum(held.values())
    top = sorted(held.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_HOLDERS]
    return [(j, x, x / total, since[j]) for j, x in top]


def explain(run_dir: Path, job: str) -> Explanation:
    """Everything the run's files say about ``job``; a ``UtilonError`` (one line) when the
    folder is not a run with stories or has no such job."""
    _check_run(run_dir)
    row = _job_row(run_dir, job)
    rows = _allocation(run_dir)
    submit = float(row["submit"])
    finish = _num(row["finish"])
    end = max([finish or 0.0, submit] + [e for _, e, _, _ in rows])
    own = [(s, e) for s, e, j, _ in rows if j == job]
    known = (run_dir / "allocation.csv").is_file()  # (else: who held what is unknown)
    waits = _waits(submit, finish if finish is not None else end, own) if known else []
    top = _holders(job, waits, rows)
    header, cluster, by_job = _story(run_dir, {job, *(h[0] for h in top)})
    entries = by_job.get(job, [])
    notes = []
    bucket = 0.0  # allocation.csv's bucket width: 0 when exact
    summary = run_dir / "summary.json"
    if summary.is_file():
        res = (json.loads(summary.read_text(encoding="utf-8")).get("timeline", {})
               .get("allocation", {}).get("resolution", "exact"))
        if res != "exact":
            bucket = float(res)
            notes.append(f"allocation.csv is averaged over {bucket:g} s buckets: waits and "
                         "holders are approximate to that")
    # (a bucket may show a holder up to one width before its grant)
    holders = [Holder(j, x, share, t, _grant_at(by_job.get(j, []), t)
                      or _grant_at(by_job.get(j, []), t + bucket))
               for j, x, share, t in top]
    if not known:
        notes.append("no allocation.csv: waits and holders are unknown")
    if any(e["kind"] == "dropped" for e in entries):
        notes.append("the middle of this job's story was dropped (its bound: "
                     f"{header.get('bounds', {}).get('head')} first and "
                     f"{header.get('bounds', {}).get('tail')} last entries)")
    if not entries and header.get("dropped", {}).get("jobs"):
        notes.append("this job's story was dropped to keep the file bounded "
                     "(finished on-time jobs' stories go first)")
    causes = {d["cause"]: d for d in cluster if d.get("kind") == "capacity" and "cause" in d}
    ex = Explanation(job, row, entries, causes, waits, holders, end, notes)
    return Explanation(job, row, entries, causes, waits, holders, end, notes, verdict(ex))


def _s(x: float) -> str:
    return f"{x:,.1f} s" if abs(x) >= 10 else f"{x:.3g} s"


def verdict(ex: Explanation) -> str:
    """One line, from the recorded facts only (docs/explain.md: the rules, in order)."""
    row = ex.row
    submit = float(row["submit"])
    goal, start, finish = _num(row["goal"]), _num(row["start"]), _num(row["finish"])
    if row["missed"] != "true":
        if goal is None:
            return "no goal to miss (constant utility)"
        assert finish is not None
        return f"on time: finished {_s(goal - finish)} before its goal"
    if finish is None:
        head = (f"missed because it did not finish by the end of the run (t={ex.end:g})"
                + ("; it never started" if start is None else ""))
    else:
        assert goal is not None
        head = f"missed its goal by {_s(finish - goal)} because"
    why: list[str] = []
    reasons = [e for e in ex.entries if e["kind"] == "reason"]
    if reasons and reasons[-1].get("reason"):
        why.append(f"the policy said ({reasons[-1]['cause']}): {reasons[-1]['reason']}")
    if ex.waits:
        w = f"it waited {_s(ex.waited)} with no slot"
        if ex.holders:
            h = ex.holders[0]
            w += f", while {h.job} held {h.share:.0%} of the others' slot-time"
            if h.granted is not None:
                w += f" (its grant: {h.granted['cause']} at t={h.granted['t']:g})"
        if finish is not None and goal is not None and ex.waited >= finish - goal:
            w += f": longer than its lateness of {_s(finish - goal)}"
        why.append(w)
    stops = [e for e in ex.entries if e["kind"] in ("killed", "lost", "failed")]
    if stops:
        kinds = sorted({e["kind"] for e in stops})
        causes = sorted({e.get("cause", "") for e in stops} - {""})
        why.append(f"{len(stops)} of its task attempts were {'/'.join(kinds)}"
                   + (f" (by {', '.join(causes)})" if causes else ""))
    if finish is not None and goal is not None:
        held, allowed = finish - submit - ex.waited, goal - submit
        if held > allowed:
            why.append(f"even without its waits, its {_s(held)} with slots exceed the "
                       f"{_s(allowed)} its goal allowed")
    if not why and finish is not None and start is not None and goal is not None:
        why.append(f"it started after {_s(start - submit)} and ran {_s(finish - start)} "
                   f"against {_s(goal - submit)} allowed")
    if finish is None:
        return head + (": " + "; ".join(why) if why else "")
    return head + " " + ("; ".join(why) if why else "of reasons the story does not hold")
