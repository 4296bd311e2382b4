"""Actual resource use per machine over time, as the fluid model sees it (opt-in).

After every change on a machine (a launch, a phase end, a task's removal or kill, a rate
recomputation, the machine leaving, a scale or speed change) the recorder appends one record
``(now, eff, wait)`` for that machine, where, with ``f = rate / speed`` for each running
attempt (0 when the speed is 0):

* ``eff[r] = sum(use_r * f) / C_r``: the fraction of resource ``r``'s current capacity that
  does useful work (0 when ``C_r`` is 0).  It never exceeds 1: an over-committed resource is
  shared, and with thrashing (``Cluster.thrashing``) it delivers only ``(C/U) ** gamma``.
* ``wait = max(0, min(1 - eff_cpu, sum(cpu_use * (1 - f)) / C_cpu))``: CPU that the running
  tasks would use but which stands idle because they are stalled on another resource, e.g.
  on an over-committed disk (the I/O-wait of RAS's Fig. 4).  0 without a ``cpu`` resource.

A second record at the same instant replaces the first, so there is one record per machine
and instant.  Between records the values are constant; before a machine's first record they
are 0.  ``bucket_means`` turns a trace into time-weighted means over fixed-width buckets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from utilon.core.tolerance import EPS


class Running(Protocol):
    """What the recorder reads of a running attempt (``fluid.Exec``)."""

    @property
    def phases(self) -> Sequence[tuple[float, tuple[float, ...]]]: ...
    @property
    def phase(self) -> int: ...
    @property
    def rate(self) -> float: ...


class MachineUse(Protocol):
    """What the recorder reads of a machine (``fluid.MachineFluid``); a protocol, so that
    this module does not import the fluid model that imports it."""

    @property
    def cap(self) -> Sequence[float]: ...
    @property
    def speed(self) -> float: ...
    @property
    def over(self) -> bool: ...
    @property
    def usage(self) -> Sequence[float]: ...
    @property
    def execs(self) -> Mapping[Any, Running]: ...

Record = tuple[float, tuple[float, ...], float]
"""``(time, eff per resource, cpu wait)``."""


@dataclass(frozen=True, slots=True)
class UsageTrace:
    """Recorded actual use: ``records[i]`` are machine ``machines[i]``'s records in time
    order; ``eff`` vectors follow ``names``."""

    names: tuple[str, ...]
    machines: tuple[str, ...]
    records: tuple[tuple[Record, ...], ...]

    def of(self, machine: str) -> tuple[Record, ...]:
        """The records of one machine, by id."""
        return self.records[self.machines.index(machine)]


class UsageRecorder:
    """Collects per-machine records for a ``FluidModel`` (which calls ``note``)."""

    __slots__ = ("cpu", "machines", "names", "records")

    def __init__(self, names: tuple[str, ...], machines: tuple[str, ...]) -> None:
        self.names = names
        self.machines = machines
        self.cpu = names.index("cpu") if "cpu" in names else -1
        self.records: list[list[Record]] = [[] for _ in machines]

    def note(self, mi: int, m: MachineUse, now: float) -> None:
        cap = m.cap
        speed = m.speed
        cpu = self.cpu
        if not m.over:  # every rate is the machine's speed: f is 1 (or 0 at speed 0) for all
            if speed > 0:
                used = m.usage
                stalled = 0.0
            else:
                used = [0.0] * len(cap)
                stalled = m.usage[cpu] if cpu >= 0 else 0.0
        else:
            n = len(cap)
            used = [0.0] * n
            stalled = 0.0
            for ex in m.execs.values():
                use = ex.phases[ex.phase][1]
                f = ex.rate / speed if speed > 0 else 0.0
                f = 0.0 if f < 0.0 else 1.0 if f > 1.0 else f
                for r in range(n):
                    x = use[r]
                    if x:
                        used[r] += x * f
                if cpu >= 0:
                    stalled += use[cpu] * (1.0 - f)
        # clipped to [0, 1]: usage within EPS of capacity runs at full speed, and sums of
        # usage carry float noise
        eff = tuple((0.0 if u <= 0.0 else 1.0 if u >= c else u / c) if c > 0 else 0.0
                    for u, c in zip(used, cap, strict=True))
        wait = 0.0
        if cpu >= 0 and cap[cpu] > 0 and stalled > 0:
            wait = max(0.0, min(1.0 - eff[cpu], stalled / cap[cpu]))
        rec = self.records[mi]
        if rec and rec[-1][0] == now:
            rec[-1] = (now, eff, wait)
        else:
            rec.append((now, eff, wait))

    def trace(self) -> UsageTrace:
        return UsageTrace(self.names, self.machines, tuple(tuple(r) for r in self.records))


def bucket_means(trace: UsageTrace, start: float, end: float, step: float) -> np.ndarray:
    """Time-weighted means per machine and bucket of ``[start, end)`` cut every ``step``
    seconds (the last bucket may be shorter): an array of shape ``(machines, buckets,
    resources + 1)`` holding ``eff`` per resource (in ``trace.names`` order) and, last, the
    CPU ``wait``.  Values are piecewise constant from each record to the next (the last one
    holds on), and 0 before a machine's first record."""
    if not (math.isfinite(start) and math.isfinite(end) and end > start):
        raise ValueError(f"bucket_means needs finite start < end, got {start!r}, {end!r}")
    if not (math.isfinite(step) and step > 0):
        raise ValueError(f"bucket_means needs a step > 0, got {step!r}")
    nb = max(1, math.ceil((end - start) / step - EPS))
    edges = start + step * np.arange(nb + 1, dtype=float)
    edges[-1] = end
    width = np.diff(edges)
    k = len(trace.names) + 1
    out = np.zeros((len(trace.machines), nb, k))
    for i, recs in enumerate(trace.records):
        if not recs:
            continue
        t = np.fromiter((r[0] for r in recs), dtype=float, count=len(recs))
        v = np.empty((len(recs), k))
        for n, (_, eff, wait) in enumerate(recs):
            v[n, :-1] = eff
            v[n, -1] = wait
        # integral of the step function from -inf up to each record's time
        cum = np.zeros((len(recs), k))
        if len(recs) > 1:
            cum[1:] = np.cumsum(v[:-1] * np.diff(t)[:, None], axis=0)
        idx = np.searchsorted(t, edges, side="right") - 1  # last record at or before the edge
        before = idx < 0
        j = np.where(before, 0, idx)
        integral = cum[j] + v[j] * (edges - t[j])[:, None]
        integral[before] = 0.0
        out[i] = np.diff(integral, axis=0) / width[:, None]
    return out
