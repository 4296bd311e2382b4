"""The trace-driven simulator: event engine and fluid progress model.

The engine is imported when one of its names is first asked for (``from utilon.sim import
Simulation``), not with the package: reading a scenario needs ``utilon.sim.estimates`` (the
estimate modes) and not the simulator (``utilon validate`` must start fast, issue 47)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from utilon.sim.engine import Phase, SimResult, Simulation, simulate

__all__ = ["Phase", "SimResult", "Simulation", "simulate"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from utilon.sim import engine

        value = globals()[name] = getattr(engine, name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
