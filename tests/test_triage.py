"""Triage, utilon's own policy: the behaviours its docstring promises, each on a case small
enough to work out by hand (liveness and invariants are the property tests' job)."""

from __future__ import annotations

from builders import make_cluster, make_job, run
from utilon.core import Decision
from utilon.policies import DEFAULT_POLICY, canonical, make_policy, policy_class
from utilon.policies.triage import Triage


def misses(result, deadlines: dict[str, float]) -> set[str]:
    return {j for j, d in deadlines.items() if result.core.jobs[j].finish > d + 1e-9}


def test_default_is_triage() -> None:
    assert DEFAULT_POLICY == "triage" and canonical("default") == "triage"
    assert policy_class("default") is Triage
    assert isinstance(make_policy("default", {"bound": 0.5}), Triage)


def test_moore_hodgson_saves_the_domino() -> None:
    """One slot, three jobs at once.  EDF serves A (goal 10), then B (finishes 20 > 19) and C
    (25 > 24) both miss; taking out A lets B and C keep their goals: one miss instead of
    two, and A is still served right after them."""
    cluster = make_cluster(1, slots=1, cpu=1, mem=1)
    deadlines = {"A": 10.0, "B": 19.0, "C": 24.0}
    jobs = [make_job("A", 0, maps=1, reduces=0, dur=10, deadline=10),
            make_job("B", 0, maps=1, reduces=0, dur=10, deadline=19),
            make_job("C", 0, maps=1, reduces=0, dur=5, deadline=24)]
    edf = run(cluster, jobs, "edf-p")
    assert misses(edf, deadlines) == {"B", "C"}
    reasons: list[tuple[str, str]] = []
    ours = run(cluster, jobs, "triage", on_decision=lambda now, snap, d: reasons.extend(
        (i.job, i.reason) for i in d.infeasible))
    assert misses(ours, deadlines) == {"A"}
    assert ours.core.jobs["A"].finish == 25.0  # not abandoned: next in line
    # the reason is given when A is deferred, and cleared when it is the only job left
    assert [j for j, _ in reasons] == ["A", "A"]
    assert reasons[0][1].startswith("deferred") and reasons[1][1] == ""


def test_a_late_job_past_its_bound_is_served_first() -> None:
    """With ``bound: 0`` no late job may wait for an on-time one: A (late alone) runs first,
    as under EDF; with the default bound it waits behind B, which then keeps its goal."""
    cluster = make_cluster(1, slots=1, cpu=1, mem=1)
    jobs = [make_job("A", 0, maps=1, reduces=0, dur=10, deadline=8),
            make_job("B", 0, maps=1, reduces=0, dur=10, deadline=12)]
    strict = run(cluster, jobs, "triage", bound=0.0)
    assert strict.core.jobs["A"].finish == 10.0 and strict.core.jobs["B"].finish == 20.0
    lenient = run(cluster, jobs, "triage")
    assert lenient.core.jobs["B"].finish == 10.0 and lenient.core.jobs["A"].finish == 20.0


def test_the_reserve_keeps_slots_for_short_jobs() -> None:
    """Big jobs with slack run 20 s tasks; a stream of 2 s jobs (one every 2 s, 6 s to
    finish) cannot wait for such a task to end.  Once triage has seen the stream, a big job
    may not grow into the reserve (twice the slots the stream holds on average: 2) while
    the short jobs are served uncapped; nobody misses more than under EDF-P."""
    cluster = make_cluster(2, slots=4, cpu=4, mem=16)
    bigs = [make_job(f"big{k}", 200 * k, maps=40, reduces=0, dur=20, deadline=200 * k + 5000)
            for k in range(5)]
    shorts = [make_job(f"s{i}", 1 + 2 * i, maps=1, reduces=0, dur=2, deadline=1 + 2 * i + 6)
              for i in range(500)]
    deadlines = {j.id: j.utility.goal for j in [*bigs, *shorts]}
    capped: list[tuple[str, int | None]] = []

    def record(now: float, snap: object, d: Decision) -> None:
        if now > 600:
            capped.extend((g.job, g.slots) for g in d.grants)

    ours = run(cluster, [*bigs, *shorts], "triage", on_decision=record)
    edf = run(cluster, [*bigs, *shorts], "edf-p")
    assert len(misses(ours, deadlines)) <= len(misses(edf, deadlines))
    assert not {b.id for b in bigs} & misses(ours, deadlines)
    big_caps = {slots for job, slots in capped if job.startswith("big")}
    assert any(c is not None and c < 8 for c in big_caps)
    assert {slots for job, slots in capped if job.startswith("s")} == {None}


