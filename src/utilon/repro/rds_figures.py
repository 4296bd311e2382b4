"""Figures of ``utilon reproduce rds`` (pyplot-free matplotlib, PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure

from utilon.report import allocation_figure, color, load_run

if TYPE_CHECKING:
    from utilon.repro.rds_run import Run

DPI = 120


def _bars(ax: Any, groups: list[str], series: dict[str, list[float]], ylabel: str) -> None:
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for k, (name, values) in enumerate(series.items()):
        ax.bar(x + (k - (len(series) - 1) / 2) * width, values, width, label=name,
               color=color(k))
    ax.set_xticks(x, groups)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)


def write_figures(out: Path, result: dict[str, Any],
                  runs: dict[str, dict[str, list[Run]]]) -> list[str]:
    written: list[str] = []

    def save(fig: Figure, name: str) -> None:
        if fig.get_layout_engine() is None:  # report figures bring their own layout
            fig.tight_layout()
        fig.savefig(out / name, dpi=DPI)
        written.append(name)

    case = {"fifo": "fifo", "fair": "fair", "ideal": "ideal (rds + oracle)"}
    if all((out / "case" / d / "summary.json").exists() for d in case):
        fig = allocation_figure([load_run(out / "case" / d, label) for d, label in case.items()])
        fig.suptitle("Fig. 2: J1 and J2 under FIFO, Fair and the ideal scheduler "
                     "(capacity doubles in [10, 20) and [30, 40) min)", fontsize=9)
        save(fig, "fig2-case-study.png")

    fig = Figure(figsize=(10, 6.5))
    axes = fig.subplots(2, 1)
    for ax, (mode, by_label) in zip(axes, runs.items(), strict=True):
        labels = ("fair", "edf-n", "edf-p", "rds", "rds-h1", "rds-deadline", "rds-tardiness")
        jobs = list(result["table3"][mode]["rds"]["penalty_by_job"])
        _bars(ax, jobs, {lb: [result["table3"][mode][lb]["penalty_by_job"][j] for j in jobs]
                         for lb in labels if lb in by_label}, "deadline-miss penalty")
        ax.set_title(f"Fig. 7: penalty per job, {mode}", fontsize=9)
        ax.legend(fontsize=8)
    save(fig, "fig7-penalty.png")

    fig = Figure(figsize=(10, 3.6))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, mode in zip(axes, result["fig9"], strict=True):
        kinds = list(result["fig9"][mode])
        _bars(ax, kinds, {b: [result["fig9"][mode][k][f"{b}_pct"] for k in kinds]
                          for b in ("soft", "hard")}, "% of jobs missing the bound")
        ax.set_title(f"Fig. 9: soft vs hard misses under RDS, {mode}", fontsize=9)
        ax.legend(fontsize=8)
    save(fig, "fig9-soft-hard.png")

    fig = Figure(figsize=(10, 3.6))
    axes = fig.subplots(1, 2)
    for mode in result["fig10"]:
        inj = result["fig10"][mode]["injected"]
        axes[0].plot(list(inj), [v["soft_miss_pct"] for v in inj.values()], "o-", label=mode)
    paper = [(e, v["paper_miss_pct"]) for e, v in next(iter(result["fig10"].values()))
             ["injected"].items() if v["paper_miss_pct"] is not None]
    axes[0].plot([p[0] for p in paper], [p[1] for p in paper], "k*", ms=10, label="paper")
    axes[0].set_xlabel("injected progress-model error (%)")
    axes[0].set_ylabel("deadline misses (%)")
    axes[0].set_title("Fig. 10b: prediction error vs misses", fontsize=9)
    axes[0].legend(fontsize=8)
    for mode in result["horizon"]:
        hz = result["horizon"][mode]
        axes[1].plot(list(hz), [v["penalty"] for v in hz.values()], "o-", label=mode)
    axes[1].set_xlabel("H_p = H_c (control intervals)")
    axes[1].set_ylabel("penalty")
    axes[1].set_title("Horizon sensitivity (§6.6)", fontsize=9)
    axes[1].legend(fontsize=8)
    save(fig, "fig10-error-horizon.png")

    fig = Figure(figsize=(7, 3.4))
    ax = fig.subplots()
    modes = list(result["fig11"])
    _bars(ax, modes, {lb: [result["fig11"][m][lb]["penalty"] for m in modes]
                      for lb in ("rds", "rds-green", "rds-oracle")}, "penalty")
    ax.set_title("Fig. 11a: RDS with ARIMA (rds), green-power and oracle prediction",
                 fontsize=9)
    ax.legend(fontsize=8)
    save(fig, "fig11-predictors.png")
    return written
