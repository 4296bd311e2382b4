"""The simulator's fast paths give exactly what the general paths give.

Three shortcuts on the per-task path (issue 28) must not change any output:

* ``SchedulerCore.finish_one``: a task completion alone at its instant, fused into one frame,
  is ``handle(now, [TaskFinished(ref)])``.  ``core.fast.fuse_finishes = False`` makes the
  engine take the general path.
* ``GrantTable.install_extension``: a decision that keeps the installed whole-job grants of
  the jobs still active and appends new ones is installed incrementally;
  ``core.fast.extend_installs = False`` forces the full install.
* ``Timeline``: attempt rows wait as tuples and move into the arrays in bulk.
* ``FluidModel(metered=False)``: no usage is kept until a slot limit or a scale or speed
  change may over-commit a machine; recording usage meters from the start.
* ``GrantTable.append``: the grants of finished jobs stay until they outnumber the
  active jobs.
* ``GrantTable.extend_order``: under an order-only policy (FIFO, EDF-P), jobs arriving
  after the installed order are appended without calling ``decide``; disabling it
  (``core.grants.order_key = None``) makes every arrival a full decision.

Each test runs one workload both ways and compares every attempt, the timeline's columns,
every job's times and the core's counters.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from builders import change, make_cluster
from utilon.core.messages import JobSubmitted
from utilon.core.scheduler import SchedulerCore
from utilon.core.timeline import PENDING_ROWS, Timeline
from utilon.model import Constant, DeadlineStep, Job, Resources, Stage, Task
from utilon.model.cluster import Cluster
from utilon.policies import make_policy
from utilon.sim import SimResult, Simulation


def workload(seed: int, n_jobs: int = 30, *, capacity_changes: bool = True,
             shared_durations: bool = False) -> tuple[Cluster, list[Job]]:
    """MapReduce jobs with a lognormal duration per task (completions rarely coincide, so
    nearly every one takes the fused path), two demand sizes, Poisson arrivals; optionally a
    machine that leaves, rejoins and is scaled, and stages whose tasks share one duration
    (simultaneous completions: the batch path)."""
    rng = np.random.default_rng(seed)
    timeline = ([change(150.0, "m2", "leave"), change(400.0, "m2", "join"),
                 change(500.0, "m1", "scale", 0.5), change(900.0, "m1", "scale", 1.0)]
                if capacity_changes else [])
    cluster = make_cluster(6, slots=4, cpu=4, mem=16, timeline=timeline)
    small, big = Resources(slots=1, cpu=1, mem=2), Resources(slots=2, cpu=2, mem=4)
    jobs = []
    submit = 0.0
    for i in range(n_jobs):
        submit += float(rng.exponential(12.0))
        demand = big if i % 5 == 3 else small
        n_map, n_red = int(rng.integers(5, 25)), int(rng.integers(1, 6))
        if shared_durations and i % 3 == 0:
            maps = [float(rng.lognormal(2.5, 0.5))] * n_map
            reds = [float(rng.lognormal(3.0, 0.5))] * n_red
        else:
            maps = rng.lognormal(2.5, 0.8, n_map).tolist()
            reds = rng.lognormal(3.0, 0.6, n_red).tolist()
        utility = (DeadlineStep(submit + 3 * (max(maps) + max(reds))) if i % 2 else
                   Constant(1.0))
        jobs.append(Job(f"j{i:03d}", submit, (
            Stage("map", tuple(Task(d, demand) for d in maps), kind="map"),
            Stage("reduce", tuple(Task(d, demand) for d in reds), after=("map",),
                  kind="reduce"),
        ), utility))
    return cluster, jobs


def outputs(res: SimResult) -> dict[str, Any]:
    core = res.core
    tl = core.timeline
    stats = dataclasses.asdict(core.stats)
    stats.pop("decide_seconds")  # measured wall-clock times
    stats.pop("solver_seconds")
    return {
        "attempts": list(core.attempts),
        "timeline": [col.tobytes() for col in (tl.job, tl.stage, tl.task, tl.machine,
                                                tl.start, tl.end, tl.slots, tl.outcome)],
        "rows": len(tl),
        "jobs": [(j.id, j.state, j.start, j.finish, j.cost) for j in core.jobs.values()],
        "stats": stats,
        "busy": core.busy,
        "run": (res.end_time, res.events, res.task_events, res.stopped_early),
    }


def simulate(cluster: Cluster, jobs: list[Job], policy: str, *, fused: bool, incremental: bool,
             estimates: str = "declared", ordered: bool | None = None,
             validate: bool = False) -> tuple[SimResult, dict[str, int]]:
    """One run with the shortcuts switched on or off (``core.fast``, ``core.grants.order_key``);
    how often each was taken."""
    sim = Simulation(cluster, jobs, make_policy(policy), estimates=estimates, validate=validate)
    core = sim.core
    if not (incremental if ordered is None else ordered):
        core.grants.order_key = None
    core.fast.fuse_finishes = fused
    core.fast.extend_installs = incremental
    res = sim.run()
    fast = core.fast
    used = {"finish_one": core.stats.completed - fast.general_finishes,
            "extension": fast.install_extensions, "ordered": fast.order_extensions}
    return res, used


@pytest.mark.parametrize("policy", ["fifo", "fair", "edf-p", "rrh"])
@pytest.mark.parametrize("seed", [1, 2])
def test_fast_paths_equal_general_paths(policy: str, seed: int) -> None:
    cluster, jobs = workload(seed, shared_durations=seed == 2)
    general, _ = simulate(cluster, jobs, policy, fused=False, incremental=False)
    fast, used = simulate(cluster, jobs, policy, fused=True, incremental=True)
    assert general.stopped_early == "" and general.core.stats.completed > 300
    assert outputs(fast) == outputs(general)
    assert used["finish_one"] > 0.5 * general.core.stats.completed  # the fused path ran
    if policy == "fifo":  # a FIFO arrival extends the installed order, without decide()
        assert used["ordered"] > 0.5 * general.core.stats.decisions
    if policy == "fifo" or policy == "edf-p":  # the rest install incrementally or in full
        assert used["extension"] + used["ordered"] > 0
    if policy == "edf-p":  # an arrival with the latest deadline so far joins the end
        assert 0 < used["ordered"] < general.core.stats.decisions


def prioritised(seed: int) -> tuple[Cluster, list[Job]]:
    """The fast-path workload with random priorities, and jobs that arrive together."""
    cluster, jobs = workload(seed, n_jobs=40, capacity_changes=False)
    rng = np.random.default_rng(seed)
    out = []
    for i, j in enumerate(jobs):
        submit = jobs[i - 1].submit if i % 4 == 1 else j.submit  # every fourth pair together
        out.append(dataclasses.replace(j, submit=submit, priority=int(rng.integers(0, 3))
                                       if i % 3 == 0 else 0))
    return cluster, out


@pytest.mark.parametrize("policy", ["fifo", "edf-p"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_order_extension_with_priorities_and_simultaneous_arrivals(policy: str,
                                                                   seed: int) -> None:
    """Priorities put some arrivals ahead of jobs already granted (a full decision), and jobs
    that arrive together are sorted among themselves: the outputs are the full decisions'."""
    cluster, jobs = prioritised(seed)
    general, _ = simulate(cluster, jobs, policy, fused=True, incremental=True, ordered=False)
    fast, used = simulate(cluster, jobs, policy, fused=True, incremental=True)
    assert general.stopped_early == ""
    assert outputs(fast) == outputs(general)
    assert 0 < used["ordered"] < general.core.stats.decisions  # both kinds of arrival happened
    checked, _ = simulate(cluster, jobs, policy, fused=True, incremental=True, validate=True)
    assert outputs(checked) == outputs(general)  # validation takes the full decision


