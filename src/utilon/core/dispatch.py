"""The dispatcher: turns installed grants into launches as capacity frees up.

Shared by every policy and both worlds.  Grants are served in the order the policy listed them;
each grant's next ready task goes first-fit to the lowest-numbered open machine where its
*declared* demand fits, so declared resources are never over-committed.  Under a ``SlotLimit``
the declared capacity is ``k`` slots per machine, whatever the tasks declare (static slots
over-commit on purpose), but a task still only goes where it would fit the machine alone: a
task demanding a resource a machine does not have could never make progress there.  Gang
stages launch whole or not at all, placed by ``feasibility.pack``.

To keep a task event cheap the dispatcher keeps: an *open* list of up machines that could still
fit the smallest demand seen; the grants whose job has a ready task (``_with_ready``) and those
also under their limit (``_hungry``); and a free-capacity vector per machine, so that a fit
test is one call of an element-wise comparison written out for the cluster's resources
(``vec``).  After a task completion only the freed
machine is offered, unless a grant became hungry again (it may want any machine).

``Dispatcher`` is the base class of ``SchedulerCore``: it reads and updates the core's state
and launches tasks (``_launch``); it is split out so that the placement rules can be read on
their own.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import le
from typing import Final

from mypy_extensions import mypyc_attr

from utilon.core import vec_native
from utilon.core.decision import Decision, SlotLimit
from utilon.core.feasibility import pack
from utilon.core.invariants import check_machine
from utilon.core.make import launch, running, task_ref
from utilon.core.messages import Command
from utilon.core.state import CoreStats, GrantState, JobRT, MachineRT, StageRT
from utilon.core.vec import AddSub
from utilon.errors import IllegalTransition
from utilon.model.lifecycle import JobState, MachineState, TaskState

_UP: Final = MachineState.UP
_READY: Final = TaskState.READY
_RUNNING: Final = TaskState.RUNNING
_QUEUED: Final = JobState.QUEUED
# Compiled, the hot sites call ``vec_native``'s loops directly (a C call, no argument
# parsing); interpreted, ``vec``'s generated functions, the faster ones there (``hot_ops``)
NATIVE: Final = vec_native.COMPILED


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class Dispatcher:
    """Placement half of ``SchedulerCore`` (see the module docstring)."""

    machines: list[MachineRT]
    decision: Decision
    validate: bool
    now: float
    stats: CoreStats
    _grants: list[GrantState]
    _hungry: set[int]
    _with_ready: set[int]
    _widen: bool
    _slot_limit: SlotLimit | None
    _min_demand: tuple[float, ...] | None
    _open: list[bool]  # machine index -> open: up, with room for the smallest demand
    _n_open: int  # how many are open
    _vle: Callable[[tuple[float, ...], list[float]], bool]  # a <= b (``vec``)
    _vsub: AddSub  # a - b (``vec``)

    def _has_room(self, m: MachineRT) -> bool:
        sl = self._slot_limit
        if sl is not None:
            if sl.reduce_per_machine is None:
                return m.ntasks < sl.per_machine
            return (m.ntasks - m.nreduce < sl.per_machine
                    or m.nreduce < sl.reduce_per_machine)
        md = self._min_demand
        if md is None:
            return True
        return self._vle(md, m.free)

    def _refresh_open(self, m: MachineRT) -> None:
        should = m.state is _UP and self._has_room(m)
        i = m.index
        if should != self._open[i]:
            self._open[i] = should
            self._n_open += 1 if should else -1

    def _open_list(self) -> list[int]:
        """The open machines in index order (first fit goes to the lowest)."""
        flags = self._open
        return [i for i in range(len(flags)) if flags[i]]

    def _fits(self, m: MachineRT, st: StageRT, v: tuple[float, ...]) -> bool:
        sl = self._slot_limit
        if sl is not None:
            return self._slot_room(m, st) > 0 and all(map(le, v, m.capx))
        return self._vle(v, m.free)

    def _slot_room(self, m: MachineRT, st: StageRT) -> int:
        """Static slots left on ``m`` for a task of ``st`` (its pool, under ``reduce_k``)."""
        sl = self._slot_limit
        assert sl is not None
        if sl.reduce_per_machine is None:
            return sl.per_machine - m.ntasks
        if st.is_reduce:
            return sl.reduce_per_machine - m.nreduce
        return sl.per_machine - (m.ntasks - m.nreduce)

    def _touch(self, job: JobRT) -> None:
        """Keep the two dispatch indexes in step with one job's grants.

        ``_with_ready`` holds the grants whose job has a ready task; ``_hungry`` those that
        also run fewer tasks than their limit.  Dispatch walks these (usually short) sets in
        grant order instead of every grant, so a task event costs O(hungry grants), not
        O(active jobs).
        """
        ready = job.n_ready > 0
        for gs in job.gstates:
            o = gs.order
            if ready:
                self._with_ready.add(o)
                if gs.running < gs.limit:
                    if o not in self._hungry:
                        # It may now use a machine other than the one that just freed up.
                        self._hungry.add(o)
                        self._widen = True
                else:
                    self._hungry.discard(o)
            else:
                self._with_ready.discard(o)
                self._hungry.discard(o)

    def _launch(self, job: JobRT, st: StageRT, m: MachineRT, gs: GrantState,
                cmds: list[Command]) -> None:
        idx = st.ready.popleft()
        if st.states[idx] is not _READY:
            raise IllegalTransition(f"task {job.id}/{st.stage.name}/{idx}: illegal move "
                                    f"{st.states[idx].name} -> RUNNING")
        st.states[idx] = _RUNNING
        st.running += 1
        st.view = None
        job.n_ready -= 1
        ref = task_ref(job=job.id, stage=st.index, index=idx)
        now = self.now
        st.started_sum += now
        job.running[ref] = running(machine=m.index, start=now, launch=self.stats.launched)
        v = st.vectors[idx]
        m.free = vec_native.sub(m.free, v) if NATIVE else self._vsub(m.free, v)
        m.ntasks += 1
        if st.is_reduce:
            m.nreduce += 1
        gs.running += 1
        job.dirty = True
        if not job.n_ready:
            self._touch(job)  # out of ready tasks: every grant of the job leaves both indexes
        elif gs.running >= gs.limit:
            # _touch(job) with ready tasks left: only this grant's count moved (the job's
            # grants have disjoint scopes), so only it can leave the hungry index; touching
            # every grant of the job cost O(its grants) per launch for grants per machine
            self._hungry.discard(gs.order)
        if job.state is _QUEUED:
            job.state = JobState.RUNNING
            job.start = now
        # _refresh_open(m) when it has no room left, inlined (only closing is possible here)
        if self._slot_limit is None:
            md = self._min_demand
            room = md is None or (vec_native.le(md, m.free) if NATIVE else
                                  self._vle(md, m.free))
        else:
            room = self._has_room(m)
        if not room and self._open[m.index]:
            self._open[m.index] = False
            self._n_open -= 1
        self.stats.launched += 1
        cmds.append(launch(task=ref, machine=m.id))

    def _check_machine(self, m: MachineRT) -> None:
        check_machine(self, m)

    def _dispatch(self, candidates: list[int] | None, cmds: list[Command]) -> None:
        grants = self._grants
        flags = self._open
        passes = (False, True) if self.decision.backfill else (False,)
        self._widen = False
        for ignore_limit in passes:
            for o in sorted(self._with_ready if ignore_limit else self._hungry):
                if not self._n_open:
                    return
                if candidates is not None and not any(flags[i] for i in candidates):
                    return
                gs = grants[o]
                if gs.job.n_ready == 0 or (not ignore_limit and gs.running >= gs.limit):
                    continue
                self._fill(gs, candidates, ignore_limit, cmds)

    def _fill(self, gs: GrantState, candidates: list[int] | None, ignore_limit: bool,
              cmds: list[Command]) -> None:
        job = gs.job
        flags = self._open
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
        if (not self._n_open) if cands is None else not cands:
            return
        machines = self.machines
        slots = self._slot_limit is not None  # else a fit is the free-capacity test, inlined
        fits = self._vle
        validate = self.validate
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
                every = [i for i in self._open_list() if gs.mask is None or i in gs.mask]
                self._fill_gang(gs, st, every, n_gang, cmds)
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
                        if (self._fits(m, st, v) if slots else
                                vec_native.le(v, m.free) if NATIVE else fits(v, m.free)):
                            break
                    p += 1
                if p == n:
                    break  # the head task fits on no candidate machine now
                self._launch(job, st, machines[mi], gs, cmds)
                if validate:
                    self._check_machine(machines[mi])

    def _fill_gang(self, gs: GrantState, st: StageRT, cands: list[int], n: int,
                   cmds: list[Command]) -> None:
        """Launch the first ``n`` ready tasks of ``st`` together, or none of them."""
        if n < 1 or n > len(st.ready):
            return
        ms = [self.machines[mi] for mi in cands if self.machines[mi].state is _UP]
        vecs = [st.vectors[st.ready[k]] for k in range(n)]
        if self._slot_limit is None:
            found = pack(vecs, [m.free for m in ms])
        else:  # slots are counted, and each task must fit the machine alone
            found = pack([(1.0,)] * n, [(float(self._slot_room(m, st)),) for m in ms],
                         eligible=lambda k, i: all(map(le, vecs[k], ms[i].capx)))
        if found.placement is None:
            return  # the gang does not fit now
        for i in found.placement:  # launches pop the ready queue in the same order
            self._launch(gs.job, st, ms[i], gs, cmds)
