"""SchedulerCore driven directly with stimuli: commands, bookkeeping and the decision contract.

Every step calls ``core.check_invariants()`` (the core's own cross-check of its counters) and
``assert_within_capacity`` (the declared capacity of every machine, recomputed here).
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from builders import ScriptedPolicy as Scripted
from builders import change, make_cluster, make_job, single_stage_job
from utilon.core import (
    CapacityChanged,
    ClusterSnapshot,
    Decision,
    Grant,
    Infeasible,
    JobSubmitted,
    Launch,
    Preempt,
    SlotLimit,
    TaskFailed,
    TaskFinished,
    TaskRef,
    Tick,
    Trigger,
)
from utilon.core.scheduler import SchedulerCore
from utilon.errors import IllegalTransition, InvalidDecision
from utilon.model import Cluster, Job, JobState, Resources, Stage, Task
from utilon.policies import Policy

CPU1 = Resources(cpu=1)
SLOT = Resources(slots=1)

class Limit(Policy):
    """Grants every job ``slots`` (mutable between steps), optionally with kill_excess."""

    name = "test-limit"
    summary = "grant every job a fixed number of slots"

    def __init__(self, slots: int | None, kill: bool = False, backfill: bool = False,
                 triggers: Iterable[Trigger] | None = None) -> None:
        self.slots = slots
        self.kill = kill
        self.backfill = backfill
        if triggers is not None:
            self.triggers = frozenset(triggers)  # type: ignore[misc]

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        return Decision(grants=tuple(Grant(j.id, slots=self.slots, kill_excess=self.kill)
                                     for j in snapshot.jobs), backfill=self.backfill)


def assert_within_capacity(core: SchedulerCore) -> None:
    names = core.names
    for m in core.machines:
        used = [0.0] * len(names)
        for ref in core.tasks_on(m.index):
            job = core.jobs[ref[0]].job
            v = job.stages[ref[1]].tasks[ref[2]].demand.vector(names)
            used = [u + x for u, x in zip(used, v, strict=True)]
        for n, u, c in zip(names, used, m.cap, strict=True):
            assert u <= c + 1e-9, f"{m.id}: {n} {u} > {c}"


def step(core: SchedulerCore, now: float, *stimuli: object, check_capacity: bool = True
         ) -> list:
    cmds = core.handle(now, list(stimuli))  # type: ignore[arg-type]
    core.check_invariants()
    if check_capacity and core.decision.slot_limit is None:
        assert_within_capacity(core)
    return cmds


def new_core(cluster: Cluster, policy: Policy | None = None, **kw: object) -> SchedulerCore:
    return SchedulerCore(cluster, policy or Scripted(), validate=True, **kw)  # type: ignore


def cpu_cluster(*cpus: float, down: Iterable[str] = ()) -> Cluster:
    return make_cluster(capacities=[{"cpu": c} for c in cpus], initially_down=down)


def launches(cmds: list) -> list[Launch]:
    return [c for c in cmds if isinstance(c, Launch)]


def preempts(cmds: list) -> list[Preempt]:
    return [c for c in cmds if isinstance(c, Preempt)]


def finish(ref: TaskRef) -> TaskFinished:
    return TaskFinished(ref)


def running(core: SchedulerCore, job: str) -> list[TaskRef]:
    return [TaskRef(*r) for r in core.jobs[job].running]


# ------------------------------------------------------------------------------ capacity
def test_launches_never_exceed_declared_capacity() -> None:
    cl = make_cluster(capacities=[{"cpu": 4, "mem": 8}, {"cpu": 8, "mem": 4}])
    job = single_stage_job("j", [(10, Resources(cpu=3, mem=3))] * 10)
    core = new_core(cl)
    cmds = step(core, 0, JobSubmitted(job))
    # m0: cpu allows 1 (3 <= 4), mem allows 2 -> 1 ; m1: cpu allows 2, mem allows 1 -> 1
    assert sorted(c.machine for c in launches(cmds)) == ["m0", "m1"]
    assert core.stats.launched == 2
    # finishing one frees exactly one place on its machine
    first = launches(cmds)[0]
    cmds = step(core, 5, finish(first.task))
    assert [c.machine for c in launches(cmds)] == [first.machine]


def test_launch_commands_name_task_and_machine() -> None:
    core = new_core(cpu_cluster(2))
    cmds = step(core, 0, JobSubmitted(single_stage_job("j", [(1, CPU1)] * 3)))
    assert cmds == [Launch(TaskRef("j", 0, 0), "m0"), Launch(TaskRef("j", 0, 1), "m0")]
    assert core.jobs["j"].state is JobState.RUNNING
    assert core.jobs["j"].start == 0


def random_cluster_and_job(caps: list[tuple[int, int]], tasks: list[tuple[int, int]]
                           ) -> tuple[Cluster, Job]:
    """Machines with the given (cpu, mem), and a two-stage job whose every task fits the
    biggest machine (demands are clipped to it)."""
    cluster = make_cluster(capacities=[{"cpu": c, "mem": m} for c, m in caps])
    big_c = max(c for c, _ in caps)
    big_m = max(m for c, m in caps if c == big_c)
    demands = [Resources(cpu=min(c, big_c), mem=min(m, big_m)) for c, m in tasks]
    job = Job("j", 0, (Stage("s", tuple(Task(1, d) for d in demands)),
                       Stage("t", (Task(1, demands[0]),), after=("s",))))
    return cluster, job


@given(
    caps=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6)), min_size=1, max_size=3),
    tasks=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=12),
    order=st.randoms(use_true_random=False),
)
def test_random_finish_orders_keep_capacity_and_finish_everything(caps, tasks, order) -> None:
    cluster, job = random_cluster_and_job(caps, tasks)
    core = new_core(cluster)
    step(core, 0, JobSubmitted(job))
    now = 0.0
    for _ in range(100):
        refs = running(core, "j")
        if not refs:
            break
        now += 1
        step(core, now, finish(order.choice(refs)))
    assert core.jobs["j"].state is JobState.DONE
    assert core.stats.completed == len(tasks) + 1


ops = st.lists(
    st.tuples(st.sampled_from(["finish", "finish", "fail", "scale", "toggle"]),
              st.integers(0, 100), st.sampled_from([0.5, 1.0, 1.5])),
    max_size=40)


@given(
    caps=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6)), min_size=1, max_size=3),
    tasks=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=10),
    script=ops,
)
def test_random_capacity_changes_and_failures_keep_the_books(caps, tasks, script) -> None:
    """Interleave completions, failures, SCALE and LEAVE/JOIN at random: the core's counters
    stay consistent, launches respect the (scaled) capacity, and once the cluster is restored
    every task completes."""
    cluster, job = random_cluster_and_job(caps, tasks)
    core = new_core(cluster)
    step(core, 0, JobSubmitted(job))
    now = 0.0

    def check_new_launches(cmds: list) -> None:
        # a machine over-committed by a SCALE gets no new task until it is back under capacity
        for c in launches(cmds):
            (m,) = [x for x in core.machines if x.id == c.machine]
            assert all(u <= cap + 1e-9 for u, cap in zip(m.used, m.cap, strict=True))

    for op, n, factor in script:
        now += 1
        refs = running(core, "j")
        if op in ("finish", "fail") and refs:
            ref = refs[n % len(refs)]
            stim = finish(ref) if op == "finish" else TaskFailed(ref)
            cmds = step(core, now, stim, check_capacity=False)
        elif op == "scale":
            m = cluster.machines[n % len(cluster.machines)]
            cmds = step(core, now, CapacityChanged(change(now, m.id, "scale", factor)),
                        check_capacity=False)
        elif op == "toggle" and len(cluster.machines) > 1:
            m = core.machines[1 + n % (len(cluster.machines) - 1)]
            action = "leave" if m.state.name == "UP" else "join"
            cmds = step(core, now, CapacityChanged(change(now, m.id, action)),
                        check_capacity=False)
        else:
            continue
        check_new_launches(cmds)
    for m in core.machines:  # restore the cluster
        now += 1
        step(core, now, CapacityChanged(change(now, m.id, "scale", 1.0)), check_capacity=False)
        if m.state.name == "DOWN":
            step(core, now, CapacityChanged(change(now, m.id, "join")), check_capacity=False)
    for _ in range(200):
        refs = running(core, "j")
        if not refs:
            break
        now += 1
        step(core, now, finish(refs[0]), check_capacity=False)
    assert core.jobs["j"].state is JobState.DONE
    assert core.stats.completed == len(tasks) + 1
    assert_within_capacity(core)


# ------------------------------------------------------------------------------ stages
def test_reduce_waits_for_every_map() -> None:
    core = new_core(make_cluster(1, slots=8))
    job = make_job("j", maps=2, reduces=1)
    cmds = step(core, 0, JobSubmitted(job))
    assert [c.task.stage for c in launches(cmds)] == [0, 0]
    snap = core.snapshot()
    (view,) = snap.jobs
    assert (view.stages[1].waiting, view.stages[1].ready) == (1, 0)
    assert launches(step(core, 3, finish(TaskRef("j", 0, 0)))) == []
    cmds = step(core, 4, finish(TaskRef("j", 0, 1)))
    assert launches(cmds) == [Launch(TaskRef("j", 1, 0), "m0")]
    step(core, 9, finish(TaskRef("j", 1, 0)))
    rt = core.jobs["j"]
    assert rt.state is JobState.DONE and rt.finish == 9
    assert "j" not in core.active


def test_policy_sees_stage_and_job_finished_triggers() -> None:
    pol = Scripted(triggers=Trigger)
    core = new_core(make_cluster(1, slots=8), pol)
    step(core, 0, JobSubmitted(make_job("j", maps=2, reduces=1)))
    step(core, 1, finish(TaskRef("j", 0, 0)))
    step(core, 2, finish(TaskRef("j", 0, 1)))
    other = make_job("k", submit=2.5, maps=1, reduces=0)
    step(core, 2.5, JobSubmitted(other))
    step(core, 3, finish(TaskRef("j", 1, 0)))
    assert [set(s.triggers) for s in pol.calls] == [
        {Trigger.ARRIVAL},
        {Trigger.TASK_FINISHED},
        {Trigger.TASK_FINISHED, Trigger.STAGE_FINISHED},
        {Trigger.ARRIVAL},
        {Trigger.TASK_FINISHED, Trigger.STAGE_FINISHED, Trigger.JOB_FINISHED},
    ]
    assert [s.now for s in pol.calls] == [0, 1, 2, 2.5, 3]


def test_policy_not_called_for_triggers_it_did_not_ask_for() -> None:
    pol = Scripted(triggers={Trigger.ARRIVAL})
    core = new_core(make_cluster(1, slots=1), pol)
    step(core, 0, JobSubmitted(make_job("j", maps=3, reduces=0)))
    cmds = step(core, 1, finish(TaskRef("j", 0, 0)), Tick())
    assert len(pol.calls) == 1
    assert launches(cmds) == [Launch(TaskRef("j", 0, 1), "m0")]  # installed grant still used


def test_no_decision_without_active_jobs() -> None:
    pol = Scripted(triggers=Trigger)
    core = new_core(make_cluster(1), pol)
    assert step(core, 0, Tick()) == []
    assert pol.calls == []


# ------------------------------------------------------------------------------ gangs
def test_gang_stage_launches_all_or_nothing() -> None:
    core = new_core(make_cluster(2, slots=1))
    too_big = make_job("big", maps=3, reduces=0, gang=True)
    assert step(core, 0, JobSubmitted(too_big)) == []
    core2 = new_core(make_cluster(3, slots=1))
    cmds = step(core2, 0, JobSubmitted(make_job("g", maps=3, reduces=0, gang=True)))
    assert sorted(c.machine for c in launches(cmds)) == ["m0", "m1", "m2"]


def test_gang_waits_until_the_whole_gang_fits() -> None:
    core = new_core(make_cluster(2, slots=1))
    step(core, 0, JobSubmitted(make_job("k", maps=1, reduces=0)))
    assert step(core, 1, JobSubmitted(make_job("g", maps=2, reduces=0, gang=True))) == []
    cmds = step(core, 2, finish(TaskRef("k", 0, 0)))
    assert sorted((c.task, c.machine) for c in launches(cmds)) == [
        (TaskRef("g", 0, 0), "m0"), (TaskRef("g", 0, 1), "m1")]


def test_gang_respects_grant_limit() -> None:
    core = new_core(make_cluster(3, slots=1), Limit(slots=2))
    assert step(core, 0, JobSubmitted(make_job("g", maps=3, reduces=0, gang=True))) == []


def test_gang_member_failure_requeues_the_whole_gang() -> None:
    core = new_core(make_cluster(2, slots=1))
    step(core, 0, JobSubmitted(make_job("g", maps=2, reduces=0, gang=True)))
    cmds = step(core, 3, TaskFailed(TaskRef("g", 0, 0), "oom"))
    assert preempts(cmds) == [Preempt(TaskRef("g", 0, 1), "m1", "gang member failed")]
    assert sorted(c.task.index for c in launches(cmds)) == [0, 1]  # relaunched together
    assert [(a.task.index, a.outcome) for a in core.attempts] == [(0, "failed"), (1, "killed")]
    assert core.stats.failed == 1 and core.stats.killed == 1


def test_gang_member_lost_with_its_machine_requeues_the_whole_gang() -> None:
    """Like a failure, losing one gang member must bring its siblings back: a gang runs whole
    or not at all.  (src bug: ``_on_capacity`` LEAVE re-queues only the lost members; the
    siblings keep running and the lost member is later launched alone.)"""
    core = new_core(make_cluster(3, slots=1))
    step(core, 0, JobSubmitted(make_job("g", maps=2, reduces=0, gang=True)))
    assert sorted(core.jobs["g"].running) == [("g", 0, 0), ("g", 0, 1)]
    cmds = step(core, 5, CapacityChanged(change(5, "m1", "leave")))
    outcomes = sorted((a.task.index, a.outcome) for a in core.attempts)
    assert outcomes == [(0, "killed"), (1, "lost")], outcomes
    assert [(c.task, c.machine) for c in preempts(cmds)] == [(TaskRef("g", 0, 0), "m0")]
    assert sorted(c.machine for c in launches(cmds)) == ["m0", "m2"]


def test_gang_launches_when_enough_machines_are_free() -> None:
    """A gang must launch as soon as the free machines can hold it, even if only one of them
    was freed by the latest completion.  (src bug: a TASK_FINISHED-only step dispatches on the
    touched machines only, so the gang is tried on m0 alone although m0 and m2 are free.)"""
    core = new_core(make_cluster(3, slots=1))
    step(core, 0, JobSubmitted(make_job("k", maps=2, reduces=0)))  # m0, m1
    assert step(core, 1, JobSubmitted(make_job("g", maps=2, reduces=0, gang=True))) == []
    cmds = step(core, 2, finish(TaskRef("k", 0, 0)))  # frees m0; m2 is idle all along
    assert sorted(c.machine for c in launches(cmds)) == ["m0", "m2"]


# ------------------------------------------------------------------------------ grants
def test_grant_slots_limit_concurrency() -> None:
    core = new_core(make_cluster(1, slots=10), Limit(slots=2))
    cmds = step(core, 0, JobSubmitted(make_job("j", maps=6, reduces=0)))
    assert len(launches(cmds)) == 2
    cmds = step(core, 1, finish(launches(cmds)[0].task))
    assert len(launches(cmds)) == 1
    assert len(core.jobs["j"].running) == 2


def test_zero_slot_grant_launches_nothing() -> None:
    core = new_core(make_cluster(1), Limit(slots=0))
    assert step(core, 0, JobSubmitted(make_job("j"))) == []


def test_limited_grant_uses_any_machine_once_below_its_limit() -> None:
    """A grant that drops below its limit must be offered every machine with room, not only
    the one where its task just finished.  (src bug: ``handle`` dispatches a TASK_FINISHED-only
    step on the touched machines; here the ready cpu=4 task fits only on the idle m1, so the job
    is never finished and a simulation stops with 'no task can run'.)"""
    core = new_core(cpu_cluster(1, 4), Limit(slots=1))
    job = single_stage_job("j", [(5, Resources(cpu=1)), (5, Resources(cpu=4))])
    cmds = step(core, 0, JobSubmitted(job))
    assert launches(cmds) == [Launch(TaskRef("j", 0, 0), "m0")]
    cmds = step(core, 5, finish(TaskRef("j", 0, 0)))
    assert launches(cmds) == [Launch(TaskRef("j", 0, 1), "m1")]


def test_grants_are_served_in_order() -> None:
    def second_first(snap: ClusterSnapshot) -> Decision:
        return Decision(grants=tuple(Grant(j.id) for j in reversed(snap.jobs)))

    core = new_core(make_cluster(1, slots=2), Scripted(second_first))
    a, b = make_job("a", maps=3, reduces=0), make_job("b", maps=3, reduces=0)
    cmds = step(core, 0, JobSubmitted(a), JobSubmitted(b))
    assert {c.task.job for c in launches(cmds)} == {"b"}
    cmds = step(core, 1, finish(TaskRef("b", 0, 0)))
    assert [c.task.job for c in launches(cmds)] == ["b"]


def test_ungranted_jobs_get_nothing() -> None:
    core = new_core(make_cluster(1),
                    Scripted(lambda s: Decision(grants=(Grant(s.jobs[0].id),))))
    cmds = step(core, 0, JobSubmitted(make_job("a", maps=1, reduces=0)),
                JobSubmitted(make_job("b", maps=1, reduces=0)))
    assert [c.task.job for c in launches(cmds)] == ["a"]


def test_backfill_offers_leftovers_beyond_grant_limits() -> None:
    core = new_core(make_cluster(1, slots=5, cpu=5), Limit(slots=1, backfill=True))
    cmds = step(core, 0, JobSubmitted(make_job("a", maps=4, reduces=0)),
                JobSubmitted(make_job("b", maps=4, reduces=0)))
    # first pass: one each (a, b); backfill pass in grant order: a takes the rest it can
    assert [c.task.job for c in launches(cmds)] == ["a", "b", "a", "a", "a"]


def test_stage_and_machine_scoped_grants() -> None:
    def scoped(snap: ClusterSnapshot) -> Decision:
        return Decision(grants=(Grant("j", stage="map", machines=frozenset({"m1"})),))

    core = new_core(make_cluster(3, slots=2), Scripted(scoped))
    cmds = step(core, 0, JobSubmitted(make_job("j", maps=4, reduces=1)))
    assert [(c.task.stage, c.machine) for c in launches(cmds)] == [(0, "m1"), (0, "m1")]


def test_non_overlapping_scopes_are_accepted() -> None:
    def split(snap: ClusterSnapshot) -> Decision:
        return Decision(grants=(
            Grant("j", slots=1, stage="map", machines=frozenset({"m0"})),
            Grant("j", slots=1, stage="map", machines=frozenset({"m1"})),
            Grant("j", stage="reduce"),
        ))

    core = new_core(make_cluster(2, slots=4), Scripted(split))
    cmds = step(core, 0, JobSubmitted(make_job("j", maps=4, reduces=1)))
    assert sorted(c.machine for c in launches(cmds)) == ["m0", "m1"]


@given(st.lists(st.tuples(st.integers(0, 3),  # the group of the machine (3: no grant)
                          st.sampled_from([None, "map", "reduce"])), min_size=5, max_size=5),
       st.booleans())
@example([(0, "reduce")] * 5, False)  # one grant wider than the job's (stage, machine) pairs
@example([(0, None)] * 5, False)
def test_installed_scoped_grants_count_the_running_tasks_they_cover(
        groups: list[tuple[int, str | None]], by_stage: bool) -> None:
    """A scoped grant installed while its job runs tasks starts with the count of those it
    covers (``GrantState.covers``), however the job's grants split stages and machines."""
    def second(snap: ClusterSnapshot) -> Decision:
        if by_stage:  # one grant per stage, every machine
            return Decision(grants=(Grant("j", stage="map"), Grant("j", stage="reduce")))
        masks: dict[int, set[str]] = {}
        stages: dict[int, str | None] = {}
        for i, (group, stage) in enumerate(groups):
            if group < 3:
                masks.setdefault(group, set()).add(f"m{i}")
                stages.setdefault(group, stage)
        return Decision(grants=tuple(Grant("j", stage=stages[k], machines=frozenset(v))
                                     for k, v in sorted(masks.items())))

    pol = Scripted(lambda s: Decision(grants=(Grant("j"),)) if len(pol.calls) == 1
                   else second(s), triggers={Trigger.ARRIVAL, Trigger.TICK})
    one = Resources(slots=1, cpu=1, mem=1)
    two_stages = Job("j", 0.0, tuple(Stage(name, tuple(Task(10, one) for _ in range(4)))
                                      for name in ("map", "reduce")))  # independent stages
    core = new_core(make_cluster(5, slots=3), pol)  # (m4 idle: masks wider than the pairs)
    step(core, 0, JobSubmitted(two_stages), JobSubmitted(make_job("k", maps=3, reduces=0)))
    step(core, 1, Tick())
    job = core.jobs["j"]
    # the first decision's tasks run on under the second's grants, both stages on one machine
    assert len(job.running) == 8
    assert any(len({ref[1] for ref, run in job.running.items() if run.machine == mi}) == 2
               for mi in range(5))
    for gs in job.gstates:
        assert gs.running == sum(1 for ref, run in job.running.items()
                                 if gs.covers(ref[1], run.machine))


