"""Declared-capacity bookkeeping shared by the live backends.

The core's dispatcher never over-commits a machine; a backend checks that independently at
every launch (a launch that would exceed a machine's declared capacity is a bug, and is
refused loudly) and records the peak usage per machine so tests can prove the bound held.
"""

from __future__ import annotations

from utilon.live.backend import BackendError
from utilon.model.cluster import CapacityAction, CapacityChange, Cluster, Machine
from utilon.model.resources import Resources

EPS = 1e-9


class CapacityGuard:
    def __init__(self, cluster: Cluster, strict: bool = True) -> None:
        self.strict = strict
        self.names = cluster.resource_names
        self.base: dict[str, tuple[float, ...]] = {}
        self.scale: dict[str, float] = {}
        self.used: dict[str, list[float]] = {}
        self.up: dict[str, bool] = {}
        self.peak: dict[str, float] = {}  # max over time of max_r used_r / capacity_r
        for m in cluster.machines:
            self.add(m, up=m.id not in cluster.initially_down)

    def add(self, machine: Machine, up: bool = True) -> None:
        self.base[machine.id] = machine.capacity.vector(self.names)
        self.scale[machine.id] = 1.0
        self.used[machine.id] = [0.0] * len(self.names)
        self.up[machine.id] = up
        self.peak.setdefault(machine.id, 0.0)

    def launch(self, machine: str, demand: Resources, what: str) -> None:
        if machine not in self.base:
            raise BackendError(f"{what}: launch on unknown machine {machine!r}")
        if not self.up[machine]:
            raise BackendError(f"{what}: launch on machine {machine!r}, which is down")
        v = demand.vector(self.names)
        used = [u + x for u, x in zip(self.used[machine], v, strict=True)]
        cap = [b * self.scale[machine] for b in self.base[machine]]
        for name, u, c in zip(self.names, used, cap, strict=True):
            if u > c + EPS and self.strict:
                raise BackendError(f"{what}: launching on {machine} would use {u:g} {name} "
                                   f"of {c:g} declared; the dispatcher must never over-commit")
        self.used[machine] = used
        ratio = max((u / c for u, c in zip(used, cap, strict=True) if c > 0), default=0.0)
        self.peak[machine] = max(self.peak[machine], ratio)

    def release(self, machine: str, demand: Resources) -> None:
        v = demand.vector(self.names)
        self.used[machine] = [max(0.0, u - x)
                              for u, x in zip(self.used[machine], v, strict=True)]

    def apply(self, change: CapacityChange) -> None:
        """Follow a capacity change (a machine's speed is not capacity: nothing to do)."""
        if change.action is CapacityAction.LEAVE:
            self.up[change.machine] = False
        elif change.action is CapacityAction.JOIN:
            self.up[change.machine] = True
        elif change.action is CapacityAction.SCALE:
            self.scale[change.machine] = change.factor

    def set_up(self, machine: str, up: bool) -> None:
        self.up[machine] = up
