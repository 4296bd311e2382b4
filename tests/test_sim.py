"""The discrete-event simulator: event order, the fluid progress model, capacity changes,
control ticks, the horizon and runs that cannot finish."""

from __future__ import annotations

import pytest

from builders import (
    ScriptedPolicy,
    attempts_of,
    change,
    check_run_invariants,
    make_cluster,
    make_job,
    run,
    single_stage_job,
)
from utilon.core import (
    ClusterSnapshot,
    Decision,
    Grant,
    TaskFinished,
    Tick,
    Trigger,
)
from utilon.core.feasibility import Unrunnable
from utilon.core.scheduler import MAX_IDLE_TICKS
from utilon.model import Job, Resources, Stage, Task, UsagePhase
from utilon.policies import make_policy
from utilon.sim import Phase, Simulation, simulate

CPU = Resources(cpu=1)


def cpu_cluster(*cpus: float, **kw: object):  # type: ignore[no-untyped-def]
    return make_cluster(capacities=[{"cpu": c} for c in cpus], **kw)  # type: ignore[arg-type]


def finishes(result) -> dict[str, float | None]:  # type: ignore[no-untyped-def]
    return {j.id: j.finish for j in result.core.jobs.values()}


# ------------------------------------------------------------------------------ event order
def test_phase_order_at_equal_times() -> None:
    assert list(Phase) == [Phase.TASK, Phase.CAPACITY, Phase.ARRIVAL, Phase.TICK]
    assert Phase.TASK < Phase.CAPACITY < Phase.ARRIVAL < Phase.TICK


def test_equal_time_events_form_one_ordered_batch() -> None:
    """At t=10 a task ends, m1 joins, job b arrives and a control tick fires: the core gets one
    batch in phase order and the policy decides once, seeing all of it."""
    pol = ScriptedPolicy(triggers=Trigger, tick=10)
    cl = make_cluster(2, slots=1, initially_down=["m1"], timeline=[change(10, "m1", "join")])
    jobs = [make_job("a", maps=1, reduces=0, dur=10), make_job("b", submit=10, maps=2, reduces=0)]
    batches: list[tuple[float, list[str]]] = []
    sim = Simulation(cl, jobs, pol, validate=True, on_batch=lambda now, stimuli, cmds:
                     batches.append((now, [type(s).__name__ for s in stimuli])))
    res = sim.run()
    at10 = [names for t, names in batches if t == 10]
    assert at10 == [["TaskFinished", "CapacityChanged", "JobSubmitted", "Tick"]]
    (snap,) = [s for s in pol.calls if s.now == 10]
    assert snap.triggers >= {Trigger.TASK_FINISHED, Trigger.CAPACITY, Trigger.ARRIVAL,
                             Trigger.TICK}
    assert [m.up for m in snap.machines] == [True, True]  # the join is visible to the arrival
    # b's two tasks start at once: one on the freed m0, one on the joined m1
    assert sorted((a.machine, a.start) for a in attempts_of(res, "b")) == [("m0", 10),
                                                                           ("m1", 10)]
    check_run_invariants(res, cl, jobs)


def test_task_end_precedes_machine_leave_at_the_same_instant() -> None:
    cl = make_cluster(2, slots=1, timeline=[change(10, "m0", "leave")])
    jobs = [make_job("a", maps=2, reduces=0, dur=10)]
    res = run(cl, jobs, "fifo")
    assert [a.outcome for a in res.core.attempts] == ["done", "done"]
    assert res.end_time == 10
    check_run_invariants(res, cl, jobs)


def test_task_end_precedes_arrival_at_the_same_instant() -> None:
    """The job arriving at t=10 sees the slot freed at t=10 (FIFO would otherwise give it to
    the earlier job's next task)."""
    cl = make_cluster(1, slots=1)
    jobs = [make_job("a", maps=1, reduces=0, dur=10),
            make_job("b", submit=10, maps=1, reduces=0, dur=5, priority=1)]
    res = run(cl, jobs, "fifo")
    assert finishes(res) == {"a": 10, "b": 15}


def test_capacity_change_precedes_arrival_at_the_same_instant() -> None:
    cl = make_cluster(1, slots=2, initially_down=["m0"], timeline=[change(5, "m0", "join")])
    jobs = [make_job("a", submit=5, maps=2, reduces=0, dur=10)]
    res = run(cl, jobs, "fifo")
    assert [a.start for a in res.core.attempts] == [5, 5]
    assert res.stopped_early == ""