def test_fast_paths_with_online_estimates() -> None:
    """Online estimates through ``finish_one``: same outputs too."""
    cluster, jobs = workload(3)
    general, _ = simulate(cluster, jobs, "fair", fused=False, incremental=False,
                          estimates="online")
    fast, _ = simulate(cluster, jobs, "fair", fused=True, incremental=True,
                       estimates="online")
    assert outputs(fast) == outputs(general)


def test_each_fast_path_alone() -> None:
    """The fused completion, the incremental install and the order extension each alone
    change nothing either."""
    cluster, jobs = workload(4, capacity_changes=False)
    general = outputs(simulate(cluster, jobs, "fifo", fused=False, incremental=False)[0])
    assert outputs(simulate(cluster, jobs, "fifo", fused=True, incremental=False)[0]) == general
    only, used = simulate(cluster, jobs, "fifo", fused=False, incremental=True, ordered=False)
    assert outputs(only) == general and used["extension"] > 0 and used["ordered"] == 0
    only, used = simulate(cluster, jobs, "fifo", fused=False, incremental=False, ordered=True)
    assert outputs(only) == general and used["ordered"] > 0


def test_incremental_install_keeps_the_invariants() -> None:
    """With every runtime check on (``validate``: invariants after every batch, including the
    dispatch index sets of the grants kept by an incremental install)."""
    cluster, jobs = workload(5)
    sim = Simulation(cluster, jobs, make_policy("fifo"), validate=True)
    res = sim.run()
    assert res.stopped_early == "" and sim.core.fast.install_extensions > 0


