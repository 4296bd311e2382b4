"""Invariants of the scheduler core, checked after every batch when ``validate=True``.

Every counter the core keeps for speed (running and ready counts, per-machine used and free
vectors, the open-machine list, the dispatch indexes, grant running counts) is recomputed here
from the underlying records and compared, in the spirit of Dask's ``validate_state()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from utilon.core.state import MachineRT
from utilon.core.tolerance import CHECK_SLACK
from utilon.errors import IllegalTransition
from utilon.model.lifecycle import JobState, MachineState, TaskState

if TYPE_CHECKING:
    from utilon.core.dispatch import Dispatcher
    from utilon.core.scheduler import SchedulerCore

_RUNNING = TaskState.RUNNING
_READY = TaskState.READY
_DONE = TaskState.DONE
_UP = MachineState.UP


def check_machine(core: Dispatcher, m: MachineRT) -> None:
    """A machine runs within its declared capacity (or its slots)."""
    sl = core._slot_limit
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

def check_invariants(core: SchedulerCore) -> None:
    """Cross-check every counter of ``core`` against the underlying records (slow)."""
    per_machine: dict[int, list[float]] = {m.index: [0.0] * len(core.names)
                                           for m in core.machines}
    ntasks = dict.fromkeys(per_machine, 0)
    for job in core.active.values():
        counts = {s.index: 0 for s in job.stages}
        for ref, run in job.running.items():
            mi = run.machine
            st = job.stages[ref.stage]
            if st.states[ref.index] is not _RUNNING:
                raise IllegalTransition(f"{ref} listed running but is "
                                        f"{st.states[ref.index].name}")
            counts[ref.stage] += 1
            ntasks[mi] += 1
            per_machine[mi] = [a + b for a, b in
                               zip(per_machine[mi], st.vectors[ref.index], strict=True)]
            if core.machines[mi].state is not _UP:
                raise IllegalTransition(f"{ref} runs on machine that is down")
        n_ready = 0
        for st in job.stages:
            if counts[st.index] != st.running:
                raise IllegalTransition(f"job {job.id} stage {st.index}: running counter "
                                        f"{st.running} != {counts[st.index]}")
            states = st.states
            if sorted(st.ready) != [i for i, s in enumerate(states) if s is _READY]:
                raise IllegalTransition(f"job {job.id} stage {st.index}: ready queue out "
                                        "of sync")
            if st.done != sum(1 for s in states if s is _DONE):
                raise IllegalTransition(f"job {job.id} stage {st.index}: done counter")
            n_ready += len(st.ready)
        if n_ready != job.n_ready:
            raise IllegalTransition(f"job {job.id}: n_ready {job.n_ready} != {n_ready}")
    for m in core.machines:
        if ntasks[m.index] != m.ntasks:
            raise IllegalTransition(f"machine {m.id}: task count out of sync")
        if any(abs(a - b) > CHECK_SLACK for a, b in zip(per_machine[m.index], m.used, strict=True)):
            raise IllegalTransition(f"machine {m.id}: used {m.used} != "
                                    f"{per_machine[m.index]}")
        should_open = m.state is _UP and core._has_room(m)
        if should_open != core._open[m.index]:
            raise IllegalTransition(f"machine {m.id}: open flag out of sync")
    if len(core._open) != len(core.machines) or core._n_open != sum(core._open):
        raise IllegalTransition("open flags out of sync with the machines or their count")
    for gs in core._grants:
        ready = gs.job.n_ready > 0
        if (gs.order in core._with_ready) != ready or (
                gs.order in core._hungry) != (ready and gs.running < gs.limit):
            raise IllegalTransition(f"grant of {gs.job.id}: dispatch index out of sync")
        if gs.job.state is JobState.DONE or gs.job.state is JobState.CANCELLED:
            continue
        expect = sum(1 for r, run in gs.job.running.items()
                     if gs.covers(r.stage, run.machine))
        if expect != gs.running:
            raise IllegalTransition(f"grant of {gs.job.id}: running {gs.running} != "
                                    f"{expect}")
