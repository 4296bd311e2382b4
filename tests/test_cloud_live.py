"""The cloud world live (:mod:`utilon.cloud.live`): the simulator's policies driven through a VM
provider and a job executor.

In-memory tests run on a :class:`ManualClock` (the run replays the simulator's timeline in
milliseconds) or on the real clock at a small time scale; one test, marked ``ray``, adds and
removes real Ray nodes of two shapes.
"""

from __future__ import annotations

import time

import pytest

from utilon.cloud.live import LiveCloud, SleepExecutor
from utilon.cloud.model import CloudJob, CloudSpec, Resize, Start, VMType
from utilon.cloud.packing import servers_for
from utilon.cloud.policy import CloudPolicy
from utilon.cloud.profile import (
    ModelProfile,
    ProfileStore,
    appendix_b_cloud,
    appendix_b_profiles,
)
from utilon.cloud.provider import InMemoryProvider, ManualClock
from utilon.cloud.sim import CloudResult, CloudSim
from utilon.cloud.workload import appendix_b_jobs
from utilon.errors import InvalidDecision
from utilon.policies import make_cloud_policy
from utilon.policies.cura.baselines import PerJobOpt

try:   # the other Cura services, when they exist
    import utilon.policies.cura as _cura_pkg  # noqa: F401
    from utilon.policies import policy_names
    EXTRA = [n for n in ("vm-aware", "cura") if n in policy_names("cloud")]
except ImportError:  # pragma: no cover - depends on what is installed
    EXTRA = []


def _forty(policy: CloudPolicy) -> CloudPolicy:
    """``policy`` with 40 VMs of every type in its initial pools (Appendix B)."""
    policy.initial_pools = lambda servers, jobs: (40,) * policy.cloud.k  # type: ignore[method-assign]
    return policy


def _appendix_b() -> tuple[ProfileStore, tuple[CloudJob, ...], int]:
    cloud = appendix_b_cloud()
    store = ProfileStore(cloud, appendix_b_profiles())
    return store, appendix_b_jobs(), servers_for(cloud, (40, 40, 40))


def _live(store: ProfileStore, policy: CloudPolicy, jobs, servers: int, *,
          fail: set[int] | None = None, seed: int = 0) -> tuple[LiveCloud, InMemoryProvider,
                                                                CloudResult]:
    clock = ManualClock()
    provider = InMemoryProvider(clock, store.cloud.boot_time, fail)
    live = LiveCloud(store, policy, jobs, provider, SleepExecutor(clock), time_scale=1.0,
                     poll_interval=1.0, servers=servers, seed=seed, clock=clock,
                     sleep=clock.sleep, timeout=10.0)
    return live, provider, live.run()


def _configs(res: CloudResult) -> dict[str, tuple[int, int, str]]:
    return {r.job.id: (r.k, r.n, r.dropped) for r in res.records}


@pytest.mark.parametrize("name", ["per-job-opt", *EXTRA])
def test_appendix_b_live_matches_the_simulator(name):
    store, jobs, servers = _appendix_b()
    sim = CloudSim(store, _forty(make_cloud_policy(name, store)), jobs, servers).run()
    live, provider, res = _live(store, _forty(make_cloud_policy(name, store)), jobs, servers)
    assert _configs(res) == _configs(sim)
    assert [r.met for r in res.records] == [r.met for r in sim.records]
    for a, b in zip(res.records, sim.records, strict=True):
        assert a.start == pytest.approx(b.start) and a.end == pytest.approx(b.end)
    assert res.usage == pytest.approx(sim.usage)
    assert res.success_rate == sim.success_rate
    # the warm pools were launched before time 0 and given back at the end
    assert live.log[0].at == 0.0 and live.log[0].action == "launch"
    assert provider.launched >= 120 and provider.terminated == provider.launched
    assert provider.vms() == {}


def _small_cloud(boot: float = 20.0) -> tuple[ProfileStore, list[CloudJob]]:
    cloud = CloudSpec(vm_types=(VMType("small", 1), VMType("big", 2)), server_cores=2,
                      boot_time=boot, hadoop_start=0.0, load_mbps=1e6)
    # "a" runs best on small VMs, "b" loses so much on them that a big VM is cheaper
    profiles = {"a": ModelProfile(work=0.2, best=0, type_loss=0.5, max_vms=1),
                "b": ModelProfile(work=0.2, best=1, type_loss=2.0, max_vms=1)}
    jobs = [CloudJob("j0", 0, "a", 100.0, 0.0, 500.0), CloudJob("j1", 1, "b", 100.0, 0.0, 500.0),
            CloudJob("j2", 0, "a", 100.0, 30.0, 500.0)]
    return ProfileStore(cloud, profiles), jobs