def test_finish_one_equals_handle_on_a_core() -> None:
    """Driven directly: two cores, one fed ``finish_one``, one ``handle``, same commands."""
    cluster = make_cluster(2, slots=2, cpu=2, mem=8)
    job = Job("a", 0.0, (Stage("map", tuple(Task(5.0 + i, Resources(slots=1, cpu=1, mem=1))
                                            for i in range(6))),), Constant(1.0))
    from utilon.core.messages import JobSubmitted, TaskFinished, TaskRef

    cores = [SchedulerCore(cluster, make_policy("fifo")) for _ in range(2)]
    first = [c.handle(0.0, [JobSubmitted(job)]) for c in cores]
    assert first[0] == first[1] and len(first[0]) == 4
    for i, t in enumerate((5.0, 6.0, 7.0, 8.0, 9.0, 10.0)):
        ref = TaskRef("a", 0, i)
        assert cores[0].finish_one(t, ref) == cores[1].handle(t, [TaskFinished(ref)])
    assert cores[0].attempts == cores[1].attempts
    assert [j.finish for j in cores[0].jobs.values()] == [10.0]
    # a completion that raced a kill (not running) is counted stale by both
    assert cores[0].finish_one(11.0, TaskRef("a", 0, 0)) == []
    assert cores[0].stats.stale == 1


def test_submission_takes_the_demand_vectors_the_workload_check_computed() -> None:
    """``check_workload`` keeps each stage's demand vectors and the core takes them at the
    stage's submission (one computation per stage); a stage it never saw is computed then."""
    cluster, jobs = workload(3, n_jobs=8, capacity_changes=False)
    sim = Simulation(cluster, jobs[:6], make_policy("fifo"))
    kept = {key: vecs for key, (_, vecs) in sim.core.state.stage_vectors.items()}
    assert len(kept) == sum(len(j.stages) for j in jobs[:6])
    sim.run()
    assert not sim.core.state.stage_vectors  # every entry was taken
    for job in jobs[:6]:
        for st, rt in zip(job.stages, sim.core.jobs[job.id].stages, strict=True):
            assert rt.vectors is kept[id(st)]
    late = jobs[7]  # never checked: computed at its submission, with the same values
    sim.core.handle(late.submit + 1e4, [JobSubmitted(late)])
    rt = sim.core.jobs[late.id].stages[0]
    assert rt.vectors == [t.demand.vector(cluster.resource_names) for t in late.stages[0].tasks]


def test_timeline_pending_rows_reach_every_reader() -> None:
    tl = Timeline(2)
    n = PENDING_ROWS + 10
    for i in range(n):
        tl.attempt(i % 7, 0, i, i % 3, float(i), float(i) + 0.5, 1.0, "done" if i % 2 else
                   "killed")
    assert len(tl) == n
    assert 0 < len(tl.pending) < PENDING_ROWS  # one bulk move happened, some rows wait
    assert list(tl.task) == list(range(n))  # reading a column moves the rest
    assert not tl.pending and len(tl) == n
    assert list(tl.outcome[:2]) == [1, 0] and tl.end[3] == 3.5 and tl.machine[4] == 1



