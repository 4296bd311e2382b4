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
    """A finished simulation: the scheduler core as the run left it, and how the run went."""

    core: SchedulerCore
    """The scheduler core at the end of the run: ``core.jobs`` holds every job's runtime
    record, ``core.infeasible`` maps each job a policy reported infeasible to the last
    reason it gave."""
    end_time: float
    """When the last job finished (or the run stopped), in seconds on the scenario's clock."""
    events: int
    """Simulator events processed."""
    task_events: int
    """Of those, the events of running tasks (a usage phase or a task ending)."""
    wall_seconds: float
    """Wall-clock seconds the run took."""
    stopped_early: str  # "" or why the run stopped before every job finished
    """Empty, or why the run stopped before every job finished."""
    usage: UsageTrace | None = None  # actual use per machine over time (``record_usage``)
    """Actual use per machine over time, when the simulation recorded it."""
