"""The slotted CORA problem (paper §II) as arrays, and its solution.

Notation follows the paper: jobs ``i`` (N), slots ``t`` (T), resources ``r`` (R).

* ``capacity[r, t]``: C^r, units of resource ``r`` the cluster offers in slot ``t`` (the paper
  has one C^r for all slots; a per-slot row lets a cluster's capacity change over the horizon).
* ``demand[i, r]``: R_i^r, units job ``i`` must receive in total (eq. 4).
* ``cap[i, r]``: what the paper leaves out but real jobs have: at most this many units per slot
  (a job cannot run more tasks at once than it has left).  ``None`` means no cap.
* ``utility[i, t]``: u_it = U_i(t), the job's utility when its last unit runs in slot ``t``;
  non-increasing in ``t`` (the paper's only assumption on U_i).

A job's completion slot T_i is the last slot in which it receives a positive amount of any
resource (eq. 2); jobs with zero demand are not part of an instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class CoraInstance:
    capacity: np.ndarray  # (R, T) int64
    demand: np.ndarray  # (N, R) int64
    utility: np.ndarray  # (N, T) float64, non-increasing along t
    cap: np.ndarray | None = None  # (N, R) int64 per-slot cap, or None

    def __post_init__(self) -> None:
        c = np.asarray(self.capacity, dtype=np.int64)
        d = np.asarray(self.demand, dtype=np.int64)
        u = np.asarray(self.utility, dtype=np.float64)
        if c.ndim == 1:
            c = c[None, :]
        if d.ndim == 1:
            d = d[:, None]
        object.__setattr__(self, "capacity", c)
        object.__setattr__(self, "demand", d)
        object.__setattr__(self, "utility", u)
        if self.cap is not None:
            p = np.asarray(self.cap, dtype=np.int64)
            if p.ndim == 1:
                p = p[:, None]
            object.__setattr__(self, "cap", p)
        n, r = d.shape
        if c.ndim != 2 or c.shape[0] != r:
            raise ValueError(f"capacity must have shape (R={r}, T), got {c.shape}")
        if u.shape != (n, c.shape[1]):
            raise ValueError(f"utility must have shape (N={n}, T={c.shape[1]}), got {u.shape}")
        if self.cap is not None and self.cap.shape != d.shape:
            raise ValueError(f"cap must have shape {d.shape}, got {self.cap.shape}")
        if (c < 0).any() or (d < 0).any():
            raise ValueError("capacity and demand must be non-negative")
        if self.cap is not None and (self.cap < 1).any():
            raise ValueError("cap must be at least 1")
        if n and (d.sum(axis=1) == 0).any():
            raise ValueError("every job must demand at least one unit of some resource")
        if u.size and (np.diff(u, axis=1) > 1e-12).any():
            raise ValueError("utility must be non-increasing in t")

    @property
    def jobs(self) -> int:
        return int(self.demand.shape[0])

    @property
    def slots(self) -> int:
        return int(self.capacity.shape[1])

    @property
    def resources(self) -> int:
        return int(self.capacity.shape[0])


@dataclass(frozen=True)
class CoraSolution:
    completion: np.ndarray  # (N,) completion slot T_i of each job
    utility: np.ndarray  # (N,) u_i,T_i
    allocation: np.ndarray  # (N, R, T) int64, x_it^r
    solver: str  # which solver produced it
    seconds: float = 0.0  # wall time of the solve (not deterministic)
    info: dict[str, object] = field(default_factory=dict)

    @property
    def sorted_utilities(self) -> np.ndarray:
        """The utility vector sorted non-decreasingly: what lexicographic max-min compares."""
        return np.sort(self.utility)


class InfeasibleInstance(ValueError):
    """No allocation finishes every job within the instance's slots (|T| too small)."""
