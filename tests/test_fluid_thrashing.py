"""The fluid model's opt-in over-commitment penalty (``Cluster.thrashing``) and the opt-in
record of actual resource use per machine (``record_usage``, ``utilon.sim.usage``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from builders import change, make_cluster, make_job
from utilon.errors import ModelError, ScenarioError
from utilon.model import Cluster, Job, Resources, UsagePhase
from utilon.policies import make_policy
from utilon.scenario import load_workload, parse_scenario
from utilon.sim import SimResult, Simulation
from utilon.sim.usage import UsageTrace, bucket_means

ROOT = Path(__file__).resolve().parents[1]
MULTI = ROOT / "examples" / "multi-resource.yaml"


def sim(cluster: Cluster, jobs: list[Job], policy: str = "fifo", *, record: bool = False,
        **params: Any) -> SimResult:
    return Simulation(cluster, jobs, make_policy(policy, params), validate=True,
                      record_attempts=True, record_usage=record).run()


def outputs(res: SimResult) -> tuple[Any, ...]:
    return (res.end_time, res.events, res.task_events,
            [(j.id, j.start, j.finish) for j in res.core.jobs.values()],
            [(a.task, a.machine, a.start, a.end, a.outcome) for a in res.core.attempts])


def io_pair(**thrashing: float) -> tuple[Cluster, list[Job]]:
    """One machine with io capacity 1 and two tasks using 0.8 io (and 1 cpu) each for 10 s."""
    cl = make_cluster(capacities=[{"cpu": 2, "io": 1}])
    cl = dataclasses.replace(cl, thrashing=tuple(thrashing.items()))
    ph = (UsagePhase(1.0, Resources(cpu=1, io=0.8)),)
    return cl, [make_job("j", maps=2, reduces=0, dur=10, demand=Resources(cpu=1), phases=ph)]


def multi_resource(seed: int | None = None) -> tuple[Cluster, list[Job]]:
    w = load_workload(MULTI, seed=seed)
    return w.cluster, list(w.jobs)


# ------------------------------------------------------------------------------ the model
def test_cluster_thrashing_is_validated_sorted_and_looked_up() -> None:
    base = make_cluster(capacities=[{"cpu": 2, "io": 1, "mem": 4}])
    cl = dataclasses.replace(base, thrashing=(("mem", 2), ("io", 0.5)))  # type: ignore[arg-type]
    assert cl.thrashing == (("io", 0.5), ("mem", 2.0))
    assert cl.thrashing_of("io") == 0.5 and cl.thrashing_of("cpu") == 0.0
    assert dataclasses.replace(base, thrashing={"io": 1}).thrashing == (  # type: ignore[arg-type]
        ("io", 1.0),)
    assert base.thrashing == ()
    for bad, msg in [((("io", -1.0),), "must be a finite number >= 0"),
                     ((("io", float("nan")),), "must be a finite number >= 0"),
                     ((("io", 1.0), ("io", 2.0)), "given twice"),
                     ((("disk", 1.0),), "unknown resource 'disk'")]:
        with pytest.raises(ModelError, match=msg):
            dataclasses.replace(base, thrashing=bad)


# ------------------------------------------------------------------------------ the law
def test_gamma_zero_is_proportional_sharing() -> None:
    cl, jobs = io_pair()
    assert [a.end for a in sim(cl, jobs).core.attempts] == [16.0, 16.0]
    cl, jobs = io_pair(io=0.0)
    assert [a.end for a in sim(cl, jobs).core.attempts] == [16.0, 16.0]


def test_thrashing_slows_over_committed_tasks_by_the_power_law() -> None:
    cl, jobs = io_pair(io=1.0)
    factor = (1 / 1.6) ** 2  # (C/U)^(1+gamma)
    ends = [a.end for a in sim(cl, jobs).core.attempts]
    assert ends == [pytest.approx(10 / factor, abs=1e-9)] * 2
    assert ends[0] == pytest.approx(25.6, abs=1e-9)


def test_thrashing_does_not_touch_machines_that_fit() -> None:
    cl = dataclasses.replace(make_cluster(capacities=[{"cpu": 2, "io": 1}]),
                             thrashing=(("io", 3.0),))
    ph = (UsagePhase(1.0, Resources(cpu=1, io=0.5)),)
    jobs = [make_job("j", maps=2, reduces=0, dur=10, demand=Resources(cpu=1), phases=ph)]
    assert [a.end for a in sim(cl, jobs).core.attempts] == [10.0, 10.0]


def test_gamma_zero_outputs_are_identical_on_an_over_committed_workload() -> None:
    cl, jobs = multi_resource()
    plain = outputs(sim(cl, jobs, "fair-slots", k=8))
    zero = dataclasses.replace(cl, thrashing=(("io", 0.0),))
    assert zero.thrashing == (("io", 0.0),)
    assert outputs(sim(zero, jobs, "fair-slots", k=8)) == plain
    # the general path with exponent 1 everywhere that is over-committed is exact too
    mem_only = dataclasses.replace(cl, thrashing=(("mem", 5.0),))
    assert outputs(sim(mem_only, jobs, "fair-slots", k=8)) == plain
    # and thrashing on the over-committed disks costs time
    io = dataclasses.replace(cl, thrashing=(("io", 1.0),))
    assert sim(io, jobs, "fair-slots", k=8).end_time > plain[0]


def test_recording_does_not_change_outputs() -> None:
    cl, jobs = multi_resource()
    assert (outputs(sim(cl, jobs, "fair-slots", k=8, record=True))
            == outputs(sim(cl, jobs, "fair-slots", k=8)))
    assert sim(cl, jobs, "fair-slots", k=8).usage is None


# ------------------------------------------------------------------------------ recording
@pytest.mark.parametrize(("gamma", "f"), [(0.0, 0.625), (1.0, 0.390625)])
def test_recorded_use_of_a_stalled_pair(gamma: float, f: float) -> None:
    cl, jobs = io_pair(io=gamma)
    res = sim(cl, jobs, record=True)
    tr = res.usage
    assert isinstance(tr, UsageTrace)
    assert tr.names == ("cpu", "io") and tr.machines == ("m0",)
    recs = tr.of("m0")
    assert [r[0] for r in recs] == [0.0, pytest.approx(10 / f)]  # one record per instant
    _, eff, wait = recs[0]
    assert eff == (pytest.approx(f), pytest.approx(1.6 * f))  # io: (C/U)^gamma of capacity
    assert wait == pytest.approx(1 - f)  # both tasks would use their cpu but wait on io
    assert recs[-1][1:] == ((0.0, 0.0), 0.0)
    means = bucket_means(tr, 0, 10 / f, 10 / f)
    assert means.shape == (1, 1, 3)
    np.testing.assert_allclose(means[0, 0], [f, 1.6 * f, 1 - f])


def test_recorded_use_never_exceeds_capacity_and_shows_io_wait() -> None:
    cl, jobs = multi_resource()
    for c in (cl, dataclasses.replace(cl, thrashing=(("io", 1.0),))):
        res = sim(c, jobs, "fair-slots", k=8, record=True)
        tr = res.usage
        assert tr is not None and tr.names == ("cpu", "io", "mem")
        assert tr.machines == tuple(m.id for m in c.machines)
        stalled = 0
        for recs in tr.records:
            assert recs, "every machine ran something"
            times = [r[0] for r in recs]
            assert times == sorted(times) and len(set(times)) == len(times)
            for _, eff, wait in recs:
                assert all(-1e-9 <= e <= 1 + 1e-9 for e in eff), eff
                assert 0 <= wait <= 1 - eff[0] + 1e-9
                stalled += wait > 1e-6
        assert stalled > 0  # io over-commit stalls tasks that would use cpu
        means = bucket_means(tr, 0, res.end_time, 60)
        assert means.shape == (len(c.machines), int(np.ceil(res.end_time / 60)), 4)
        assert (means >= -1e-9).all() and (means <= 1 + 1e-9).all()


def test_recorder_matches_its_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder's shortcuts agree with the plain definition, summed over every attempt."""
    from utilon.sim import usage

    def reference(self: usage.UsageRecorder, mi: int, m: Any, now: float) -> None:
        used = [0.0] * len(m.cap)
        stalled = 0.0
        for ex in m.execs.values():
            use = ex.phases[ex.phase][1]
            f = ex.rate / m.speed if m.speed > 0 else 0.0
            used = [u + x * f for u, x in zip(used, use, strict=True)]
            stalled += use[0] * (1 - f)
        eff = tuple(u / c if c > 0 else 0.0 for u, c in zip(used, m.cap, strict=True))
        wait = max(0.0, min(1 - eff[0], stalled / m.cap[0]))
        rec = self.records[mi]
        if rec and rec[-1][0] == now:
            rec.pop()
        rec.append((now, eff, wait))

    cl, jobs = multi_resource()
    cl = dataclasses.replace(cl, thrashing=(("io", 0.7),),
                             timeline=(change(100, "tt-0", "speed", 0.0),
                                       change(150, "tt-0", "speed", 1.0),
                                       change(200, "tt-1", "scale", 0.5)))
    got = sim(cl, jobs, "fair-slots", k=8, record=True).usage
    monkeypatch.setattr(usage.UsageRecorder, "note", reference)
    want = sim(cl, jobs, "fair-slots", k=8, record=True).usage
    assert got is not None and want is not None
    assert [len(r) for r in got.records] == [len(r) for r in want.records]
    for g_recs, w_recs in zip(got.records, want.records, strict=True):
        for (tg, eg, wg), (tw, ew, ww) in zip(g_recs, w_recs, strict=True):
            assert tg == tw
            np.testing.assert_allclose(eg, ew, atol=1e-9)
            assert wg == pytest.approx(ww, abs=1e-9)


