"""Liveness and invariants as properties of every registered cloud service.

Random cloud scenarios (one to three VM types, servers of 8-32 cores, one to three profiled job
kinds, up to 14 jobs with deadlines some configuration can meet, fleets of 0-6 servers, with
or without a prediction error and a boot time) run under every service registered in the cloud
world -- Cura's and the baselines, and any registered later.  After every run:

* **liveness**: the run ends, and every job either finished or was dropped with a reason (no
  job is left waiting forever); on a fleet large enough to give every job its fastest
  configuration at once, a per-job optimal service drops none;
* **invariants**: a job starts no earlier than its arrival, on one of its profile's
  configurations; it runs for its actual runtime, after the boot of a per-job cluster; a job
  counted as met ends by its deadline; the cores held by running jobs never exceed the fleet's;
* the same scenario and seed give the same schedule.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from utilon.cloud.model import CloudJob
from utilon.cloud.scenario import CloudScenarioSpec, CloudWorkload, build_cloud_workload
from utilon.cloud.sim import CloudResult, CloudSim
from utilon.policies import make_cloud_policy, policy_names


@st.composite
def cloud_scenarios(draw: st.DrawFn) -> tuple[CloudWorkload, int]:
    cores = draw(st.sampled_from([8, 16, 32]))
    vm = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=3, unique=True))
    types = [{"name": f"t{c}", "cores": c} for c in sorted(vm)]
    kinds = draw(st.integers(1, 3))
    models = {f"k{i}": {"work": draw(st.floats(0.05, 2.0)),
                        "best": draw(st.sampled_from(types))["name"],
                        "type_loss": draw(st.floats(0, 0.5)),
                        "scale_loss": draw(st.floats(0, 0.05)),
                        "max_vms": draw(st.integers(1, 16))} for i in range(kinds)}
    doc: dict[str, Any] = {
        "name": "prop", "seed": draw(st.integers(0, 5)),
        "cloud": {"servers": 0, "server_cores": cores, "vm_types": types,
                  "boot_time": draw(st.sampled_from([0, 20, 60])), "hadoop_start": 5,
                  "prediction_error": draw(st.sampled_from([0.0, 0.1, 0.3]))},
        "profiles": {"models": models},
        "workload": {"jobs": [{"id": "placeholder", "kind": "k0", "arrival": 0,
                               "deadline": 1e8}]},
    }
    base = build_cloud_workload(CloudScenarioSpec.model_validate(doc))
    jobs = []
    for i in range(draw(st.integers(1, 14))):
        kind = f"k{draw(st.integers(0, kinds - 1))}"
        size = draw(st.sampled_from([10.0, 200.0, 1000.0, 5000.0]))
        arrival = draw(st.floats(0, 400)).__round__(1)
        probe = CloudJob(f"j{i}", i % 3, kind, size, arrival, arrival + 1.0)
        fastest = float(base.store.configs(probe).t_run.min())
        slack = draw(st.floats(1.0, 4.0))
        jobs.append({"id": f"j{i}", "kind": kind, "size_mb": size, "arrival": arrival,
                     "customer": i % 3,
                     "deadline": round(fastest * slack + doc["cloud"]["boot_time"] + 1, 3)})
    doc["workload"] = {"jobs": jobs}
    servers = draw(st.integers(0, 6))
    doc["cloud"]["servers"] = servers
    return build_cloud_workload(CloudScenarioSpec.model_validate(doc)), servers


def run(workload: CloudWorkload, name: str, servers: int) -> CloudResult:
    policy = make_cloud_policy(name, workload.store)
    fleet = policy.fixed_servers(workload.jobs)
    return CloudSim(workload.store, policy, workload.jobs,
                    servers if fleet is None else fleet, seed=workload.seed).run()


def check(workload: CloudWorkload, res: CloudResult) -> None:
    cloud = workload.store.cloud
    events = []
    for rec in res.records:
        j = rec.job
        assert (rec.end is not None) != bool(rec.dropped), (j.id, rec)  # liveness
        if rec.dropped:
            assert rec.start is None
            continue
        assert rec.start is not None and rec.run_start is not None and rec.end is not None
        assert rec.start >= j.arrival - 1e-9
        table = workload.store.configs(j)
        assert any(int(k) == rec.k and int(n) == rec.n for k, n in zip(table.k, table.n,
                                                                       strict=True))
        boot = cloud.boot_time if rec.fresh else 0.0
        assert abs(rec.run_start - rec.start - boot) < 1e-6
        assert abs(rec.end - rec.run_start - rec.actual) < 1e-6
        if rec.met:
            assert rec.end <= j.deadline + 1e-6
        cores = rec.n * cloud.vm_types[rec.k].cores
        events += [(rec.start, 1, cores), (rec.end, 0, -cores)]
    held = 0
    for _, _, d in sorted(events):  # ends before starts at one instant
        held += d
        assert held <= res.servers * cloud.server_cores


@given(sc=cloud_scenarios())
def test_every_cloud_service_is_live_and_keeps_its_invariants(
        sc: tuple[CloudWorkload, int]) -> None:
    workload, servers = sc
    for name in policy_names("cloud"):
        res = run(workload, name, servers)
        check(workload, res)
        again = run(workload, name, servers)
        assert [(r.job.id, r.k, r.n, r.start, r.end, r.dropped) for r in res.records] == [
            (r.job.id, r.k, r.n, r.start, r.end, r.dropped) for r in again.records], name


@given(sc=cloud_scenarios())
def test_a_fleet_for_every_job_at_once_drops_none(sc: tuple[CloudWorkload, int]) -> None:
    workload, _ = sc
    cloud = workload.store.cloud
    # every job's largest configuration of the largest VM type, all at once, in every VM
    # type's pool (pools start with an equal share of the cores), with room for packing
    need = sum(int(workload.store.configs(j).n.max()) * cloud.vm_types[-1].cores
               for j in workload.jobs)
    servers = cloud.k * (need // cloud.server_cores + 1 + len(workload.jobs))
    for name in ("per-job-opt", "vm-aware"):
        res = run(workload, name, servers)
        check(workload, res)
        assert not [r.job.id for r in res.records if r.dropped], name
