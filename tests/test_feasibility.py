"""``core.feasibility``: gang packing, and refusing a job that can never run before a run."""

from __future__ import annotations

import itertools
from operator import le

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import ScriptedPolicy, change, make_cluster, run, single_stage_job
from utilon.core import Decision, Grant, Trigger
from utilon.core.feasibility import Unrunnable, check_workload, pack, reach, why_never
from utilon.model import Cluster, Job, Machine, Resources, Stage, Task

vectors = st.lists(st.integers(0, 4).map(float), min_size=2, max_size=2).map(tuple)


def brute_force(demands: list[tuple[float, ...]], free: list[tuple[float, ...]]) -> bool:
    for layout in itertools.product(range(len(free)), repeat=len(demands)):
        used = [[0.0] * len(free[0]) for _ in free]
        for d, i in zip(demands, layout, strict=True):
            used[i] = [u + x for u, x in zip(used[i], d, strict=True)]
        if all(all(map(le, u, f)) for u, f in zip(used, free, strict=True)):
            return True
    return False


@settings(max_examples=300)
@given(st.lists(vectors, min_size=1, max_size=5), st.lists(vectors, min_size=1, max_size=3))
def test_pack_is_exact_on_small_instances(demands: list[tuple[float, ...]],
                                          free: list[tuple[float, ...]]) -> None:
    found = pack(demands, free)
    assert found.complete
    assert (found.placement is not None) == brute_force(demands, free)
    if found.placement is not None:
        used = [[0.0, 0.0] for _ in free]
        for d, i in zip(demands, found.placement, strict=True):
            used[i] = [u + x for u, x in zip(used[i], d, strict=True)]
        assert all(all(map(le, u, f)) for u, f in zip(used, free, strict=True))


def test_pack_keeps_plain_first_fit_when_it_works_and_falls_back_to_larger_first() -> None:
    assert pack([(2.0,), (3.0,)], [(3.0,), (3.0,)]).placement == [0, 1]  # first fit as given
    # first fit in the given order puts 2 on the 3-slot machine and has no room left for 3
    assert pack([(2.0,), (3.0,)], [(3.0,), (2.0,)]).placement == [1, 0]


def test_pack_respects_eligibility_and_reports_an_unfinished_search() -> None:
    found = pack([(1.0,)] * 2, [(2.0,), (2.0,)], eligible=lambda k, i: i == 1)
    assert found.placement == [1, 1]
    assert pack([(1.0,)] * 3, [(2.0,), (2.0,)], eligible=lambda k, i: i == 1).placement is None
    # enough room in total, no layout: the search proves it, unless its budget runs out
    assert pack([(2.0,)] * 3, [(3.0,), (3.0,), (1.0,)]) == (None, True)
    assert pack([(2.0,)] * 3, [(3.0,), (3.0,), (1.0,)], budget=1) == (None, False)


def test_dispatcher_starts_a_gang_that_plain_first_fit_cannot_place() -> None:
    cl = Cluster((Machine("a", Resources(cpu=3)), Machine("b", Resources(cpu=2))))
    stage = Stage("s", (Task(5, Resources(cpu=2)), Task(5, Resources(cpu=3))), gang=True)
    res = run(cl, [Job("j", 0.0, (stage,))], "fifo")
    assert res.core.jobs["j"].finish == 5.0
    assert {a.task.index: a.machine for a in res.core.attempts} == {0: "b", 1: "a"}


def test_why_never_names_the_stage_the_task_and_the_largest_machine() -> None:
    cl = make_cluster(2, slots=2)
    job = single_stage_job("big", [(1.0, Resources(slots=1))] * 2 + [(1.0, Resources(slots=3))])
    why = why_never(job, cl)
    assert why.startswith("stage 's': task 2 demands {slots: 3}")
    assert "the largest is {" in why and "slots: 2" in why


def test_a_gang_is_refused_only_when_no_layout_exists() -> None:
    cl = make_cluster(2, slots=2, cpu=4, mem=16)
    fits = single_stage_job("ok", [(1.0, Resources(slots=1))] * 4, gang=True)
    wide = single_stage_job("wide", [(1.0, Resources(slots=1))] * 5, gang=True)
    assert why_never(fits, cl) == ""
    assert "gang stage 's' needs its 5 tasks at once" in why_never(wide, cl)


