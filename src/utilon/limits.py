"""The sane limits every parser enforces, so that no input runs utilon out of memory or time.

A scenario, a ``utilon solve`` instance or an imported trace that goes past one of these is
refused with one line naming the file, the field and the limit -- before anything is allocated
for it.  The limits are far above any real workload (the whole SWIM FB-2010 day expands to a
few million tasks); ``UTILON_MAX_TASKS`` raises the task limit for a machine with the memory
for it.
"""

from __future__ import annotations

import math
import os

MAX_SECONDS = 1e9
"""Longest time, duration or deadline in seconds (about 31.7 years): past it, float sums and
integer conversions stop being exact and a simulation would never end."""

MAX_COUNT = 1_000_000
"""Most tasks in one stage, jobs drawn from one generator, or items in one list of an
instance."""

MAX_MACHINES = 100_000
"""Most machines in one group of a cluster (the largest public traces have about 12,000)."""


MAX_NAME = 256
"""Longest id, tenant, class or stage name: names are labels, not payloads (issue 46: a 10 MB
``class`` string was stored)."""

MAX_WEIGHT = 1e6
"""Largest job weight (and priority, in size): a weight of 1e308 overflows every weighted sum
a policy forms."""


def max_tasks() -> int:
    """Most tasks one scenario or instance may expand to (``UTILON_MAX_TASKS``, default
    10 million: about 3 GB of task objects)."""
    raw = os.environ.get("UTILON_MAX_TASKS", "")
    try:
        value = int(raw) if raw else 10_000_000
    except ValueError:
        value = 10_000_000
    return max(1, value)


def finite_seconds(value: float) -> bool:
    """``value`` is a usable time in seconds: finite and within ``MAX_SECONDS`` in size."""
    return math.isfinite(value) and abs(value) <= MAX_SECONDS