def test_simultaneous_arrivals_get_one_decision() -> None:
    seen: list[float] = []
    cl = make_cluster(1, slots=4)
    jobs = [make_job(x, submit=3, maps=1, reduces=0) for x in "abc"]
    run(cl, jobs, "fifo", on_decision=lambda t, s, d: seen.append(t))
    assert seen.count(3) == 1


def test_jobs_submitted_out_of_order_arrive_by_submit_time() -> None:
    cl = make_cluster(1, slots=1)
    jobs = [make_job("late", submit=20, maps=1, reduces=0, dur=1),
            make_job("early", submit=0, maps=1, reduces=0, dur=1)]
    res = run(cl, jobs, "fifo")
    assert list(res.core.jobs) == ["early", "late"]
    assert finishes(res) == {"early": 1, "late": 21}


# ------------------------------------------------------------------------------ fluid model
def test_declared_usage_runs_at_full_speed() -> None:
    cl = cpu_cluster(4)
    jobs = [single_stage_job("j", [(10, Resources(cpu=2))] * 2)]
    res = run(cl, jobs, "fifo")
    assert finishes(res) == {"j": 10}


def test_actual_usage_twice_the_cpu_takes_twice_as_long() -> None:
    heavy = (UsagePhase(1.0, Resources(cpu=4), "run"),)
    cl = cpu_cluster(4)
    jobs = [make_job("j", maps=2, reduces=0, dur=10, demand=Resources(cpu=2), phases=heavy)]
    res = run(cl, jobs, "fifo")
    assert [(a.start, a.end) for a in res.core.attempts] == [(0, 20), (0, 20)]
    check_run_invariants(res, cl, jobs)


def test_over_commit_only_slows_tasks_that_use_the_scarce_resource() -> None:
    cl = make_cluster(capacities=[{"cpu": 4, "mem": 8}])
    cpu_hog = UsagePhase(1.0, Resources(cpu=8), "cpu")
    mem_only = UsagePhase(1.0, Resources(mem=1), "mem")
    j = make_job("hog", maps=1, reduces=0, dur=10, demand=Resources(cpu=1), phases=(cpu_hog,))
    k = make_job("io", maps=1, reduces=0, dur=10, demand=Resources(cpu=1), phases=(mem_only,))
    res = run(cl, [j, k], "fifo")
    assert finishes(res) == {"hog": 20, "io": 10}


def test_multi_phase_tasks() -> None:
    """Two tasks on a 4-cpu machine, each using 4 cpu for the first half of its work and 1 cpu
    for the second: the first half runs at half speed (10 s), the second at full speed (5 s)."""
    phases = (UsagePhase(0.5, Resources(cpu=4), "map"), UsagePhase(0.5, Resources(cpu=1), "io"))
    cl = cpu_cluster(4)
    jobs = [make_job("j", maps=2, reduces=0, dur=10, demand=Resources(cpu=2), phases=phases)]
    res = run(cl, jobs, "fifo")
    assert [a.end for a in res.core.attempts] == [pytest.approx(15)] * 2


def test_phase_change_of_one_task_speeds_up_its_neighbour() -> None:
    """A (10 s, 4 cpu) shares a 4-cpu machine with B (20 s: 4 cpu for 20% of its work, then
    none).  Both run at half speed until B's first phase ends at t=8; A then has 6 s left."""
    cl = cpu_cluster(4)
    b_phases = (UsagePhase(0.2, Resources(cpu=4)), UsagePhase(0.8, Resources()))
    b = make_job("b", maps=1, reduces=0, dur=20, demand=Resources(cpu=2), phases=b_phases)
    a = make_job("a", maps=1, reduces=0, dur=10, demand=Resources(cpu=2),
                 phases=(UsagePhase(1.0, Resources(cpu=4)),))
    res = run(cl, [a, b], "fifo")
    assert finishes(res) == {"a": pytest.approx(14), "b": pytest.approx(24)}


