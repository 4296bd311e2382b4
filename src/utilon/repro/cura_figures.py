"""Figures of ``utilon reproduce cura`` (pyplot-free matplotlib, PNG): the Appendix B schedules
as Gantt charts (Fig. 3) and every sweep of Figs. 5-12 as four panels (servers required, mean
response time, per-job cost, effective utilization), plus Fig. 9's success rate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from utilon.report import color

DPI = 120
METRICS = (("servers", "servers required"), ("mean_response_s", "mean response time (s)"),
           ("per_job_server_hours", "per-job cost (server-hours)"),
           ("effective_utilization", "effective utilization"))


def _gantt(table: dict[str, Any], title: str, out: Path) -> Path:
    fig = Figure(figsize=(8, 4))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, who in zip(axes, ("paper", "ours"), strict=True):
        for r in table["rows"]:
            x = r[who]
            if x["vm"] is None or x["start"] is None:
                continue
            ax.barh(r["job"], x["end"] - x["start"], left=x["start"], color=color(x["vm"] - 1),
                    edgecolor="k", lw=0.4)
            ax.text(x["start"] + 2, r["job"], f"{x['vms']}", va="center", fontsize=6)
            ax.plot([r["deadline"]], [r["job"]], "k|", ms=8)
        ax.set_title(f"{who} (colour = VM type, | = deadline)", fontsize=9)
        ax.set_xlabel("time (s)")
        ax.invert_yaxis()
    axes[0].set_ylabel("job")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = out / f"cura-{title.split(':')[0].lower().replace(' ', '')}.png"
    fig.savefig(path, dpi=DPI)
    return path


def _sweep(sw: dict[str, Any], name: str, out: Path) -> Path:
    xs = list(sw["points"])
    services = list(next(iter(sw["points"].values())))
    fig = Figure(figsize=(12, 3.2))
    axes = fig.subplots(1, 4)
    for ax, (m, label) in zip(axes, METRICS, strict=True):
        for i, s in enumerate(services):
            ys = [sw["points"][x][s][m] for x in xs]
            ax.plot(range(len(xs)), ys, marker="o", ms=4, color=color(i), label=s)
        ax.set_xticks(range(len(xs)), xs, fontsize=7)
        ax.set_xlabel(sw["x"], fontsize=8)
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path = out / f"cura-{name}.png"
    fig.savefig(path, dpi=DPI)
    return path


def plot(res: dict[str, Any], out: Path) -> list[Path]:
    ab = res["appendix_b"]
    paths = [_gantt(ab["table5"], "Table 5: VM-aware schedule", out),
             _gantt(ab["table6"], "Table 6: with reconfiguration", out)]
    for name, sw in res["figures"].items():
        if name == "fig9":
            fig = Figure(figsize=(5, 3.5))
            ax = fig.add_subplot()
            for i, (svc, pts) in enumerate(sw.items()):
                ax.plot([int(s) for s in pts], list(pts.values()), marker="o", color=color(i),
                        label=svc)
            ax.set_xlabel("servers")
            ax.set_ylabel("success rate")
            ax.set_title("Fig. 9: success rate vs fleet", fontsize=9)
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
            fig.tight_layout()
            p = out / "cura-fig9.png"
            fig.savefig(p, dpi=DPI)
            paths.append(p)
        else:
            paths.append(_sweep(sw, name.replace("_", "-"), out))
    return paths
