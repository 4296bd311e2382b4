"""What the scheduler core records about a run's attempts, and its shortcuts' switches.
(A running task's record, ``Running``, is runtime state: ``core/state.py``.)

Plain Python dataclasses, kept out of the compiled core modules (``setup.py``): a frozen
dataclass compiled by mypyc does not unpickle, and results travel between processes in
parallel runs.  (The counters, ``CoreStats``, are updated per task and live with the runtime
state, compiled.)
"""

from __future__ import annotations

from dataclasses import dataclass

from utilon.core.messages import TaskRef


@dataclass(frozen=True, slots=True)
class Attempt:
    """One execution attempt of a task, as the core saw it."""

    task: TaskRef
    machine: str
    start: float
    end: float
    outcome: str  # done | killed | lost | failed


@dataclass(slots=True)
class FastPaths:
    """The core's shortcuts on the per-event path: a switch for each and how often it was
    taken.  Each gives what the general path gives (``tests/test_sim_fast_path.py`` holds
    them to it, switching them off), so none of this is an output of a run.

    * ``fuse_finishes``: the simulator hands a task completion alone at its instant to
      ``SchedulerCore.finish_one`` rather than ``handle``; the completions that still took
      the general path are counted in ``general_finishes``.
    * ``extend_installs``: a decision that keeps the installed whole-job grants and appends
      new ones is installed incrementally (``install_extensions``).
    * ``order_extensions``: arrivals under an order-only policy appended to the installed
      order without calling ``decide`` (switched off by clearing ``core.grants.order_key``).
    """

    fuse_finishes: bool = True
    extend_installs: bool = True
    general_finishes: int = 0
    install_extensions: int = 0
    order_extensions: int = 0
