"""The report's figures, as functions of loaded runs returning matplotlib ``Figure`` objects.

This is the plotting API the paper reproductions reuse: every function takes ``RunData``
(or plain arrays, for the generic helpers) and returns a figure built without pyplot (no global
state, no display needed).  Colours are fixed per position so one policy keeps its colour
across all figures of a report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from utilon.metrics.timeline import ordinal
from utilon.report.data import RunData, Steps

PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3",
           "#8C8C8C", "#CCB974", "#64B5CD")
MAX_STACK_JOBS = 12  # above this many jobs, allocation is stacked per class
#: utility-sum bars whose spread is below this share of the largest get a zoomed axis
ZOOM_SPREAD = 0.2
MAX_GANTT_MACHINES = 40  # above this many machines, the Gantt chart shows a sample
MAX_GANTT_RUNS = 8  # Gantt charts for at most this many runs of a comparison
WIDTH = 9.0  # inches; 100 dpi PNGs of ~900 px width


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _figure(height: float, width: float = WIDTH) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _classes(runs: Sequence[RunData]) -> list[str]:
    return list(dict.fromkeys(c for r in runs for c in r.jobs.classes))


def _no_data(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#666")
    ax.set_xticks([])
    ax.set_yticks([])


# ------------------------------------------------------------------ completion time
def _auto_scale(ax: Any, values: np.ndarray, axis: str = "y") -> str:
    """Symmetric-log scale when a few huge values would flatten everything else."""
    mag = np.abs(values[np.isfinite(values)])
    if len(mag) < 2 or mag.max() <= 0:
        return "linear"
    typical = float(np.median(mag))
    if mag.max() <= 30 * max(typical, 1e-9):
        return "linear"
    thresh = max(typical, 1.0)
    (ax.set_yscale if axis == "y" else ax.set_xscale)("symlog", linthresh=thresh)
    return f"symlog, linear within ±{thresh:.3g} s"


def delta_boxplot(runs: Sequence[RunData], title: str = "", scale: str = "auto") -> Figure:
    """Δ = finish − goal per job, box plots per job class, one box per run.  ``scale``:
    ``"auto"`` (symmetric log when a few huge values would flatten the rest), ``"linear"``,
    ``"symlog"``."""
    classes = _classes(runs)
    fig = _figure(3.6)
    ax = fig.add_subplot()
    n = len(runs)
    width = 0.8 / max(n, 1)
    drawn = False
    for i, r in enumerate(runs):
        data, pos = [], []
        for k, c in enumerate(classes):
            d = r.jobs.delta[r.jobs.of_class(c)]
            d = d[np.isfinite(d)]
            if len(d):
                data.append(d)
                pos.append(k - 0.4 + width * (i + 0.5))
        if data:
            drawn = True
            ax.boxplot(data, positions=pos, widths=width * 0.85, patch_artist=True,
                       manage_ticks=False, flierprops={"markersize": 2, "alpha": 0.5},
                       boxprops={"facecolor": color(i), "alpha": 0.75},
                       medianprops={"color": "black"})
    if not drawn:
        _no_data(ax, "no finished job with a goal")
    else:
        ax.axhline(0, color="#333", lw=0.8, ls="--")
        ax.set_xticks(range(len(classes)), classes)
        how = "linear"
        if scale != "linear":
            every = np.concatenate([r.jobs.delta for r in runs])
            how = _auto_scale(ax, every if scale == "auto" else np.r_[0.0, 1e9, 1.0])
        ax.set_ylabel("Δ = finish − goal (s)")
        ax.legend(handles=[Patch(color=color(i), label=r.label) for i, r in enumerate(runs)],
                  fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        if how != "linear":
            title = title or ("Completion time relative to goal, per job class (below 0: "
                              f"early)\n{how}")
    ax.set_title(title or "Completion time relative to goal, per job class (below 0: early)",
                 fontsize=10)
    return fig


def delta_cdf(runs: Sequence[RunData], title: str = "") -> Figure:
    """Empirical CDF of Δ per run; jobs that never finished are off the right edge."""
    fig = _figure(3.4)
    ax = fig.add_subplot()
    drawn = False
    for i, r in enumerate(runs):
        d = np.sort(r.jobs.delta[np.isfinite(r.jobs.delta)])
        with_goal = int(np.sum(np.isfinite(r.jobs.goal)))
        if not len(d) or not with_goal:
            continue
        drawn = True
        y = np.arange(1, len(d) + 1) / with_goal  # unfinished jobs keep the CDF below 1
        ax.step(np.r_[d[0], d], np.r_[0, y], where="post", color=color(i), label=r.label)
    if drawn:
        ax.axvline(0, color="#333", lw=0.8, ls="--")
        how = _auto_scale(ax, np.concatenate([r.jobs.delta for r in runs]), axis="x")
        ax.set_xlabel("Δ = finish − goal (s)" + (f" [{how}]" if how != "linear" else ""))
        ax.set_ylabel("fraction of jobs with a goal")
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=8)
    else:
        _no_data(ax, "no finished job with a goal")
    ax.set_title(title or "CDF of Δ (left of the dashed line: met the goal)")
    return fig


def ccdf_figure(series: Mapping[str, np.ndarray], *, xlabel: str, title: str = "") -> Figure:
    """Complementary CDF, P(X ≥ x), of each named sample (paper reproductions)."""
    fig = _figure(3.4)
    ax = fig.add_subplot()
    drawn = False
    for i, (name, v) in enumerate(series.items()):
        v = np.sort(np.asarray(v, dtype=float))
        v = v[np.isfinite(v)]
        if not len(v):
            continue
        drawn = True
        ax.step(v, 1.0 - np.arange(len(v)) / len(v), where="post", color=color(i),
                label=name)
    if drawn:
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of events ≥ x")
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=8)
    else:
        _no_data(ax, "no events")
    ax.set_title(title, fontsize=10)
    return fig


def grouped_boxplot(groups: Mapping[str, Mapping[str, Sequence[float]]], *, ylabel: str,
                    title: str = "", zero_line: bool = True) -> Figure:
    """Box plots: one group per outer key (x axis), one box per inner key (colour), e.g.
    Δ per workload mix and scheduler/class (paper reproductions)."""
    series = list(dict.fromkeys(k for g in groups.values() for k in g))
    fig = _figure(3.6)
    ax = fig.add_subplot()
    width = 0.8 / max(len(series), 1)
    every = []
    for i, name in enumerate(series):
        data, pos = [], []
        for k, g in enumerate(groups.values()):
            v = np.asarray(g.get(name, ()), dtype=float)
            v = v[np.isfinite(v)]
            if len(v):
                data.append(v)
                pos.append(k - 0.4 + width * (i + 0.5))
                every.append(v)
        if data:
            ax.boxplot(data, positions=pos, widths=width * 0.85, patch_artist=True,
                       manage_ticks=False, flierprops={"markersize": 2, "alpha": 0.5},
                       boxprops={"facecolor": color(i), "alpha": 0.75},
                       medianprops={"color": "black"})
    if every:
        if zero_line:
            ax.axhline(0, color="#333", lw=0.8, ls="--")
        how = _auto_scale(ax, np.concatenate(every))
        ax.set_xticks(range(len(groups)), list(groups))
        ax.set_ylabel(ylabel)
        ax.legend(handles=[Patch(color=color(i), label=n) for i, n in enumerate(series)],
                  fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        if how != "linear":
            title = f"{title}\n{how}" if title else how
    else:
        _no_data(ax, "no data")
    ax.set_title(title, fontsize=10)
    return fig


# ------------------------------------------------------------------ utility
def utility_figure(runs: Sequence[RunData]) -> Figure:
    """Utility per job (distribution per run), min and sum per run, and mean per class."""
    fig = _figure(3.6, WIDTH + 3)
    a1, a2, a3 = fig.subplots(1, 3, width_ratios=(1.2, 1, 1.4))
    labels = [r.label for r in runs]
    data = [r.jobs.utility for r in runs]
    if any(len(d) for d in data):
        parts = a1.violinplot([d if len(d) else [0.0] for d in data], showmedians=True)
        for i, body in enumerate(parts["bodies"]):
            body.set_facecolor(color(i))
            body.set_alpha(0.6)
        a1.set_xticks(range(1, len(runs) + 1), labels, rotation=30, ha="right", fontsize=8)
    else:
        _no_data(a1, "no jobs")
    a1.set_title("utility per job")
    x = np.arange(len(runs))
    sums = [float(r.summary.get("utility_sum", np.sum(r.jobs.utility))) for r in runs]
    mins = [float(r.summary.get("utility_min", np.min(r.jobs.utility, initial=0))) for r in runs]
    bars = a2.bar(x, sums, color=[color(i) for i in range(len(runs))], alpha=0.8)
    a2.bar_label(bars, [f"min {m:.3g}" for m in mins], fontsize=7, padding=2)
    a2.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
    lo, hi = (min(sums), max(sums)) if sums else (0.0, 0.0)
    zoom = lo > 0 and hi > lo and hi - lo < ZOOM_SPREAD * hi
    if zoom:  # bars from 0 would look equal: show the range where they differ
        pad = hi - lo
        a2.set_ylim(max(0.0, lo - pad), hi + 0.6 * pad)
    a2.set_title("sum of utility (label: min)" + ("\naxis does not start at 0" if zoom else ""))
    _grouped(a3, runs, lambda r, m: float(np.mean(r.jobs.utility[m])) if m.any() else 0.0)
    a3.set_title("mean utility per class")
    return fig


def _grouped(ax: Any, runs: Sequence[RunData], value: Any) -> None:
    """Grouped bars: one group per job class, one bar per run."""
    classes = _classes(runs)
    width = 0.8 / max(len(runs), 1)
    for i, r in enumerate(runs):
        vals = [value(r, r.jobs.of_class(c)) for c in classes]
        ax.bar(np.arange(len(classes)) - 0.4 + width * (i + 0.5), vals, width,
               color=color(i), label=r.label, alpha=0.85)
    ax.set_xticks(range(len(classes)), classes, fontsize=8)
    ax.legend(fontsize=7)


def misses_figure(runs: Sequence[RunData]) -> Figure:
    """Deadline misses and penalty per job class, one bar per run."""
    fig = _figure(3.4)
    a1, a2 = fig.subplots(1, 2)
    _grouped(a1, runs, lambda r, m: int(np.sum(r.jobs.missed[m])))
    a1.set_title("deadline misses per class")
    _grouped(a2, runs, lambda r, m: float(np.sum(r.jobs.penalty[m])))
    a2.set_title("penalty per class (RDS eq. 1)")
    return fig


# ------------------------------------------------------------------ allocation over time
def _mean_on_grid(steps: Steps, keys: Sequence[str], group: Mapping[str, str],
                  edges: np.ndarray) -> np.ndarray:
    """Mean value per group over each ``[edges[k], edges[k+1])``, from step rows."""
    out = np.zeros((len(keys), len(edges) - 1))
    gi = {k: i for i, k in enumerate(keys)}
    row_group = np.asarray([gi[group.get(j, j)] for j in steps.key], dtype=int)
    width = np.diff(edges)
    for g in range(len(keys)):
        sel = row_group == g
        if not sel.any():
            continue
        s, e, v = steps.start[sel], steps.end[sel], steps.value[sel]
        # integral of the group's level is piecewise linear: sum of ramps, one per row
        t = np.concatenate([s, e])
        slope = np.concatenate([v, -v])
        order = np.argsort(t, kind="stable")
        t, slope = t[order], np.cumsum(slope[order])
        integral = np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(t))])
        f = np.interp(edges, t, integral, left=0.0, right=integral[-1])
        out[g] = np.diff(f) / width
    return out


def _slot_resource(run: RunData) -> str:
    """The resource the allocation timeline records (the core's slot resource: ``slots``,
    else ``cpu``, else the first by name), so that the stacked area, the capacity line and
    the axis share one unit."""
    names = sorted(run.summary.get("utilisation_by_resource", {}))
    if not names and run.capacity is not None:
        names = sorted(k for k in run.capacity if k not in ("time", "machines", "effective"))
    return next((c for c in ("slots", "cpu") if c in names), names[0] if names else "slots")


def allocation_figure(runs: Sequence[RunData], *, resource: str = "",
                      max_jobs: int = MAX_STACK_JOBS, points: int = 600) -> Figure:
    """Stacked area of the slot resource held per job (per class above ``max_jobs`` jobs),
    one panel per run that recorded an allocation, with the cluster's capacity over time on
    top."""
    shown = [r for r in runs if r.allocation is not None and len(r.allocation.start)]
    runs = shown or list(runs[:1])  # no empty panels; one saying so when nothing was recorded
    fig = _figure(2.3 * len(runs) + 0.6)
    axes = fig.subplots(len(runs), 1, sharex=True, squeeze=False)[:, 0]
    end = max([float(r.summary.get("makespan", 0)) for r in runs]
              + [float(r.allocation.end.max()) for r in runs
                 if r.allocation is not None and len(r.allocation.end)] + [1.0])
    edges = np.linspace(0.0, end, points + 1)
    for ax, r in zip(axes, runs, strict=True):
        steps = r.allocation
        if steps is None or not len(steps.start):
            _no_data(ax, f"{r.label}: no allocation recorded")
            continue
        jobs = list(dict.fromkeys(steps.key))
        per_class = len(jobs) > max_jobs
        group = dict(zip(r.jobs.id, r.jobs.job_class, strict=True)) if per_class else {}
        keys = list(dict.fromkeys(group.get(j, j) for j in jobs)) if per_class else jobs
        levels = _mean_on_grid(steps, keys, group, edges)
        ax.stackplot(edges, np.c_[levels, levels[:, -1:]], labels=keys, step="post",
                     colors=[color(i) for i in range(len(keys))], alpha=0.85)
        cap = r.capacity
        col = resource or _slot_resource(r)
        if cap is not None and len(cap["time"]) and col in cap:
            t = np.r_[cap["time"], end]
            ax.step(t, np.r_[cap[col], cap[col][-1]], where="post", color="black", lw=1.2,
                    label=f"capacity ({col})")
            if not np.allclose(cap["effective"], cap[col]):
                ax.step(t, np.r_[cap["effective"], cap["effective"][-1]], where="post",
                        color="black", lw=1, ls=":", label="capacity × speed")
        res = r.summary.get("timeline", {}).get("allocation", {}).get("resolution", "exact")
        note = "" if res == "exact" else f", averaged over {res:g} s buckets"
        ax.set_title(f"{r.label}: held per {'class' if per_class else 'job'}{note}",
                     fontsize=9, loc="left")
        ax.set_ylabel(col)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    axes[-1].set_xlabel("time (s)")
    return fig


# ------------------------------------------------------------------ Gantt
def _lanes(machine: Sequence[str], start: np.ndarray, end: np.ndarray,
           idx: np.ndarray) -> tuple[dict[str, int], np.ndarray]:
    """Give every attempt a lane on its machine so that concurrent tasks do not overlap
    (interval colouring: each attempt takes the lowest lane free at its start)."""
    import heapq

    lane = np.zeros(len(idx), dtype=int)
    lanes: dict[str, int] = {}
    busy: dict[str, list[tuple[float, int]]] = {}
    free: dict[str, list[int]] = {}
    for k in sorted(range(len(idx)), key=lambda k: (start[idx[k]], end[idx[k]])):
        i = idx[k]
        m = machine[i]
        b, f = busy.setdefault(m, []), free.setdefault(m, [])
        while b and b[0][0] <= start[i]:
            heapq.heappush(f, heapq.heappop(b)[1])
        n = heapq.heappop(f) if f else lanes.get(m, 0)
        lanes[m] = max(lanes.get(m, 0), n + 1)
        heapq.heappush(b, (end[i], n))
        lane[k] = n
    return lanes, lane


def _boxes(left: np.ndarray, width: np.ndarray, y: np.ndarray, h: float = 0.85
           ) -> list[np.ndarray]:
    """Rectangles as 4 x 2 vertex arrays, centred on ``y``."""
    x0, x1 = left, left + width
    y0, y1 = y - h / 2, y + h / 2
    return list(np.stack([np.c_[x0, y0], np.c_[x1, y0], np.c_[x1, y1], np.c_[x0, y1]], axis=1))


def gantt_figure(run: RunData, *, max_machines: int = MAX_GANTT_MACHINES) -> Figure:
    """Task attempts per machine, one lane per concurrently running task; bars coloured by
    job, hatched when the attempt was killed, lost or failed."""
    att = run.attempts
    if att is None or not len(att["job"]):
        fig = _figure(2.0)
        _no_data(fig.add_subplot(), f"{run.label}: no task attempts recorded")
        return fig
    machines = sorted(set(att["machine"]), key=_natural)
    notes = []
    about = run.summary.get("timeline", {}).get("attempts", {})
    if about.get("sampled"):
        notes.append(f"sample: {about.get('note', '')}; {about['rows']} of {about['of']} "
                     "attempts")
    if len(machines) > max_machines:
        step = -(-len(machines) // max_machines)
        notes.append(f"every {ordinal(step)} machine shown ({len(machines[::step])} of "
                     f"{len(machines)} with tasks)")
        machines = machines[::step]
    shown = set(machines)
    idx = np.asarray([i for i, m in enumerate(att["machine"]) if m in shown], dtype=int)
    lanes, lane = _lanes(att["machine"], att["start"], att["end"], idx)
    base, y0 = {}, 0
    for m in machines:
        base[m] = y0
        y0 += lanes.get(m, 1) + 1  # one empty lane between machines
    fig = _figure(min(12.0, max(2.0, 0.09 * y0 + 1.3)))
    ax = fig.add_subplot()
    job_ids = list(dict.fromkeys(att["job"]))
    by_class = len(job_ids) > MAX_STACK_JOBS  # more jobs than colours: colour = class
    cls = dict(zip(run.jobs.id, run.jobs.job_class, strict=True))
    keys = list(dict.fromkeys(cls.get(j, "?") for j in job_ids)) if by_class else job_ids
    kcol = {k: color(i) for i, k in enumerate(keys)}
    jcol = {j: kcol[cls.get(j, "?") if by_class else j] for j in job_ids}
    y = np.asarray([base[att["machine"][i]] for i in idx]) + lane
    left = att["start"][idx]
    width = np.maximum(att["end"][idx] - left, 0.0)
    # one collection of rectangles: thousands of separate bar patches take seconds to draw
    ax.add_collection(PolyCollection(_boxes(left, width, y), closed=True, edgecolors="none",
                                     facecolors=[jcol[att["job"][i]] for i in idx]))
    ax.set_xlim(0, float(np.max(left + width, initial=1.0)) * 1.01)
    bad = np.asarray([att["outcome"][i] in ("killed", "lost", "failed") for i in idx],
                     dtype=bool)
    handles = []
    if bad.any():
        ax.add_collection(PolyCollection(_boxes(left[bad], width[bad], y[bad]), closed=True,
                                         facecolors="none", edgecolors="black", hatch="////",
                                         linewidths=0))
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="////",
                             label="killed / lost / failed"))
    if len(keys) <= MAX_STACK_JOBS:
        handles += [Patch(color=kcol[k], label=k) for k in keys]
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  frameon=False)
    ax.set_yticks([base[m] + (lanes.get(m, 1) - 1) / 2 for m in machines], machines,
                  fontsize=6 if len(machines) > 20 else 8)
    ax.set_ylim(y0 - 0.5, -1)
    ax.set_xlabel("time (s)")
    title = (f"{run.label}: tasks per machine (one lane per concurrent task, colour = "
             f"{'job class' if by_class else 'job'})")
    ax.set_title(title + ("\n" + "; ".join(notes) if notes else ""), fontsize=9, loc="left")
    return fig


def _natural(s: str) -> tuple[Any, ...]:
    """Sort m-2 before m-10."""
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s))


# ------------------------------------------------------------------ decision latency
def latency_figure(runs: Sequence[RunData]) -> Figure:
    """Decision latency p50/p95/max per run and, where a policy solves an optimization
    problem, its solver time."""
    solver = [r for r in runs if "solver_ms_p50" in r.summary.get("timing", {})]
    fig = _figure(3.2, WIDTH if solver else WIDTH * 0.6)
    a1, *rest = fig.subplots(1, 2 if solver else 1, squeeze=False)[0]
    x = np.arange(len(runs))
    labels = [r.label for r in runs]
    stats = ("p50", "p95", "max")
    for k, (name, shade) in enumerate(zip(stats, (1.0, 0.7, 0.4), strict=True)):
        vals = [float(r.summary.get("timing", {}).get(f"decide_ms_{name}", 0.0)) for r in runs]
        a1.bar(x - 0.3 + 0.2 * (k + 0.5), np.maximum(vals, 1e-4), 0.2, label=name,
               color=[color(i) for i in range(len(runs))], alpha=shade)
    a1.set_yscale("log")
    a1.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
    a1.set_ylabel("ms per decision")
    a1.set_title("decision latency (bars: p50, p95, max)")
    if solver:  # no empty panel when no policy here solves an optimization problem
        a2 = rest[0]
        xs = np.arange(len(solver))
        for k, (name, shade) in enumerate(zip(stats, (1.0, 0.7, 0.4), strict=True)):
            vals = [float(r.summary["timing"][f"solver_ms_{name}"]) for r in solver]
            a2.bar(xs - 0.3 + 0.2 * (k + 0.5), np.maximum(vals, 1e-4), 0.2, label=name,
                   color=[color(runs.index(r)) for r in solver], alpha=shade)
        a2.set_yscale("log")
        a2.set_xticks(xs, [r.label for r in solver], rotation=30, ha="right", fontsize=8)
        a2.set_ylabel("ms per solve")
        a2.set_title("solver time (optimization policies)")
    return fig