def test_resource_aware_dispatch_records_no_wait() -> None:
    cl, jobs = multi_resource()
    tr = sim(cl, jobs, "fifo", record=True).usage
    assert tr is not None
    assert max(w for recs in tr.records for _, _, w in recs) == pytest.approx(0, abs=1e-9)


def test_recording_is_deterministic() -> None:
    cl, jobs = multi_resource()
    c = dataclasses.replace(cl, thrashing=(("io", 0.5),))
    a = sim(c, jobs, "fair-slots", k=8, record=True).usage
    b = sim(c, jobs, "fair-slots", k=8, record=True).usage
    assert a == b and a is not None and sum(map(len, a.records)) > 100


def test_capacity_changes_are_recorded() -> None:
    cl = make_cluster(capacities=[{"cpu": 4}],
                      timeline=[change(2, "m0", "scale", 0.5), change(4, "m0", "speed", 0.0),
                                change(6, "m0", "speed", 1.0), change(7, "m0", "leave")])
    jobs = [make_job("j", maps=1, reduces=0, dur=10, demand=Resources(cpu=4))]
    res = Simulation(cl, jobs, make_policy("fifo", {}), record_usage=True,
                     horizon=9).run()
    assert res.usage is not None
    recs = res.usage.of("m0")
    assert [(t, e, w) for t, e, w in recs] == [
        (0.0, (1.0,), 0.0),   # launch: 4 of 4 cpu
        (2.0, (1.0,), 0.0),   # scaled to 2 cpu: half speed, 2 of 2 used
        (4.0, (0.0,), 1.0),   # speed 0: nothing done, all the cpu it would use counts as wait
        (6.0, (1.0,), 0.0),
        (7.0, (0.0,), 0.0),   # the machine left
    ]


