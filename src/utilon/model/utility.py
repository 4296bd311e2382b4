"""Time-utility functions: what a job's completion time is worth.

Every function is non-increasing in the completion time ``t`` (absolute seconds on the
scenario clock) and finite; each validates its parameters on construction and raises
``ModelError`` naming the offending parameter.  ``value`` takes a float, ``values`` a numpy
array (vectorised, used by optimisation policies).  ``goal`` is the completion time the job's
owner is aiming at (deadline, soft bound, sigmoid midpoint, ...), used for ``delta``, ``missed``
and ``penalty`` in the outputs; ``None`` when the function has no goal (constant utility).

The kinds, and the papers they come from:

* ``deadline``  — step: ``value`` up to the deadline, ``late_value`` after (EDF baselines).
* ``soft_hard`` — RDS eq. (4): full value before the soft bound, linear decay with slope
  ``value / (soft - origin)`` between the soft and the hard bound, 0 after the hard bound.  RDS
  writes the decay relative to the job's own time frame (``origin`` = submit time); it requires
  hard <= 2 x soft so the decay never goes negative — we clamp at 0 instead of rejecting.
* ``truncated_linear`` — CORA §III-D3: utility decreases linearly with the job's execution time
  (``slope`` per second from ``origin``) and drops to ``late_value`` once the deadline is
  passed.
* ``sigmoid``   — CORA: ``p / (1 + exp(mu (t - d)))``.
* ``piecewise`` — a table of (time, utility) breakpoints, linear in between, constant outside.
* ``constant``  — completion time does not matter.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, ClassVar

import numpy as np

from utilon.errors import ModelError

INF = math.inf


def _finite(name: str, value: float) -> float:
    name = "value" if name == "value_before" else name  # the user-facing parameter name
    v = float(value)
    if not math.isfinite(v):
        raise ModelError(f"utility parameter {name!r} must be a finite number, got {value!r}")
    return v


class TimeUtility(ABC):
    """A non-increasing utility of completion time."""

    kind: ClassVar[str]

    @abstractmethod
    def value(self, t: float) -> float:
        """Utility of completing at absolute time ``t``."""

    def values(self, t: np.ndarray) -> np.ndarray:
        """Vectorised ``value``; subclasses override with closed forms."""
        return np.array([self.value(float(x)) for x in np.ravel(t)]).reshape(np.shape(t))

    @property
    @abstractmethod
    def goal(self) -> float | None:
        """The target completion time, or ``None`` if the function has none."""

    @property
    @abstractmethod
    def bounds(self) -> tuple[float, float]:
        """(lowest, highest) value the function can take."""

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """Parameters, for outputs and round-tripping."""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params()}


@dataclass(frozen=True, slots=True)
class DeadlineStep(TimeUtility):
    deadline: float
    value_before: float = 1.0
    late_value: float = 0.0
    kind: ClassVar[str] = "deadline"

    def __post_init__(self) -> None:
        _finite("deadline", self.deadline)
        _finite("value", self.value_before)
        _finite("late_value", self.late_value)
        if self.late_value > self.value_before:
            raise ModelError(
                f"deadline utility: late_value {self.late_value} exceeds value "
                f"{self.value_before}; utilities must not increase with completion time"
            )

    def value(self, t: float) -> float:
        return self.value_before if t <= self.deadline else self.late_value

    def values(self, t: np.ndarray) -> np.ndarray:
        return np.where(np.asarray(t) <= self.deadline, self.value_before, self.late_value)

    @property
    def goal(self) -> float:
        return self.deadline

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.late_value, self.value_before)

    def params(self) -> dict[str, Any]:
        return {"deadline": self.deadline, "value": self.value_before,
                "late_value": self.late_value}


@dataclass(frozen=True, slots=True)
class SoftHard(TimeUtility):
    origin: float
    soft: float
    hard: float
    value_before: float = 1.0
    kind: ClassVar[str] = "soft_hard"

    def __post_init__(self) -> None:
        for n in ("origin", "soft", "hard", "value_before"):
            _finite(n, getattr(self, n))
        if not self.origin < self.soft:
            raise ModelError(
                f"soft_hard utility: soft bound {self.soft} must be after the job's submit "
                f"time {self.origin}"
            )
        if self.hard < self.soft:
            raise ModelError(
                f"soft_hard utility: hard bound {self.hard} is before soft bound {self.soft}"
            )
        if self.value_before < 0:
            raise ModelError("soft_hard utility: value must be >= 0")

    def _slope(self) -> float:
        return self.value_before / (self.soft - self.origin)

    def value(self, t: float) -> float:
        if t <= self.soft:
            return self.value_before
        if t > self.hard:
            return 0.0
        return max(0.0, self.value_before - self._slope() * (t - self.soft))

    def values(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        decayed = np.maximum(0.0, self.value_before - self._slope() * (t - self.soft))
        out = np.where(t <= self.soft, self.value_before, decayed)
        return np.where(t > self.hard, 0.0, out)

    @property
    def goal(self) -> float:
        return self.soft

    @property
    def bounds(self) -> tuple[float, float]:
        return (0.0, self.value_before)

    def params(self) -> dict[str, Any]:
        return {"origin": self.origin, "soft": self.soft, "hard": self.hard,
                "value": self.value_before}


@dataclass(frozen=True, slots=True)
class TruncatedLinear(TimeUtility):
    origin: float
    deadline: float
    slope: float
    value_before: float = 1.0
    late_value: float = 0.0
    kind: ClassVar[str] = "truncated_linear"

    def __post_init__(self) -> None:
        for n in ("origin", "deadline", "slope", "value_before", "late_value"):
            _finite(n, getattr(self, n))
        if self.slope < 0:
            raise ModelError(
                f"truncated_linear utility: slope {self.slope} is negative; give the rate of "
                "decay as a non-negative number (utility lost per second)"
            )
        if self.deadline < self.origin:
            raise ModelError("truncated_linear utility: deadline is before the job's submit time")
        if self.late_value > self.value_before:
            raise ModelError("truncated_linear utility: late_value exceeds value")

    def value(self, t: float) -> float:
        if t > self.deadline:
            return self.late_value
        return max(self.late_value, self.value_before - self.slope * max(0.0, t - self.origin))

    def values(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        lin = self.value_before - self.slope * np.maximum(0.0, t - self.origin)
        return np.where(t > self.deadline, self.late_value, np.maximum(self.late_value, lin))

    @property
    def goal(self) -> float:
        return self.deadline

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.late_value, self.value_before)

    def params(self) -> dict[str, Any]:
        return {"origin": self.origin, "deadline": self.deadline, "slope": self.slope,
                "value": self.value_before, "late_value": self.late_value}


@dataclass(frozen=True, slots=True)
class Sigmoid(TimeUtility):
    p: float
    mu: float
    d: float
    kind: ClassVar[str] = "sigmoid"

    def __post_init__(self) -> None:
        for n in ("p", "mu", "d"):
            _finite(n, getattr(self, n))
        if self.p < 0:
            raise ModelError(f"sigmoid utility: priority p={self.p} must be >= 0")
        if self.mu < 0:
            raise ModelError(
                f"sigmoid utility: decay mu={self.mu} must be >= 0 (a negative decay would "
                "make utility grow with completion time)"
            )

    def value(self, t: float) -> float:
        x = self.mu * (t - self.d)
        if x > 0:
            e = math.exp(-x) if x < 745 else 0.0
            return self.p * e / (1.0 + e)
        return self.p / (1.0 + math.exp(x))

    def values(self, t: np.ndarray) -> np.ndarray:
        x = self.mu * (np.asarray(t, dtype=float) - self.d)
        e = np.exp(-np.abs(x))
        return np.where(x > 0, self.p * e / (1.0 + e), self.p / (1.0 + e))

    @property
    def goal(self) -> float:
        return self.d

    @property
    def bounds(self) -> tuple[float, float]:
        return (0.0, self.p) if self.mu > 0 else (self.p / 2, self.p / 2)

    def params(self) -> dict[str, Any]:
        return {"p": self.p, "mu": self.mu, "d": self.d}


@dataclass(frozen=True, slots=True)
class PiecewiseLinear(TimeUtility):
    points: tuple[tuple[float, float], ...]
    kind: ClassVar[str] = "piecewise"

    def __post_init__(self) -> None:
        pts = tuple((_finite("time", t), _finite("utility", u)) for t, u in self.points)
        if not pts:
            raise ModelError("piecewise utility needs at least one (time, utility) point")
        for (t0, u0), (t1, u1) in pairwise(pts):
            if not t1 > t0:
                raise ModelError(
                    f"piecewise utility: times must increase strictly, got {t0} then {t1}"
                )
            if u1 > u0:
                raise ModelError(
                    f"piecewise utility: utility rises from {u0} to {u1} between t={t0} and "
                    f"t={t1}; utilities must not increase with completion time"
                )
        object.__setattr__(self, "points", pts)

    def value(self, t: float) -> float:
        return float(self.values(np.asarray([t]))[0])

    def values(self, t: np.ndarray) -> np.ndarray:
        ts = np.array([p[0] for p in self.points])
        us = np.array([p[1] for p in self.points])
        return np.interp(np.asarray(t, dtype=float), ts, us)

    @property
    def goal(self) -> float | None:
        top = self.points[0][1]
        last_top = self.points[0][0]
        for t, u in self.points:
            if u == top:
                last_top = t
        return last_top if len(self.points) > 1 and self.points[-1][1] < top else None

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.points[-1][1], self.points[0][1])

    def params(self) -> dict[str, Any]:
        return {"points": [list(p) for p in self.points]}


@dataclass(frozen=True, slots=True)
class Constant(TimeUtility):
    level: float = 1.0
    kind: ClassVar[str] = "constant"

    def __post_init__(self) -> None:
        _finite("value", self.level)

    def value(self, t: float) -> float:
        return self.level

    def values(self, t: np.ndarray) -> np.ndarray:
        return np.full(np.shape(t), self.level, dtype=float)

    @property
    def goal(self) -> None:
        return None

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.level, self.level)

    def params(self) -> dict[str, Any]:
        return {"value": self.level}


UTILITY_KINDS: dict[str, type[TimeUtility]] = {
    cls.kind: cls
    for cls in (DeadlineStep, SoftHard, TruncatedLinear, Sigmoid, PiecewiseLinear, Constant)
}


def is_non_increasing(u: TimeUtility, times: Sequence[float]) -> bool:
    """Check ``u`` on a grid of times (used by tests and validators)."""
    vals = [u.value(t) for t in sorted(times)]
    return all(b <= a + 1e-12 for a, b in pairwise(vals))
