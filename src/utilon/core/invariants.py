"""Invariants of the scheduler core, checked after every batch when ``validate=True``.

Every counter the core keeps for speed (running and ready counts, per-machine used and free
vectors, the open-machine flags, the dispatch indexes, grant running counts) is recomputed here
from the underlying records and compared, in the spirit of Dask's ``validate_state()``.
"""

from __future__ import annotations

from utilon.core.dispatch import Dispatcher
from utilon.core.grants import GrantTable
from utilon.core.tolerance import CHECK_SLACK
from utilon.core.transitions import Transitions
from utilon.errors import IllegalTransition
from utilon.model.lifecycle import JobState, MachineState, TaskState

_RUNNING = TaskState.RUNNING
_READY = TaskState.READY
_DONE = TaskState.DONE
_UP = MachineState.UP


def check_invariants(state: Transitions, dispatcher: Dispatcher, grants: GrantTable) -> None:
    """Cross-check every counter against the underlying records (slow)."""
    machines = state.machines
    per_machine: dict[int, list[float]] = {m.index: [0.0] * len(dispatcher.names)
                                           for m in machines}
    ntasks = dict.fromkeys(per_machine, 0)
    for job in state.active.values():
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
            if machines[mi].state is not _UP:
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
    for m in machines:
        if ntasks[m.index] != m.ntasks:
            raise IllegalTransition(f"machine {m.id}: task count out of sync")
        if any(abs(a - b) > CHECK_SLACK
               for a, b in zip(per_machine[m.index], m.used, strict=True)):
            raise IllegalTransition(f"machine {m.id}: used {m.used} != "
                                    f"{per_machine[m.index]}")
        should_open = m.state is _UP and dispatcher.has_room(m)
        if should_open != dispatcher.open[m.index]:
            raise IllegalTransition(f"machine {m.id}: open flag out of sync")
    if len(dispatcher.open) != len(machines) or dispatcher.n_open != sum(dispatcher.open):
        raise IllegalTransition("open flags out of sync with the machines or their count")
    for gs in grants.installed:
        ready = gs.job.n_ready > 0
        if (gs.order in grants.with_ready) != ready or (
                gs.order in grants.hungry) != (ready and gs.running < gs.limit):
            raise IllegalTransition(f"grant of {gs.job.id}: dispatch index out of sync")
        if gs.job.state is JobState.DONE or gs.job.state is JobState.CANCELLED:
            continue
        expect = sum(1 for r, run in gs.job.running.items()
                     if gs.covers(r.stage, run.machine))
        if expect != gs.running:
            raise IllegalTransition(f"grant of {gs.job.id}: running {gs.running} != "
                                    f"{expect}")
