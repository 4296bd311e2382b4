"""Live runs on Ray: a local single-node Ray, and a multi-node Ray cluster on this machine
(Ray's ``cluster_utils``) from which one node is removed, and another added, mid-run.

Marked ``ray``; they need the ``ray`` extra, which ``make test`` installs.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster as RayCluster  # noqa: E402

from utilon.core.messages import Launch  # noqa: E402
from utilon.errors import UtilonError  # noqa: E402
from utilon.live import LiveRun, TaskCatalog  # noqa: E402
from utilon.live.ray_backend import RayBackend, machine_id  # noqa: E402
from utilon.policies import make_policy  # noqa: E402
from utilon.runner import run_live  # noqa: E402
from utilon.scenario.load import load_workload  # noqa: E402

pytestmark = pytest.mark.ray

REAL_JOBS = textwrap.dedent("""\
    name: ray-small
    seed: 3
    cluster:
      machines:
        - {id: m, capacity: {slots: 2}}
    workload:
      jobs:
        - id: wc
          submit: 0
          utility: {kind: deadline, deadline: 60}
          run: {kind: wordcount, generate_mb: 1, maps: 3, reduces: 2}
        - id: sort
          submit: 0.2
          utility: {kind: deadline, deadline: 60}
          run: {kind: sort, records: 20000, maps: 2, reduces: 2}
        - id: pi
          submit: 0.4
          utility: {kind: deadline, deadline: 60}
          run: {kind: pi, maps: 2, samples: 200000}
    """)


def _scenario(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "scenario.yaml"
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def local_ray():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("policy", ["fifo", "fair", "edf-p", "ras", "alsched", "triage"])
def test_real_jobs_on_local_ray(local_ray, tmp_path, policy):
    w = load_workload(_scenario(tmp_path, REAL_JOBS))
    out = run_live(w, policy, RayBackend(), out_dir=tmp_path / "run")
    s = out.summary
    assert s["backend"] == "ray" and s["finished"] == 3, s
    assert s["verified"] == {"ok": 3, "failed": 0, "unverifiable": 0, "plain": 0}
    assert all(v <= 1.0 + 1e-9 for v in s["peak_usage"].values())
    # the Ray node, not the scenario's machine, is what the tasks ran on
    machines = {a.machine for a in out.result.core.attempts}
    assert machines and all(m.startswith("node-") for m in machines)
    assert (tmp_path / "run" / "attempts.csv").exists()
    assert ray.is_initialized()  # a Ray the backend did not start is left running


def test_capacity_timeline_naming_unknown_node_is_a_clear_error(local_ray, tmp_path):
    text = REAL_JOBS.replace("    - {id: m, capacity: {slots: 2}}\n",
                             "    - {id: m, capacity: {slots: 2}}\n  capacity:\n"
                             "    - {at: 0.1, action: leave, machines: m}\n")
    w = load_workload(_scenario(tmp_path, text))
    assert w.cluster.timeline
    with pytest.raises(UtilonError, match="not a node of the Ray cluster"):
        run_live(w, "fifo", RayBackend(), out_dir=tmp_path / "run")


def test_node_removed_and_added_mid_run_loses_no_task(tmp_path):
    """Three one-CPU nodes; when tasks run on a worker node it is removed; later a new node
    joins.  Every task still completes exactly once more than it was lost, outputs verify."""
    if ray.is_initialized():
        ray.shutdown()
    cluster = RayCluster(initialize_head=True, head_node_args={"num_cpus": 1})
    victim = cluster.add_node(num_cpus=1)
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        w = load_workload(_scenario(tmp_path, textwrap.dedent("""\
            name: ray-churn
            seed: 5
            cluster:
              machines:
                - {id: m, capacity: {slots: 1}}
            workload:
              jobs:
                - id: sleepers
                  submit: 0
                  run:
                    kind: callable
                    stages:
                      - {name: nap, tasks: 12, call: "utilon.jobs.builtin:sleep",
                         args: {seconds: 0.6}, estimate: 0.6}
                - id: wc
                  submit: 0.5
                  run: {kind: wordcount, generate_mb: 1, maps: 4, reduces: 2}
            """)))
        catalog = TaskCatalog(tmp_path / "run", w.jobs, w.plans)
        catalog.prepare()
        victim_id = machine_id(victim.node_id)
        state = {"removed": False, "added": None}

        def on_batch(now, stimuli, cmds):
            if not state["removed"] and any(
                    type(c) is Launch and c.machine == victim_id for c in cmds):
                cluster.remove_node(victim)
                state["removed"] = True
            elif state["removed"] and state["added"] is None and now > 1.0:
                state["added"] = cluster.add_node(num_cpus=1)

        # rds: a control step every second, so that it plans around the node that left
        policy = make_policy("rds", {"interval": 1.0, "predictor": "last"})
        run = LiveRun(w.cluster, w.jobs, policy, RayBackend(node_poll=0.5), catalog,
                      on_batch=on_batch, timeout=120)
        res = run.run()
    finally:
        ray.shutdown()
        cluster.shutdown()
    core = res.core
    assert state["removed"] and state["added"] is not None
    assert not res.stopped_early
    assert all(j.finish is not None for j in core.jobs.values())
    total = sum(j.n_tasks for j in w.jobs)
    assert core.stats.completed == total
    assert core.stats.lost + core.stats.failed >= 1  # the removed node's task(s) came back
    outcomes = {(a.task, a.outcome) for a in core.attempts}
    assert all((a.task, "done") in outcomes for a in core.attempts)
    assert res.verification["wc"].ok is True
    # the node that joined was used
    new_id = machine_id(state["added"].node_id)
    assert any(a.machine == new_id for a in core.attempts)
    assert victim_id not in {m.id for m in core.machines if m.state.name == "UP"}


def test_alsched_prefers_the_ray_node_with_a_custom_resource(tmp_path):
    """Two Ray nodes of different sizes; the larger carries a custom resource ``big`` (a
    machine capacity on the utilon side), which the request's class queries."""
    if ray.is_initialized():
        ray.shutdown()
    cluster = RayCluster(initialize_head=True, head_node_args={"num_cpus": 1})
    big = cluster.add_node(num_cpus=3, resources={"big": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        w = load_workload(_scenario(tmp_path, textwrap.dedent("""\
            name: ray-alsched
            seed: 2
            cluster:
              machines:
                - {id: m, capacity: {slots: 1}}
            workload:
              jobs:
                - id: naps
                  submit: 0
                  request:
                    expr: "(max (scale 2 nck(B, tasks, tasks)) lnck(all, tasks, tasks))"
                    classes: {B: {capacity.big: {">=": 1}}}
                  run:
                    kind: callable
                    stages:
                      - {name: nap, tasks: 3, call: "utilon.jobs.builtin:sleep",
                         args: {seconds: 0.1}, estimate: 0.1}
            """)))
        out = run_live(w, "alsched", RayBackend(), out_dir=tmp_path / "run")
        assert out.summary["finished"] == 1
        assert {a.machine for a in out.result.core.attempts} == {machine_id(big.node_id)}
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_the_service_schedules_on_ray_nodes(local_ray, tmp_path):
    from fastapi.testclient import TestClient

    from utilon.scenario import build_cluster, parse_scenario
    from utilon.service.api import create_app
    from utilon.service.engine import ServiceEngine
    from utilon.service.store import Store
    from utilon.service.tenants import TenantBook, create_token

    if not ray.is_initialized():  # an earlier test of this module may have stopped it
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    token = create_token(tmp_path / "t.yaml", "team")
    book = TenantBook.load(tmp_path / "t.yaml")
    spec = parse_scenario({"name": "ray-service", "workload": {},
                           "cluster": {"machines": [{"id": "m", "capacity": {"slots": 2}}]}})
    engine = ServiceEngine(Store(str(tmp_path / "u.db")), spec, build_cluster(spec.cluster),
                           make_policy("fair"), RayBackend(), tmp_path / "state",
                           weights=book.weight)
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(engine, book)) as client:
        job = {"id": "pi", "run": {"kind": "pi", "maps": 2, "samples": 200000},
               "utility": {"kind": "deadline", "deadline": 120}}
        assert client.post("/v1/jobs", json=job, headers=auth).status_code == 201
        import time

        end = time.monotonic() + 120
        while client.get("/v1/jobs/pi", headers=auth).json()["state"] != "finished":
            assert time.monotonic() < end, "pi did not finish on Ray"
            time.sleep(0.1)
        j = client.get("/v1/jobs/pi", headers=auth).json()
        assert j["result"]["verification"]["ok"] is True
        assert all(a["machine"].startswith("node-") for a in j["attempts"])
        machines = client.get("/v1/cluster", headers=auth).json()["machines"]
        assert machines and all(m["id"].startswith("node-") for m in machines)
        assert client.get("/v1/health").json()["backend"] == "ray"
    assert ray.is_initialized()  # the service leaves a Ray it did not start running