def test_shrinking_a_grant_does_not_kill() -> None:
    pol = Limit(slots=4, triggers={Trigger.ARRIVAL, Trigger.TICK})
    core = new_core(make_cluster(1, slots=8), pol)
    cmds = step(core, 0, JobSubmitted(make_job("j", maps=8, reduces=0)))
    assert len(launches(cmds)) == 4
    pol.slots = 1
    assert step(core, 1, Tick()) == []  # no Preempt: running tasks are left alone
    assert len(core.jobs["j"].running) == 4
    for i, t in enumerate((2, 3, 4)):
        cmds = step(core, t, finish(TaskRef("j", 0, i)))
        assert cmds == []  # still at or above the grant
    cmds = step(core, 5, finish(TaskRef("j", 0, 3)))
    assert len(launches(cmds)) == 1
    assert not [a for a in core.attempts if a.outcome != "done"]


def test_kill_excess_preempts_most_recent_and_requeues() -> None:
    pol = Limit(slots=2, triggers={Trigger.ARRIVAL, Trigger.TICK})
    core = new_core(make_cluster(1, slots=8), pol)
    first = launches(step(core, 0, JobSubmitted(make_job("j", maps=6, reduces=0))))
    pol.slots = 4
    second = launches(step(core, 1, Tick()))
    assert [c.task.index for c in first] == [0, 1]
    assert [c.task.index for c in second] == [2, 3]
    pol.slots, pol.kill = 1, True
    cmds = step(core, 2, Tick())
    assert [(c.task.index, c.reason) for c in preempts(cmds)] == [
        (3, "preempted"), (2, "preempted"), (1, "preempted")]
    assert launches(cmds) == []
    assert running(core, "j") == [TaskRef("j", 0, 0)]
    killed = [a for a in core.attempts if a.outcome == "killed"]
    assert sorted((a.task.index, a.start, a.end) for a in killed) == [
        (1, 0, 2), (2, 1, 2), (3, 1, 2)]
    assert core.stats.killed == 3
    (view,) = core.snapshot().jobs
    assert (view.stages[0].ready, view.stages[0].running) == (5, 1)
    # a killed task is re-queued at the head: it runs again first
    cmds = step(core, 3, finish(TaskRef("j", 0, 0)))
    assert [c.task.index for c in launches(cmds)] == [1]


