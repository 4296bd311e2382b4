"""The frozen view of the world a policy decides on.

A snapshot is built by the core at each policy call and is never mutated afterwards.  Views are
cached by the core and rebuilt only for jobs, stages and machines that changed since the
previous snapshot, so a decision costs O(changed objects), not O(cluster).

The per-job, per-stage and per-machine views are ``NamedTuple``s rather than frozen
dataclasses: they are just as immutable, and building one is several times cheaper (a frozen
dataclass sets each field through ``object.__setattr__``), which matters when a decision over
hundreds of active jobs happens thousands of times per run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, cast

import numpy as np

from utilon.core.messages import Trigger
from utilon.model.cluster import AttrValue
from utilon.model.lifecycle import JobState
from utilon.model.resources import Resources
from utilon.model.utility import TimeUtility


class MachineView(NamedTuple):
    """One machine as the policy sees it."""

    id: str
    """The machine's id (what ``Grant.machines`` names)."""
    index: int  # type: ignore[assignment]  # shadows tuple.index; the name reads best
    """Its position in ``ClusterSnapshot.machines`` (and in the rows of ``free``)."""
    capacity: Resources  # declared capacity now (base x scale)
    """Declared capacity now: the machine's own, times any scaling of the capacity
    timeline."""
    attributes: tuple[tuple[str, AttrValue], ...]
    """The scenario's ``attributes`` (rack, kind, ...), as sorted ``(name, value)`` pairs."""
    up: bool
    """False while the machine is absent (not yet joined, or left)."""
    speed: float
    """How fast its tasks run, relative to their declared durations (1.0: as declared)."""
    price: float
    """Cost per hour of the whole machine."""

    def attr(self, name: str, default: AttrValue | None = None) -> AttrValue | None:
        """The value of attribute ``name``, or ``default``."""
        for k, v in self.attributes:
            if k == name:
                return v
        return default


class StageView(NamedTuple):
    """One stage of an active job: its tasks by state, and what one task is expected to
    take and need."""

    name: str
    """The stage's name (what ``Grant.stage`` names)."""
    index: int  # type: ignore[assignment]  # shadows tuple.index; the name reads best
    """Its position in ``JobView.stages``."""
    kind: str
    """``map``, ``reduce`` or ``task``."""
    total: int
    """Tasks in the stage."""
    waiting: int
    """Tasks waiting for the stages this one runs after."""
    ready: int
    """Tasks that could start now."""
    running: int
    """Tasks running now."""
    done: int
    """Tasks finished."""
    expected_duration: float
    """Expected seconds per task: what the job declares, or an online estimate (see
    ``ClusterSnapshot.online_estimates``)."""
    demand: Resources  # declared demand of the stage's next ready task (or first task)
    """Declared demand of the stage's next ready task (or of its first task)."""
    slot_size: float  # that demand in the cluster's slot resource (at least a tiny epsilon)
    """That demand in the cluster's slot resource (``ClusterSnapshot.slot_resource``)."""
    gang: bool
    """True when the stage's tasks must start together."""
    request: object = None  # alsched's placement utility for the stage (model.job.Stage)
    """alsched's placement utility for the stage, if the scenario gives one."""
    started_sum: float = 0.0
    """Sum of the running tasks' start times: they have run ``running * now - started_sum``
    seconds in all (a sum, so that a cached view stays valid as time passes)."""

    def elapsed(self, now: float) -> float:
        """Seconds the stage's running tasks have run so far, summed."""
        return max(0.0, self.running * now - self.started_sum)

    @property
    def remaining(self) -> int:
        """Tasks not finished yet."""
        return self.total - self.done


