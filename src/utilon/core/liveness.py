"""Liveness: when a run can stop with jobs left, because nothing will ever change.

A backend's loop asks after every control tick (``after_tick``) and when its queue runs dry
(``stuck``): a tick-driven policy may hold work back on purpose, but not forever.
"""

from __future__ import annotations

from operator import le
from typing import Final

from utilon.core.feasibility import pack
from utilon.core.state import JobRT, MachineRT
from utilon.model.lifecycle import MachineState

# After this many ticks with nothing running, nothing launched and no arrival or capacity
# change ahead, a run stops.
MAX_IDLE_TICKS: Final = 1000
_UP: Final = MachineState.UP


def stuck(active: dict[str, JobRT], machines: list[MachineRT]) -> bool:
    """Nothing makes progress (no task runs, or only on machines scaled or slowed to zero)
    and no ready task fits any up machine, even empty (a gang: all its ready tasks at once):
    without a capacity change or an arrival nothing can start or finish."""
    for job in active.values():
        for ref, run in job.running.items():
            m = machines[run.machine]
            # a task on a machine scaled or slowed to zero makes no progress
            demand = job.stages[ref.stage].vectors[ref.index]
            if m.speed > 0 and (m.scale > 0 or not any(demand)):
                return False
    caps = [m.capx for m in machines if m.state is _UP]
    for job in active.values():
        for st in job.stages:
            if not st.ready:
                continue
            if st.gang:
                if pack([st.vectors[i] for i in st.ready], caps).placement is not None:
                    return False
            elif any(all(map(le, st.vectors[i], c)) for i in set(st.ready) for c in caps):
                return False
    return True


def after_tick(active: dict[str, JobRT], machines: list[MachineRT], busy: bool, more: bool,
               idle_ticks: int) -> tuple[int, bool, str]:
    """After a control tick: the count of ticks in a row with nothing running or launched
    (``busy``: something was), whether to keep ticking (``more``: arrivals or capacity changes
    are ahead), and why the run stops when active jobs are left."""
    idle_ticks = 0 if busy else idle_ticks + 1
    if more:
        return idle_ticks, True, ""
    if not active:
        return idle_ticks, False, ""
    if stuck(active, machines):
        return idle_ticks, False, "no task can run and nothing will change"
    if idle_ticks < MAX_IDLE_TICKS:
        return idle_ticks, True, ""
    return idle_ticks, False, (f"nothing ran for {MAX_IDLE_TICKS} control ticks and "
                               "nothing will change")
