"""One self-contained HTML report (inline CSS, images as data URIs, no scripts, nothing
fetched from the network) plus the same figures as PNG files next to it."""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from utilon.report import figures as F
from utilon.report.data import RunData, load_runs

DPI = 100
MAX_HTML_BYTES = 8_000_000
"""Size limit of a report (tested on a run of thousands of jobs): figures are raster images of
fixed size, allocation is stacked per class for large runs, and the Gantt chart samples
machines, so a report's size does not grow with the run."""

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:.2em;
margin-top:2em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
img{max-width:100%;height:auto;border:1px solid #eee;margin:.3em 0}
pre{background:#f7f7f7;padding:.6em;font-size:.8em;overflow-x:auto;max-height:24em}
.note{color:#666;font-size:.85em}dt{font-weight:600}dd{margin:0 0 .4em 1.5em}
"""


@dataclass(frozen=True)
class Report:
    html: Path
    pngs: tuple[Path, ...]


def _png(fig: Figure) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _fmt(x: Any, nd: int = 3) -> str:
    if isinstance(x, bool) or x is None:
        return "" if x is None else str(x).lower()
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:,.{nd}f}" if abs(x) < 1e6 else f"{x:,.0f}"
    return html.escape(str(x))


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(v)}</td>" for v in row) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def summary_table(runs: Sequence[RunData]) -> str:
    header = ("policy", "jobs", "finished", "U min", "U sum", "U mean", "misses", "miss rate",
              "penalty", "makespan s", "resp mean s", "resp p95 s", "utilisation",
              "servers", "cost", "decisions", "decide p50 ms", "decide p95 ms",
              "decide max ms", "solver p50 ms", "solver p95 ms")
    rows = []
    for r in runs:
        s, t = r.summary, r.summary.get("timing", {})
        rows.append((r.label, s.get("jobs"), s.get("finished"), s.get("utility_min"),
                     s.get("utility_sum"), s.get("utility_mean"), s.get("misses"),
                     s.get("miss_rate"), s.get("penalty"), s.get("makespan"),
                     s.get("response_mean"), s.get("response_p95"), s.get("utilisation"),
                     s.get("servers"), s.get("cost"), s.get("decisions"),
                     t.get("decide_ms_p50"), t.get("decide_ms_p95"), t.get("decide_ms_max"),
                     t.get("solver_ms_p50", "–"), t.get("solver_ms_p95", "–")))
    return _table(header, rows)


def class_table(runs: Sequence[RunData]) -> str:
    classes = list(dict.fromkeys(c for r in runs for c in r.jobs.classes))
    rows = []
    for c in classes:
        for r in runs:
            m = r.jobs.of_class(c)
            if not m.any():
                continue
            d = r.jobs.delta[m]
            d = d[np.isfinite(d)]
            rows.append((c, r.label, int(m.sum()), int(r.jobs.missed[m].sum()),
                         float(r.jobs.penalty[m].sum()), float(r.jobs.utility[m].min()),
                         float(r.jobs.utility[m].sum()),
                         float(np.median(d)) if len(d) else None))
    return _table(("class", "policy", "jobs", "misses", "penalty", "U min", "U sum",
                   "median Δ s"), rows)


def provenance_block(runs: Sequence[RunData]) -> str:
    seen: dict[str, dict[str, Any]] = {}
    for r in runs:
        seen.setdefault(json.dumps(r.provenance, sort_keys=True), r.provenance)
    parts = []
    for prov in seen.values():
        items = [("scenario", prov.get("scenario")), ("source", prov.get("source")),
                 ("seed", prov.get("seed")), ("description", prov.get("description"))]
        dl = "".join(f"<dt>{k}</dt><dd>{_fmt(v)}</dd>" for k, v in items if v not in (None, ""))
        derivations = prov.get("derivations") or []
        if derivations:
            dl += "<dt>derived</dt><dd>" + "<br>".join(html.escape(str(d))
                                                      for d in derivations[:20]) + "</dd>"
        meta = prov.get("metadata")
        if meta:
            text = json.dumps(meta, indent=1)
            if len(text) > 20_000:
                text = text[:20_000] + "\n… (truncated; see provenance.json)"
            dl += f"<dt>metadata</dt><dd><pre>{html.escape(text)}</pre></dd>"
        parts.append(f"<dl>{dl}</dl>")
    return "".join(parts)


def figures_for(runs: Sequence[RunData]) -> list[tuple[str, str, str, Callable[[], Figure]]]:
    """(file stem, section title, caption, builder) for every figure of a report."""
    out: list[tuple[str, str, str, Callable[[], Figure]]] = [
        ("delta-box", "Completion time: Δ per class",
         "Δ = finish − goal of every finished job that has a goal; boxes per job class.",
         lambda: F.delta_boxplot(runs)),
        ("delta-cdf", "Completion time: CDF of Δ",
         "Fraction of jobs with a goal whose Δ is at most x; jobs that never finished keep "
         "the curve below 1.", lambda: F.delta_cdf(runs)),
        ("utility", "Utility", "Distribution of per-job utility, sum and minimum per policy, "
         "and mean utility per class.", lambda: F.utility_figure(runs)),
        ("misses", "Deadline misses and penalty",
         "Jobs that finished after their goal (or not at all) and their penalty, per class.",
         lambda: F.misses_figure(runs)),
    ]
    if any(r.allocation is not None and len(r.allocation.start) for r in runs):
        out.append(("allocation", "Allocation over time",
                    "Slot-resource units held, stacked per job (per class for large runs), "
                    "with the cluster's capacity over time as the black line; runs that "
                    "recorded no allocation are left out.", lambda: F.allocation_figure(runs)))
    # runs of the cloud world place clusters of VMs, not task attempts: no Gantt chart
    tasked = [r for r in runs if r.attempts is not None and len(r.attempts["job"])]
    for r in tasked[:F.MAX_GANTT_RUNS]:
        stem = "gantt-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", r.label)
        out.append((stem, f"Tasks per machine: {r.label}",
                    "Every task attempt as a bar on its machine.",
                    lambda r=r: F.gantt_figure(r)))  # type: ignore[misc]
    out.append(("latency", "Decision latency",
                "Wall time of the policy's decide() per call (p50, p95, max) and, for "
                "optimization policies, of their solver.", lambda: F.latency_figure(runs)))
    return out


def build_report(run_dirs: Sequence[Path], out: Path, *, title: str = "",
                 allow_mixed: bool = False) -> Report:
    """Read the runs, write ``out`` (HTML) and one ``<stem>-<figure>.png`` per figure next to
    it; return their paths.  Runs of different scenarios are refused unless ``allow_mixed``."""
    runs = load_runs(run_dirs, allow_mixed=allow_mixed)
    return write_report(runs, out, title=title)


def write_report(runs: Sequence[RunData], out: Path, *, title: str = "") -> Report:
    out.parent.mkdir(parents=True, exist_ok=True)
    scen = list(dict.fromkeys(r.scenario for r in runs))
    title = title or f"utilon report: {', '.join(scen)}"
    sections = [f"<h1>{html.escape(title)}</h1>",
                f"<p class='note'>{len(runs)} run(s): "
                + ", ".join(html.escape(f"{r.label} ({r.path})") for r in runs) + "</p>",
                "<h2>Summary</h2>", summary_table(runs),
                "<h2>Per class</h2>", class_table(runs)]
    pngs = []
    for stem, head, caption, build in figures_for(runs):
        fig = build()
        data = _png(fig)
        path = out.with_name(f"{out.stem}-{stem}.png")
        path.write_bytes(data)
        pngs.append(path)
        b64 = base64.b64encode(data).decode("ascii")
        sections += [f"<h2>{html.escape(head)}</h2>",
                     f"<p class='note'>{html.escape(caption)} ({html.escape(path.name)})</p>",
                     f"<img alt='{html.escape(head)}' src='data:image/png;base64,{b64}'>"]
    sections += ["<h2>Provenance</h2>", provenance_block(runs)]
    doc = ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
           f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
           + "\n".join(sections) + "</body></html>\n")
    out.write_text(doc, encoding="utf-8")
    return Report(out, tuple(pngs))
