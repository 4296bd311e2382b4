"""Baseline policies (fifo, fair, fair-slots, edf-n, edf-p) and the policy registry."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import (
    BASELINES,
    ScriptedPolicy,
    attempts_of,
    check_run_invariants,
    make_cluster,
    make_job,
    max_concurrency,
    run,
    running_at,
)
from utilon.core import ClusterSnapshot, Decision, Grant, JobSubmitted, SlotLimit
from utilon.core.scheduler import SchedulerCore
from utilon.errors import ParameterError, UnknownNameError
from utilon.model import Cluster, Job, Resources, Sigmoid, SoftHard
from utilon.policies import (
    Policy,
    make_policy,
    policy_class,
    policy_names,
    policy_parameters,
    register,
)
from utilon.policies import base as policy_base
from utilon.policies.edf import deadline_key
from utilon.policies.fair import FairSlots, fair_decision, max_min_fair, whole_tasks


def snapshot_of(cluster: Cluster, jobs: Sequence[Job], at: float | None = None
                ) -> ClusterSnapshot:
    """The snapshot a policy would see right after ``jobs`` arrived (nothing launched)."""
    core = SchedulerCore(cluster, ScriptedPolicy(lambda s: Decision()))
    for j in jobs:
        core.handle(j.submit if at is None else at, [JobSubmitted(j)])
    return core.snapshot()


def starts(result) -> dict[str, float | None]:  # type: ignore[no-untyped-def]
    return {j.id: j.start for j in result.core.jobs.values()}


def finishes(result) -> dict[str, float | None]:  # type: ignore[no-untyped-def]
    return {j.id: j.finish for j in result.core.jobs.values()}


# ------------------------------------------------------------------------------ registry
def test_baselines_are_registered() -> None:
    assert set(BASELINES) <= set(policy_names())
    assert policy_names() == sorted(policy_names())
    for name in BASELINES:
        cls = policy_class(name)
        assert cls.name == name and cls.summary
        assert isinstance(make_policy(name), Policy)


def test_unknown_policy_lists_valid_names() -> None:
    with pytest.raises(UnknownNameError) as info:
        make_policy("fiffo")
    err = info.value
    assert err.kind == "policy" and err.name == "fiffo"
    assert set(BASELINES) <= set(err.valid)
    text = str(err)
    assert "unknown policy 'fiffo'; valid: " in text
    assert "edf-n, edf-p, fair, fair-slots, fifo" in text
    assert "utilon policies" in text  # the fix hint


def test_unknown_parameter_lists_accepted_ones() -> None:
    with pytest.raises(ParameterError,
                       match="policy 'fair-slots' has no parameter 'kk'; it accepts: k, reduce_k"):
        make_policy("fair-slots", {"kk": 2})
    with pytest.raises(ParameterError, match="policy 'fifo' has no parameter 'k'; it accepts: "
                                             "none"):
        make_policy("fifo", {"k": 2})


@pytest.mark.parametrize("bad", ["two", 2.5, [2], None])
def test_wrong_parameter_type(bad: object) -> None:
    with pytest.raises(ParameterError, match=r"policy 'fair-slots': parameter 'k'=") as info:
        make_policy("fair-slots", {"k": bad}, where="s.yaml: policies.fair-slots")
    assert str(info.value).startswith("s.yaml: policies.fair-slots: ")


def test_parameter_values_are_validated_and_coerced() -> None:
    p = make_policy("fair-slots", {"k": "3", "reduce_k": 1})
    assert isinstance(p, FairSlots) and p.k == 3 and p.reduce_k == 1
    assert p.params() == {"k": 3, "reduce_k": 1}
    assert repr(p) == "FairSlots(k=3, reduce_k=1)"
    with pytest.raises(ParameterError, match="policy 'fair-slots': k must be >= 1"):
        make_policy("fair-slots", {"k": 0})
    with pytest.raises(ParameterError, match="reduce_k must be >= 1"):
        make_policy("fair-slots", {"reduce_k": 0})


def test_policy_parameters() -> None:
    assert policy_parameters("fair-slots") == {"k": (int, 4), "reduce_k": (int | None, None)}
    assert policy_parameters("fifo") == {}
    assert make_policy("fifo").params() == {}


def test_register_rejects_duplicates_and_makes_policy_available() -> None:
    name = f"test-{uuid.uuid4().hex[:8]}"

    class Needs(Policy):
        summary = "test"

        def __init__(self, level: int) -> None:
            self.level = level

        def decide(self, snapshot: ClusterSnapshot) -> Decision:
            return Decision()

    Needs.name = name
    try:
        register(Needs)
        assert name in policy_names()
        assert make_policy(name, {"level": 2}).params() == {"level": 2}
        with pytest.raises(ParameterError, match=f"policy '{name}' needs parameter"):
            make_policy(name)
        with pytest.raises(ValueError, match="registered twice"):
            register(Needs)
    finally:
        policy_base._REGISTRY.pop(name, None)
    assert name not in policy_names()


# ------------------------------------------------------------------------------ fifo
def test_fifo_orders_by_priority_then_submit() -> None:
    cl = make_cluster(1)
    jobs = [make_job("a", submit=0), make_job("b", submit=1), make_job("c", submit=2, priority=1),
            make_job("d", submit=2), make_job("e", submit=3, priority=-1)]
    d = make_policy("fifo").decide(snapshot_of(cl, jobs))
    assert [g.job for g in d.grants] == ["c", "a", "b", "d", "e"]
    assert all(g.slots is None for g in d.grants) and not d.backfill


def test_fifo_run_serves_jobs_in_order() -> None:
    cl = make_cluster(1, slots=1)
    jobs = [make_job("a", submit=0, maps=1, reduces=0),
            make_job("b", submit=1, maps=1, reduces=0),
            make_job("c", submit=2, maps=1, reduces=0, priority=1),
            make_job("d", submit=3, maps=1, reduces=0)]
    res = run(cl, jobs, "fifo")
    assert starts(res) == {"a": 0, "b": 20, "c": 10, "d": 30}
    check_run_invariants(res, cl, jobs)


def test_fifo_head_job_takes_every_slot_it_can_use() -> None:
    cl = make_cluster(2, slots=2)
    jobs = [make_job("a", maps=3, reduces=0), make_job("b", maps=4, reduces=0)]
    res = run(cl, jobs, "fifo")
    assert running_at(res, 0, "a") == 3 and running_at(res, 0, "b") == 1
    assert not attempts_of(res, outcome="killed")


# ------------------------------------------------------------------------------ fair shares
def test_max_min_fair_equal_split() -> None:
    assert max_min_fair(12, [100, 100, 100], [1, 1, 1]) == pytest.approx([4, 4, 4])


def test_max_min_fair_weights() -> None:
    assert max_min_fair(12, [100, 100], [1, 2]) == pytest.approx([4, 8])


def test_max_min_fair_demand_caps_and_redistribution() -> None:
    # the small job is capped at its demand; what it leaves is split by weight
    assert max_min_fair(10, [2, 8, 20], [1, 1, 1]) == pytest.approx([2, 4, 4])
    assert max_min_fair(10, [1, 100, 100], [1, 1, 3]) == pytest.approx([1, 2.25, 6.75])
    assert max_min_fair(10, [1, 2], [1, 1]) == pytest.approx([1, 2])  # everyone satisfied
    assert max_min_fair(4, [0, 5], [1, 1]) == pytest.approx([0, 4])


def test_max_min_fair_edge_cases() -> None:
    assert max_min_fair(10, [], []) == []
    assert max_min_fair(0, [3, 3], [1, 1]) == [0, 0]


@given(
    capacity=st.floats(0, 100),
    jobs=st.lists(st.tuples(st.floats(0, 50), st.floats(0.1, 5)), min_size=1, max_size=8),
)
def test_max_min_fair_properties(capacity: float, jobs: list[tuple[float, float]]) -> None:
    demands = [d for d, _ in jobs]
    weights = [w for _, w in jobs]
    shares = max_min_fair(capacity, demands, weights)
    tol = 1e-6 * (1 + capacity)
    assert all(-tol <= s <= d + tol for s, d in zip(shares, demands, strict=True))
    total = sum(shares)
    assert total <= capacity + tol
    assert total == pytest.approx(min(capacity, sum(demands)), abs=tol)  # no waste
    # max-min: a job below its demand has the highest weighted share
    for i, (s, d, w) in enumerate(zip(shares, demands, weights, strict=True)):
        if s < d - tol:
            for j, (s2, w2) in enumerate(zip(shares, weights, strict=True)):
                if j != i:
                    assert s2 / w2 <= s / w + tol


def test_whole_tasks_rounding() -> None:
    assert whole_tasks([1.5, 1.5], [3, 3], 3) == [2, 1]  # tie: the first
    assert whole_tasks([0.4, 2.6], [5, 5], 3) == [0, 3]  # largest remainder
    assert whole_tasks([2.5, 2.5], [2, 9], 5) == [2, 3]  # capped at what a job can run
    assert whole_tasks([3.0, 1.0], [3, 1], 4) == [3, 1]
    assert whole_tasks([0.5, 0.5], [1, 1], 1) == [1, 0]


@given(st.lists(st.tuples(st.floats(0, 20), st.integers(0, 20)), min_size=1, max_size=8))
def test_whole_tasks_properties(items: list[tuple[float, int]]) -> None:
    shares = [min(s, c) for s, c in items]
    caps = [c for _, c in items]
    total = int(sum(shares) + 1e-9)
    out = whole_tasks(shares, caps, total)
    assert sum(out) <= total
    for o, s, c in zip(out, shares, caps, strict=True):
        assert 0 <= o <= c
        assert o in (int(s + 1e-9), int(s + 1e-9) + 1)


def test_fair_decision_shares_and_order() -> None:
    cl = make_cluster(2, slots=3)  # 6 slots
    jobs = [make_job("a", maps=10, reduces=0), make_job("b", maps=1, reduces=0),
            make_job("c", maps=10, reduces=0, weight=2)]
    snap = snapshot_of(cl, jobs)
    d = make_policy("fair").decide(snap)
    # b needs 1; a and c split the remaining 5 as 1:2 -> 1.67 / 3.33 -> whole tasks 2 / 3
    assert {g.job: g.slots for g in d.grants} == {"a": 2, "b": 1, "c": 3}
    assert d.backfill and d.slot_limit is None
    assert fair_decision([], 10) == Decision()


def test_fair_grants_most_starved_job_first() -> None:
    cl = make_cluster(1, slots=4, cpu=4)
    jobs = [make_job("a", maps=8, reduces=0), make_job("b", submit=1, maps=8, reduces=0)]
    seen: list[list[tuple[str, int | None]]] = []

    def record(t, snap, decision):  # type: ignore[no-untyped-def]
        seen.append([(g.job, g.slots) for g in decision.grants])

    run(cl, jobs, "fair", on_decision=record)
    assert seen[0] == [("a", 4)]
    assert seen[1] == [("b", 2), ("a", 2)]  # b runs nothing: it goes first


def test_fair_run_gives_equal_jobs_equal_slots() -> None:
    cl = make_cluster(2, slots=2)
    jobs = [make_job("a", maps=8, reduces=0), make_job("b", maps=8, reduces=0)]
    res = run(cl, jobs, "fair")
    for t in (0, 10, 20, 30):
        assert running_at(res, t, "a") == running_at(res, t, "b") == 2
    assert finishes(res) == {"a": 40, "b": 40}
    check_run_invariants(res, cl, jobs)


def test_fair_late_job_gets_its_share_without_killing() -> None:
    cl = make_cluster(1, slots=4)
    jobs = [make_job("a", maps=12, reduces=0), make_job("b", submit=5, maps=8, reduces=0)]
    res = run(cl, jobs, "fair")
    assert running_at(res, 0, "a") == 4
    assert running_at(res, 5, "a") == 4  # nothing killed at b's arrival
    assert running_at(res, 10, "a") == running_at(res, 10, "b") == 2
    assert not attempts_of(res, outcome="killed")
    check_run_invariants(res, cl, jobs)


def test_fair_weights_on_a_run() -> None:
    cl = make_cluster(1, slots=4)
    jobs = [make_job("a", maps=8, reduces=0), make_job("b", maps=8, reduces=0, weight=3)]
    res = run(cl, jobs, "fair")
    assert (running_at(res, 0, "a"), running_at(res, 0, "b")) == (1, 3)


def test_fair_is_work_conserving() -> None:
    cl = make_cluster(1, slots=4)
    jobs = [make_job("a", maps=1, reduces=0, dur=100), make_job("b", maps=8, reduces=0)]
    res = run(cl, jobs, "fair")
    assert running_at(res, 0, "b") == 3  # b's share is 3, and a cannot use more than 1
    assert running_at(res, 10, "b") == 3


# ------------------------------------------------------------------------------ edf
def test_deadline_key_uses_the_utility_goal() -> None:
    cl = make_cluster(1)
    jobs = [make_job("none", submit=0), make_job("late", submit=1, deadline=500),
            make_job("soft", submit=2, utility=SoftHard(2, 100, 200)),
            make_job("sig", submit=3, utility=Sigmoid(1, 1, 100))]
    snap = snapshot_of(cl, jobs)
    order = sorted(snap.jobs, key=deadline_key)
    assert [j.id for j in order] == ["soft", "sig", "late", "none"]  # ties: earlier submit
    d = make_policy("edf-p").decide(snap)
    assert [g.job for g in d.grants] == ["soft", "sig", "late", "none"]
    assert all(g.slots is None and not g.kill_excess for g in d.grants)


def test_edf_n_grants_only_the_earliest_deadline_when_nothing_runs() -> None:
    cl = make_cluster(1)
    snap = snapshot_of(cl, [make_job("a", deadline=300), make_job("b", deadline=100),
                            make_job("c", deadline=200)])
    d = make_policy("edf-n").decide(snap)
    assert [g.job for g in d.grants] == ["b"]
    assert make_policy("edf-n").decide(snapshot_of(cl, [])) == Decision()


def _edf_n_by_scan(snap: ClusterSnapshot) -> Decision:
    """EDF-N's decision by the plain scan over the queue (RDS §6), the reference."""
    pool = [j for j in snap.jobs if j.started is not None] or list(snap.jobs)
    return Decision(grants=(Grant(min(pool, key=deadline_key).id),)) if pool else Decision()


