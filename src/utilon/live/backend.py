"""The backend interface: what the live runner needs from a world that executes tasks.

A backend executes the core's commands (``apply``) and reports what happened as stimuli
(``poll``).  It owns its clock: ``now()`` is seconds since ``start``, wall time for real
backends and virtual time for the fake.  The core, the snapshot, the dispatcher and the
policies are exactly the simulator's; a backend never decides anything.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from utilon.core.messages import Command, Stimulus
from utilon.errors import UtilonError
from utilon.live.catalog import TaskCatalog
from utilon.model.cluster import CapacityChange, Cluster


class BackendError(UtilonError):
    """A backend cannot start, or was asked to do something the core should never ask."""


class Backend(ABC):
    name = "backend"
    strict_capacity = True
    """Refuse launches beyond declared capacity (the runner turns it off for policies that
    over-commit on purpose; peak usage above 1 then shows how far they went)."""

    @abstractmethod
    def start(self, cluster: Cluster, catalog: TaskCatalog) -> Cluster:
        """Connect and start the clock; return the cluster to schedule on (the scenario's, or
        the machines the backend discovered)."""

    @abstractmethod
    def now(self) -> float:
        """Seconds since ``start``."""

    @abstractmethod
    def apply(self, commands: Sequence[Command]) -> None:
        """Launch and preempt tasks, in order."""

    @abstractmethod
    def poll(self, timeout: float) -> list[Stimulus]:
        """Wait up to ``timeout`` seconds for something to happen; return what happened
        (task completions and failures, machines discovered or lost)."""

    def wait_until(self, deadline: float) -> list[Stimulus]:
        """``poll`` until ``deadline`` on this backend's clock (the fake lands on it exactly)."""
        return self.poll(max(0.0, deadline - self.now()))

    @abstractmethod
    def apply_capacity(self, change: CapacityChange) -> None:
        """Enforce a change from the scenario's capacity timeline before the core hears of
        it: a leaving machine's tasks are stopped (the core re-queues them as lost)."""

    def peak_usage(self) -> dict[str, float]:
        """Per machine, the highest share of its declared capacity ever in use."""
        guard = getattr(self, "guard", None)
        return dict(guard.peak) if guard is not None else {}

    @abstractmethod
    def close(self) -> None:
        """Stop everything still running and release resources; safe to call twice."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
