"""Run outputs: per-job rows, summaries and the files they are written to."""

from utilon.metrics.outputs import JOB_COLUMNS, job_rows, summarize, write_outputs

__all__ = ["JOB_COLUMNS", "job_rows", "summarize", "write_outputs"]