# ------------------------------------------------------------------------------ bucket_means
def test_bucket_means_weights_time() -> None:
    tr = UsageTrace(("cpu", "io"), ("a", "b"), (
        ((1.0, (1.0, 0.5), 0.0), (3.0, (0.0, 0.0), 1.0)),
        (),
    ))
    m = bucket_means(tr, 0.0, 5.0, 2.0)  # buckets [0,2) [2,4) [4,5)
    assert m.shape == (2, 3, 3)
    np.testing.assert_allclose(m[0], [[0.5, 0.25, 0.0], [0.5, 0.25, 0.5], [0.0, 0.0, 1.0]])
    assert m[1].tolist() == [[0.0] * 3] * 3
    # a window that starts after the records holds the last value
    assert bucket_means(tr, 10.0, 11.0, 0.5)[0].tolist() == [[0.0, 0.0, 1.0]] * 2
    # records at the same instant as a bucket edge
    m2 = bucket_means(tr, 1.0, 3.0, 1.0)
    np.testing.assert_allclose(m2[0], [[1.0, 0.5, 0.0], [1.0, 0.5, 0.0]])
    with pytest.raises(ValueError, match="step"):
        bucket_means(tr, 0, 1, 0)
    with pytest.raises(ValueError, match="start < end"):
        bucket_means(tr, 1, 1, 1)


# ------------------------------------------------------------------------------ scenario
def _scenario(thrashing: Any) -> dict[str, Any]:
    return {"name": "t", "cluster": {"machines": [{"id": "m", "capacity": {"cpu": 2, "io": 1}}],
                                     "thrashing": thrashing},
            "workload": {"jobs": [{"id": "j", "submit": 0, "stages": [
                {"name": "map", "tasks": 1, "duration": 1, "demand": {"cpu": 1}}]}]}}


def test_scenario_thrashing_parses_and_reaches_the_cluster(tmp_path: Path) -> None:
    text = yaml.safe_dump(_scenario({"io": 0.5, "cpu": 2}))
    assert "thrashing:" in text
    p = tmp_path / "s.yaml"
    p.write_text(text, encoding="utf-8")
    w = load_workload(p)
    assert w.cluster.thrashing == (("cpu", 2.0), ("io", 0.5))
    assert parse_scenario(_scenario({"io": 1})).cluster.thrashing == {"io": 1.0}
    d = _scenario({})
    del d["cluster"]["thrashing"]
    assert parse_scenario(d).cluster.thrashing == {}


def test_scenario_negative_thrashing_is_a_one_line_error() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_scenario({"io": -0.5}))
    msg = str(info.value)
    assert "\n" not in msg
    assert "cluster.thrashing" in msg and "'io'" in msg and ">= 0" in msg


def test_scenario_thrashing_of_an_unknown_resource(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(_scenario({"disk": 1})), encoding="utf-8")
    with pytest.raises(ScenarioError, match="unknown resource 'disk'") as info:
        load_workload(p)
    assert "cluster.thrashing" in str(info.value)
