"""The liveness failures reported against utilon, each pinned as a regression test.

Every policy must finish every job that can run; a job that can never run under a policy's
parameters is refused before the run with one line naming the job, the stage and why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import check_run_invariants, run, single_stage_job
from utilon.core.feasibility import Unrunnable
from utilon.model import (
    CapacityAction,
    CapacityChange,
    Cluster,
    Job,
    Machine,
    Resources,
    Stage,
    Task,
)
from utilon.policies import policy_names
from utilon.runner import make_backend, run_live, run_policy
from utilon.scenario import load_workload

ROOT = Path(__file__).resolve().parents[1]


def one_machine(**capacity: float) -> Cluster:
    return Cluster((Machine("m", Resources(capacity)),))


@pytest.mark.parametrize("policy", policy_names())
def test_tasks_that_take_a_whole_multi_resource_machine(policy: str) -> None:
    """{cpu: 2, mem: 4}, two tasks of {cpu: 2, mem: 1}: alsched stopped with "no task can
    run" (it counted one task as one cpu)."""
    cl = one_machine(cpu=2, mem=4)
    job = single_stage_job("j", [(22.0, Resources(cpu=2, mem=1))] * 2)
    res = run(cl, [job], policy)
    assert res.stopped_early == ""
    assert res.core.jobs["j"].finish == pytest.approx(44.0)
    check_run_invariants(res, cl, [job])


@pytest.mark.parametrize("policy", policy_names())
def test_a_gang_reduce_stage_on_one_machine(policy: str) -> None:
    """{slots: 8}, a job whose reduce stage of 2 tasks is a gang: RAS idled for 1,000 control
    ticks (it placed the gang's reducers one per TaskTracker)."""
    cl = one_machine(slots=8)
    maps = Stage("map", tuple(Task(10.0, Resources(slots=1)) for _ in range(2)), kind="map")
    reduce = Stage("reduce", tuple(Task(10.0, Resources(slots=1)) for _ in range(2)),
                   after=("map",), kind="reduce", gang=True)
    job = Job("j", 0.0, (maps, reduce))
    res = run(cl, [job], policy)
    assert res.stopped_early == ""
    assert res.core.jobs["j"].finish == pytest.approx(20.0)
    check_run_invariants(res, cl, [job])


def test_a_gang_wider_than_fair_slots_k_is_refused_up_front() -> None:
    """fair-slots with k=4 and a gang of 5 on one machine stopped early mid-run; it must be
    refused before the run, naming the job, the stage and the parameter."""
    cl = one_machine(slots=8)
    job = single_stage_job("wide", [(10.0, Resources(slots=1))] * 5, gang=True)
    with pytest.raises(Unrunnable) as ei:
        run(cl, [job], "fair-slots", k=4)
    line = ei.value.one_line()
    assert "job wide: gang stage 's' needs 5 tasks at once" in line
    assert "k=4" in line and "policy 'fair-slots'" in line and "raise k" in line
    assert run(cl, [job], "fair-slots", k=5).core.jobs["wide"].finish == 10.0
    assert run(cl, [job], "fifo").core.jobs["wide"].finish == 10.0


@pytest.mark.parametrize("policy", ["alsched", "ras"])
def test_live_mix_finishes_in_simulation(policy: str) -> None:
    """``examples/live-mix.yaml`` under alsched never started nbody (a gang across two
    one-slot machines) and so never wordcount-2 either."""
    w = load_workload(ROOT / "examples" / "live-mix.yaml")
    out = run_policy(w, policy)
    assert out.summary["stopped_early"] == ""
    assert out.summary["finished"] == out.summary["jobs"] == 6
    assert out.summary["unfinished"] == 0


@pytest.mark.live
def test_live_mix_runs_for_real_under_alsched(tmp_path: Path) -> None:
    w = load_workload(ROOT / "examples" / "live-mix.yaml")
    res = run_live(w, "alsched", make_backend("local"), out_dir=tmp_path / "run")
    s = res.summary
    assert s["stopped_early"] == "" and s["finished"] == s["jobs"] == 6
    assert s["verified"]["ok"] == 6 and s["verified"]["failed"] == 0


@pytest.mark.parametrize("action", [CapacityAction.SCALE, CapacityAction.SPEED])
@pytest.mark.parametrize("policy", policy_names())
def test_a_machine_scaled_to_zero_under_running_tasks_ends_the_run(
        policy: str, action: CapacityAction) -> None:
    """Tasks running on a machine scaled (or slowed) to zero make no progress: a tick-driven
    policy (RAS) kept ticking forever because something was "running"."""
    cl = Cluster((Machine("m", Resources(slots=2)),),
                 timeline=(CapacityChange(5.0, "m", action, 0.0),))
    job = single_stage_job("j", [(22.0, Resources(slots=1))] * 2)
    res = run(cl, [job], policy)
    assert res.stopped_early == "no task can run and nothing will change"
    assert res.core.jobs["j"].finish is None
