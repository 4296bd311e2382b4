"""The dispatcher: turns installed grants into launches as capacity frees up.

Shared by every policy and both worlds.  Grants are served in the order the policy listed them
(``GrantTable``); each grant's next ready task goes first-fit to the lowest-numbered open machine
where its *declared* demand fits, so declared resources are never over-committed.  Under a
``SlotLimit`` the declared capacity is ``k`` slots per machine, whatever the tasks declare
(static slots over-commit on purpose), but a task still only goes where it would fit the
machine alone: a task demanding a resource a machine does not have could never make progress
there.  Gang stages launch whole or not at all, placed by ``feasibility.pack``.

To keep a task event cheap the dispatcher keeps an *open* flag per machine: up, with room for
the smallest demand seen; it walks the grant table's dispatch indexes rather than every grant;
and a machine's free capacity is one vector (``MachineRT.free``), so that a fit test is one
call of an element-wise comparison (``vec``).  After a task completion only the freed machine
is offered, unless a grant became hungry again (it may want any machine).

It owns the machine side of a task's life: ``take`` at a launch, ``give`` at every end of an
attempt (``transitions`` calls it).
"""

from __future__ import annotations

import logging
from operator import le
from typing import Final

from mypy_extensions import mypyc_attr

from utilon.core import vec_native
from utilon.core.decision import SlotLimit
from utilon.core.feasibility import pack
from utilon.core.grants import GrantTable
from utilon.core.make import launch, task_ref
from utilon.core.messages import Command
from utilon.core.state import CoreStats, GrantState, JobRT, MachineRT, Running, StageRT
from utilon.core.tolerance import CHECK_SLACK, EPS
from utilon.core.vec import hot_ops
from utilon.errors import IllegalTransition
from utilon.model.lifecycle import JobState, MachineState, TaskState

log = logging.getLogger(__name__)