def test_machines_count_only_if_up_at_or_after_the_submission() -> None:
    cl = make_cluster(2, slots=1, capacities=[dict(slots=1), dict(slots=4)],
                      timeline=[change(10, "m1", "leave"), change(30, "m1", "join"),
                                change(50, "m1", "leave")])
    assert [c[0] for c in reach(cl, ("slots",), 5)] == pytest.approx([1, 4])
    assert [c[0] for c in reach(cl, ("slots",), 20)] == pytest.approx([1, 4])  # rejoins at 30
    assert [c[0] for c in reach(cl, ("slots",), 50)] == pytest.approx([1])  # gone before it
    wide = Stage("s", (Task(1, Resources(slots=4)),))
    assert why_never(Job("early", 40.0, (wide,)), cl) == ""
    assert "task 0 demands {slots: 4}" in why_never(Job("late", 60.0, (wide,)), cl)


def test_scale_changes_give_the_largest_capacity_from_the_submission_on() -> None:
    cl = make_cluster(1, slots=2, timeline=[change(0, "m0", "scale", 0.5),
                                            change(100, "m0", "scale", 2.0)])
    assert reach(cl, ("cpu", "mem", "slots"), 10)[0][2] == pytest.approx(4.0)
    shrunk = make_cluster(1, slots=2, timeline=[change(0, "m0", "scale", 0.5)])
    assert reach(shrunk, ("cpu", "mem", "slots"), 10)[0][2] == pytest.approx(1.0)


def test_check_workload_reports_the_first_job_and_counts_the_rest() -> None:
    cl = make_cluster(1, slots=1)
    jobs = [single_stage_job(f"j{i}", [(1.0, Resources(slots=2))]) for i in range(3)]
    with pytest.raises(Unrunnable) as ei:
        check_workload(cl, jobs, where="w.yaml: workload")
    line = ei.value.one_line()
    assert line.startswith("w.yaml: workload: job j0: stage 's'")
    assert "(and 2 more job(s) that can never run)" in line and "(fix: " in line


def test_a_tick_driven_policy_stops_at_once_when_nothing_can_ever_start() -> None:
    """The only machine that fits the job leaves for good: a tick-driven policy used to tick
    1,000 times before giving up; now the run stops at the next tick."""
    cl = make_cluster(2, slots=1, capacities=[dict(slots=1), dict(slots=2)],
                      timeline=[change(1, "m1", "leave")])
    job = single_stage_job("j", [(10.0, Resources(slots=2))])
    pol = ScriptedPolicy(lambda snap: Decision(tuple(Grant(j.id) for j in snap.jobs)),
                         triggers={Trigger.ARRIVAL, Trigger.TICK}, tick=5.0)
    res = run(cl, [job], pol)
    assert res.stopped_early == "no task can run and nothing will change"
    assert len(pol.calls) <= 3 and res.core.jobs["j"].finish is None


def test_the_first_task_that_fits_nowhere_is_named_among_shared_and_own_demands() -> None:
    """Tasks share demand objects (one vector each) or bring their own equal ones; the reason
    names the first task, in order, whose demand fits no machine."""
    from utilon.core.feasibility import demand_vectors

    cluster = make_cluster(2, slots=4, cpu=4, mem=8)
    small, big = Resources(slots=1, cpu=1, mem=2), Resources(slots=1, cpu=1, mem=64)
    tasks = (Task(1.0, small), Task(1.0, small), Task(1.0, Resources(slots=1, cpu=1, mem=64)),
             Task(1.0, big), Task(1.0, small), Task(1.0, big))
    job = Job("j", 0.0, (Stage("s", tasks),))
    assert "task 2 demands" in why_never(job, cluster)
    names = cluster.resource_names
    vecs = demand_vectors(job.stages[0], names)
    assert vecs == [t.demand.vector(names) for t in tasks]
    assert vecs[0] is vecs[1] is vecs[4] and vecs[3] is vecs[5] and vecs[2] is not vecs[3]
    shared = Stage("t", tuple(Task(1.0, small) for _ in range(5)))
    one = demand_vectors(shared, names)
    assert one == [small.vector(names)] * 5 and all(v is one[0] for v in one)
    assert why_never(Job("k", 0.0, (shared,)), cluster) == ""
