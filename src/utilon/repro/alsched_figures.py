"""Figures of ``utilon reproduce alsched`` (pyplot-free matplotlib, PNG): Figs. 7, 8-9 and
Table 1 of the paper."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from utilon.report import color

DPI = 120
STYLE = {"soft": ("Soft", 0, "o"), "hard": ("Hard", 1, "s"), "none": ("None", 2, "^")}


def _sweep(ax: Axes, sw: dict[str, Any], policies: tuple[str, ...]) -> None:
    f = sw["speedups"]
    for p in policies:
        label, c, marker = STYLE[p]
        ax.plot(f, sw["runtime"][p], color=color(c), marker=marker, ms=4, lw=1.4, label=label)
    if sw["inflection"] is not None and "hard" in policies:
        ax.axvline(sw["inflection"], color="0.5", ls=":", lw=1)
        ax.annotate(f"Hard overtakes Soft\nf = {sw['inflection']:.1f}",
                    (sw["inflection"], ax.get_ylim()[1]), fontsize=7, ha="left", va="top")
    ax.set_xlabel("speedup factor f")
    ax.set_ylabel("total runtime (time units)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def figures(res: dict[str, Any], out: Path) -> list[str]:
    written = []
    f7 = res["fig7"]
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    _sweep(ax, f7, ("soft", "hard", "none"))
    ax.set_title(f"Fig. 7: {f7['jobs']} NBODY jobs, large:small capacity {f7['ratio']}; "
                 f"mean of {f7['seeds']} seed(s)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "alsched-fig7.png", dpi=DPI)
    written.append("alsched-fig7.png")

    f9 = res["fig9"]
    fig = Figure(figsize=(10, 4))
    a8, a9 = fig.subplots(1, 2)
    _sweep(a8, f9, ("soft", "none"))
    a8.set_title(f"Fig. 8: ratio {f9['ratio']}, None and Soft; mean of {f9['seeds']} "
                 "seed(s)", fontsize=9)
    _sweep(a9, f9, ("soft", "hard", "none"))
    a9.set_title(f"Fig. 9: ratio {f9['ratio']}, all policies", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "alsched-fig8-9.png", dpi=DPI)
    written.append("alsched-fig8-9.png")

    t1 = res["table1"]
    kinds = list(t1["paper"]["soft"])
    fig = Figure(figsize=(7, 3.6))
    ax = fig.add_subplot()
    x = np.arange(len(kinds))
    w = 0.13
    for k, p in enumerate(("soft", "hard", "none")):
        label, c, _ = STYLE[p]
        ax.bar(x + (2 * k - 2.5) * w, [t1["paper"][p][n] for n in kinds], w,
               color=color(c), alpha=0.45, label=f"{label} (paper)")
        ax.bar(x + (2 * k - 1.5) * w, [t1["ours"][p][n] for n in kinds], w,
               color=color(c), label=f"{label} (ours)")
    ax.set_xticks(x, kinds)
    ax.set_ylabel("total time (time units)")
    ax.set_title(f"Table 1: {t1['jobs']} jobs, duration {t1['duration']:g}, "
                 f"NBODY speedup {t1['speedup']:g} (assumed); mean of {t1['seeds']} seed(s)",
                 fontsize=9)
    ax.legend(fontsize=7, ncol=3)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(out / "alsched-table1.png", dpi=DPI)
    written.append("alsched-table1.png")
    return written