@given(st.lists(st.tuples(st.sampled_from([0.0, 5.0, 10.0]),  # submit
                          st.sampled_from([50.0, 80.0, None]),  # deadline (many ties)
                          st.integers(1, 3), st.integers(0, 1)),  # maps, reduces
                min_size=1, max_size=12))
def test_edf_n_heap_decides_as_the_scan_in_a_run(specs: list) -> None:  # type: ignore[type-arg]
    """Every decision of a run equals the scan's on the same snapshot.  Ids sort against
    arrival order (z, y, x, ...), so equal deadlines and submits are told apart by arrival,
    as the scan's position does, and not by id."""
    jobs = [make_job(f"{chr(ord('z') - i)}{i}", submit=sub, maps=maps, reduces=red, dur=7,
                     deadline=dl) for i, (sub, dl, maps, red) in enumerate(specs)]
    seen: list[tuple[Decision, Decision]] = []
    res = run(make_cluster(1, slots=2), sorted(jobs, key=lambda j: j.submit), "edf-n",
              on_decision=lambda t, s, d: seen.append((d, _edf_n_by_scan(s))))
    assert seen and all(d == ref for d, ref in seen)
    assert all(j.finish is not None for j in res.core.jobs.values())


def test_edf_n_heap_ties_go_to_the_earlier_arrival_not_the_id() -> None:
    cl = make_cluster(1)
    pol = make_policy("edf-n")
    jobs = [make_job(i, submit=0, deadline=100) for i in ("b", "a", "c")]
    assert pol.decide(snapshot_of(cl, jobs)).grants[0].job == "b"
    # a later snapshot of the same run: "b" has gone, "d" arrived with an earlier deadline
    snap = snapshot_of(cl, [*jobs[1:], make_job("d", submit=0, deadline=90)])
    assert pol.decide(snap).grants[0].job == "d"
    snap = snapshot_of(cl, jobs[1:])
    assert pol.decide(snap).grants[0].job == "a"


