"""Issue 47: ``validate`` (and the service's submissions) build jobs at a cost that grows with
what a scenario *says*, not with the tasks it expands to.  Counted, not timed: a stage's
demand and usage phases are checked once per stage, however many tasks it samples, and
``Task.many`` gives the errors a task-by-task build gives."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import utilon.model.job as job_module
from utilon.errors import ModelError
from utilon.model import Resources, Task, UsagePhase
from utilon.scenario import load_workload

ROOT = Path(__file__).resolve().parent.parent
FACEBOOK = ROOT / "examples" / "facebook-mix.yaml"  # 300 jobs, 27,419 sampled tasks


def test_a_stage_s_demand_is_checked_once_not_once_per_task(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"shared": 0, "nonnegative": 0}
    check_shared = job_module._check_shared
    is_nonnegative = Resources.is_nonnegative

    def counted_shared(*args: object) -> None:
        calls["shared"] += 1
        check_shared(*args)  # type: ignore[arg-type]

    def counted_nonnegative(self: Resources) -> bool:
        calls["nonnegative"] += 1
        return is_nonnegative(self)

    monkeypatch.setattr(job_module, "_check_shared", counted_shared)
    monkeypatch.setattr(Resources, "is_nonnegative", counted_nonnegative)
    w = load_workload(FACEBOOK)
    stages = sum(len(j.stages) for j in w.jobs)
    tasks = sum(j.n_tasks for j in w.jobs)
    assert tasks > 20 * stages  # the scenario samples thousands of tasks in a few stages
    assert calls["shared"] == stages
    # and no other per-task check on the way: the rest are the machines' capacities
    assert calls["nonnegative"] == stages + len(w.cluster.machines)


def test_many_shares_equal_tasks_and_keeps_order() -> None:
    d = Resources(cpu=1)
    tasks = Task.many([3, 1.0, 3.0, 2], d)
    assert [t.duration for t in tasks] == [3.0, 1.0, 3.0, 2.0]
    assert all(type(t.duration) is float for t in tasks)
    assert tasks[0] is tasks[2] and tasks[0] == Task(3.0, d)
    assert Task.many(iter([5.0, 5.0]), d) == (Task(5.0, d), Task(5.0, d))  # any iterable
    assert Task.many([], Resources(cpu=-1)) == ()  # no task, nothing to check
    with pytest.raises(AttributeError):  # still a frozen value
        tasks[0].duration = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("durations", [[1.0, 0.0], [math.nan], [2.0, 2.0, -math.inf]])
def test_many_refuses_what_task_refuses(durations: list[float]) -> None:
    with pytest.raises(ModelError, match="task duration must be a positive number"):
        Task.many(durations, Resources(cpu=1))


def test_many_reports_the_error_a_task_by_task_build_reports_first() -> None:
    bad = Resources(cpu=-1)
    with pytest.raises(ModelError, match="task duration"):  # the first task's duration
        Task.many([0.0, 1.0], bad)
    with pytest.raises(ModelError, match="demand must be non-negative"):
        Task.many([1.0, 0.0], bad)
    with pytest.raises(ModelError, match=r"fractions sum to 0\.5, not 1"):
        Task.many([1.0], Resources(cpu=1), (UsagePhase(0.5, Resources(cpu=1)),))
