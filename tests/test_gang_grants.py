"""Gang grants (alsched's nCk): the tasks a grant allows start at one instant, or none do."""

from __future__ import annotations

import pytest

from builders import ScriptedPolicy, make_cluster, single_stage_job
from utilon.core import Decision, Grant, JobSubmitted, Launch, TaskFinished, TaskRef
from utilon.core.scheduler import SchedulerCore
from utilon.errors import InvalidDecision
from utilon.model import Resources

CPU1 = Resources(cpu=1)


def gang(slots: int | None) -> ScriptedPolicy:
    return ScriptedPolicy(lambda s: Decision(grants=tuple(
        Grant(j.id, slots=slots, gang=True) for j in s.jobs)))


def core_for(cpus: list[float], policy: ScriptedPolicy) -> SchedulerCore:
    cl = make_cluster(capacities=[{"cpu": c} for c in cpus])
    return SchedulerCore(cl, policy, validate=True)


def launched(cmds: list) -> list[str]:
    return sorted(c.machine for c in cmds if isinstance(c, Launch))


def test_gang_grant_starts_all_allowed_tasks_together_across_machines() -> None:
    core = core_for([2, 2], gang(4))
    cmds = core.handle(0, [JobSubmitted(single_stage_job("j", [(10, CPU1)] * 6))])
    assert launched(cmds) == ["m0", "m0", "m1", "m1"]


def test_gang_grant_waits_until_all_fit() -> None:
    # One cpu is taken by another job's long task: 3 of the 4 gang tasks would fit, so none
    # may start until the blocker finishes.
    policy = ScriptedPolicy(lambda s: Decision(grants=tuple(
        Grant(j.id, slots=4, gang=True) if j.id == "g" else Grant(j.id) for j in s.jobs)))
    core = core_for([2, 2], policy)
    cmds = core.handle(0, [JobSubmitted(single_stage_job("blocker", [(50, CPU1)]))])
    assert launched(cmds) == ["m0"]
    cmds = core.handle(1, [JobSubmitted(single_stage_job("g", [(10, CPU1)] * 4))])
    assert launched(cmds) == []
    cmds = core.handle(50, [TaskFinished(TaskRef("blocker", 0, 0))])
    assert launched(cmds) == ["m0", "m0", "m1", "m1"]


def test_gang_grant_is_not_backfilled_beyond_its_slots() -> None:
    policy = ScriptedPolicy(lambda s: Decision(
        grants=tuple(Grant(j.id, slots=2, gang=True) for j in s.jobs), backfill=True))
    core = core_for([4], policy)
    cmds = core.handle(0, [JobSubmitted(single_stage_job("j", [(10, CPU1)] * 4))])
    assert launched(cmds) == ["m0", "m0"]


def test_gang_grant_without_slots_is_invalid() -> None:
    core = core_for([2], gang(None))
    with pytest.raises(InvalidDecision, match="gang grant"):
        core.handle(0, [JobSubmitted(single_stage_job("j", [(10, CPU1)] * 2))])


def test_gang_grant_to_dict() -> None:
    assert Grant("j", slots=3, gang=True).to_dict() == {"job": "j", "slots": 3, "gang": True}
