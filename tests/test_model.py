"""Domain-model validation: tasks, stages, jobs, machines, clusters and lifecycle tables."""

from __future__ import annotations

import math

import pytest

from builders import change, make_cluster
from utilon.errors import IllegalTransition, ModelError, UtilonError
from utilon.model import (
    CapacityAction,
    CapacityChange,
    Cluster,
    Constant,
    Job,
    JobState,
    Machine,
    MachineState,
    Resources,
    Stage,
    Task,
    TaskState,
    UsagePhase,
    mapreduce_job,
)
from utilon.model.lifecycle import JOB_MOVES, MACHINE_MOVES, TASK_MOVES, check_move

ONE = Resources(slots=1)


def stage(name: str, n: int = 1, after: tuple[str, ...] = ()) -> Stage:
    return Stage(name, tuple(Task(1.0, ONE) for _ in range(n)), after=after)


# ------------------------------------------------------------------------------ tasks
@pytest.mark.parametrize("dur", [0, -1, math.nan, math.inf, -math.inf])
def test_bad_task_duration(dur: float) -> None:
    with pytest.raises(ModelError, match="task duration must be a positive number"):
        Task(dur, ONE)


def test_negative_demand_rejected() -> None:
    with pytest.raises(ModelError, match="demand must be non-negative"):
        Task(1, Resources(cpu=-1))


def test_usage_phases() -> None:
    t = Task(10, Resources(cpu=2))
    (only,) = t.usage_phases()
    assert only.fraction == 1.0 and only.usage == Resources(cpu=2)
    phased = Task(10, Resources(cpu=2), (UsagePhase(0.25, Resources(cpu=1), "a"),
                                          UsagePhase(0.75, Resources(cpu=3), "b")))
    assert [p.name for p in phased.usage_phases()] == ["a", "b"]
    with pytest.raises(ModelError, match=r"fractions sum to 0\.5, not 1"):
        Task(10, ONE, (UsagePhase(0.5, ONE),))


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5])
def test_usage_phase_fraction_range(fraction: float) -> None:
    with pytest.raises(ModelError, match=r"not in \(0, 1\]"):
        UsagePhase(fraction, ONE, "x")


def test_usage_phase_negative_usage() -> None:
    with pytest.raises(ModelError, match="usage must be non-negative"):
        UsagePhase(1.0, Resources(cpu=-1))


# ------------------------------------------------------------------------------ stages, jobs
def test_stage_validation() -> None:
    with pytest.raises(ModelError, match="stage name must not be empty"):
        stage("")
    with pytest.raises(ModelError, match="stage 'x' has no tasks"):
        Stage("x", ())
    for bad in (0, -1, math.inf, math.nan):
        with pytest.raises(ModelError, match="estimate must be a positive number"):
            Stage("x", (Task(1, ONE),), estimate=bad)


def test_stage_expected_duration_and_work() -> None:
    s = Stage("s", (Task(2, ONE), Task(4, ONE)))
    assert s.expected_duration == 3
    assert s.work == 6
    assert Stage("s", (Task(2, ONE),), estimate=7).expected_duration == 7


def test_duplicate_stage_names() -> None:
    with pytest.raises(ModelError, match="job j: stage name 'map' used twice"):
        Job("j", 0, (stage("map"), stage("map")))


def test_unknown_or_later_after() -> None:
    with pytest.raises(ModelError, match="waits for 'nope', which is not a stage listed before"):
        Job("j", 0, (stage("map"), stage("reduce", after=("nope",))))
    with pytest.raises(ModelError, match="waits for 'b'"):  # listed after: not a topo order
        Job("j", 0, (stage("a", after=("b",)), stage("b")))
    with pytest.raises(ModelError, match="waits for 'a'"):  # itself
        Job("j", 0, (stage("a", after=("a",)),))


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"id": ""}, "job id must not be empty"),
        ({"submit": -1.0}, "submit time must be >= 0"),
        ({"submit": math.inf}, "submit time must be >= 0"),
        ({"weight": 0.0}, "weight must be > 0"),
        ({"weight": math.nan}, "weight must be > 0"),
        ({"stages": ()}, "has no stages"),
    ],
)
def test_job_validation(kw: dict, match: str) -> None:
    args = {"id": "j", "submit": 0.0, "stages": (stage("s"),)}
    args.update(kw)
    with pytest.raises(ModelError, match=match):
        Job(**args)


def test_job_helpers() -> None:
    j = Job("j", 0, (stage("a", 2), stage("b", 3, after=("a",)), stage("c", after=("a", "b"))))
    assert j.n_tasks == 6
    assert j.stage_index("b") == 1
    with pytest.raises(ModelError, match="job j has no stage 'zz'"):
        j.stage_index("zz")
    assert isinstance(j.utility, Constant)


def test_mapreduce_job_builder() -> None:
    j = mapreduce_job("mr", submit=3, maps=4, map_duration=10, reduces=2, reduce_duration=5,
                      demand=Resources(cpu=1), reduce_demand=Resources(cpu=2))
    assert [s.name for s in j.stages] == ["map", "reduce"]
    assert [s.kind for s in j.stages] == ["map", "reduce"]
    assert j.stages[1].after == ("map",)
    assert len(j.stages[0].tasks) == 4 and len(j.stages[1].tasks) == 2
    assert j.stages[0].tasks[0].demand == Resources(cpu=1)
    assert j.stages[1].tasks[0].demand == Resources(cpu=2)
    assert j.stages[1].tasks[0].duration == 5
    assert j.submit == 3
    only_maps = mapreduce_job("m", maps=1, map_duration=1)
    assert len(only_maps.stages) == 1
    assert only_maps.stages[0].tasks[0].demand == Resources(slots=1)