def test_edf_n_heap_is_not_fooled_by_snapshots_from_elsewhere() -> None:
    """The same policy object on unrelated snapshots (an id reused with another deadline)
    still decides as the scan; ``bind`` starts a run afresh."""
    cl = make_cluster(1)
    pol = make_policy("edf-n")
    first = snapshot_of(cl, [make_job("a", deadline=100), make_job("b", deadline=200)])
    assert pol.decide(first) == _edf_n_by_scan(first)
    other = snapshot_of(cl, [make_job("a", deadline=300), make_job("b", deadline=200)])
    assert pol.decide(other) == _edf_n_by_scan(other)
    assert pol.decide(other).grants[0].job == "b"
    pol.bind(cl)
    assert pol.decide(first).grants[0].job == "a"


def test_edf_n_runs_one_job_at_a_time_and_does_not_switch() -> None:
    cl = make_cluster(1, slots=2)
    jobs = [make_job("a", maps=4, reduces=1, deadline=1000),
            make_job("b", submit=5, maps=2, reduces=0, deadline=50),
            make_job("c", submit=6, maps=2, reduces=0, deadline=40)]
    decisions: list[list[str]] = []
    res = run(cl, jobs, "edf-n", on_decision=lambda t, s, d: decisions.append(
        [g.job for g in d.grants]))
    assert all(len(g) == 1 for g in decisions)
    # a keeps the cluster (even while its reduce leaves a slot idle); then c, the earlier
    # deadline of the two waiting jobs, then b
    assert finishes(res) == {"a": 30, "c": 40, "b": 50}
    by_job = {j: [(a.start, a.end) for a in attempts_of(res, j)] for j in "abc"}
    for x in "abc":
        for y in "abc":
            if x < y:
                assert (max(e for _, e in by_job[x]) <= min(s for s, _ in by_job[y])
                        or max(e for _, e in by_job[y]) <= min(s for s, _ in by_job[x]))
    assert running_at(res, 25) == 1  # the reduce runs alone
    check_run_invariants(res, cl, jobs)


