"""The fluid progress model: how fast each running task advances.

Tasks that share a machine share its actual resources.  For every resource ``r`` whose total
actual usage ``U_r`` exceeds the machine's capacity ``C_r``, every task that uses ``r`` is
slowed by the factor ``(C_r / U_r) ** (1 + gamma_r)``; a task's rate is the machine's speed
times the smallest factor over the resources it uses.  Whenever the set of tasks, a task's usage
phase, the capacity or the speed of a machine changes, the rates of its tasks are recomputed and
their end-of-phase events are re-issued (older events carry a stale version and are skipped).

``gamma_r`` is the cluster's *thrashing* exponent for ``r`` (``Cluster.thrashing``, opt-in, 0
by default).  With ``gamma_r = 0`` this is plain proportional sharing: an over-committed
resource still delivers 100% of its capacity, split among its users, however many there are.
Real machines do worse: concurrent streams make a disk seek back and forth (seek thrashing) and
over-committed memory swaps, so the more a resource is over-committed the less useful work it
does.  With ``gamma_r > 0`` the useful throughput of ``r`` falls to ``(C_r / U_r) ** gamma_r``
of its capacity (``gamma = 1`` and twice the load: half the capacity is useful work), which is
the cost of over-commitment that static slot counts incur (RAS, resource-aware MapReduce
scheduling).  Exponents are resolved once per model; ``gamma = 0`` everywhere takes exactly the
old code path, so outputs are byte-identical to a cluster without ``thrashing``.

When a machine is not over-committed before or after a change, every rate equals the
machine's speed and nothing needs recomputing: that fast path is the common case and keeps the
simulator close to the cost of a bare event loop.

*Metering.*  Usage only matters once a machine may be over-committed, and that needs a task
whose actual use differs from what it declared (usage phases), a static ``SlotLimit`` (which
dispatches past declared capacity on purpose), or a machine scaled down under its tasks: the
core never over-commits declared capacity by itself.  So a model built with ``metered=False``
(the simulator does so when no task has phases and usage is not recorded) keeps no usage at
all, and every rate is the machine's speed; ``start_metering`` (called by the simulator when
the core installs a slot limit, and by ``set_scale`` / ``set_speed``) sums the running
attempts' usage once and from then on keeps it as above.  Outputs are the same either way:
without over-commitment, usage changes no rate.

With ``record=True`` the model also keeps, per machine, the actual use of each resource and the
CPU stalled on other resources after every change (``utilon.sim.usage``); when off, that costs
one attribute check per change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from heapq import heappush as _heappush
from itertools import count
from typing import Any

from utilon.core.messages import TaskRef
from utilon.core.tolerance import EPS
from utilon.core.vec import hot_ops
from utilon.model.cluster import Cluster
from utilon.sim.usage import UsageRecorder, UsageTrace

Schedule = Callable[[float, "Exec"], None]


class Exec:
    """A running attempt: its usage phases and its progress in the current one."""

    __slots__ = ("last", "machine", "phase", "phases", "rate", "ref", "remaining", "version")

    def __init__(self, ref: TaskRef, machine: int,
                 phases: Sequence[tuple[float, tuple[float, ...]]], last: float = 0.0) -> None:
        self.ref = ref
        self.machine = machine
        self.phases = phases  # (work seconds at full speed, actual usage vector)
        self.phase = 0
        self.remaining = phases[0][0]
        self.rate = 0.0
        self.last = last  # when ``remaining`` was last brought up to date
        self.version = 0


class MachineFluid:
    __slots__ = ("base", "cap", "cap_eps", "execs", "over", "speed", "usage", "vec")

    def __init__(self, base: tuple[float, ...]) -> None:
        self.vec = hot_ops(len(base))
        self.base = base
        self.cap = base
        self.cap_eps = [c + EPS for c in base]
        self.speed = 1.0
        self.usage = [0.0] * len(base)
        self.execs: dict[TaskRef, Exec] = {}
        self.over = False

    def overcommitted(self) -> bool:
        return self.vec.gt_any(self.usage, self.cap_eps)


class FluidModel:
    def __init__(self, cluster: Cluster, names: tuple[str, ...], schedule: Schedule, *,
                 record: bool = False, heap: list[Any] | None = None,
                 seq: Iterator[int] | None = None, metered: bool = True) -> None:
        self.machines = [MachineFluid(m.capacity.vector(names)) for m in cluster.machines]
        # usage kept per machine (see the module docstring); always when recording it
        self.metered = metered or record
        self._vadd, self._vsub, _, self._vgt = hot_ops(len(names))
        self.running = 0  # attempts running on all machines (each machine keeps its own)
        self._schedule = schedule
        # The simulator's event heap and sequence counter, when ``schedule`` is the push
        # ``(t, 0, next(seq), 0, (ex, ex.version))`` onto it: a launch then pushes directly.
        self._heap = heap if seq is not None else None
        # the heap's next sequence number (a bound ``__next__``: no lookup of ``next``)
        self._next: Callable[[], int] = (seq if seq is not None else count(1)).__next__
        # 1 + gamma per resource, or None when no resource thrashes (the old, exact path)
        expo = tuple(1.0 + cluster.thrashing_of(r) for r in names)
        self._expo: tuple[float, ...] | None = expo if any(e != 1.0 for e in expo) else None
        self._rec: UsageRecorder | None = (
            UsageRecorder(names, tuple(m.id for m in cluster.machines)) if record else None)

    def usage_trace(self) -> UsageTrace | None:
        """What was recorded (``record=True``), else None."""
        return None if self._rec is None else self._rec.trace()

    # -- task lifecycle ---------------------------------------------------------------------
    def launch(self, ref: TaskRef, mi: int, now: float,
               phases: Sequence[tuple[float, tuple[float, ...]]]) -> None:
        m = self.machines[mi]
        ex = Exec(ref, mi, phases, now)
        work = ex.remaining
        m.execs[ref] = ex
        self.running += 1
        if self.metered:
            ex.rate = 0.0
            m.usage = usage = self._vadd(m.usage, phases[0][1])
            if m.over or self._vgt(usage, m.cap_eps):  # over-committed: recompute the rates
                self._recompute(m, now)
                if self._rec is not None:
                    self._rec.note(mi, m, now)
                return
        # nothing is over-committed (always so unmetered): the rate is the machine's speed
        ex.rate = rate = m.speed
        if rate > 0:
            heap = self._heap
            if heap is None:
                self._schedule(now + work / rate, ex)
            else:  # the engine's _schedule_exec, inlined
                _heappush(heap, (now + work / rate, 0, self._next(), 0, (ex, 0)))
        if self._rec is not None:
            self._rec.note(mi, m, now)

    def phase_end(self, ex: Exec, now: float) -> bool:
        """Advance ``ex`` past its current phase; True if the task is finished."""
        m = self.machines[ex.machine]
        if not self.metered:  # (unmetered, no task has phases: this was its only phase)
            ex.phase = 1
            self._remove(m, ex, now)
            return True
        phases = ex.phases
        old = phases[ex.phase][1]
        ex.phase = phase = ex.phase + 1
        if phase == len(phases):
            self._remove(m, ex, now)  # records
            return True
        new = phases[phase][1]
        m.usage = [u - a + b for u, a, b in zip(m.usage, old, new, strict=True)]
        ex.remaining = ex.phases[ex.phase][0]
        ex.last = now
        ex.version += 1
        if m.over or m.overcommitted():
            ex.rate = -1.0  # force a fresh event from the recomputation
            self._recompute(m, now)
        elif ex.rate > 0:
            self._schedule(now + ex.remaining / ex.rate, ex)
        if self._rec is not None:
            self._rec.note(ex.machine, m, now)
        return False

    def kill(self, ref: TaskRef, mi: int, now: float) -> None:
        """Stop the attempt of ``ref`` on machine ``mi`` (no-op if it is not running there)."""
        m = self.machines[mi]
        ex = m.execs.get(ref)
        if ex is not None:
            self._remove(m, ex, now)

    def _remove(self, m: MachineFluid, ex: Exec, now: float) -> None:
        del m.execs[ex.ref]
        self.running -= 1
        ex.version += 1
        if not self.metered:
            pass
        elif m.execs:
            phases = ex.phases
            p, n = ex.phase, len(phases)
            m.usage = self._vsub(m.usage, phases[p if p < n else n - 1][1])
        else:
            m.usage = [0.0] * len(m.usage)  # drop accumulated float noise
        if m.over:
            self._recompute(m, now)
        if self._rec is not None:
            self._rec.note(ex.machine, m, now)

    # -- capacity ---------------------------------------------------------------------------
    def drop_machine(self, mi: int, now: float | None = None) -> list[TaskRef]:
        """The machine left: its tasks are gone (the core re-queues them).  ``now`` is only
        needed when recording."""
        m = self.machines[mi]
        lost = list(m.execs)
        for ex in m.execs.values():
            ex.version += 1
        self.running -= len(lost)
        m.execs = {}
        m.usage = [0.0] * len(m.usage)
        m.over = False
        if self._rec is not None and now is not None:
            self._rec.note(mi, m, now)
        return lost

    def start_metering(self) -> None:
        """Keep usage from now on: each machine's is summed once over its running attempts
        (in launch order).  A no-op when already metered."""
        if self.metered:
            return
        self.metered = True
        for m in self.machines:
            usage = [0.0] * len(m.usage)
            for ex in m.execs.values():
                usage = self._vadd(usage, ex.phases[ex.phase][1])
            m.usage = usage
            m.over = m.overcommitted()  # (never: the core does not over-commit by itself)

    def set_scale(self, mi: int, factor: float, now: float) -> None:
        self.start_metering()
        m = self.machines[mi]
        m.cap = tuple(b * factor for b in m.base)
        m.cap_eps = [c + EPS for c in m.cap]
        self._recompute(m, now)
        if self._rec is not None:
            self._rec.note(mi, m, now)

    def set_speed(self, mi: int, factor: float, now: float) -> None:
        self.start_metering()
        m = self.machines[mi]
        m.speed = factor
        self._recompute(m, now)
        if self._rec is not None:
            self._rec.note(mi, m, now)

    # -- rates ------------------------------------------------------------------------------
    def _recompute(self, m: MachineFluid, now: float) -> None:
        expo = self._expo
        if expo is None:
            factors = [
                (1.0 if u <= c + EPS else (c / u if c > 0 else 0.0)) if u > EPS else 1.0
                for u, c in zip(m.usage, m.cap, strict=True)
            ]
        else:  # thrashing: an over-committed resource does less useful work the more it is
            factors = [
                (1.0 if u <= c + EPS else ((c / u) ** e if c > 0 else 0.0)) if u > EPS else 1.0
                for u, c, e in zip(m.usage, m.cap, expo, strict=True)
            ]
        m.over = any(f < 1.0 for f in factors)
        speed = m.speed
        for ex in m.execs.values():
            use = ex.phases[ex.phase][1]
            f = 1.0
            for x, fr in zip(use, factors, strict=True):
                if x > 0 and fr < f:
                    f = fr
            rate = speed * f
            if rate == ex.rate:
                continue
            if ex.rate > 0:
                ex.remaining -= ex.rate * (now - ex.last)
                if ex.remaining < 0:
                    ex.remaining = 0.0
            ex.last = now
            ex.rate = rate
            ex.version += 1
            if rate > 0:
                self._schedule(now + ex.remaining / rate, ex)
