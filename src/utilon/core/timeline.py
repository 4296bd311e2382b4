"""A compact record of what a run did over time: every task attempt and every capacity change.

The core appends one row per finished attempt (job, stage, task, machine, start, end, slot
units held, outcome): a tuple appended to a short list, the cheapest record there is.  Rows
move in bulk into one packed byte buffer, 41 bytes per attempt (``ROW``: a full-day trace of a
million attempts is 41 MB), and reading a column moves them first and returns it as a numpy
array.  Packing with ``struct`` costs a third of moving the rows into eight typed arrays, whose
conversion parses every element.
``utilon.metrics.timeline`` turns this into the run's ``allocation.csv``, ``capacity.csv`` and
``attempts.csv`` (size-bounded, see docs/outputs.md), which the reports plot.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from itertools import starmap

import numpy as np

OUTCOMES = ("done", "killed", "lost", "failed", "running")
OUTCOME_CODE = {o: i for i, o in enumerate(OUTCOMES)}
PENDING_ROWS = 4096  # attempts held as tuples before they move into the buffer
# one attempt: job, stage, task, machine, start, end, slots, outcome code (little-endian,
# unpadded) and the same layout as a numpy record
ROW = struct.Struct("<iiiidddb")
COLUMNS = ("job", "stage", "task", "machine", "start", "end", "slots", "outcome")
ROW_DTYPE = np.dtype(list(zip(COLUMNS, ("<i4", "<i4", "<i4", "<i4", "<f8", "<f8", "<f8", "i1"),
                              strict=True)))
_pack = ROW.pack


class Timeline:
    """Attempt rows arrive as one tuple each in ``pending`` and move into the packed buffer in
    bulk: every ``PENDING_ROWS`` attempts, and whenever a column is read, so readers always
    see every row."""

    __slots__ = ("_rows", "cap_effective", "cap_machines", "cap_time", "cap_totals",
                 "job_ids", "machine_ids", "pending")

    def __init__(self, n_resources: int) -> None:
        self.job_ids: list[str] = []  # job sequence number -> id, in arrival order
        self.machine_ids: list[str] = []  # machine index -> id
        self._rows = bytearray()  # the moved rows, ``ROW`` each
        # rows not yet in the buffer: (job, stage, task, machine, start, end, slots, code);
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
        """Move the pending rows into the buffer."""
        pending = self.pending
        if pending:
            self._rows += b"".join(starmap(_pack, pending))
            pending.clear()

    def _col(self, name: str) -> np.ndarray:
        """One column, a fresh contiguous array (it keeps no hold on the growing buffer)."""
        if self.pending:
            self.flush()
        records = np.frombuffer(self._rows, dtype=ROW_DTYPE)
        col = records[name].copy()
        del records  # releases the buffer's export, so that it may grow again
        return col

    job = property(lambda self: self._col("job"))
    stage = property(lambda self: self._col("stage"))
    task = property(lambda self: self._col("task"))
    machine = property(lambda self: self._col("machine"))
    start = property(lambda self: self._col("start"))
    end = property(lambda self: self._col("end"))
    slots = property(lambda self: self._col("slots"))
    outcome = property(lambda self: self._col("outcome"))

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
        return len(self._rows) // ROW.size + len(self.pending)