def test_edf_p_gives_freed_slots_to_the_earlier_deadline_without_killing() -> None:
    cl = make_cluster(1, slots=2)
    jobs = [make_job("a", maps=4, reduces=0, deadline=1000),
            make_job("b", submit=5, maps=2, reduces=0, deadline=50)]
    res = run(cl, jobs, "edf-p")
    assert not [a for a in res.core.attempts if a.outcome != "done"]
    assert running_at(res, 5, "a") == 2  # b's arrival kills nothing
    assert [a.start for a in attempts_of(res, "b")] == [10, 10]  # the freed slots go to b
    assert finishes(res) == {"a": 30, "b": 20}
    check_run_invariants(res, cl, jobs)


def test_edf_p_backfills_other_jobs() -> None:
    cl = make_cluster(1, slots=4)
    jobs = [make_job("a", maps=1, reduces=0, deadline=10),
            make_job("b", maps=8, reduces=0, deadline=100)]
    res = run(cl, jobs, "edf-p")
    assert running_at(res, 0, "a") == 1 and running_at(res, 0, "b") == 3


# ------------------------------------------------------------------------------ fair-slots
@pytest.mark.parametrize(("cpu", "k"), [(0.5, 2), (4, 2), (1, 3)])
def test_fair_slots_runs_k_tasks_per_machine_whatever_they_declare(cpu: float, k: int) -> None:
    cl = make_cluster(capacities=[{"cpu": 4}, {"cpu": 4}])
    jobs = [make_job("a", maps=12, reduces=0, demand=Resources(cpu=cpu))]
    res = run(cl, jobs, "fair-slots", k=k)
    for m in ("m0", "m1"):
        assert max_concurrency(a for a in res.core.attempts if a.machine == m) == k
    check_run_invariants(res, cl, jobs)