# ------------------------------------------------------------------------------ failures
def test_task_failure_requeues_and_retries() -> None:
    pol = Scripted(triggers=Trigger)
    core = new_core(make_cluster(1, slots=1), pol)
    step(core, 0, JobSubmitted(make_job("j", maps=1, reduces=0)))
    cmds = step(core, 2, TaskFailed(TaskRef("j", 0, 0)))
    assert launches(cmds) == [Launch(TaskRef("j", 0, 0), "m0")]
    assert Trigger.TASK_FAILED in pol.calls[-1].triggers
    step(core, 5, finish(TaskRef("j", 0, 0)))
    assert [(a.outcome, a.start, a.end) for a in core.attempts] == [
        ("failed", 0, 2), ("done", 2, 5)]
    assert core.jobs["j"].start == 0 and core.jobs["j"].finish == 5


def test_stale_completions_and_failures_are_ignored() -> None:
    core = new_core(make_cluster(1, slots=1))
    step(core, 0, JobSubmitted(make_job("j", maps=2, reduces=0)))
    step(core, 1, finish(TaskRef("j", 0, 1)))  # not running (still ready)
    step(core, 1, finish(TaskRef("nope", 0, 0)))
    step(core, 1, TaskFailed(TaskRef("j", 0, 1)))
    assert core.stats.stale == 3
    assert core.stats.completed == 0