@pytest.mark.parametrize("policy", ["fifo", "edf-p", "fair"])
def test_a_decision_hook_sees_every_call_of_decide(policy: str) -> None:
    """``on_decision`` is promised the snapshot and ``decide``'s answer: with a hook every
    decision calls ``decide`` (no order extension), and the outputs are still the same."""
    cluster, jobs = workload(6, capacity_changes=False)
    pol = make_policy(policy)
    calls: list[float] = []
    decide = pol.decide

    def spy(snap: Any) -> Any:
        calls.append(snap.now)
        return decide(snap)

    pol.decide = spy  # type: ignore[method-assign]
    hooked: list[float] = []
    res = Simulation(cluster, jobs, pol, on_decision=lambda t, s, d: hooked.append(t)).run()
    assert hooked == calls and len(calls) == res.core.stats.decisions > 0
    plain, used = simulate(cluster, jobs, policy, fused=True, incremental=True)
    assert outputs(res) == outputs(plain)
    if policy == "fifo":
        assert used["ordered"] > 0  # without the hook, arrivals extend the order


@pytest.mark.parametrize("policy", ["fifo", "fair", "fair-slots", "edf-p"])
@pytest.mark.parametrize("changes", [False, True])
def test_unmetered_fluid_model_equals_metered(policy: str, changes: bool) -> None:
    """Without usage phases the fluid model keeps no usage until something may over-commit a
    machine (``FluidModel.metered``): recording usage meters from the start, and every other
    output is the same.  A slot limit (fair-slots) or a scale change starts the metering."""
    cluster, jobs = workload(7, capacity_changes=changes)
    runs = {}
    for record in (False, True):
        sim = Simulation(cluster, jobs, make_policy(policy), record_usage=record)
        runs[record] = (sim.run(), sim.fluid.metered)
    (plain, metered_at_end), (recorded, _) = runs[False], runs[True]
    assert plain.stopped_early == ""
    assert outputs(plain) == outputs(recorded)
    assert metered_at_end == (changes or policy == "fair-slots")
    if changes:
        assert plain.core.stats.lost > 0  # the machine that left took running tasks with it


def test_grants_of_finished_jobs_are_dropped_now_and_then() -> None:
    """The order extension leaves the grants of finished jobs in place and drops them once
    they outnumber the active jobs: the list stays bounded, the invariants hold after every
    event, and the outputs are the full decisions'."""
    cluster = make_cluster(2, slots=4, cpu=4, mem=16)
    demand = Resources(slots=1, cpu=1, mem=2)
    jobs = [Job(f"j{i:03d}", 5.0 * i, (Stage("map", (Task(3.0 + i % 4, demand),) * 2),),
                Constant(1.0)) for i in range(400)]  # one or two active at a time
    general, _ = simulate(cluster, jobs, "fifo", fused=True, incremental=True, ordered=False)
    sizes: list[int] = []  # the installed grants after every batch
    sim = Simulation(cluster, jobs, make_policy("fifo"), validate=True,
                     on_batch=lambda now, stimuli, cmds:
                     sizes.append(len(sim.core.grants.installed)))
    fast = sim.run()
    assert outputs(fast) == outputs(general)
    assert len(sizes) > 390 and max(sizes) <= 2 * 2 + 64 + 2  # bounded: dropped now and then
    assert min(sizes[100:]) < 10 < max(sizes[100:])  # and it did grow between the drops


@pytest.mark.parametrize("action", ["scale", "speed"])
def test_metering_starts_with_the_usage_of_the_running_tasks(action: str) -> None:
    """A machine scaled (or slowed) under running tasks: the metering that starts then counts
    the tasks already running, so they slow down exactly as in a model metered throughout."""
    cluster = make_cluster(1, slots=4, cpu=4, mem=16, timeline=[
        change(3.0, "m0", action, 0.5), change(50.0, "m0", action, 1.0)])
    demand = Resources(slots=1, cpu=1, mem=2)
    jobs = [Job("a", 0.0, (Stage("map", tuple(Task(10.0 + 0.1 * i, demand)
                                              for i in range(4))),), Constant(1.0)),
            Job("b", 1.0, (Stage("map", tuple(Task(7.0, demand) for _ in range(3))),),
                Constant(1.0))]
    res = {}
    for record in (False, True):
        sim = Simulation(cluster, jobs, make_policy("fifo"), record_usage=record)
        res[record] = sim.run()
        assert sim.fluid.metered
    assert outputs(res[False]) == outputs(res[True])
    first = [a for a in res[False].core.attempts if a.task[0] == "a"]
    # four tasks on a machine halved at t=3 shared half of it: the first ran at half speed
    assert len(first) == 4 and first[0].end == 3.0 + 2 * 7.0
    assert all(a.end - a.start > 10.0 + 0.1 * i + 5.0 for i, a in enumerate(first))
