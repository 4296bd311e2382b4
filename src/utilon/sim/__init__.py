"""The trace-driven simulator: event engine and fluid progress model."""

from utilon.sim.engine import Phase, SimResult, Simulation, simulate

__all__ = ["Phase", "SimResult", "Simulation", "simulate"]