# ------------------------------------------------------------------------------ capacity changes
def test_machine_leave_loses_its_tasks_and_join_makes_it_usable() -> None:
    cl = make_cluster(2, slots=2, initially_down=["m1"])
    core = new_core(cl)
    cmds = step(core, 0, JobSubmitted(make_job("j", maps=4, reduces=0)))
    assert {c.machine for c in launches(cmds)} == {"m0"}
    cmds = step(core, 1, CapacityChanged(change(1, "m1", "join")))
    assert [c.machine for c in launches(cmds)] == ["m1", "m1"]
    cmds = step(core, 2, CapacityChanged(change(2, "m0", "leave")))
    assert preempts(cmds) == []  # lost, not preempted: the backend already lost them
    lost = [a for a in core.attempts if a.outcome == "lost"]
    assert sorted(a.task.index for a in lost) == [0, 1]
    assert all(a.machine == "m0" and a.end == 2 for a in lost)
    assert core.stats.lost == 2
    assert not core.tasks_on(0) and core.machines[0].used == [0.0, 0.0, 0.0]
    view = core.snapshot().machines[0]
    assert view.up is False
    cmds = step(core, 3, finish(TaskRef("j", 0, 2)))
    assert [(c.task.index, c.machine) for c in launches(cmds)] == [(1, "m1")]