_UP: Final = MachineState.UP
_READY: Final = TaskState.READY
_RUNNING: Final = TaskState.RUNNING
_QUEUED: Final = JobState.QUEUED
# Compiled, the hot sites call ``vec_native``'s loops directly (a C call, no argument
# parsing); interpreted, ``vec``'s generated functions, the faster ones there (``hot_ops``)
NATIVE: Final = vec_native.COMPILED


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class Dispatcher:
    def __init__(self, machines: list[MachineRT], grants: GrantTable, stats: CoreStats,
                 names: tuple[str, ...], validate: bool) -> None:
        self.machines = machines  # the core's list: a machine added at run time is in it
        self.grants = grants
        self.stats = stats
        self.names = names
        self.validate = validate
        # element-wise vector operations written out for this many resources (``vec``)
        self.vadd, self.vsub, self.vle, _ = hot_ops(len(names))
        self.slot_limit: SlotLimit | None = None
        self.min_demand: tuple[float, ...] | None = None
        self.placeable: set[tuple[float, ...]] = set()  # demand vectors known to fit
        self.warnings: list[str] = []
        self.open: list[bool] = [False] * len(machines)  # up, with room for min_demand
        self.n_open = 0
        for m in machines:
            self.refresh_open(m)

    # -- which machines are open -----------------------------------------------------------
    def has_room(self, m: MachineRT) -> bool:
        sl = self.slot_limit
        if sl is not None:
            if sl.reduce_per_machine is None:
                return m.ntasks < sl.per_machine
            return (m.ntasks - m.nreduce < sl.per_machine
                    or m.nreduce < sl.reduce_per_machine)
        md = self.min_demand
        if md is None:
            return True
        return vec_native.le(md, m.free) if NATIVE else self.vle(md, m.free)

    def refresh_open(self, m: MachineRT) -> None:
        should = m.state is _UP and self.has_room(m)
        i = m.index
        if should != self.open[i]:
            self.open[i] = should
            self.n_open += 1 if should else -1

    def set_slot_limit(self, sl: SlotLimit | None) -> None:
        if sl != self.slot_limit:
            self.slot_limit = sl
            for m in self.machines:
                self.refresh_open(m)

    def machine_added(self, m: MachineRT, vectors: set[tuple[float, ...]]) -> None:
        """``m`` joined (appended to ``machines``); ``vectors``: the active jobs' demands."""
        self.open.append(False)
        for v in vectors:
            if v not in self.placeable and all(x <= c + EPS
                                               for x, c in zip(v, m.base, strict=True)):
                self.placeable.add(v)
        self.refresh_open(m)

    def note_demands(self, job_id: str, vecs: list[tuple[float, ...]]) -> None:
        """A submitted stage's demands: the smallest demand (which machines are open) and a
        warning for a demand that fits no machine."""
        lowered = False
        v0 = vecs[0] if vecs else None
        # the distinct vectors (the tasks of a stage usually share one object: no hashing)
        distinct = [v0] if v0 is not None and all(v is v0 for v in vecs) else set(vecs)
        for v in distinct:
            if v in self.placeable:
                continue
            md = self.min_demand
            if md is None:
                self.min_demand = tuple(v)
                lowered = True
            else:  # the element-wise minimum (a tuple: ``le`` reads it typed)
                low = tuple([x if x < y else y for x, y in zip(v, md, strict=True)])
                if low != md:
                    self.min_demand = low
                    lowered = True
            if any(all(x <= c + EPS for x, c in zip(v, m.base, strict=True))
                   for m in self.machines):
                self.placeable.add(v)
            else:
                msg = (f"job {job_id}: a task demands {dict(zip(self.names, v, strict=True))}, "
                       "which fits no machine of the cluster; it can never run")
                self.warnings.append(msg)
                log.warning(msg)
        if lowered:  # a smaller demand may make nearly-full machines useful again
            for m in self.machines:
                self.refresh_open(m)

    # -- the machine side of a task --------------------------------------------------------
    def take(self, m: MachineRT, st: StageRT, v: tuple[float, ...]) -> None:
        """A task of ``st`` demanding ``v`` starts on ``m``; ``m`` closes if now full."""
        m.free = vec_native.sub(m.free, v) if NATIVE else self.vsub(m.free, v)
        m.ntasks += 1
        if st.is_reduce:
            m.nreduce += 1
        if self.slot_limit is None:  # has_room, inlined: a launch is the hot path
            md = self.min_demand
            room = md is None or (vec_native.le(md, m.free) if NATIVE else self.vle(md, m.free))
        else:
            room = self.has_room(m)
        if self.open[m.index] and not room:
            self.open[m.index] = False
            self.n_open -= 1

    def give(self, m: MachineRT, st: StageRT, v: tuple[float, ...]) -> None:
        """A task of ``st`` demanding ``v`` stopped running on ``m``; ``m`` may open."""
        m.ntasks -= 1
        if st.is_reduce:
            m.nreduce -= 1
        if m.ntasks:
            m.free = vec_native.add(m.free, v) if NATIVE else self.vadd(m.free, v)
        else:
            m.reset_free()  # no task left: recomputed, which drops float noise
        if not self.open[m.index]:
            self.refresh_open(m)

    def fits(self, m: MachineRT, st: StageRT, v: tuple[float, ...]) -> bool:
        if self.slot_limit is not None:
            return self.slot_room(m, st) > 0 and all(map(le, v, m.capx))
        return vec_native.le(v, m.free) if NATIVE else self.vle(v, m.free)

    def slot_room(self, m: MachineRT, st: StageRT) -> int:
        """Static slots left on ``m`` for a task of ``st`` (its pool, under ``reduce_k``)."""
        sl = self.slot_limit
        assert sl is not None
        if sl.reduce_per_machine is None:
            return sl.per_machine - m.ntasks
        if st.is_reduce:
            return sl.reduce_per_machine - m.nreduce
        return sl.per_machine - (m.ntasks - m.nreduce)

    def check_machine(self, m: MachineRT) -> None:
        """A machine runs within its declared capacity (or its slots)."""
        sl = self.slot_limit
        if sl is not None:
            if sl.reduce_per_machine is None:
                ok = m.ntasks <= sl.per_machine
            else:
                ok = (m.ntasks - m.nreduce <= sl.per_machine
                      and m.nreduce <= sl.reduce_per_machine)
            if not ok:
                raise IllegalTransition(f"machine {m.id} runs more tasks than its slots")
        elif not all(u <= c + CHECK_SLACK for u, c in zip(m.used, m.cap, strict=True)):
            raise IllegalTransition(f"machine {m.id}: declared capacity exceeded: used "
                                    f"{m.used} > capacity {list(m.cap)}")

    # -- dispatching -----------------------------------------------------------------------
    def dispatch(self, candidates: list[int] | None, now: float, cmds: list[Command]) -> None:
        """Offer the open machines (``candidates`` only, if given) to the hungry grants in
        order, then, with backfill, to every grant with a ready task."""
        table = self.grants
        grants = table.installed
        flags = self.open
        passes = (False, True) if table.backfill else (False,)
        table.widen = False
        for ignore_limit in passes:
            for o in sorted(table.with_ready if ignore_limit else table.hungry):
                if not self.n_open:
                    return
                if candidates is not None and not any(flags[i] for i in candidates):
                    return
                gs = grants[o]
                if gs.job.n_ready == 0 or (not ignore_limit and gs.running >= gs.limit):
                    continue
                self._fill(gs, candidates, ignore_limit, now, cmds)

    def launch(self, job: JobRT, st: StageRT, m: MachineRT, gs: GrantState, now: float,
               cmds: list[Command]) -> None:
        """READY -> RUNNING: the head of ``st``'s ready queue starts on ``m``."""
        idx = st.ready.popleft()
        if st.states[idx] is not _READY:
            raise IllegalTransition(f"task {job.id}/{st.stage.name}/{idx}: illegal move "
                                    f"{st.states[idx].name} -> RUNNING")
        st.states[idx] = _RUNNING
        st.running += 1
        st.started_sum += now
        st.view = None
        job.n_ready -= 1
        job.dirty = True
        if job.state is _QUEUED:
            job.state = JobState.RUNNING
            job.start = now
        ref = task_ref(job=job.id, stage=st.index, index=idx)
        job.running[ref] = Running(machine=m.index, start=now, launch=self.stats.launched)
        self.take(m, st, st.vectors[idx])
        self.grants.launched(job, gs)
        self.stats.launched += 1
        cmds.append(launch(task=ref, machine=m.id))
        if self.validate:
            self.check_machine(m)

    def _fill(self, gs: GrantState, candidates: list[int] | None, ignore_limit: bool,
              now: float, cmds: list[Command]) -> None:
        job = gs.job
        flags = self.open
        # the machines to try, in index order; None: every machine, walking the open flags
        # (a fill usually places its tasks on the first few open machines: listing them all
        # first cost more than the walk)
        cands: list[int] | None
        if candidates is None:
            # (the open machines of the mask in index order, in O(mask) rather than a walk
            # of every machine: grants per machine have masks of one)
            cands = None if gs.mask is None else [i for i in sorted(gs.mask) if flags[i]]
        else:
            cands = [i for i in candidates if flags[i] and (gs.mask is None or i in gs.mask)]
        if (not self.n_open) if cands is None else not cands:
            return
        machines = self.machines
        slots = self.slot_limit is not None  # else a fit is the free-capacity test, inlined
        vle = self.vle
        for st in job.stages:
            if (gs.stage is not None and st.index != gs.stage) or not st.ready:
                continue
            if st.gang or gs.gang:
                # A gang stage starts whole; a gang grant starts what it may run, together.
                # Both may need machines other than the one that just freed up.
                if st.gang:
                    if st.running or (not ignore_limit and gs.running + len(st.ready)
                                      > gs.limit):
                        continue
                    n_gang = len(st.ready)
                elif ignore_limit:
                    continue  # a gang grant is an exact request: no backfill beyond it
                else:
                    n_gang = int(min(gs.limit - gs.running, len(st.ready)))
                every = [i for i in range(len(flags))
                         if flags[i] and (gs.mask is None or i in gs.mask)]
                self._fill_gang(gs, st, every, n_gang, now, cmds)
                continue
            p = 0
            n = len(flags) if cands is None else len(cands)
            ready = st.ready
            vectors = st.vectors
            mi = 0
            v: tuple[float, ...] | None = None
            while ready and (ignore_limit or gs.running < gs.limit):
                head = vectors[ready[0]]
                if head is not v:
                    p = 0  # a different demand may fit machines the last one skipped
                    v = head
                while p < n:
                    mi = p if cands is None else cands[p]
                    if flags[mi]:  # (launches close machines as they fill)
                        m = machines[mi]
                        if (self.fits(m, st, v) if slots else
                                vec_native.le(v, m.free) if NATIVE else vle(v, m.free)):
                            break
                    p += 1
                if p == n:
                    break  # the head task fits on no candidate machine now
                self.launch(job, st, machines[mi], gs, now, cmds)

    def _fill_gang(self, gs: GrantState, st: StageRT, cands: list[int], n: int, now: float,
                   cmds: list[Command]) -> None:
        """Launch the first ``n`` ready tasks of ``st`` together, or none of them."""
        if n < 1 or n > len(st.ready):
            return
        ms = [self.machines[mi] for mi in cands if self.machines[mi].state is _UP]
        vecs = [st.vectors[st.ready[k]] for k in range(n)]
        if self.slot_limit is None:
            found = pack(vecs, [m.free for m in ms])
        else:  # slots are counted, and each task must fit the machine alone
            found = pack([(1.0,)] * n, [(float(self.slot_room(m, st)),) for m in ms],
                         eligible=lambda k, i: all(map(le, vecs[k], ms[i].capx)))
        if found.placement is None:
            return  # the gang does not fit now
        for i in found.placement:  # launches pop the ready queue in the same order
            self.launch(gs.job, st, ms[i], gs, now, cmds)