def test_parameters_are_checked() -> None:
    import pytest

    from utilon.errors import ParameterError

    with pytest.raises(ParameterError, match="bound"):
        make_policy("triage", {"bound": -1})
    with pytest.raises(ParameterError, match="history"):
        make_policy("triage", {"history": 0})
    with pytest.raises(ParameterError, match="sizing"):
        make_policy("triage", {"sizing": "cores"})


def test_dominant_sizing_plans_in_the_bottleneck_resource() -> None:
    """One machine of 4 cores and 100 MB/s; tasks need a core and 50 MB/s, so two run at
    once, not four.  Planned in slots (cores) the job looks twice as fast as it is; with
    ``sizing: dominant`` a task counts as the half of the machine its I/O takes."""
    from utilon.model import Resources
    from utilon.policies.triage import dominant_scale, outlook

    cluster = make_cluster(capacities=[{"cpu": 4, "io": 100}])
    job = make_job("A", 0, maps=4, reduces=0, dur=10, demand=Resources(cpu=1, io=50))
    snaps = []
    run(cluster, [job], "fifo", on_decision=lambda now, snap, d: snaps.append(snap))
    snap = snaps[0]
    view = snap.jobs[0]
    scale = dominant_scale(snap)
    assert scale == (("io", 0.04),)  # 4 cores per 100 MB/s
    slots = outlook(view, 0.0, snap.total_slots)
    dominant = outlook(view, 0.0, snap.total_slots, scale=scale)
    assert slots is not None and dominant is not None
    assert (slots.work, slots.path) == (40.0, 10.0)
    assert (dominant.work, dominant.path) == (80.0, 20.0)


def test_the_adaptive_reserve_is_strict_only_while_slots_are_short() -> None:
    """A stream of 2 s jobs keeps a reserve of 2 of 8 slots while 20 s tasks run.  Two jobs
    with time to spare, 2 tasks each, arrive when the cluster could serve everyone: the
    adaptive reserve (the default) starts both at once; the strict one lets only the first
    grow and leaves the second waiting, with free slots, for a short job that does not need
    them (the light-hour delay of docs/league.md)."""
    cluster = make_cluster(2, slots=4, cpu=4, mem=16)
    long_ = [make_job(f"l{k}", 0, maps=1, reduces=0, dur=1200, deadline=20_000)
             for k in range(2)]
    shorts = [make_job(f"s{i}", 1 + 2 * i, maps=1, reduces=0, dur=2, deadline=1 + 2 * i + 6)
              for i in range(500)]
    spare = [make_job("A", 700.5, maps=2, reduces=0, dur=20, deadline=5000),
             make_job("B", 700.7, maps=2, reduces=0, dur=20, deadline=5000)]
    jobs = [*long_, *shorts, *spare]
    adaptive = run(cluster, jobs, "triage")
    strict = run(cluster, jobs, "triage", reserve="strict")
    assert adaptive.core.jobs["B"].start < 701.0
    assert strict.core.jobs["B"].start > adaptive.core.jobs["B"].start + 1.0
    deadlines = {j.id: j.utility.goal for j in jobs}
    assert len(misses(adaptive, deadlines)) <= len(misses(strict, deadlines))


def test_reserve_modes_are_checked() -> None:
    import pytest

    from utilon.errors import ParameterError

    assert make_policy("triage", {"reserve": True}).reserve_mode == "adaptive"
    assert make_policy("triage", {"reserve": False}).reserve_mode == "off"
    with pytest.raises(ParameterError, match="reserve"):
        make_policy("triage", {"reserve": "sometimes"})