def test_fair_slots_over_commit_slows_tasks() -> None:
    cl = make_cluster(capacities=[{"cpu": 4}])
    jobs = [make_job("a", maps=2, reduces=0, dur=10, demand=Resources(cpu=4))]
    res = run(cl, jobs, "fair-slots", k=2)
    assert [(a.start, a.end) for a in res.core.attempts] == [(0, 20), (0, 20)]


def test_fair_slots_reduce_pool() -> None:
    cl = make_cluster(1, slots=1)
    jobs = [make_job("a", maps=1, reduces=3, dur=10), make_job("b", maps=3, reduces=0, dur=10)]
    res = run(cl, jobs, "fair-slots", k=1, reduce_k=2)
    reduces = [a for a in res.core.attempts if a.task.job == "a" and a.task.stage == 1]
    assert max_concurrency(reduces) == 2
    assert max_concurrency(a for a in res.core.attempts if a not in reduces) == 1
    check_run_invariants(res, cl, jobs)


def test_fair_slots_decision() -> None:
    cl = make_cluster(3, slots=1, initially_down=["m2"])
    jobs = [make_job("a", maps=9, reduces=0), make_job("b", maps=9, reduces=0)]
    d = make_policy("fair-slots", {"k": 3}).decide(snapshot_of(cl, jobs))
    assert d.slot_limit == SlotLimit(3, None)
    assert {g.job: g.slots for g in d.grants} == {"a": 3, "b": 3}  # 2 up machines x 3 slots
    assert d.backfill


