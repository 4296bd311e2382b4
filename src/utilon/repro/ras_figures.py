"""Figures of ``utilon reproduce ras`` (pyplot-free matplotlib, PNG): Figs. 3–6 of the paper."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from utilon.report import color

if TYPE_CHECKING:
    from utilon.repro.ras_run import RasRun

DPI = 120
APPS = ("sort", "combine", "select")
FLOOR = -2.0  # utilities below (−∞ for a starving job) are drawn at this floor


def _save(fig: Figure, out: Path, name: str, written: list[str]) -> None:
    fig.tight_layout()
    fig.savefig(out / name, dpi=DPI)
    written.append(name)


def _tasks(ax: Axes, run: RasRun, app: str) -> None:
    series = run.tasks_over_time()
    t = np.asarray(series["t"])
    for k, job in enumerate(j for j in run.jobs if j.job_class == app):
        c = color(k)
        ax.plot(t, series[f"{job.id}/map"], color=c, lw=1.2, label=f"{job.id} map")
        ax.plot(t, series[f"{job.id}/reduce"], color=c, lw=1, ls=":")
        ax.axvline(job.submit, color=c, lw=0.6, alpha=0.5)
    ax.set_ylabel(f"{app}\nrunning tasks")
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)


def _utility(ax: Axes, run: RasRun, goals: bool) -> None:
    ids = [j.id for j in run.jobs]
    for k, jid in enumerate(ids):
        pts = [(t, u[jid]) for t, u in run.utility_log if jid in u]
        if not pts:
            continue
        t, u = np.asarray(pts).T
        ax.step(t, np.maximum(u, FLOOR), where="post", color=color(k), lw=1, label=jid)
        if goals:
            g = next(j for j in run.jobs if j.id == jid).utility.goal
            if g is not None and math.isfinite(g):
                ax.axvline(g, color=color(k), lw=0.6, ls="--", alpha=0.6)
    ax.set_ylim(FLOOR - 0.1, 1.05)
    ax.set_ylabel(f"job utility (−∞ drawn at {FLOOR:g})")
    ax.set_xlabel("time (s)")
    ax.legend(fontsize=7, ncol=3)
    ax.grid(alpha=0.3)


def write_figures(out: Path, exp1: dict[str, RasRun], ras2: RasRun, best: int) -> list[str]:
    written: list[str] = []
    # Fig. 3: makespan of Fair with 1..8 slots against RAS
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    ks = list(range(1, 9))
    ms = [exp1[f"fair-{k}"].makespan for k in ks]
    ax.bar([str(k) for k in ks], ms, color=color(0), label="Fair Scheduler (ours)")
    ax.axhline(exp1["ras"].makespan, color=color(1), lw=2, label="RAS (ours)")
    ax.axhline(4536, color=color(1), lw=1, ls="--", label="RAS (paper, 4,536 s)")
    ax.plot(["4"], [4781], "k*", ms=10, label="Fair, 4 slots (paper, 4,781 s)")
    ax.set_xlabel("map slots per TaskTracker")
    ax.set_ylabel("workload makespan (s)")
    ax.set_title("Fig. 3: makespan, Experiment 1")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    _save(fig, out, "fig3-makespan.png", written)
    # Fig. 4: tasks per application and CPU use / wait, Fair (best k) vs RAS
    fig = Figure(figsize=(12, 9))
    runs = ((f"Fair Scheduler, {best} slots", exp1[f"fair-{best}"]), ("RAS", exp1["ras"]))
    for col, (title, run) in enumerate(runs):
        for row, app in enumerate(APPS):
            ax = fig.add_subplot(4, 2, 2 * row + col + 1)
            _tasks(ax, run, app)
            if row == 0:
                ax.set_title(title)
        ax = fig.add_subplot(4, 2, 7 + col)
        cpu = run.cpu()
        t = cpu["step"] * (np.arange(len(cpu["use_mean"])) + 0.5)
        for key, label, k in (("use", "CPU use", 0), ("wait", "CPU waiting", 3)):
            m, s = np.asarray(cpu[f"{key}_mean"]) * 100, np.asarray(cpu[f"{key}_std"]) * 100
            ax.plot(t, m, color=color(k), label=f"{label} (mean {100 * cpu[key]:.0f}%)")
            ax.fill_between(t, m - s, m + s, color=color(k), alpha=0.2)
        ax.set_ylim(0, 105)
        ax.set_ylabel("% of CPU")
        ax.set_xlabel("time (s)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    _save(fig, out, "fig4-tasks-cpu.png", written)
    # Fig. 5: utility of each job over time, Experiment 1
    fig = Figure(figsize=(9, 4))
    ax = fig.add_subplot()
    _utility(ax, exp1["ras"], goals=False)
    ax.set_title("Fig. 5: job utility, Experiment 1 (relaxed goals)")
    _save(fig, out, "fig5-utility.png", written)
    # Fig. 6: Experiment 2, tasks per job and utility with goals
    fig = Figure(figsize=(10, 7))
    ax = fig.add_subplot(2, 1, 1)
    series = ras2.tasks_over_time()
    t = np.asarray(series["t"])
    for k, job in enumerate(ras2.jobs):
        total = np.asarray(series[f"{job.id}/map"]) + np.asarray(series[f"{job.id}/reduce"])
        ax.plot(t, total, color=color(k), lw=1, label=job.id)
    ax.set_ylabel("running tasks")
    ax.set_title("Fig. 6: Experiment 2 (tight goals): tasks per job and utility "
                 "(dashed: goals)")
    ax.legend(fontsize=7, ncol=3)
    ax.grid(alpha=0.3)
    _utility(fig.add_subplot(2, 1, 2), ras2, goals=True)
    _save(fig, out, "fig6-exp2.png", written)
    return written