def test_double_join_or_leave_is_illegal() -> None:
    core = new_core(make_cluster(1))
    with pytest.raises(IllegalTransition, match="machine m0: illegal move UP -> UP"):
        core.handle(0, [CapacityChanged(change(0, "m0", "join"))])
    core = new_core(make_cluster(1, initially_down=["m0"]))
    with pytest.raises(IllegalTransition, match="DOWN -> DOWN"):
        core.handle(0, [CapacityChanged(change(0, "m0", "leave"))])


def test_scale_reduces_free_capacity() -> None:
    core = new_core(cpu_cluster(4))
    step(core, 0, CapacityChanged(change(0, "m0", "scale", 0.5)))
    assert core.snapshot().machines[0].capacity == Resources(cpu=2)
    assert core.snapshot().total_slots == 2
    cmds = step(core, 0, JobSubmitted(single_stage_job("j", [(1, CPU1)] * 6)))
    assert len(launches(cmds)) == 2


def test_scale_down_below_usage_stops_launches_without_killing() -> None:
    core = new_core(cpu_cluster(4))
    step(core, 0, JobSubmitted(single_stage_job("j", [(1, CPU1)] * 8)))
    cmds = core.handle(1, [CapacityChanged(change(1, "m0", "scale", 0.5))])
    core.check_invariants()
    assert cmds == []
    assert len(core.jobs["j"].running) == 4  # over-committed now, nothing killed
    assert step(core, 2, finish(TaskRef("j", 0, 0)), check_capacity=False) == []
    assert step(core, 3, finish(TaskRef("j", 0, 1)), check_capacity=False) == []
    cmds = step(core, 4, finish(TaskRef("j", 0, 2)))  # used 1 of 2
    assert len(launches(cmds)) == 1


