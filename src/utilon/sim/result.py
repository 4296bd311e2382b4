"""What a simulation returns.

A plain dataclass, kept out of the compiled simulator modules (``setup.py``) so that it pickles
as an ordinary class: results travel between processes in parallel runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from utilon.core.scheduler import SchedulerCore
from utilon.sim.usage import UsageTrace


@dataclass(frozen=True, slots=True)
class SimResult:
    core: SchedulerCore
    end_time: float
    events: int
    task_events: int
    wall_seconds: float
    stopped_early: str  # "" or why the run stopped before every job finished
    usage: UsageTrace | None = None  # actual use per machine over time (``record_usage``)
