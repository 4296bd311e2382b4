"""A compact record of what a run did over time: every task attempt and every capacity change.

The core appends one row per finished attempt (job, stage, task, machine, start, end, slot
units held, outcome) to flat typed arrays — a few hundred nanoseconds and ~45 bytes per attempt,
so a full-day trace of a million attempts fits in tens of megabytes of memory — and one row per
capacity change.  ``utilon.metrics.timeline`` turns this into the run's ``allocation.csv``,
``capacity.csv`` and ``attempts.csv`` (size-bounded, see docs/outputs.md), which the reports
plot.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

OUTCOMES = ("done", "killed", "lost", "failed", "running")
OUTCOME_CODE = {o: i for i, o in enumerate(OUTCOMES)}


class Timeline:
    __slots__ = ("cap_effective", "cap_machines", "cap_time", "cap_totals", "end", "job",
                 "job_ids", "machine", "machine_ids", "outcome", "slots", "stage", "start",
                 "task")

    def __init__(self, n_resources: int) -> None:
        self.job_ids: list[str] = []  # job sequence number -> id, in arrival order
        self.machine_ids: list[str] = []  # machine index -> id
        self.job = array("i")
        self.stage = array("i")
        self.task = array("i")
        self.machine = array("i")
        self.start = array("d")
        self.end = array("d")
        self.slots = array("d")  # units of the slot resource the attempt held
        self.outcome = array("b")
        self.cap_time = array("d")
        self.cap_machines = array("i")
        self.cap_totals = [array("d") for _ in range(n_resources)]
        self.cap_effective = array("d")  # slot capacity x speed: what scale-up changes

    def add_job(self, job_id: str) -> int:
        self.job_ids.append(job_id)
        return len(self.job_ids) - 1

    def attempt(self, job: int, stage: int, task: int, machine: int, start: float, end: float,
                slots: float, outcome: str) -> None:
        self.job.append(job)
        self.stage.append(stage)
        self.task.append(task)
        self.machine.append(machine)
        self.start.append(start)
        self.end.append(end)
        self.slots.append(slots)
        self.outcome.append(OUTCOME_CODE[outcome])

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
        return len(self.job)
