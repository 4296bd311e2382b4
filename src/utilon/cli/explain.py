"""``utilon explain RUN_DIR JOB``: the story of one job of a finished run, and a verdict.

Light at import (``utilon --help`` must start fast): the reader is imported when it runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from utilon.cli.common import errors, out

if TYPE_CHECKING:
    from utilon.metrics.explain import Explanation


def explain_command(
    run_dir: Annotated[Path, typer.Argument(help="a run's output folder (with jobs.csv and "
                                            "story.jsonl)", show_default=False)],
    job: Annotated[str, typer.Argument(help="the job's id (jobs.csv's id column)",
                                       show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="print the explanation as JSON")]
    = False,
) -> None:
    """Why JOB waited, was killed or missed its goal: its recorded story (submission, grants,
    the policy's reasons, kills and re-queues, finish against its goal), who held the slots
    while it waited, and a one-line verdict.  Reads the run's files; re-runs nothing."""
    with errors():
        from utilon.metrics.explain import explain

        ex = explain(run_dir, job)
        if as_json:
            import json

            out.print_json(json.dumps(_as_dict(ex)))
            return
        for line in render(ex):
            out.print(line, highlight=False, markup=False, soft_wrap=True)


def _as_dict(ex: Explanation) -> dict[str, Any]:
    return {"job": ex.job, "row": ex.row, "verdict": ex.verdict,
            "waits": [list(w) for w in ex.waits], "waited": ex.waited,
            "holders": [{"job": h.job, "slot_seconds": h.slot_seconds, "share": h.share,
                         "since": h.since, "granted": h.granted} for h in ex.holders],
            "story": ex.entries, "causes": ex.causes, "notes": ex.notes}


def _t(x: float) -> str:
    return f"t={x:,.3f}"


def _entry(e: dict[str, Any], causes: dict[str, dict[str, Any]]) -> str:
    """One story entry as a sentence."""
    kind, cause = e["kind"], e.get("cause", "")
    if kind == "submitted":
        goal = e.get("goal")
        return (f"submitted ({cause}): {e.get('tasks')} tasks"
                + (f", goal {_t(goal)}" if goal is not None else ", no goal"))
    if kind in ("granted", "grant_changed"):
        what = "granted" if kind == "granted" else "grant changed"
        slots = e.get("slots", "several grants" if "grants" in e else None)
        scope = "all it can use" if slots is None else f"{slots} slots"
        extra = "".join(f", {k} {e[k]}" for k in ("stage", "machines") if k in e)
        extra += ", gang" if e.get("gang") else ""
        extra += ", kill excess" if e.get("kill_excess") else ""
        return f"{what} by {cause}: rank {e.get('rank')} of {e.get('of')}, {scope}{extra}"
    if kind == "revoked":
        return f"grant taken away by {cause}"
    if kind == "reason":
        text = e.get("reason", "")
        return f"policy ({cause}): {text}" if text else f"policy ({cause}): reason cleared"
    if kind == "stage_done":
        return f"stage {e.get('stage')} done"
    if kind in ("killed", "lost", "failed"):
        by = ""
        c = causes.get(cause)
        if c is not None:
            by = f" ({cause}: machine {c.get('machine')} {c.get('action')})"
        elif cause:
            by = f" (by {cause})"
        return (f"task {e.get('stage')}/{e.get('task')} {kind} on {e.get('machine')}{by}: "
                f"{e.get('reason')}; re-queued")
    if kind == "finished":
        if "goal" not in e:
            return "finished"
        return f"finished ({'late' if e.get('late') else 'on time'}; goal {_t(e['goal'])})"
    if kind == "cancelled":
        return f"cancelled ({cause}): {e.get('reason')}"
    if kind == "dropped":
        return f"... {e.get('n')} entries dropped (the story's bound) ..."
    return kind


def render(ex: Explanation) -> list[str]:
    """The explanation as lines of text, in time order."""
    row = ex.row
    lines = [f"job {ex.job}: submitted {_t(float(row['submit']))}, "
             f"started {_t(float(row['start'])) if row['start'] else 'never'}, "
             f"finished {_t(float(row['finish'])) if row['finish'] else 'never'}, "
             f"goal {_t(float(row['goal'])) if row['goal'] else 'none'}"]
    events: list[tuple[float, int, str]] = []
    for i, e in enumerate(ex.entries):
        if e["kind"] == "dropped":
            t = ex.entries[i - 1]["t"] if i else float(row["submit"])
        else:
            t = e["t"]
        events.append((t, i, _entry(e, ex.causes)))
    n = len(events)
    if row["start"]:
        events.append((float(row["start"]), n, "started: its first task launched"))
    for k, (a, b) in enumerate(ex.waits):
        events.append((a, n + 1 + k, f"waiting with no slot until {_t(b)} ({b - a:,.3f} s)"))
    lines.append("story:")
    lines += [f"  {_t(t):>16}  {text}" for t, _, text in sorted(events)]
    if ex.holders:
        lines.append(f"while it waited ({ex.waited:,.3f} s), slots were held by:")
        for h in ex.holders:
            g = h.granted
            grant = (f"its grant: {g['cause']} at {_t(g['t'])}, rank {g.get('rank')} of "
                     f"{g.get('of')}" if g is not None else "no grant in its story then")
            lines.append(f"  {h.job}: {h.slot_seconds:,.1f} slot-s ({h.share:.0%}) from "
                         f"{_t(h.since)}; {grant}")
    lines += [f"note: {n_}" for n_ in ex.notes]
    lines.append(f"verdict: {ex.verdict}")
    return lines
