"""Where the live cloud driver (:mod:`utilon.cloud.live`) gets its VMs from.

A :class:`Provider` creates VMs of a :class:`~utilon.cloud.model.VMType` (they boot first),
destroys them, and reports what happened since the last look: a VM became ready, failed to
boot, or vanished.  It knows nothing of servers, pools or jobs: the driver keeps that
bookkeeping, exactly as the simulator does, so any provider (in memory, Ray nodes, a real
cloud API) plugs in under the same policy.

:class:`InMemoryProvider` is the test double: VMs become ready ``boot_time`` after launch on an
injected clock, and chosen launches fail, so error handling is testable in milliseconds.
:class:`ManualClock` is a clock that only moves when slept on, which makes a live run a
deterministic replay of the simulator's timeline.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from utilon.cloud.model import VMType
from utilon.errors import ModelError


@dataclass(frozen=True)
class VMReady:
    vm_id: str
    vm_type: VMType


@dataclass(frozen=True)
class VMFailed:
    vm_id: str
    vm_type: VMType
    reason: str


@dataclass(frozen=True)
class VMGone:
    """A VM no longer exists (terminated by the driver, or lost)."""

    vm_id: str


ProviderEvent = VMReady | VMFailed | VMGone


class Provider(ABC):
    """Creates and destroys VMs; reports their state changes through :meth:`poll`."""

    @abstractmethod
    def launch(self, vm_type: VMType, count: int) -> list[str]:
        """Start creating ``count`` VMs; returns their ids (they are booting)."""

    @abstractmethod
    def terminate(self, vm_ids: list[str]) -> None:
        """Destroy these VMs (booting or ready)."""

    @abstractmethod
    def poll(self) -> list[ProviderEvent]:
        """What happened since the last call."""

    @abstractmethod
    def vms(self) -> dict[str, VMType]:
        """The VMs alive now (booting or ready), by id."""

    def due(self) -> float | None:
        """The clock time of the next event already known (lets the driver sleep exactly);
        ``None`` when unknown."""
        return None

    def close(self) -> None:
        """Release whatever the provider holds."""
        return None


class ManualClock:
    """A clock that advances only when slept on: ``clock()`` reads it, ``clock.sleep(dt)``
    moves it forward (by at least one representable step, so a loop always progresses)."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def sleep(self, dt: float) -> None:
        self.t = max(self.t + max(dt, 0.0), math.nextafter(self.t, math.inf))


class InMemoryProvider(Provider):
    """VMs that exist only as entries in a dict.

    ``fail`` holds launch sequence numbers (0-based over every VM ever launched) that fail at
    the end of their boot instead of becoming ready."""

    def __init__(self, clock: Callable[[], float], boot_time: float,
                 fail: set[int] | None = None) -> None:
        if boot_time < 0:
            raise ModelError(f"boot_time must be >= 0, got {boot_time}")
        self.clock = clock
        self.boot_time = boot_time
        self.fail = set(fail or ())
        self.launched = 0
        self.terminated = 0
        self._alive: dict[str, VMType] = {}
        self._booting: dict[str, tuple[float, int]] = {}   # id -> (ready at, launch number)
        self._events: list[ProviderEvent] = []

    def launch(self, vm_type: VMType, count: int) -> list[str]:
        if count < 0:
            raise ModelError(f"cannot launch {count} VMs")
        ids = []
        ready_at = self.clock() + self.boot_time
        for _ in range(count):
            vid = f"vm-{self.launched}"
            self._alive[vid] = vm_type
            self._booting[vid] = (ready_at, self.launched)
            self.launched += 1
            ids.append(vid)
        return ids

    def terminate(self, vm_ids: list[str]) -> None:
        for vid in vm_ids:
            if self._alive.pop(vid, None) is None:
                raise ModelError(f"terminate: no VM {vid!r}")
            self._booting.pop(vid, None)
            self.terminated += 1
            self._events.append(VMGone(vid))

    def poll(self) -> list[ProviderEvent]:
        now = self.clock()
        for vid, (at, seq) in sorted(self._booting.items(), key=lambda x: x[1][1]):
            if at > now:
                continue
            del self._booting[vid]
            vm_type = self._alive[vid]
            if seq in self.fail:
                del self._alive[vid]
                self._events.append(VMFailed(vid, vm_type, f"injected failure of launch {seq}"))
            else:
                self._events.append(VMReady(vid, vm_type))
        out, self._events = self._events, []
        return out

    def vms(self) -> dict[str, VMType]:
        return dict(self._alive)

    def due(self) -> float | None:
        if self._events:
            return self.clock()
        return min((at for at, _ in self._booting.values()), default=None)
