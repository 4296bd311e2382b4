"""The cloud world's policy interface ("services" in Cura's §4.1), defined next to its simulator.

A cloud policy is configured in its constructor with the profile store and its parameters and
then answers ``decide(now, view, arrived, finished) -> [Command]``: start a job on a cluster
configuration (pool VMs, or freshly created VMs for a per-job cluster), drop a job that can no
longer meet its deadline, or reshape the VM pools.  ``initial_pools`` sets the pools at time 0,
``wakeup`` asks for a call at a future instant (a reservation's start).  Like the slot world's
policies (``utilon.core.policy``) it reads no clock and does no I/O, so the simulator
(``utilon.cloud.sim``) and the live driver (``utilon.cloud.live``) run the same object.  Both
worlds' policies share one registry (``utilon.policies``), told apart by ``world``.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from utilon.cloud.model import CloudJob, Command, Finished, PoolView
from utilon.cloud.packing import equal_pools
from utilon.cloud.profile import ProfileStore


class CloudPolicy(ABC):
    name: ClassVar[str]
    summary: ClassVar[str]
    paper: ClassVar[str] = ""
    world: ClassVar[str] = "cloud"
    pooled: ClassVar[bool] = True
    """False for services that create VMs per job (they start with no pools)."""

    def __init__(self, store: ProfileStore) -> None:
        self.store = store
        self.cloud = store.cloud

    def initial_pools(self, servers: int, jobs: tuple[CloudJob, ...]) -> tuple[int, ...]:
        """Pool sizes at time 0: by default every VM type gets an equal share of the cores."""
        return equal_pools(self.cloud, servers) if self.pooled else (0,) * self.cloud.k

    def fixed_servers(self, jobs: tuple[CloudJob, ...]) -> int | None:
        """Servers the service needs regardless of search (a dedicated service sizes its
        clusters from the workload's peaks); ``None`` when found by search."""
        return None

    @abstractmethod
    def decide(self, now: float, view: PoolView, arrived: list[CloudJob],
               finished: list[Finished]) -> list[Command]:
        """What to do at ``now``."""

    def wakeup(self) -> float | None:
        """The next instant this policy must be called at even if nothing happens."""
        return None

    def report(self) -> dict[str, Any]:
        """Deterministic, policy-specific measurements."""
        return {}

    def params(self) -> dict[str, Any]:
        """Constructor parameters, for outputs (``summary.json``): those kept as attributes
        of the same name."""
        out: dict[str, Any] = {}
        for name in inspect.signature(type(self).__init__).parameters:
            if name not in ("self", "store") and hasattr(self, name):
                out[name] = getattr(self, name)
        return out