@pytest.mark.parametrize(("factor", "end"), [(0.5, 16), (2.0, 7), (1.0, 10)])
def test_speed_change_mid_task_stretches_the_remaining_time(factor: float, end: float) -> None:
    cl = cpu_cluster(4, timeline=[change(4, "m0", "speed", factor)])
    jobs = [single_stage_job("j", [(10, CPU)])]
    res = run(cl, jobs, "fifo")
    assert res.core.attempts[0].end == pytest.approx(end)
    check_run_invariants(res, cl, jobs)


def test_speed_zero_pauses_and_resumes() -> None:
    cl = cpu_cluster(4, timeline=[change(2, "m0", "speed", 0.0), change(7, "m0", "speed", 1)])
    res = run(cl, [single_stage_job("j", [(10, CPU)])], "fifo")
    assert res.core.attempts[0].end == pytest.approx(15)


def test_speed_change_before_launch_applies_to_new_tasks() -> None:
    cl = cpu_cluster(4, timeline=[change(0, "m0", "speed", 0.5)])
    res = run(cl, [single_stage_job("j", [(10, CPU)], submit=1)], "fifo")
    assert res.core.attempts[0].end == pytest.approx(21)


def test_scale_down_slows_over_committed_tasks() -> None:
    cl = cpu_cluster(4, timeline=[change(5, "m0", "scale", 0.5)])
    jobs = [single_stage_job("j", [(10, Resources(cpu=4))])]
    res = run(cl, jobs, "fifo")
    # 5 s of work done, then 4 cpu of usage on 2 cpu: half speed for the other 5 s
    assert res.core.attempts[0].end == pytest.approx(15)
    check_run_invariants(res, cl, jobs)


def test_scale_down_without_over_commit_changes_nothing() -> None:
    cl = cpu_cluster(4, timeline=[change(5, "m0", "scale", 0.5)])
    res = run(cl, [single_stage_job("j", [(10, Resources(cpu=1))])], "fifo")
    assert res.core.attempts[0].end == pytest.approx(10)


def test_scale_back_up_restores_speed() -> None:
    cl = cpu_cluster(4, timeline=[change(2, "m0", "scale", 0.5), change(6, "m0", "scale", 1)])
    res = run(cl, [single_stage_job("j", [(10, Resources(cpu=4))])], "fifo")
    # 2 s at full speed, 4 s at half speed (2 s of work), 6 s at full speed
    assert res.core.attempts[0].end == pytest.approx(12)


def test_machine_leave_loses_tasks_which_rerun_elsewhere() -> None:
    cl = make_cluster(3, slots=1, initially_down=["m2"],
                      timeline=[change(4, "m1", "leave"), change(6, "m2", "join")])
    jobs = [make_job("j", maps=2, reduces=1, dur=10)]
    res = run(cl, jobs, "fifo")
    got = sorted((a.task.stage, a.task.index, a.machine, a.start, a.end, a.outcome)
                 for a in res.core.attempts)
    assert got == [
        (0, 0, "m0", 0, 10, "done"),
        (0, 1, "m1", 0, 4, "lost"),
        (0, 1, "m2", 6, 16, "done"),
        (1, 0, "m0", 16, 26, "done"),
    ]
    assert res.core.stats.lost == 1
    assert res.stopped_early == ""
    check_run_invariants(res, cl, jobs)


def test_machine_rejoins_after_leaving() -> None:
    cl = make_cluster(1, slots=1, timeline=[change(3, "m0", "leave"), change(5, "m0", "join")])
    jobs = [make_job("j", maps=1, reduces=0, dur=10)]
    res = run(cl, jobs, "fifo")
    assert [(a.start, a.end, a.outcome) for a in res.core.attempts] == [
        (0, 3, "lost"), (5, 15, "done")]
    check_run_invariants(res, cl, jobs)


def test_killed_tasks_do_not_complete_later() -> None:
    """kill_excess preemption in a simulation: the killed attempt's end event is stale."""

    def shrink(snap: ClusterSnapshot) -> Decision:
        n = 1 if snap.now >= 5 else None
        return Decision(grants=tuple(Grant(j.id, slots=n, kill_excess=True) for j in snap.jobs))

    cl = make_cluster(1, slots=4)
    jobs = [make_job("a", maps=3, reduces=0, dur=10), make_job("b", submit=5, maps=1, reduces=0)]
    res = run(cl, jobs, ScriptedPolicy(shrink))
    killed = attempts_of(res, outcome="killed")
    assert sorted((a.task.index, a.end) for a in killed) == [(1, 5), (2, 5)]
    assert finishes(res)["a"] == 30  # then one at a time: 10, 20, 30
    assert res.core.stats.completed == 4
    check_run_invariants(res, cl, jobs)


