"""RAS's Table 2: the resource profiles of the paper's three Gridmix applications.

Each value is the share of one TaskTracker's capacity a single task of that phase uses
(measured by the authors with ``vmstat`` at each job's fastest slot count, §3.6); shuffle is
the I/O per map placed.  The reproduction (``utilon.repro.ras``) runs them as published, and
the SWIM importer's ``profiles: ras-table2`` gives real trace jobs the profile of the
application they resemble (``app_of``).
"""

from __future__ import annotations

APPS = ("sort", "combine", "select")

# app -> (map, reduce) profile; shuffle: I/O per map placed
TABLE2: dict[str, tuple[dict[str, float], dict[str, float]]] = {
    "sort": ({"cpu": 0.30, "io": 0.45, "mem": 0.25}, {"cpu": 0.20, "io": 0.50, "mem": 0.60}),
    "combine": ({"cpu": 0.25, "io": 0.10, "mem": 0.10}, {"cpu": 0.10, "io": 0.10, "mem": 0.25}),
    "select": ({"cpu": 0.15, "io": 0.20, "mem": 0.10}, {"cpu": 0.10, "io": 0.10, "mem": 0.25}),
}
SHUFFLE: dict[str, dict[str, float]] = {
    "sort": {"io": 0.0015}, "combine": {"io": 0.00015}, "select": {"io": 0.00015}}

SORT_SHUFFLE = 0.5
"""A job that shuffles at least this share of its input is Sort-like (Sort moves all of it)."""
SELECT_SHUFFLE = 0.05
"""A map-only job, or one that shuffles less than this share of its input, is Select-like
(a filter); anything between is Combine-like (map-side aggregation shrinks the shuffle)."""


def concurrency(app: str) -> int:
    """Map tasks of ``app`` one TaskTracker holds: the most its map profile fits."""
    return int(min(1.0 / v for v in TABLE2[app][0].values() if v > 0) + 1e-9)


def app_of(input_bytes: int, shuffle_bytes: int) -> str:
    """The Table 2 application a job with these data sizes resembles (see the constants)."""
    if shuffle_bytes <= 0 or shuffle_bytes < SELECT_SHUFFLE * input_bytes:
        return "select"
    if shuffle_bytes >= SORT_SHUFFLE * input_bytes:
        return "sort"
    return "combine"
