"""The one float tolerance of the core and the simulator, and the one "missed" rule.

Capacities, demands and times are sums of floats: two values that should be equal may differ in
the last bits.  Every comparison that must not flip on that noise adds ``EPS``: a demand fits
when it is within ``EPS`` of the free capacity, and a job misses its goal when it finishes more
than ``EPS`` after it.  ``CHECK_SLACK`` is wider on purpose: the invariant check compares
counters that accumulate one rounding error per launch and release against a fresh sum.
"""

from __future__ import annotations

from typing import Final

EPS: Final = 1e-9
CHECK_SLACK: Final = 1e-6


def missed(finish: float | None, goal: float | None) -> bool:
    """Whether a job that finished at ``finish`` (None: not finished) missed ``goal`` (None:
    no goal, never missed once finished)."""
    if finish is None:
        return True
    return goal is not None and finish - goal > EPS
