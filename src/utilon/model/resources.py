"""Named resource vectors.

``Resources`` is the public, immutable value (``Resources(cpu=4, mem=16)``).  Hot paths (the
dispatcher and the fluid simulator) do not use it directly: they work on plain tuples ordered by
the cluster's ``resource_names``, obtained once with ``Resources.vector``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from utilon.errors import ModelError

_EPS = 1e-9


@dataclass(frozen=True, slots=True, init=False)
class Resources:
    """An immutable mapping resource-name -> amount; absent names are 0."""

    items: tuple[tuple[str, float], ...]

    def __init__(self, mapping: Mapping[str, float] | None = None, /, **amounts: float) -> None:
        merged: dict[str, float] = dict(mapping or {})
        merged.update(amounts)
        clean: list[tuple[str, float]] = []
        for name, value in sorted(merged.items()):
            v = float(value)
            if not math.isfinite(v):
                raise ModelError(f"resource {name!r} must be finite, got {value!r}")
            if v != 0.0:
                clean.append((str(name), v))
        object.__setattr__(self, "items", tuple(clean))

    # -- mapping-like access -------------------------------------------------------------
    def __getitem__(self, name: str) -> float:
        for k, v in self.items:
            if k == name:
                return v
        return 0.0

    def get(self, name: str, default: float = 0.0) -> float:
        for k, v in self.items:
            if k == name:
                return v
        return default

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.items)

    def as_dict(self) -> dict[str, float]:
        return dict(self.items)

    def vector(self, names: Iterable[str]) -> tuple[float, ...]:
        d = dict(self.items)
        return tuple(d.get(n, 0.0) for n in names)

    @classmethod
    def from_vector(cls, names: Iterable[str], values: Iterable[float]) -> Resources:
        return cls(dict(zip(names, values, strict=True)))

    # -- arithmetic ------------------------------------------------------------------------
    def __add__(self, other: Resources) -> Resources:
        d = dict(self.items)
        for k, v in other.items:
            d[k] = d.get(k, 0.0) + v
        return Resources(d)

    def __sub__(self, other: Resources) -> Resources:
        d = dict(self.items)
        for k, v in other.items:
            d[k] = d.get(k, 0.0) - v
        return Resources(d)

    def __mul__(self, factor: float) -> Resources:
        return Resources({k: v * factor for k, v in self.items})

    __rmul__ = __mul__

    def __le__(self, other: Resources) -> bool:
        names = set(self.names) | set(other.names)
        return all(self[n] <= other[n] + _EPS for n in names)

    def fits(self, capacity: Resources) -> bool:
        """True if this demand fits inside ``capacity`` (with a tiny float tolerance)."""
        return self <= capacity

    def is_nonnegative(self) -> bool:
        return all(v >= 0.0 for _, v in self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v:g}" for k, v in self.items)
        return f"Resources({inner})"