def test_every_baseline_finishes_a_mixed_workload() -> None:
    cl = make_cluster(2, slots=2)
    jobs = [make_job("a", maps=3, reduces=1, deadline=80),
            make_job("b", submit=2, maps=2, reduces=2, deadline=40, priority=1),
            make_job("c", submit=4, maps=1, reduces=0, dur=3, deadline=20)]
    for name in BASELINES:
        res = run(cl, jobs, name)
        assert res.stopped_early == "", name
        assert all(f is not None for f in finishes(res).values()), name
        check_run_invariants(res, cl, jobs)


def test_grant_helper_policy_is_not_registered() -> None:
    assert ScriptedPolicy.name not in policy_names()
    assert Grant("x").to_dict() == {"job": "x", "slots": None}


def test_builtin_table_names_what_the_modules_register() -> None:
    """policies.base.BUILTINS lets names be listed without importing policy modules; it must
    say exactly which names each module registers, and in which world."""
    import importlib

    from utilon.policies import base

    modules = {m for _, m in base.BUILTINS.values()}
    for m in modules:
        importlib.import_module(m)
    registered = {n: (c.world, c.__module__) for n, c in base._REGISTRY.items()
                  if c.__module__ in modules or n in base.BUILTINS}
    assert registered == base.BUILTINS
