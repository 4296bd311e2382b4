"""Machines, clusters and the capacity timeline.

A cluster is a fixed set of machines, some of which may start absent, plus a timeline of
capacity changes: machines join and leave (scale-out), a machine's resources are scaled (the
dispatcher then sees less room and running tasks slow down if they no longer fit), or a
machine's speed is changed (same slots, slower or faster tasks: RDS's scale-up, where
``r_slot`` changes with the cluster's capacity).

``thrashing`` is an opt-in over-commitment penalty per resource: with exponent ``g`` for
resource ``r``, a machine whose tasks use more of ``r`` than it has gets only ``(C/U)**g`` of
``r``'s capacity worth of useful work (seek thrashing, swapping); see ``utilon.sim.fluid``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from utilon.errors import ModelError
from utilon.model.resources import Resources

AttrValue = str | int | float | bool


@dataclass(frozen=True, slots=True)
class Machine:
    id: str
    capacity: Resources
    attributes: tuple[tuple[str, AttrValue], ...] = ()
    price: float = 0.0
    """Cost per hour of the whole machine; a task pays its dominant share of it."""

    def __post_init__(self) -> None:
        if not self.id:
            raise ModelError("machine id must not be empty")
        if not self.capacity or not self.capacity.is_nonnegative():
            raise ModelError(f"machine {self.id}: capacity must be a non-empty, non-negative "
                             "resource vector")
        if not (math.isfinite(self.price) and self.price >= 0):
            raise ModelError(f"machine {self.id}: price must be >= 0")
        object.__setattr__(self, "attributes", tuple(sorted(self.attributes)))

    def attr(self, name: str, default: AttrValue | None = None) -> AttrValue | None:
        for k, v in self.attributes:
            if k == name:
                return v
        return default


class CapacityAction(StrEnum):
    JOIN = "join"
    LEAVE = "leave"
    SCALE = "scale"
    SPEED = "speed"


@dataclass(frozen=True, slots=True)
class CapacityChange:
    time: float
    machine: str
    action: CapacityAction
    factor: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.time) and self.time >= 0):
            raise ModelError(f"capacity change time must be >= 0, got {self.time!r}")
        if not (math.isfinite(self.factor) and self.factor >= 0):
            raise ModelError(f"capacity change factor must be >= 0, got {self.factor!r}")


@dataclass(frozen=True, slots=True)
class Cluster:
    machines: tuple[Machine, ...]
    timeline: tuple[CapacityChange, ...] = ()
    initially_down: frozenset[str] = field(default_factory=frozenset)
    thrashing: tuple[tuple[str, float], ...] = ()
    """Over-commitment exponent ``gamma_r >= 0`` per resource name (absent: 0, plain
    proportional sharing); any iterable of pairs or a mapping is accepted, stored sorted."""

    def __post_init__(self) -> None:
        if not self.machines:
            raise ModelError("a cluster needs at least one machine")
        raw = self.thrashing
        pairs = raw.items() if isinstance(raw, Mapping) else raw
        seen: dict[str, float] = {}
        for name, gamma in pairs:
            if not isinstance(name, str) or not name:
                raise ModelError(f"thrashing: resource name must be a non-empty string, "
                                 f"got {name!r}")
            if name in seen:
                raise ModelError(f"thrashing: resource {name!r} is given twice")
            try:
                g = float(gamma)
            except (TypeError, ValueError):
                g = math.nan
            if not (math.isfinite(g) and g >= 0):
                raise ModelError(f"thrashing exponent of {name!r} must be a finite number "
                                 f">= 0, got {gamma!r}")
            seen[name] = g
        if seen:
            known_res = set(self.resource_names)
            for name in seen:
                if name not in known_res:
                    raise ModelError(f"thrashing names unknown resource {name!r} (machines "
                                     f"have {', '.join(sorted(known_res))})")
        object.__setattr__(self, "thrashing", tuple(sorted(seen.items())))
        ids = [m.id for m in self.machines]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})[0]
            raise ModelError(f"machine id {dup!r} is used twice")
        known = set(ids)
        for ch in self.timeline:
            if ch.machine not in known:
                raise ModelError(f"capacity change at t={ch.time:g} names unknown machine "
                                 f"{ch.machine!r}")
        for m in self.initially_down:
            if m not in known:
                raise ModelError(f"initially_down names unknown machine {m!r}")
        # A stable sort keeps the file order of changes at equal times.
        timeline = tuple(sorted(self.timeline, key=lambda c: c.time))
        object.__setattr__(self, "timeline", timeline)
        up = {m for m in known if m not in self.initially_down}
        for ch in timeline:  # replay: joining an up machine or removing a down one is a mistake
            if ch.action is CapacityAction.JOIN:
                if ch.machine in up:
                    raise ModelError(f"at t={ch.time:g} machine {ch.machine!r} joins but is "
                                     "already up")
                up.add(ch.machine)
            elif ch.action is CapacityAction.LEAVE:
                if ch.machine not in up:
                    raise ModelError(f"at t={ch.time:g} machine {ch.machine!r} leaves but is "
                                     "not up")
                up.discard(ch.machine)

    @property
    def resource_names(self) -> tuple[str, ...]:
        names: set[str] = set()
        for m in self.machines:
            names.update(m.capacity.names)
        return tuple(sorted(names))

    def thrashing_of(self, name: str) -> float:
        """The over-commitment exponent of resource ``name`` (0 when absent)."""
        for k, g in self.thrashing:
            if k == name:
                return g
        return 0.0

    @property
    def slot_resource(self) -> str:
        """The resource that share-based policies count in: ``slots``, else ``cpu``."""
        names = self.resource_names
        for cand in ("slots", "cpu"):
            if cand in names:
                return cand
        return names[0]

    def machine(self, machine_id: str) -> Machine:
        for m in self.machines:
            if m.id == machine_id:
                return m
        raise ModelError(f"no machine {machine_id!r}")

    def select(self, ids: Iterable[str]) -> tuple[Machine, ...]:
        wanted = set(ids)
        return tuple(m for m in self.machines if m.id in wanted)