class JobView(NamedTuple):
    """One active (submitted, unfinished) job as the policy sees it."""

    id: str
    """The job's id (what ``Grant.job`` names)."""
    tenant: str
    """Who submitted it."""
    submit: float
    """Its submission time, in seconds on the scenario's clock."""
    weight: float
    """Its weight (fair shares, weighted metrics); 1.0 unless the scenario says otherwise."""
    priority: int
    """Its priority: higher first, for the policies that use one (FIFO)."""
    job_class: str
    """Its class from the scenario (``critical``, ``sensitive``, ``insensitive``, ...)."""
    utility: TimeUtility
    """What finishing at a given time is worth; ``utility.goal`` is its goal."""
    state: JobState
    """``QUEUED`` until its first task starts, then ``RUNNING``."""
    started: float | None
    """When its first task started, or ``None``."""
    stages: tuple[StageView, ...]
    """Its stages, in the order they were declared."""

    @property
    def ready(self) -> int:
        """Tasks that could start now, over all stages."""
        return sum(s.ready for s in self.stages)

    @property
    def running(self) -> int:
        """Tasks running now, over all stages."""
        return sum(s.running for s in self.stages)

    @property
    def runnable(self) -> int:
        """Tasks that could be running right now (ready + running)."""
        return sum(s.ready + s.running for s in self.stages)

    @property
    def remaining(self) -> int:
        """Tasks not finished yet, over all stages."""
        return sum(s.total - s.done for s in self.stages)

    @property
    def remaining_work(self) -> float:
        """Expected task-seconds left (running tasks counted whole: a pessimistic bound)."""
        return sum((s.total - s.done) * s.expected_duration for s in self.stages)

    @property
    def goal(self) -> float:
        """The completion time the job aims at (its deadline, soft bound, ...); ``inf`` when
        its utility has none."""
        g = self.utility.goal
        return math.inf if g is None else g

    @property
    def slot_size(self) -> float:
        """Slot-resource size of this job's next task (current runnable stage)."""
        for s in self.stages:
            if s.ready or s.running:
                return s.slot_size
        for s in self.stages:
            if s.remaining:
                return s.slot_size
        return self.stages[-1].slot_size


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything a policy may base a decision on, frozen at one instant."""

    now: float
    """The time of the decision, in seconds on the scenario's clock."""
    triggers: frozenset[Trigger]
    """The events that caused this call (several may coincide)."""
    machines: tuple[MachineView, ...]
    """Every machine of the cluster, up or not."""
    jobs: tuple[JobView, ...]  # active jobs, in arrival order
    """The active jobs (submitted, not finished), in arrival order."""
    resource_names: tuple[str, ...]
    """The cluster's resources (``cpu``, ``mem``, ``slots``, ...), in vector order."""
    slot_resource: str
    """The resource that counts as a slot (``slots`` if the cluster has it, else ``cpu``
    or the first resource)."""
    free: np.ndarray | None = None
    """Declared free capacity, machines x resources; filled only for policies that set
    ``uses_free_capacity`` (building it costs O(machines x resources) per decision)."""
    placement: dict[str, dict[tuple[int, int], int]] | None = None
    """Where each active job's tasks run: job id -> {(stage index, machine index): running
    tasks}; filled only for policies that set ``uses_placement`` (costs O(running tasks))."""
    online_estimates: bool = False
    """True when ``expected_duration`` is an online estimate: the declared value is only a
    prior until the stage's first task completes (``estimates: online``); False when it is
    what the job declares (``estimates: declared``, the simulator's default)."""

    @property
    def up_machines(self) -> tuple[MachineView, ...]:
        """The machines that are up."""
        return tuple(m for m in self.machines if m.up)

    @property
    def total_slots(self) -> float:
        """Capacity of the up machines in the slot resource."""
        known = _derived(self.machines)
        key = ("slots", self.slot_resource)
        total = known.get(key)
        if total is None:
            r = self.slot_resource
            total = known[key] = sum(m.capacity[r] for m in self.machines if m.up)
        return cast(float, total)

    def capacity_matrix(self, names: tuple[str, ...]) -> np.ndarray:
        """Declared capacity, machines x ``names`` (a row of zeros for a machine that is
        down); read-only, shared by the snapshots of one machines tuple."""
        known = _derived(self.machines)
        key = ("capacity", names)
        caps = known.get(key)
        if caps is None:
            caps = np.zeros((len(self.machines), len(names)))
            for i, m in enumerate(self.machines):
                if m.up:
                    caps[i] = m.capacity.vector(names)
            caps.setflags(write=False)
            known[key] = caps
        assert isinstance(caps, np.ndarray)
        return caps

    def job(self, job_id: str) -> JobView:
        """The active job ``job_id``; ``KeyError`` if it is not active."""
        for j in self.jobs:
            if j.id == job_id:
                return j
        raise KeyError(job_id)


# What ``total_slots`` and ``capacity_matrix`` derived from the last machines tuple asked
# about: policies ask at every decision, and the core reuses one tuple until capacity changes
# (summing the machines' capacities was 5% of CORA's decision time, building the capacity
# matrix a fifth of alsched's, on the SWIM day).  The tuple is held, so its identity cannot be
# reused while remembered.
_last_machines: tuple[object, dict[tuple[str, object], object]] = (None, {})


def _derived(machines: tuple[MachineView, ...]) -> dict[tuple[str, object], object]:
    global _last_machines
    held, known = _last_machines
    if held is not machines:
        known = {}
        _last_machines = (machines, known)
    return known