# ------------------------------------------------------------------------------ ticks, horizon
def test_tick_policy_is_called_every_tick() -> None:
    pol = ScriptedPolicy(triggers={Trigger.TICK}, tick=10)
    cl = make_cluster(1)
    jobs = [make_job("j", submit=3, maps=1, reduces=0, dur=25)]
    res = run(cl, jobs, pol)
    assert [s.now for s in pol.calls] == [13, 23, 33]
    assert all(s.triggers == {Trigger.TICK} for s in pol.calls)
    # nothing launches before the first decision
    assert res.core.attempts[0].start == 13 and finishes(res) == {"j": 38}


def test_ticks_continue_until_every_job_and_change_is_past() -> None:
    pol = ScriptedPolicy(triggers={Trigger.TICK}, tick=10)
    cl = make_cluster(1)
    jobs = [make_job("a", maps=1, reduces=0, dur=5), make_job("b", submit=50, maps=1,
                                                              reduces=0, dur=5)]
    res = run(cl, jobs, pol)
    # no decision while nothing is active; b's arrival coincides with the tick at 50
    assert [s.now for s in pol.calls] == [10, 50]
    assert finishes(res) == {"a": 15, "b": 55}


def test_idle_tick_policy_stops_instead_of_ticking_forever() -> None:
    pol = ScriptedPolicy(lambda s: Decision(), triggers={Trigger.TICK}, tick=1)
    res = run(make_cluster(1), [make_job("j", maps=1, reduces=0)], pol)
    assert "nothing ran" in res.stopped_early
    assert len(pol.calls) == MAX_IDLE_TICKS
    assert res.core.jobs["j"].finish is None


def test_non_positive_tick_is_rejected() -> None:
    pol = ScriptedPolicy(tick=0)
    with pytest.raises(ValueError, match="tick must be > 0"):
        run(make_cluster(1), [make_job("j")], pol)


def test_horizon_stops_the_run() -> None:
    cl = make_cluster(1, slots=1)
    jobs = [make_job("a", maps=1, reduces=0, dur=10), make_job("b", maps=1, reduces=0,
                                                               dur=10)]
    res = run(cl, jobs, "fifo", horizon=15)
    assert res.stopped_early == "horizon 15 s reached"
    assert res.end_time == 15
    assert finishes(res) == {"a": 10, "b": None}
    assert [a.outcome for a in res.core.attempts] == ["done"]
    assert list(res.core.active) == ["b"]


def test_a_wall_clock_limit_stops_the_run_and_says_when() -> None:
    """``wall_limit`` with a clock that advances one second per reading: the run stops at the
    first batch after the limit, with the unfinished jobs still active."""
    cl = make_cluster(1, slots=1)
    jobs = [make_job(f"j{i}", maps=1, reduces=0, dur=10) for i in range(6)]
    ticks = iter(range(10**6))
    sim = Simulation(cl, jobs, make_policy("fifo"), timer=lambda: float(next(ticks)),
                     wall_limit=8)
    res = sim.run()
    assert res.stopped_early.startswith("wall-clock limit of 8 s reached at simulated time ")
    done = {k: v for k, v in finishes(res).items() if v is not None}
    assert 0 < len(done) < 6 and set(res.core.active) == {f"j{i}" for i in range(6)} - set(done)
    unlimited = Simulation(cl, jobs, make_policy("fifo"), timer=lambda: float(next(ticks)),
                           wall_limit=None).run()
    assert unlimited.stopped_early == "" and len(finishes(unlimited)) == 6


def test_horizon_after_every_job_finished_is_not_an_early_stop() -> None:
    """``SimResult.stopped_early`` is documented as '"" or why the run stopped before every job
    finished'.  (src bug: ``Simulation.run`` sets it whenever an event lies past the horizon,
    here a speed change at t=200, although the only job finished at t=10, and reports
    end_time=100 instead of 10; without a horizon the same run ends at 10.)"""
    cl = cpu_cluster(4, timeline=[change(200, "m0", "speed", 2)])
    jobs = [single_stage_job("j", [(10, CPU)])]
    res = run(cl, jobs, "fifo", horizon=100)
    assert res.stopped_early == ""
    assert res.end_time == 10


