"""A compact record of what a run did over time: every task attempt and every capacity change.

The core appends one row per finished attempt (job, stage, task, machine, start, end, slot
units held, outcome) to flat typed arrays — a few hundred nanoseconds and ~45 bytes per attempt,
so a full-day trace of a million attempts fits in tens of megabytes of memory — and one row per
capacity change.  Attempt rows first wait as tuples in a short list (one append per attempt)
and move into the arrays in bulk; reading a column moves them first.
``utilon.metrics.timeline`` turns this into the run's ``allocation.csv``, ``capacity.csv`` and
``attempts.csv`` (size-bounded, see docs/outputs.md), which the reports plot.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

OUTCOMES = ("done", "killed", "lost", "failed", "running")
OUTCOME_CODE = {o: i for i, o in enumerate(OUTCOMES)}
PENDING_ROWS = 4096  # attempts held as tuples before they move into the arrays


class Timeline:
    """Attempt rows arrive as one tuple each in ``pending`` (a list append is the cheapest
    record there is) and move into the typed arrays in bulk: every ``PENDING_ROWS`` attempts,
    and whenever a column is read, so readers always see every row."""

    __slots__ = ("_cols", "cap_effective", "cap_machines", "cap_time", "cap_totals",
                 "job_ids", "machine_ids", "pending")

    def __init__(self, n_resources: int) -> None:
        self.job_ids: list[str] = []  # job sequence number -> id, in arrival order
        self.machine_ids: list[str] = []  # machine index -> id
        # job, stage, task, machine, start, end, slots (units of the slot resource the
        # attempt held), outcome code
        self._cols: tuple[array[Any], ...] = (
            array("i"), array("i"), array("i"), array("i"), array("d"), array("d"), array("d"),
            array("b"))
        # rows not yet in the arrays: (job, stage, task, machine, start, end, slots, code);
        # the core appends to this very list (``flush`` empties it in place)
        self.pending: list[tuple[int, int, int, int, float, float, float, int]] = []
        self.cap_time = array("d")
        self.cap_machines = array("i")
        self.cap_totals = [array("d") for _ in range(n_resources)]
        self.cap_effective = array("d")  # slot capacity x speed: what scale-up changes

    def add_job(self, job_id: str) -> int:
        self.job_ids.append(job_id)
        return len(self.job_ids) - 1

    def attempt(self, job: int, stage: int, task: int, machine: int, start: float, end: float,
                slots: float, outcome: str) -> None:
        pending = self.pending
        pending.append((job, stage, task, machine, start, end, slots, OUTCOME_CODE[outcome]))
        if len(pending) >= PENDING_ROWS:
            self.flush()

    def flush(self) -> None:
        """Move the pending rows into the arrays."""
        pending = self.pending
        if pending:  # (fromlist sizes each array once: ~45% cheaper than extend)
            for col, values in zip(self._cols, zip(*pending, strict=True), strict=True):
                col.fromlist(list(values))
            pending.clear()

    def _col(self, i: int) -> array[Any]:
        if self.pending:
            self.flush()
        return self._cols[i]

    job = property(lambda self: self._col(0))
    stage = property(lambda self: self._col(1))
    task = property(lambda self: self._col(2))
    machine = property(lambda self: self._col(3))
    start = property(lambda self: self._col(4))
    end = property(lambda self: self._col(5))
    slots = property(lambda self: self._col(6))
    outcome = property(lambda self: self._col(7))

    def capacity(self, now: float, machines: int, totals: Sequence[float],
                 effective: float) -> None:
        """The cluster's capacity from ``now`` on; a change at the same instant replaces the
        previous row so that simultaneous events give one step."""
        if self.cap_time and self.cap_time[-1] == now:
            self.cap_time.pop()
            self.cap_machines.pop()
            self.cap_effective.pop()
            for col in self.cap_totals:
                col.pop()
        self.cap_time.append(now)
        self.cap_machines.append(machines)
        self.cap_effective.append(effective)
        for col, v in zip(self.cap_totals, totals, strict=True):
            col.append(v)

    def __len__(self) -> int:
        return len(self._cols[0]) + len(self.pending)