def test_speed_change_only_shows_in_the_view() -> None:
    core = new_core(cpu_cluster(4))
    step(core, 0, CapacityChanged(change(0, "m0", "speed", 0.25)))
    m = core.snapshot().machines[0]
    assert m.speed == 0.25 and m.capacity == Resources(cpu=4) and m.up


def test_capacity_integral() -> None:
    core = new_core(cpu_cluster(4, 2))
    step(core, 10, CapacityChanged(change(10, "m1", "leave")))
    assert core.capacity_integral(20) == [60 + 40]


# ------------------------------------------------------------------------------ slot limits
def test_slot_limit_counts_tasks_not_resources() -> None:
    def limited(snap: ClusterSnapshot) -> Decision:
        return Decision(grants=tuple(Grant(j.id) for j in snap.jobs),
                        slot_limit=SlotLimit(2))

    core = new_core(cpu_cluster(4, 4), Scripted(limited))
    small = single_stage_job("s", [(1, Resources(cpu=0.5))] * 10)
    cmds = step(core, 0, JobSubmitted(small))
    assert sorted(c.machine for c in launches(cmds)) == ["m0", "m0", "m1", "m1"]
    core2 = new_core(cpu_cluster(4, 4), Scripted(limited))
    big = single_stage_job("b", [(1, Resources(cpu=4))] * 10)
    cmds = step(core2, 0, JobSubmitted(big), check_capacity=False)
    assert sorted(c.machine for c in launches(cmds)) == ["m0", "m0", "m1", "m1"]


def test_slot_limit_with_reduce_pool() -> None:
    def limited(snap: ClusterSnapshot) -> Decision:
        return Decision(grants=tuple(Grant(j.id) for j in snap.jobs),
                        slot_limit=SlotLimit(1, reduce_per_machine=1))

    core = new_core(make_cluster(1, slots=1), Scripted(limited))
    step(core, 0, JobSubmitted(make_job("a", maps=1, reduces=2)),
         JobSubmitted(make_job("b", maps=3, reduces=0)))
    cmds = step(core, 1, finish(TaskRef("a", 0, 0)), check_capacity=False)
    # the map slot goes to b, the reduce slot to a: two tasks on a one-slot machine
    assert sorted((c.task.job, c.task.stage) for c in launches(cmds)) == [("a", 1), ("b", 0)]


# ------------------------------------------------------------------------------ invalid input
def test_time_going_backwards_is_illegal() -> None:
    core = new_core(make_cluster(1))
    core.handle(5, [Tick()])
    with pytest.raises(IllegalTransition, match="time went backwards"):
        core.handle(4, [Tick()])


def test_job_submitted_twice_is_illegal() -> None:
    core = new_core(make_cluster(1))
    core.handle(0, [JobSubmitted(make_job("j"))])
    with pytest.raises(IllegalTransition, match="job 'j' submitted twice"):
        core.handle(1, [JobSubmitted(make_job("j"))])


def test_unknown_stimulus_is_illegal() -> None:
    core = new_core(make_cluster(1))
    with pytest.raises(IllegalTransition, match="unknown stimulus"):
        core.handle(0, ["hello"])  # type: ignore[list-item]


def test_unplaceable_demand_is_warned_about() -> None:
    core = new_core(cpu_cluster(2, 4))
    cmds = step(core, 0, JobSubmitted(single_stage_job("j", [(1, Resources(cpu=8))])))
    assert cmds == []
    (msg,) = core.warnings
    assert "job j" in msg and "fits no machine" in msg


def _m(*ids: str) -> frozenset[str]:
    return frozenset(ids)


