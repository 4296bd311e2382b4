"""What a policy sees: the frozen ``ClusterSnapshot`` built from the core's runtime state.

Views are cached where the state they show has not changed: a stage's ``StageView`` until
the stage changes (every change sets ``StageRT.view`` to None), a job's ``JobView`` until the
job is marked dirty, the machines' views until a machine changes (``machines_changed``), and a
machine's row of the free-capacity matrix until its capacity or free vector is replaced.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from mypy_extensions import mypyc_attr

from utilon.core.make import job_view, stage_view
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView, MachineView
from utilon.core.state import JobRT, MachineRT
from utilon.model.lifecycle import MachineState
from utilon.model.resources import Resources

_UP: Final = MachineState.UP


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class Views:
    def __init__(self, names: tuple[str, ...], slot_resource: str, free: bool,
                 placement: bool, online: bool) -> None:
        self.names = names
        self.slot_resource = slot_resource
        self.slot_idx = names.index(slot_resource)
        self.free = free  # the policy reads the free-capacity matrix
        self.placement = placement  # the policy reads where each job's tasks run
        self.online = online
        self.machine_views: tuple[MachineView, ...] | None = None
        # per machine: (cap, free, its row of the free matrix); a row is rebuilt only when
        # either list changed (every change replaces the list)
        self.free_rows: list[tuple[tuple[float, ...], list[float], list[float]] | None] = []

    def machines_changed(self, m: MachineRT | None) -> None:
        """A machine (None: some machine) joined, left or changed capacity or speed."""
        if m is not None:
            m.view = None
        self.machine_views = None

    def snapshot(self, now: float, triggers: frozenset[Trigger], machines: list[MachineRT],
                 active: dict[str, JobRT]) -> ClusterSnapshot:
        if self.machine_views is None:
            self.machine_views = tuple([self._machine_view(m) for m in machines])
        free = None
        if self.free:
            rows = self.free_rows
            if len(rows) != len(machines):
                rows = self.free_rows = [None] * len(machines)
            matrix: list[list[float]] = []
            for i, m in enumerate(machines):
                row = rows[i]
                if row is not None and row[0] is m.cap and row[1] is m.free:
                    matrix.append(row[2])
                    continue
                values = [c - u for c, u in zip(m.cap, m.used, strict=True)]
                rows[i] = (m.cap, m.free, values)
                matrix.append(values)
            free = np.array(matrix, dtype=float)
            free.setflags(write=False)
        placement = None
        if self.placement:
            placement = {}
            for j in active.values():
                where: dict[tuple[int, int], int] = {}
                for ref, run in j.running.items():
                    key = (ref.stage, run.machine)
                    where[key] = where.get(key, 0) + 1
                placement[j.id] = where
        job_view = self.job_view  # called for changed jobs only; the rest reuse their view
        return ClusterSnapshot(
            now=now,
            triggers=triggers,
            machines=self.machine_views,
            jobs=tuple([j.view if not j.dirty and j.view is not None else job_view(j)
                        for j in active.values()]),
            resource_names=self.names,
            slot_resource=self.slot_resource,
            free=free,
            placement=placement,
            online_estimates=self.online,
        )

    def _machine_view(self, m: MachineRT) -> MachineView:
        if m.view is None:
            m.view = MachineView(id=m.id, index=m.index,
                                 capacity=Resources.from_vector(self.names, m.cap),
                                 attributes=m.machine.attributes, up=m.state is _UP,
                                 speed=m.speed, price=m.price)
        return m.view

    def job_view(self, j: JobRT) -> JobView:
        if j.dirty or j.view is None:
            stages = []
            si = self.slot_idx
            for st in j.stages:
                view = st.view  # None since the stage changed (every change resets it)
                if view is None:
                    ready = st.ready
                    head = ready[0] if ready else 0
                    size = st.vectors[head][si]
                    stage = st.stage
                    st.view = view = stage_view(
                        name=stage.name, index=st.index, kind=stage.kind, total=st.total,
                        waiting=st.total if st.locked else 0, ready=len(ready),
                        running=st.running, done=st.done, expected_duration=st.expected,
                        demand=stage.tasks[head].demand, slot_size=size if size > 0 else 1.0,
                        gang=st.gang, request=stage.request, started_sum=st.started_sum)
                stages.append(view)
            job = j.job
            j.view = job_view(id=job.id, tenant=job.tenant, submit=job.submit,
                              weight=job.weight, priority=job.priority, job_class=job.job_class,
                              utility=job.utility, state=j.state, started=j.start,
                              stages=tuple(stages))
            j.dirty = False
        return j.view