def test_per_job_cluster_launches_and_terminates_one_vm_set_per_job():
    store, jobs = _small_cloud()
    policy = make_cloud_policy("per-job-cluster", store)
    sim = CloudSim(store, make_cloud_policy("per-job-cluster", store), jobs, 2).run()
    live, provider, res = _live(store, policy, jobs, 2)
    started = [r for r in res.records if r.start is not None]
    assert len(started) == 3 and all(r.met for r in res.records)
    assert _configs(res) == _configs(sim)
    assert {r.k for r in started} == {0, 1}      # two VM shapes
    n = sum(r.n for r in started)
    assert provider.launched == provider.terminated == n
    launches = [e for e in live.log if e.action == "launch"]
    ends = [e for e in live.log if e.action == "terminate"]
    assert len(launches) == len(ends) == 3
    assert sorted(e.vm_type for e in launches) == sorted(e.vm_type for e in ends)
    for r in started:   # each job's cluster booted first, then ran its actual time
        assert r.run_start == pytest.approx(r.start + store.cloud.boot_time)
        assert r.end == pytest.approx(r.run_start + r.actual)
        assert any(e.at == pytest.approx(r.end) for e in ends)


def test_failed_vm_boot_is_relaunched_and_the_job_still_runs():
    store, jobs = _small_cloud()
    live, provider, res = _live(store, make_cloud_policy("per-job-cluster", store), jobs, 2,
                                fail={0})
    assert len(live.failures) == 1 and "injected" in live.failures[0][2]
    assert all(r.end is not None or r.dropped for r in res.records)
    first = res.records[0]
    assert first.end is not None
    # its replacement booted a second time
    assert first.run_start == pytest.approx(first.start + 2 * store.cloud.boot_time)
    assert provider.launched == 4 and provider.terminated == 3 and provider.vms() == {}


def test_failed_pool_vm_is_replaced_before_time_zero():
    store, jobs, servers = _appendix_b()
    live, provider, res = _live(store, _forty(make_cloud_policy("per-job-opt", store)), jobs,
                                servers, fail={3, 50})
    assert len(live.failures) == 2
    assert provider.launched == 122
    sim = CloudSim(store, _forty(make_cloud_policy("per-job-opt", store)), jobs, servers).run()
    assert _configs(res) == _configs(sim)     # the warm pool was complete at time 0


def test_real_clock_run_ends_and_meets_deadlines():
    store, jobs = _small_cloud(boot=5.0)
    provider = InMemoryProvider(time.monotonic, 5.0 * 0.002)
    live = LiveCloud(store, make_cloud_policy("per-job-cluster", store), jobs, provider,
                     SleepExecutor(), time_scale=0.002, servers=2, timeout=5.0)
    res = live.run()
    assert all(r.end is not None for r in res.records)
    assert res.all_met and provider.vms() == {}


class _Reshape(PerJobOpt):
    """Per-job-opt that starts with two small VMs and turns the pools into big ones."""

    def __init__(self, store: ProfileStore) -> None:
        super().__init__(store)
        self.reshaped = False

    def initial_pools(self, servers, jobs):
        return (2, 0)

    def decide(self, now, view, arrived, finished):
        out = super().decide(now, view, arrived, finished)
        if not self.reshaped:
            self.reshaped = True
            out.append(Resize((0, 2)))
        return out


def test_resize_terminates_idle_vms_and_launches_missing_ones_as_the_simulator():
    store, jobs = _small_cloud()
    sim = CloudSim(store, _Reshape(store), jobs, 2).run()
    live, provider, res = _live(store, _Reshape(store), jobs, 2)
    assert _configs(res) == _configs(sim)
    for a, b in zip(res.records, sim.records, strict=True):
        assert (a.start, a.end) == pytest.approx((b.start, b.end))
    assert res.reconfigurations == sim.reconfigurations == 1
    assert res.reconfigured_vms == sim.reconfigured_vms == 4
    assert ("launch", "big") in {(e.action, e.vm_type) for e in live.log if e.at == 0.0}
    shrunk = [e for e in live.log if e.action == "terminate" and e.vm_type == "small"]
    assert shrunk and all(e.at > 0 for e in shrunk)   # busy VMs go only once idle
    assert provider.vms() == {}


class _Rogue(CloudPolicy):
    name = "rogue"
    summary = "starts a job nobody submitted"

    def decide(self, now, view, arrived, finished):
        return [Start("nope", 0, 10)] if arrived else []


def test_command_for_unknown_job_is_invalid():
    store, jobs, servers = _appendix_b()
    with pytest.raises(InvalidDecision, match="nope"):
        _live(store, _forty(_Rogue(store)), jobs, servers)


@pytest.mark.ray
def test_ray_nodes_of_two_shapes_are_added_and_removed():
    ray = pytest.importorskip("ray")
    from utilon.cloud.ray_provider import RayExecutor, RayProvider

    if ray.is_initialized():
        ray.shutdown()
    store, jobs = _small_cloud()
    scale = 0.1     # 20 s of virtual boot are 2 s of wall time; a Ray node takes about that
    provider = RayProvider(store.cloud)
    try:
        live = LiveCloud(store, make_cloud_policy("per-job-cluster", store), jobs, provider,
                         RayExecutor(), time_scale=scale, poll_interval=0.02, servers=2,
                         timeout=60.0)
        res = live.run()
        assert provider.vms() == {}
    finally:
        provider.close()
    assert all(r.end is not None and r.met for r in res.records)
    shapes = {("small", 1), ("big", 2)}
    assert set(provider.shapes_added) == shapes == set(provider.shapes_removed)
    assert provider.launched == provider.terminated == 3
    for r in res.records:   # a job ran only once its node was up, for (at least) its time
        assert r.run_start >= r.start and r.end - r.run_start >= r.actual * 0.99
