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
from utilon.report.data import RunData, SeedComparison, load_runs, seed_comparison

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


_SEED_COLUMNS = (("U min", "utility_min", 3), ("U sum", "utility_sum", 2),
                 ("U mean", "utility_mean", 3), ("misses", "misses", 1),
                 ("unfinished", "unfinished", 1), ("penalty", "penalty", 2),
                 ("makespan s", "makespan", 0), ("resp mean s", "response_mean", 0),
                 ("resp p95 s", "response_p95", 0))


def seeds_section(seeds: SeedComparison) -> list[str]:
    """The statistics over seeds: per scenario, each policy's mean ± the half-width of its
    95% confidence interval; per key metric, the wins/ties/losses matrix (of the scenario,
    and over every scenario when there are several)."""
    from utilon.metrics.stats import pm

    doc = seeds.doc
    shown = [seeds.scenario] if seeds.scenario is not None else list(doc["scenarios"])
    level = round(100 * float(doc.get("level", 0.95)))
    tie = doc.get("ties", {}).get("relative", 0.0)
    out = ["<h2>Over seeds</h2>",
           f"<p class='note'>Mean over seeds ± the half-width of its {level}% confidence "
           "interval (Student t over the seeds; – with one seed).  Wins/ties/losses pair the "
           "runs of one scenario and seed: the row policy against the column policy; values "
           f"within {tie:.1%} of each other tie.</p>"]
    for scen in shown:
        s = doc["scenarios"][scen]
        header = ("policy", *(h for h, _, _ in _SEED_COLUMNS), "seeds", "stopped")
        rows = [(p, *(pm(st[m], nd) for _, m, nd in _SEED_COLUMNS), st["misses"]["n"],
                 st["stopped"]) for p, st in s["policies"].items()]
        out += [f"<h3>{html.escape(scen)}: seeds "
                f"{html.escape(', '.join(str(x) for x in s['seeds']))}</h3>",
                _table(header, rows)]
    matrices = [(f"{seeds.scenario}", doc["scenarios"][seeds.scenario]["wtl"],
                 len(doc["scenarios"][seeds.scenario]["seeds"]))] if seeds.scenario else []
    if seeds.scenario is None or len(doc["scenarios"]) > 1:
        matrices.append(("every scenario", doc["wtl"], int(doc.get("pairs", 0))))
    for what, wtl, pairs in matrices:
        for m in doc.get("key_metrics", []):
            better = doc["metrics"][m]
            policies = list(wtl[m])
            rows = [(a, *("·" if a == b else "{wins}/{ties}/{losses}".format(**wtl[m][a][b])
                          for b in policies)) for a in policies]
            out += [f"<h3>{html.escape(m)} ({better} is better): wins/ties/losses, "
                    f"{html.escape(what)}, {pairs} paired run(s)</h3>",
                    _table(("row vs column", *policies), rows)]
    return out


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
    it; return their paths.  Runs of different scenarios are refused unless ``allow_mixed``.

    A comparison over seeds (one directory: ``compare --seeds`` or one scenario of a
    comparison of several) is reported by its statistics over seeds -- means with confidence
    intervals and the wins/ties/losses matrices -- and the figures of its first seed."""
    seeds = seed_comparison(Path(run_dirs[0])) if len(run_dirs) == 1 else None
    if seeds is not None:
        run_dirs = [seeds.runs]
    runs = load_runs(run_dirs, allow_mixed=allow_mixed)
    return write_report(runs, out, title=title, seeds=seeds)


def write_report(runs: Sequence[RunData], out: Path, *, title: str = "",
                 seeds: SeedComparison | None = None) -> Report:
    out.parent.mkdir(parents=True, exist_ok=True)
    scen = list(dict.fromkeys(r.scenario for r in runs))
    title = title or f"utilon report: {', '.join(scen)}"
    sections = [f"<h1>{html.escape(title)}</h1>"]
    if seeds is not None:
        sections += seeds_section(seeds)
    sections += [f"<p class='note'>{len(runs)} run(s)"
                 + (f" of seed {html.escape(seeds.seed)}, the first" if seeds else "") + ": "
                 + ", ".join(html.escape(f"{r.label} ({r.path})") for r in runs) + "</p>",
                 "<h2>Summary" + (f" (seed {html.escape(seeds.seed)})" if seeds else "")
                 + "</h2>", summary_table(runs),
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
