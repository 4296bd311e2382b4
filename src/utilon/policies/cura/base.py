"""The cloud world's policy interface ("services" in Cura's §4.1) and their registry.

A cloud policy is configured in its constructor with the profile store and its parameters and
then answers ``decide(now, view, arrived, finished) -> [Command]``: start a job on a cluster
configuration (pool VMs, or freshly created VMs for a per-job cluster), drop a job that can no
longer meet its deadline, or reshape the VM pools.  ``initial_pools`` sets the pools at time 0,
``wakeup`` asks for a call at a future instant (a reservation's start).  Like the slot world's
policies it reads no clock and does no I/O, so the simulator and the live driver run the same
object.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any, ClassVar, TypeVar

from utilon.cloud.model import CloudJob, Command, Finished, PoolView
from utilon.cloud.packing import equal_pools
from utilon.cloud.profile import ProfileStore
from utilon.errors import ParameterError, UnknownNameError


class CloudPolicy(ABC):
    name: ClassVar[str]
    summary: ClassVar[str]
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


_REGISTRY: dict[str, type[CloudPolicy]] = {}
C = TypeVar("C", bound=type[CloudPolicy])


def register(cls: C) -> C:
    if cls.name in _REGISTRY:
        raise ValueError(f"cloud policy {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def cloud_policy_names() -> list[str]:
    return list(_REGISTRY)


def cloud_policy_class(name: str) -> type[CloudPolicy]:
    """The registered cloud policy class ``name`` (an unknown name is a one-line error)."""
    cls = _REGISTRY.get(name)
    if cls is None:
        raise UnknownNameError("cloud policy", name, list(_REGISTRY),
                               fix="run `utilon policies` to see them")
    return cls


def make_cloud_policy(name: str, store: ProfileStore, params: dict[str, Any] | None = None
                      ) -> CloudPolicy:
    """Build a registered cloud policy; an unknown name or parameter is a one-line error."""
    cls = cloud_policy_class(name)
    sig = inspect.signature(cls.__init__)
    accepted = [p for p in sig.parameters if p not in ("self", "store")]
    for key in params or {}:
        if key not in accepted:
            raise ParameterError(f"cloud policy {name!r} has no parameter {key!r}; it "
                                 f"accepts: {', '.join(accepted) or 'none'}")
    try:
        return cls(store, **(params or {}))
    except (TypeError, ValueError) as e:
        raise ParameterError(f"cloud policy {name!r}: {e}") from None
