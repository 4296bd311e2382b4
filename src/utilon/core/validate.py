"""Checks every decision against the contract before the core acts on it.

A policy that grants slots to a job that is not active, names a stage or machine that does not
exist, or gives one job overlapping grants gets an ``InvalidDecision`` naming the policy and
the offending item: a bug surfaces at the decision that has it, not hours later as odd metrics.
"""

from __future__ import annotations

from collections.abc import Collection
from operator import itemgetter
from typing import Any

from utilon.core.decision import Decision
from utilon.core.snapshot import ClusterSnapshot
from utilon.errors import InvalidDecision

_NONE = {None}
_SLOT_TYPES = {int, type(None)}  # exactly: a bool is not a slot count
# Grant and JobView are NamedTuples: their fields by index (C-level, no descriptor call)
_job, _slots, _stage, _machines, _gang = (itemgetter(i) for i in (0, 1, 2, 3, 5))
_id = itemgetter(0)


class _Scopes:
    """The scopes one job's grants hold so far, to test a new grant against all of them at
    once: per stage named (``None``: every stage), how many grants, whether one covers every
    machine, and the union of the machines the others name.  Two scopes overlap unless they
    name different stages or disjoint machine sets, so a new grant overlaps an earlier one
    exactly when it meets a grant of its own stage or of every stage (of any stage, when it
    names none) on a common machine, or either covers every machine.  Linear in the machines
    named, where testing every earlier grant was quadratic in a job's grants (RAS gives one
    per stage and machine)."""

    __slots__ = ("by_stage", "count", "every_machine", "machines")

    def __init__(self) -> None:
        # stage -> [grants, one of them covers every machine, machines the others name]
        self.by_stage: dict[str | None, list[Any]] = {}
        self.count = 0
        self.every_machine = False
        self.machines: set[str] = set()

    def overlaps(self, stage: str | None, machines: frozenset[str] | None) -> bool:
        if stage is None:  # every stage: any earlier grant of the job may meet it
            count, every, named = self.count, self.every_machine, self.machines
            return count > 0 and (machines is None or every or not named.isdisjoint(machines))
        for key in (stage, None):
            held = self.by_stage.get(key)
            if held is not None and held[0] and (machines is None or held[1]
                                                 or not held[2].isdisjoint(machines)):
                return True
        return False

    def add(self, stage: str | None, machines: frozenset[str] | None) -> None:
        held = self.by_stage.get(stage)
        if held is None:
            held = self.by_stage[stage] = [0, False, set()]
        held[0] += 1
        self.count += 1
        if machines is None:
            held[1] = self.every_machine = True
        else:
            held[2] |= machines
            self.machines |= machines


def validate_decision(decision: Decision, snap: ClusterSnapshot, policy: str,
                      active: Collection[str] | None = None) -> None:
    """Raise ``InvalidDecision`` unless ``decision`` keeps the contract on ``snap``.
    ``active``: the ids of ``snap.jobs`` when the caller keeps them already (the core's active
    jobs by id), so that checking a few grants does not cost a pass over every queued job."""
    where = f"policy {policy!r} at t={snap.now:g}"
    if not isinstance(decision, Decision):
        raise InvalidDecision(f"decide() returned {type(decision).__name__}, not a Decision",
                              where=where)
    grants = decision.grants
    # (C-level passes over the grants; anything else goes through the checks below)
    if (set(map(_stage, grants)) <= _NONE and set(map(_machines, grants)) <= _NONE
            and not any(map(_gang, grants))):
        # The common case (one whole-job grant each): ids active and distinct, sane slots.
        if active is None:
            active = set(map(_id, snap.jobs))
        ids = list(map(_job, grants))
        # slot counts checked by C-level passes (their types, then the smallest value), not
        # a Python step per grant: a decision at 1,000 jobs has 1,000 of them
        slots = list(map(_slots, grants))
        counts = set(slots)
        counts.discard(None)
        if len(set(ids)) == len(ids) and all(map(active.__contains__, ids)) and (
                set(map(type, slots)) <= _SLOT_TYPES and (not counts or min(counts) >= 0)):
            _check_rest(decision, active, where)
            return
    jobs = {j.id: j for j in snap.jobs}
    machine_ids: set[str] | None = None
    scopes: dict[str, _Scopes] = {}
    for g in decision.grants:
        job = jobs.get(g.job)
        if job is None:
            raise InvalidDecision(f"grant for job {g.job!r}, which is not active", where=where)
        if g.slots is not None and (not isinstance(g.slots, int) or isinstance(g.slots, bool)
                                    or g.slots < 0):
            raise InvalidDecision(f"grant for job {g.job!r}: slots must be a non-negative int "
                                  f"or None, got {g.slots!r}", where=where)
        if g.gang and g.slots is None:
            raise InvalidDecision(f"gang grant for job {g.job!r} needs a number of slots: how "
                                  "many tasks start together", where=where)
        if g.stage is not None and g.stage not in {s.name for s in job.stages}:
            raise InvalidDecision(f"grant for job {g.job!r} names unknown stage {g.stage!r}",
                                  where=where)
        if g.machines is not None:
            if machine_ids is None:
                machine_ids = {m.id for m in snap.machines}
            unknown = sorted(g.machines - machine_ids)
            if unknown:
                raise InvalidDecision(f"grant for job {g.job!r} names unknown machine "
                                      f"{unknown[0]!r}", where=where)
        held = scopes.get(g.job)
        if held is None:
            held = scopes[g.job] = _Scopes()
        elif held.overlaps(g.stage, g.machines):
            raise InvalidDecision(f"job {g.job!r} has two grants with overlapping scopes",
                                  where=where)
        held.add(g.stage, g.machines)
    _check_rest(decision, set(jobs), where)


def _check_rest(decision: Decision, active: Collection[str], where: str) -> None:
    for item in decision.infeasible:
        if item.job not in active:
            raise InvalidDecision(f"infeasible item names inactive job {item.job!r}",
                                  where=where)
    sl = decision.slot_limit
    if sl is not None and (sl.per_machine < 1 or (sl.reduce_per_machine is not None
                                                   and sl.reduce_per_machine < 1)):
        raise InvalidDecision("slot limits must be >= 1", where=where)