@pytest.mark.parametrize(
    ("decision", "match"),
    [
        (Decision(grants=(Grant("ghost"),)), "grant for job 'ghost', which is not active"),
        (Decision(grants=(Grant("j"), Grant("j"))), "job 'j' has two grants with overlapping"),
        (Decision(grants=(Grant("j", stage="map"), Grant("j"))), "overlapping scopes"),
        (Decision(grants=(Grant("j", stage="map"), Grant("j", stage="map"))), "overlapping"),
        (Decision(grants=(Grant("j", machines=_m("m0", "m1")),
                          Grant("j", machines=_m("m1")))), "overlapping scopes"),
        (Decision(grants=(Grant("j", stage="map", machines=_m("m0")),
                          Grant("j", machines=_m("m0")))), "overlapping scopes"),
        (Decision(grants=(Grant("j", stage="shuffle"),)), "names unknown stage 'shuffle'"),
        (Decision(grants=(Grant("j", machines=_m("m0", "zz")),)), "unknown machine 'zz'"),
        (Decision(grants=(Grant("j", slots=-1),)), "slots must be a non-negative int"),
        (Decision(grants=(Grant("j", slots=1.5),)), "slots must be a non-negative int"),  # type: ignore
        (Decision(grants=(Grant("j", slots=True),)), "slots must be a non-negative int"),  # type: ignore
        (Decision(infeasible=(Infeasible("ghost", "late"),)), "names inactive job 'ghost'"),
        (Decision(slot_limit=SlotLimit(0)), "slot limits must be >= 1"),
        (Decision(slot_limit=SlotLimit(1, 0)), "slot limits must be >= 1"),
        ([Grant("j")], "decide\\(\\) returned list, not a Decision"),
    ],
)
def test_invalid_decisions_raise(decision: object, match: str) -> None:
    core = new_core(make_cluster(2), Scripted(lambda s: decision))  # type: ignore[arg-type]
    with pytest.raises(InvalidDecision, match=match) as info:
        core.handle(3, [JobSubmitted(make_job("j"))])
    assert "policy 'test-scripted' at t=3" in str(info.value)


def _pairwise_overlap(a: tuple[str | None, frozenset[str] | None],
                      b: tuple[str | None, frozenset[str] | None]) -> bool:
    """The contract's definition: scopes overlap unless they name different stages or
    disjoint machine sets."""
    if a[0] is not None and b[0] is not None and a[0] != b[0]:
        return False
    return not (a[1] is not None and b[1] is not None and not (a[1] & b[1]))


_scope = st.tuples(st.sampled_from([None, "map", "reduce"]),
                   st.none() | st.frozensets(st.sampled_from(["m0", "m1", "m2", "m3"])))


@given(st.lists(_scope, max_size=8))
def test_scope_overlap_is_found_at_the_grant_the_pairwise_test_finds(
        scopes: list[tuple[str | None, frozenset[str] | None]]) -> None:
    """The validator's running test (one pass, unions per stage) flags the same first grant
    as testing every pair."""
    from utilon.core.validate import _Scopes

    expected = next((i for i in range(len(scopes))
                     if any(_pairwise_overlap(scopes[k], scopes[i]) for k in range(i))), None)
    held, found = _Scopes(), None
    for i, (stage, machines) in enumerate(scopes):
        if held.overlaps(stage, machines):
            found = i
            break
        held.add(stage, machines)
    assert found == expected


def test_infeasible_items_are_recorded() -> None:
    def give_up(snap: ClusterSnapshot) -> Decision:
        return Decision(grants=(Grant("j"),), infeasible=(Infeasible("j", "too late"),))

    core = new_core(make_cluster(1), Scripted(give_up))
    step(core, 0, JobSubmitted(make_job("j")))
    assert core.infeasible == {"j": "too late"}


# ------------------------------------------------------------------------------ snapshots
def test_snapshot_views() -> None:
    pol = Scripted(uses_free=True)
    cl = make_cluster(2, slots=2, cpu=4, mem=8, initially_down=["m1"])
    core = new_core(cl, pol)
    step(core, 0, JobSubmitted(make_job("b", maps=3, reduces=2, priority=1)))
    step(core, 1, JobSubmitted(make_job("a", submit=1, maps=1, reduces=0)))
    snap = core.snapshot()
    assert [j.id for j in snap.jobs] == ["b", "a"]  # arrival order
    b = snap.job("b")
    assert b.started == 0 and b.priority == 1
    assert [(s.name, s.total, s.waiting, s.ready, s.running, s.done) for s in b.stages] == [
        ("map", 3, 0, 1, 2, 0), ("reduce", 2, 2, 0, 0, 0)]
    assert (b.ready, b.running, b.runnable, b.remaining) == (1, 2, 3, 5)
    assert b.remaining_work == 50
    assert b.goal == float("inf")
    assert b.slot_size == 1.0
    assert snap.job("a").started is None
    with pytest.raises(KeyError):
        snap.job("zz")
    assert [m.id for m in snap.up_machines] == ["m0"]
    assert snap.total_slots == 2
    assert snap.resource_names == ("cpu", "mem", "slots") and snap.slot_resource == "slots"
    assert snap.free is not None and snap.free.shape == (2, 3)
    assert list(snap.free[0]) == [2.0, 6.0, 0.0]
    assert not snap.free.flags.writeable
    assert new_core(cl).snapshot().free is None  # only for policies that ask for it


def test_total_slots_follows_each_snapshots_own_machines() -> None:
    """``total_slots`` and ``capacity_matrix`` remember what they derived from the last
    machines tuple: snapshots of two cores asked in turn, and a core whose capacity changed,
    each get their own."""
    small, big = new_core(make_cluster(1, slots=2)), new_core(make_cluster(3, slots=4))
    for _ in range(2):
        assert small.snapshot().total_slots == 2 and big.snapshot().total_slots == 12
    step(big, 1, CapacityChanged(change(1, "m2", "leave")))
    assert big.snapshot().total_slots == 8
    snap = small.snapshot()
    other = ClusterSnapshot(now=0, triggers=frozenset(), machines=snap.machines, jobs=(),
                            resource_names=snap.resource_names, slot_resource="cpu")
    assert other.total_slots == 4 and snap.total_slots == 2  # the same machines, cpu: 4
    # the capacity matrix likewise: per snapshot's machines, a row of zeros for one down
    names = ("slots", "cpu")
    assert big.snapshot().capacity_matrix(names).tolist() == [[4, 4], [4, 4], [0, 0]]
    assert big.snapshot().capacity_matrix(("cpu",)).tolist() == [[4], [4], [0]]
    assert small.snapshot().capacity_matrix(names).tolist() == [[2, 4]]
    assert not big.snapshot().capacity_matrix(names).flags.writeable