# ------------------------------------------------------------------------------ machines, cluster
def test_machine_validation() -> None:
    with pytest.raises(ModelError, match="machine id must not be empty"):
        Machine("", ONE)
    with pytest.raises(ModelError, match="machine m: capacity must be a non-empty"):
        Machine("m", Resources())
    with pytest.raises(ModelError, match="machine m: capacity must be a non-empty"):
        Machine("m", Resources(cpu=-1))
    with pytest.raises(ModelError, match="price must be >= 0"):
        Machine("m", ONE, price=-1)
    m = Machine("m", ONE, (("zone", "b"), ("rack", 2)))
    assert m.attributes == (("rack", 2), ("zone", "b"))
    assert m.attr("zone") == "b"
    assert m.attr("gpu", False) is False


def test_duplicate_machine_ids() -> None:
    with pytest.raises(ModelError, match="machine id 'a' is used twice"):
        Cluster((Machine("a", ONE), Machine("b", ONE), Machine("a", ONE)))


def test_empty_cluster() -> None:
    with pytest.raises(ModelError, match="at least one machine"):
        Cluster(())


def test_unknown_machine_in_timeline() -> None:
    with pytest.raises(ModelError, match="capacity change at t=5 names unknown machine 'zz'"):
        Cluster((Machine("a", ONE),), (CapacityChange(5, "zz", CapacityAction.LEAVE),))
    with pytest.raises(ModelError, match="initially_down names unknown machine 'zz'"):
        Cluster((Machine("a", ONE),), initially_down=frozenset({"zz"}))


@pytest.mark.parametrize(("time", "factor"), [(-1, 1), (math.inf, 1), (0, -0.5), (0, math.nan)])
def test_capacity_change_validation(time: float, factor: float) -> None:
    with pytest.raises(ModelError, match="must be >= 0"):
        CapacityChange(time, "a", CapacityAction.SCALE, factor)


def test_timeline_is_sorted_stably() -> None:
    cl = make_cluster(2, timeline=[change(5, "m0", "leave"), change(1, "m1", "speed", 2),
                                   change(5, "m0", "join"), change(0, "m1", "scale", 0.5)])
    assert [(c.time, c.machine, c.action.value) for c in cl.timeline] == [
        (0, "m1", "scale"), (1, "m1", "speed"), (5, "m0", "leave"), (5, "m0", "join")]


def test_cluster_resource_names_and_slot_resource() -> None:
    assert make_cluster(1).resource_names == ("cpu", "mem", "slots")
    assert make_cluster(1).slot_resource == "slots"
    cpu_only = Cluster((Machine("a", Resources(cpu=2, mem=4)), Machine("b", Resources(gpu=1))))
    assert cpu_only.resource_names == ("cpu", "gpu", "mem")
    assert cpu_only.slot_resource == "cpu"
    assert Cluster((Machine("a", Resources(mem=4, disk=1)),)).slot_resource == "disk"
    cl = make_cluster(3)
    assert cl.machine("m1").id == "m1"
    with pytest.raises(ModelError, match="no machine 'zz'"):
        cl.machine("zz")
    assert [m.id for m in cl.select(["m2", "m0", "zz"])] == ["m0", "m2"]


def test_make_cluster_builder_attributes() -> None:
    cl = make_cluster(2, slots=2, cpu=8, mem=32, zone="a")
    assert all(m.attr("zone") == "a" for m in cl.machines)
    assert cl.machines[0].capacity == Resources(slots=2, cpu=8, mem=32)


# ------------------------------------------------------------------------------ lifecycles
def test_legal_moves_pass() -> None:
    for table in (TASK_MOVES, JOB_MOVES, MACHINE_MOVES):
        for old, new in table:
            check_move("x", old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (TaskState.WAITING, TaskState.RUNNING),
        (TaskState.READY, TaskState.DONE),
        (TaskState.DONE, TaskState.READY),
        (TaskState.DONE, TaskState.RUNNING),
        (TaskState.RUNNING, TaskState.WAITING),
        (TaskState.READY, TaskState.READY),
        (JobState.DONE, JobState.RUNNING),
        (JobState.QUEUED, JobState.DONE),
        (JobState.RUNNING, JobState.QUEUED),
        (MachineState.UP, MachineState.UP),
        (MachineState.DOWN, MachineState.DOWN),
    ],
)
def test_illegal_moves_raise(old, new) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IllegalTransition, match=f"task 7: illegal move {old.name} -> {new.name}"):
        check_move("task 7", old, new)


def test_error_hierarchy_and_one_line() -> None:
    assert issubclass(IllegalTransition, UtilonError)
    assert issubclass(ModelError, UtilonError)
    e = UtilonError("bad  value\n here", where="a.yaml: jobs[0]", fix="use 1")
    assert e.one_line() == "a.yaml: jobs[0]: bad value here (fix: use 1)"
    assert str(e) == e.one_line()
    assert e.message == "bad  value\n here"
