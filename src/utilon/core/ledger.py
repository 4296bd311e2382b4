"""Accounting: what the run used and cost, fed by attempt and capacity events.

The transitions tell the ledger when an attempt ends (``attempt_ended``: done, killed, lost or
failed) and when the cluster's capacity changes (``capacity_changed``); it keeps

* busy time: declared resource-seconds of every ended attempt, accumulated per distinct demand
  vector (a small key per vector, ``StageRT.vkeys``: no float-tuple hashing per completion) and
  summed per resource on demand (``busy``);
* the capacity integral of the up machines (``capacity_integral``);
* each job's cost (``attempt_cost``: the one formula, also used for attempts still running
  at the end of a run, ``metrics.outputs.in_flight``);
* the attempt records (``attempts``, when asked for) and the run's timeline rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from mypy_extensions import mypyc_attr

from utilon.core.messages import TaskRef
from utilon.core.records import Attempt
from utilon.core.state import JobRT, MachineRT, StageRT
from utilon.core.timeline import OUTCOME_CODE, OUTCOMES, PENDING_ROWS, Timeline
from utilon.model.lifecycle import MachineState

_UP: Final = MachineState.UP
_PENDING_ROWS: Final = PENDING_ROWS
DONE: Final = OUTCOME_CODE["done"]
KILLED: Final = OUTCOME_CODE["killed"]
LOST: Final = OUTCOME_CODE["lost"]
FAILED: Final = OUTCOME_CODE["failed"]


def attempt_cost(demand: Sequence[float], capacity: Sequence[float], price: float,
                 seconds: float) -> float:
    """What an attempt costs: the machine's price per hour x its time x the task's dominant
    share of the machine."""
    share = max((x / c for x, c in zip(demand, capacity, strict=True) if c > 0), default=0.0)
    return seconds * price / 3600.0 * share


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class Ledger:
    def __init__(self, names: tuple[str, ...], slot_idx: int, record_attempts: bool) -> None:
        self.names = names
        self.slot_idx = slot_idx
        self.record_attempts = record_attempts
        self.attempts: list[Attempt] = []
        self.timeline = Timeline(len(names))  # always on: compact, feeds the reports
        self.rows = self.timeline.pending
        # Attempt seconds per distinct demand vector, indexed by its key: -1.0 until an
        # attempt with it ends; summed in the order they first did (``busy``).
        self.vkeys: dict[tuple[float, ...], int] = {}
        self.busy_vecs: list[tuple[float, ...]] = []
        self.busy_dt: list[float] = []
        self.busy_order: list[int] = []
        self.cap_total: list[float] = [0.0] * len(names)
        self.cap_integral = [0.0] * len(names)
        self.cap_since = 0.0

    # -- attempts --------------------------------------------------------------------------
    def attempt_ended(self, job: JobRT, st: StageRT, ref: TaskRef, m: MachineRT, start: float,
                      end: float, outcome: int) -> None:
        """An attempt of ``ref`` on ``m`` from ``start`` to ``end`` ended with ``outcome``
        (an ``OUTCOME_CODE``)."""
        idx = ref.index
        v = st.vectors[idx]
        dt = end - start
        busy = self.busy_dt
        k = st.vkeys[idx]
        b = busy[k]
        if b < 0.0:  # the first attempt with this demand to end
            self.busy_order.append(k)
            b = 0.0
        busy[k] = b + dt
        if m.price:
            job.cost += attempt_cost(v, m.base, m.price, dt)
        if self.record_attempts:
            self.attempts.append(Attempt(ref, m.id, start, end, OUTCOMES[outcome]))
        rows = self.rows  # ``Timeline.attempt``'s row, appended here: once per attempt
        rows.append((job.seq, ref.stage, idx, m.index, start, end, v[self.slot_idx], outcome))
        if len(rows) >= _PENDING_ROWS:
            self.timeline.flush()

    def keys_of(self, vecs: list[tuple[float, ...]]) -> list[int]:
        """Each vector's key (``StageRT.vkeys``); a new vector gets the next one.  Tasks
        usually share their vector objects, so each object is looked up once."""
        if vecs and all(v is vecs[0] for v in vecs):
            return [self._vkey(vecs[0])] * len(vecs)
        by_object: dict[int, int] = {}
        out = []
        for v in vecs:
            k = by_object.get(id(v))
            if k is None:
                k = by_object[id(v)] = self._vkey(v)
            out.append(k)
        return out

    def _vkey(self, v: tuple[float, ...]) -> int:
        k = self.vkeys.get(v)
        if k is None:
            k = self.vkeys[v] = len(self.busy_vecs)
            self.busy_vecs.append(v)
            self.busy_dt.append(-1.0)
        return k

    @property
    def busy(self) -> list[float]:
        """Declared resource-seconds of every ended attempt so far, per resource."""
        tot = [0.0] * len(self.names)
        for k in self.busy_order:
            dt = self.busy_dt[k]
            for r, x in enumerate(self.busy_vecs[k]):
                tot[r] += x * dt
        return tot

    # -- capacity --------------------------------------------------------------------------
    def capacity_changed(self, now: float, machines: list[MachineRT]) -> None:
        """The up machines or their capacity changed at ``now`` (the integral is brought up
        to ``now`` with the capacity before the change)."""
        dt = now - self.cap_since
        if dt > 0:
            for r, c in enumerate(self.cap_total):
                self.cap_integral[r] += c * dt
        self.cap_since = now
        tot = [0.0] * len(self.names)
        up = [m for m in machines if m.state is _UP]
        for m in up:
            for r, c in enumerate(m.cap):
                tot[r] += c
        self.cap_total = tot
        si = self.slot_idx
        self.timeline.capacity(now, len(up), tot, sum(m.cap[si] * m.speed for m in up))

    def capacity_integral(self, until: float) -> list[float]:
        """Integral of the up machines' declared capacity from 0 to ``until``."""
        dt = max(0.0, until - self.cap_since)
        return [i + c * dt for i, c in zip(self.cap_integral, self.cap_total, strict=True)]