def test_on_decision_callback_sees_every_decision() -> None:
    seen: list[tuple[float, list[str], dict]] = []
    core = new_core(make_cluster(1), on_decision=lambda t, s, d: seen.append(
        (t, [j.id for j in s.jobs], d.to_dict())))
    step(core, 0, JobSubmitted(make_job("j", maps=1, reduces=0)))
    assert seen == [(0, ["j"], {"grants": [{"job": "j", "slots": None}]})]
    assert core.stats.decisions == 1 and len(core.stats.decide_seconds) == 1


def test_decision_to_dict() -> None:
    d = Decision(grants=(Grant("a", 2, "map", _m("m1", "m0"), True),),
                 infeasible=(Infeasible("a", "late"),), backfill=True,
                 slot_limit=SlotLimit(2, 1))
    assert d.to_dict() == {
        "grants": [{"job": "a", "slots": 2, "stage": "map", "machines": ["m0", "m1"],
                    "kill_excess": True}],
        "infeasible": [{"job": "a", "reason": "late"}],
        "backfill": True,
        "slot_limit": {"per_machine": 2, "reduce_per_machine": 1},
    }
    assert Decision().to_dict() == {"grants": []}


# ------------------------------------------------------------------------------ dispatch quality
def test_ready_task_fills_an_idle_machine_it_fits() -> None:
    """Work conservation within a stage: after the big head task goes to m1, the small one must
    still be offered m0.  (src bug: ``_fill`` never rewinds its machine pointer ``p`` after a
    launch, so machines before the last placement are skipped for the next task.)"""
    core = new_core(cpu_cluster(1, 4))
    job = single_stage_job("j", [(5, Resources(cpu=4)), (5, Resources(cpu=1))])
    cmds = step(core, 0, JobSubmitted(job))
    assert sorted((c.task.index, c.machine) for c in launches(cmds)) == [(0, "m1"), (1, "m0")]


def test_head_of_line_task_that_fits_nowhere_now_blocks_its_stage() -> None:
    core = new_core(cpu_cluster(2, 2))
    job = single_stage_job("j", [(5, Resources(cpu=2)), (5, Resources(cpu=2)),
                                 (5, Resources(cpu=2)), (5, Resources(cpu=1))])
    cmds = step(core, 0, JobSubmitted(job))
    assert [c.task.index for c in launches(cmds)] == [0, 1]  # task 3 waits behind task 2


# ------------------------------------------------------------------------------ cancellation
@pytest.mark.parametrize("policy", ["fifo", "fair", "edf-p"])
def test_a_cancelled_job_stops_and_its_capacity_goes_to_the_others(policy: str) -> None:
    from utilon.core.messages import JobCancelled, JobSubmitted
    from utilon.policies import make_policy

    core = new_core(make_cluster(n=1, slots=2, cpu=2, mem=8), make_policy(policy))
    a = make_job("a", maps=4, reduces=0, dur=10, deadline=100)
    b = make_job("b", maps=2, reduces=0, dur=10, deadline=200)
    cmds = step(core, 0.0, JobSubmitted(a), JobSubmitted(b))
    running_a = [c.task for c in launches(cmds) if c.task.job == "a"]
    assert running_a
    cmds = step(core, 1.0, JobCancelled("a"))
    killed = preempts(cmds)
    assert sorted(k.task for k in killed) == sorted(running_a)
    assert all("cancelled" in k.reason for k in killed)
    assert core.jobs["a"].state is JobState.CANCELLED and "a" not in core.active
    assert {c.task.job for c in launches(cmds)} <= {"b"}  # the freed slots go to b
    assert sum(1 for m in core.machines for r in core.tasks_on(m.index) if r[0] == "a") == 0
    # a cancel of a job that is over, or unknown, changes nothing
    assert step(core, 2.0, JobCancelled("a")) == [] and step(core, 2.0, JobCancelled("x")) == []


def test_simultaneous_completions_offer_machines_in_event_order() -> None:
    """Two machines free at t = 4: m1 (its task was started first, so its completion is
    handled first) gets the waiting task, not the lower-numbered m0 — the placement rule as
    docs/architecture.md states it (issue 47's reproducer)."""
    from builders import run

    one, two = Resources(slots=1, cpu=1, mem=1), Resources(slots=2, cpu=2, mem=2)
    cl = make_cluster(2, slots=2, cpu=2, mem=2)
    jobs = [single_stage_job("A", [(d, one) for d in (1, 10, 4, 12)], 0),
            single_stage_job("B", [(d, one) for d in (3, 20)], 1),
            single_stage_job("D", [(5, two)], 2)]
    placed = {(a.task.job, a.task.index): (a.machine, a.start, a.end)
              for a in run(cl, jobs, "fifo").core.attempts}
    assert placed["A", 2] == ("m1", 0.0, 4.0) and placed["B", 0] == ("m0", 1.0, 4.0)
    assert placed["B", 1] == ("m1", 4.0, 24.0)  # m0 was free at 4.0 as well
    assert placed["D", 0] == ("m0", 10.0, 15.0)
