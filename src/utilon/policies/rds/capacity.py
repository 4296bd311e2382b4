"""The cluster's effective capacity over time, as RDS's resource predictors see it.

RDS (§3.1, §6) measures available resource ``r_a`` in CPU units.  Here the effective capacity
of the up machines is Σ slots × speed: in *scale-up* the slot count stays and the speed of a
slot follows the supply (``r_slot = r_a / slots`` changes), in *scale-out* machines join and
leave at speed 1 (``r_slot`` is fixed) — the same number measures both.

``CapacityProfile`` replays a cluster's capacity timeline into a piecewise-constant function so
that the oracle predictor ("ideal scheduler" of §2.2) and the NRMSE bookkeeping can ask for
the exact mean capacity of any interval.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from utilon.core.snapshot import MachineView
from utilon.model.cluster import CapacityAction, Cluster


def effective_capacity(machines: Iterable[MachineView], slot_resource: str) -> tuple[float, float]:
    """(Σ slots × speed, Σ slots) over the up machines of a snapshot."""
    cap = slots = 0.0
    for m in machines:
        if m.up:
            s = m.capacity[slot_resource]
            slots += s
            cap += s * m.speed
    return cap, slots


@dataclass(frozen=True)
class CapacityProfile:
    """Effective capacity ``values[k]`` holds from ``times[k]`` until ``times[k + 1]``."""

    times: NDArray[np.float64]
    values: NDArray[np.float64]

    @classmethod
    def from_cluster(cls, cluster: Cluster) -> CapacityProfile:
        slot = cluster.slot_resource
        base = {m.id: float(m.capacity[slot]) for m in cluster.machines}
        up = {m.id: m.id not in cluster.initially_down for m in cluster.machines}
        scale = dict.fromkeys(base, 1.0)
        speed = dict.fromkeys(base, 1.0)

        def total() -> float:
            return sum(base[i] * scale[i] * speed[i] for i in base if up[i])

        times, values = [0.0], [total()]
        for ch in sorted(cluster.timeline, key=lambda c: c.time):
            if ch.machine not in base:
                continue
            if ch.action is CapacityAction.JOIN:
                up[ch.machine] = True
            elif ch.action is CapacityAction.LEAVE:
                up[ch.machine] = False
            elif ch.action is CapacityAction.SCALE:
                scale[ch.machine] = ch.factor
            else:
                speed[ch.machine] = ch.factor
            if ch.time == times[-1]:
                values[-1] = total()
            else:
                times.append(ch.time)
                values.append(total())
        return cls(np.asarray(times), np.asarray(values))

    def at(self, t: float) -> float:
        k = int(np.searchsorted(self.times, t, side="right")) - 1
        return float(self.values[max(k, 0)])

    def _integral(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        """∫_0^t capacity, vectorised (before times[0] the first value holds)."""
        widths = np.diff(self.times)
        cum = np.concatenate(([0.0], np.cumsum(widths * self.values[:-1])))
        k = np.maximum(np.searchsorted(self.times, t, side="right") - 1, 0)
        return cum[k] + (t - self.times[k]) * self.values[k]

    def means(self, start: float, interval: float, n: int) -> NDArray[np.float64]:
        """Mean capacity of the ``n`` intervals ``[start + iΔ, start + (i+1)Δ)``."""
        edges = start + interval * np.arange(n + 1, dtype=float)
        return np.diff(self._integral(edges)) / interval
