"""Reports and plots: what a schedule did, as pictures.

``build_report(run_dirs, out)`` writes one self-contained HTML file and a PNG per figure.  The
figure functions (``delta_boxplot``, ``delta_cdf``, ``utility_figure``, ``misses_figure``,
``allocation_figure``, ``gantt_figure``, ``latency_figure``) are the plotting API that the
paper reproductions reuse.
"""

from utilon.report.data import ReportError, RunData, load_run, load_runs, run_dirs
from utilon.report.figures import (
    allocation_figure,
    color,
    delta_boxplot,
    delta_cdf,
    gantt_figure,
    latency_figure,
    misses_figure,
    utility_figure,
)
from utilon.report.html import MAX_HTML_BYTES, Report, build_report, write_report

__all__ = ["MAX_HTML_BYTES", "Report", "ReportError", "RunData", "allocation_figure",
           "build_report", "color", "delta_boxplot", "delta_cdf", "gantt_figure",
           "latency_figure", "load_run", "load_runs", "misses_figure", "run_dirs",
           "utility_figure", "write_report"]