def test_run_without_horizon_processes_late_changes_but_ends_at_last_finish() -> None:
    cl = cpu_cluster(4, timeline=[change(200, "m0", "speed", 2)])
    res = run(cl, [single_stage_job("j", [(10, CPU)])], "fifo")
    assert res.stopped_early == "" and res.end_time == 10


def test_job_that_fits_no_machine_is_refused_before_the_run() -> None:
    cl = cpu_cluster(2, 4)
    jobs = [single_stage_job("huge", [(10, Resources(cpu=8))]),
            single_stage_job("ok", [(10, Resources(cpu=1))] * 3, submit=1)]
    with pytest.raises(Unrunnable) as ei:
        run(cl, jobs, "fifo")
    line = ei.value.one_line()
    assert "job huge: stage 's': task 0 demands {cpu: 8}" in line
    assert "the largest is {cpu: 4}" in line and "it can never run" in line
    assert ei.value.job == "huge"


def test_job_submitted_after_its_only_machine_left_for_good_is_refused() -> None:
    cl = make_cluster(2, slots=1, capacities=[dict(slots=1), dict(slots=4)],
                      timeline=[change(5, "m1", "leave")])
    wide = Stage("s", tuple(Task(1, Resources(slots=4)) for _ in range(1)))
    early = Job("early", 0.0, (wide,))
    assert run(cl, [early], "fifo").core.jobs["early"].finish == 1
    with pytest.raises(Unrunnable, match="job late: stage 's'"):
        run(cl, [Job("late", 5.0, (wide,))], "fifo")  # m1 leaves at 5, before arrivals at 5


def test_job_whose_only_machine_left_stops_the_run_early() -> None:
    cl = make_cluster(1, slots=1, timeline=[change(5, "m0", "leave")])
    res = run(cl, [make_job("j", maps=1, reduces=0, dur=10)], "edf-p")
    assert res.stopped_early == "no task can run and nothing will change"
    assert res.core.jobs["j"].finish is None
    assert [a.outcome for a in res.core.attempts] == ["lost"]


# ------------------------------------------------------------------------------ results
def test_sim_result_and_simulate_wrapper() -> None:
    cl = make_cluster(2, slots=2)
    jobs = [make_job("a", maps=4, reduces=2, dur=5), make_job("b", submit=2, maps=2, reduces=0)]
    res = simulate(cl, jobs, make_policy("fair"), validate=True)
    assert res.stopped_early == ""
    assert res.end_time == max(f for f in finishes(res).values() if f is not None)
    assert res.task_events == len(res.core.attempts) == 8
    assert res.events >= res.task_events + len(jobs)
    assert res.wall_seconds >= 0
    assert res.core.stats.completed == 8 and res.core.stats.launched == 8


def test_progress_callback_reports_finished_jobs() -> None:
    seen: list[tuple[int, int]] = []
    cl = make_cluster(1, slots=1)
    jobs = [make_job(x, maps=1, reduces=0, dur=1) for x in "abc"]
    Simulation(cl, jobs, make_policy("fifo"), progress=lambda d, n: seen.append((d, n))).run()
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_empty_workload() -> None:
    res = run(make_cluster(1), [], "fifo")
    assert res.stopped_early == "" and res.end_time == 0 and res.events == 0


def test_busy_time_accounting() -> None:
    cl = make_cluster(1, slots=2, cpu=2, mem=2)
    res = run(cl, [make_job("j", maps=2, reduces=0, dur=10)], "fifo")
    names = res.core.names
    assert dict(zip(names, res.core.busy, strict=True)) == {"cpu": 20, "mem": 20, "slots": 20}
    assert res.core.capacity_integral(10) == [20, 20, 20]


def test_stimuli_are_frozen_values() -> None:
    s = TaskFinished(("j", 0, 0))  # type: ignore[arg-type]
    with pytest.raises(AttributeError):  # frozen dataclass or NamedTuple alike
        s.task = ("k", 0, 0)  # type: ignore[misc]
    assert Tick() == Tick()
