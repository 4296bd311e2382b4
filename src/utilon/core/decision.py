"""A policy's decision is data: grants, infeasible items and dispatch options.

A ``Grant`` lets one job hold up to ``slots`` running tasks (``None``: as many as it can
use), optionally only tasks of one stage and only on a set of machines, and optionally as a
gang (the ``slots - running`` tasks it allows start at one instant, or none do: alsched's
``nCk``).  Grants are listed in priority order: when capacity frees up, the dispatcher offers
it to the first grant that has room and a ready task that fits.  A job may hold several grants
(per stage, per machine set) as long as their scopes do not overlap.

Shrinking a grant below what a job is running is a no-kill preemption ("stop giving slots"):
running tasks finish and the job gets no new ones until it is under its grant.  With
``kill_excess`` the core instead kills the most recently started tasks of the scope right away
and re-queues them (kill-and-requeue).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Grant(NamedTuple):  # a NamedTuple: policies build one per job per decision, cheaply
    """Permission for one job to run tasks: ``Grant("etl-1")`` lets it use all it can;
    ``Grant("etl-1", slots=4, stage="map")`` at most four running map tasks."""

    job: str
    """The job's id (``JobView.id``); it must be active in the snapshot."""
    slots: int | None = None
    """How many of the scope's tasks may run at once; ``None``: as many as can run."""
    stage: str | None = None
    """Only tasks of this stage (``StageView.name``); ``None``: any stage."""
    machines: frozenset[str] | None = None
    """Only on these machines (``MachineView.id``); ``None``: any machine."""
    kill_excess: bool = False
    """Kill (and re-queue) the newest running tasks of the scope above ``slots`` right away,
    instead of letting them finish."""
    gang: bool = False
    """Start the granted tasks together: up to ``slots`` of them at once, or none."""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"job": self.job, "slots": self.slots}
        if self.stage is not None:
            d["stage"] = self.stage
        if self.machines is not None:
            d["machines"] = sorted(self.machines)
        if self.kill_excess:
            d["kill_excess"] = True
        if self.gang:
            d["gang"] = True
        return d


@dataclass(frozen=True, slots=True)
class Infeasible:
    """Something the policy cannot honour (a deadline no schedule meets, ...), with why."""

    job: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class SlotLimit:
    """Hadoop's static slot model: each machine runs at most ``per_machine`` tasks (and at
    most ``reduce_per_machine`` tasks of ``reduce`` stages, in their own pool, if set),
    whatever the tasks declare.  Actual usage still drives the simulator, so too many slots
    over-commit machines and slow tasks down."""

    per_machine: int
    reduce_per_machine: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"per_machine": self.per_machine, "reduce_per_machine": self.reduce_per_machine}


@dataclass(frozen=True, slots=True)
class Decision:
    """What a policy returns from ``decide``; the core validates it, installs it and
    dispatches by it until the next decision.  A job without a grant gets no new tasks."""

    grants: tuple[Grant, ...] = ()
    """In priority order: capacity that frees up is offered to the first grant with room."""
    infeasible: tuple[Infeasible, ...] = ()
    """Goals the policy knows it cannot meet, each with its reason; counted in the run's
    summary (``infeasible``).  Reporting a job here does not stop it from running: grant it
    too if it should still get capacity."""
    backfill: bool = False
    """After every grant got what it may, offer leftover capacity to grants in order anyway
    (work conservation, as Hadoop's Fair Scheduler does)."""
    slot_limit: SlotLimit | None = None
    """Hadoop's static slots per machine, for the policies that model them; ``None``: tasks
    fit by their declared demand."""
    solver_seconds: float | None = field(default=None, compare=False)
    """Wall time an optimization policy's solver spent on this decision (measured, so not
    part of equality or ``to_dict``); the core reports it apart from the decide time."""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"grants": [g.to_dict() for g in self.grants]}
        if self.infeasible:
            d["infeasible"] = [i.to_dict() for i in self.infeasible]
        if self.backfill:
            d["backfill"] = True
        if self.slot_limit is not None:
            d["slot_limit"] = self.slot_limit.to_dict()
        return d
