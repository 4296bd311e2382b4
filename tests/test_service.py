"""``utilon serve``: the API, tenants, cancellation, the store, crash recovery and SIGTERM.

Most tests share one service (a FastAPI TestClient over an engine on local worker processes,
two logical machines of one slot); the recovery tests start the real ``utilon serve`` process,
kill it with SIGKILL or stop it with SIGTERM, and start it again on the same store.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from builders import wait_for
from utilon.errors import UtilonError
from utilon.live import LocalBackend
from utilon.policies import make_policy
from utilon.scenario import build_cluster, parse_scenario
from utilon.service.api import create_app
from utilon.service.client import Client, ClientError
from utilon.service.engine import ServiceEngine
from utilon.service.export import export
from utilon.service.store import Store
from utilon.service.tenants import TenantBook, create_token

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parent.parent
CLUSTER = {"machines": [{"id": "m", "count": 2, "capacity": {"slots": 1, "mem": 4}}]}


def sleepy(job_id: str, tasks: int = 2, seconds: float = 0.2, deadline: float | None = 60,
           **extra: Any) -> dict[str, Any]:
    job: dict[str, Any] = {"id": job_id, "stages": [{"name": "s", "tasks": tasks,
                                                     "duration": seconds,
                                                     "demand": {"slots": 1}}]}
    if deadline is not None:
        job["utility"] = {"kind": "deadline", "deadline": deadline}
    return job | extra




@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("tenants")
    f = d / "tenants.yaml"
    toks = {"a": create_token(f, "team-a"), "b": create_token(f, "team-b", weight=3),
            "admin": create_token(f, "ops", admin=True)}
    return {"file": f, **toks}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory,
            tokens: dict[str, Any]) -> Iterator[tuple[TestClient, ServiceEngine]]:
    d = tmp_path_factory.mktemp("service")
    spec = parse_scenario({"name": "t", "cluster": CLUSTER, "workload": {}})
    book = TenantBook.load(tokens["file"])
    engine = ServiceEngine(Store(str(d / "u.db")), spec, build_cluster(spec.cluster),
                           make_policy("fair"), LocalBackend(), d / "state",
                           weights=book.weight)
    with TestClient(create_app(engine, book)) as client:
        yield client, engine


def h(tokens: dict[str, Any], who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens[who]}"}


def finished(client: TestClient, headers: dict[str, str], job_id: str) -> Callable[[], bool]:
    return lambda: client.get(f"/v1/jobs/{job_id}", headers=headers).json()["state"] in (
        "finished", "cancelled", "failed")


# ------------------------------------------------------------------------------ the API
def test_health_needs_no_token(service: tuple[TestClient, ServiceEngine]) -> None:
    client, _ = service
    r = client.get("/v1/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    assert r.json()["policy"] == "fair" and r.json()["backend"] == "local"
    assert client.get("/openapi.json").json()["info"]["title"] == "utilon"
    assert client.get("/docs").status_code == 200


def test_submit_run_and_finish(service: tuple[TestClient, ServiceEngine],
                               tokens: dict[str, Any]) -> None:
    client, _ = service
    r = client.post("/v1/jobs", json=sleepy("run-1", tasks=3), headers=h(tokens, "a"))
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["state"] == "queued" and body["tenant"] == "team-a"
    assert body["goal"] == pytest.approx(body["submitted"] + 60)
    wait_for(finished(client, h(tokens, "a"), "run-1"), what="run-1")
    j = client.get("/v1/jobs/run-1", headers=h(tokens, "a")).json()
    assert j["state"] == "finished" and j["missed"] is False and j["utility"] == 1.0
    # the jobs.csv row names it TENANT:ID, unique across tenants (ids are per tenant)
    assert j["result"]["row"]["id"] == "team-a:run-1" and j["result"]["row"]["finish"] > 0
    assert j["id"] == "run-1" and j["ref"] == "team-a:run-1"
    assert [e["kind"] for e in j["events"]] == ["submitted", "running", "finished"]
    assert len(j["attempts"]) == 3 and {a["outcome"] for a in j["attempts"]} == {"done"}
    assert j["live"]["tasks_done"] == 3 and j["live"]["deadline_status"] == "met"


def test_a_real_job_is_verified(service: tuple[TestClient, ServiceEngine],
                                tokens: dict[str, Any]) -> None:
    client, _ = service
    job = {"id": "pi-1", "run": {"kind": "pi", "maps": 2, "samples": 200000},
           "utility": {"kind": "deadline", "deadline": 120}}
    assert client.post("/v1/jobs", json=job, headers=h(tokens, "a")).status_code == 201
    wait_for(finished(client, h(tokens, "a"), "pi-1"), what="pi-1")
    j = client.get("/v1/jobs/pi-1", headers=h(tokens, "a")).json()
    assert j["state"] == "finished" and j["result"]["verification"]["ok"] is True
    assert Path(j["result"]["outputs"]).is_dir()


@pytest.mark.parametrize(("job", "status", "mention"), [
    ({"id": "bad-1"}, 422, "stages"),
    ({"id": "bad-2", "stages": [{"name": "s", "tasks": 1, "duration": 1}], "colour": 1},
     422, "colour"),
    (sleepy("bad-3") | {"submit": 5}, 422, "submit"),
    (sleepy("bad-4", deadline=0.05, seconds=1.0), 422, "cannot be met"),
    (sleepy("bad-5") | {"admission": "maybe"}, 422, "admission"),
    ({"id": "bad-6", "stages": [{"name": "s", "tasks": 1, "duration": 1,
                                 "demand": {"gpu": 1}}]}, 422, "gpu"),
    (sleepy("bad-7") | {"tenant": "team-b"}, 403, "tenant"),
    (sleepy("bad-8", tasks=10**7), 422, "tasks"),
    # issue 46: zero demands, odd task counts, huge strings and weights
    ({"id": "bad-9", "stages": [{"name": "s", "tasks": 20, "duration": 1,
                                 "demand": {"slots": 0}}]}, 422, "every demand must be > 0"),
    (sleepy("bad-10", tasks=-1), 422, "whole number"),
    (sleepy("bad-11") | {"stages": [{"name": "s", "tasks": 1.5, "duration": 1}]}, 422,
     "whole number"),
    (sleepy("bad-12") | {"class": "x" * 100_000}, 422, "class"),
    (sleepy("bad-13") | {"weight": 1e308}, 422, "weight"),
])
def test_bad_input_is_a_4xx_naming_the_field(service: tuple[TestClient, ServiceEngine],
                                            tokens: dict[str, Any], job: dict[str, Any],
                                            status: int, mention: str) -> None:
    client, _ = service
    r = client.post("/v1/jobs", json=job, headers=h(tokens, "a"))
    assert r.status_code == status, r.text
    assert mention in r.json()["error"] + r.json()["field"], r.json()
    assert "\n" not in r.json()["error"]


def test_an_impossible_deadline_is_accepted_when_asked(
        service: tuple[TestClient, ServiceEngine], tokens: dict[str, Any]) -> None:
    client, _ = service
    job = sleepy("late-1", deadline=0.05, seconds=0.5) | {"admission": "accept"}
    assert client.post("/v1/jobs", json=job, headers=h(tokens, "a")).status_code == 201
    wait_for(finished(client, h(tokens, "a"), "late-1"), what="late-1")
    assert client.get("/v1/jobs/late-1", headers=h(tokens, "a")).json()["missed"] is True


def test_ids_are_unique_and_tokens_required(service: tuple[TestClient, ServiceEngine],
                                            tokens: dict[str, Any]) -> None:
    client, _ = service
    assert client.post("/v1/jobs", json=sleepy("dup-1"), headers=h(tokens, "a")).status_code \
        == 201
    r = client.post("/v1/jobs", json=sleepy("dup-1"), headers=h(tokens, "a"))
    assert r.status_code == 409 and "you already have a job with id 'dup-1'" in r.json()["error"]
    r = client.post("/v1/jobs", json=sleepy("x"), headers={})
    assert r.status_code == 401 and "token" in r.json()["error"]
    r = client.get("/v1/jobs", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    auto = client.post("/v1/jobs", json={k: v for k, v in sleepy("x").items() if k != "id"},
                       headers=h(tokens, "b")).json()
    assert auto["id"].startswith("team-b-")


def test_ids_are_per_tenant(service: tuple[TestClient, ServiceEngine],
                           tokens: dict[str, Any]) -> None:
    """Issue 46: a 409 told one tenant which ids another had.  Now two tenants may each have
    a job ``same-1``; an admin names one as ``TENANT:ID``."""
    client, _ = service
    for who in ("a", "b"):
        r = client.post("/v1/jobs", json=sleepy("same-1", seconds=0.05), headers=h(tokens, who))
        assert r.status_code == 201 and r.json()["id"] == "same-1", r.text
    assert client.get("/v1/jobs/same-1", headers=h(tokens, "a")).json()["tenant"] == "team-a"
    assert client.get("/v1/jobs/same-1", headers=h(tokens, "b")).json()["tenant"] == "team-b"
    r = client.post("/v1/jobs", json=sleepy("same-1"), headers=h(tokens, "b"))
    assert r.status_code == 409 and "team-a" not in r.text  # its own duplicate, nobody else's
    assert client.get("/v1/jobs/team-a:same-1", headers=h(tokens, "b")).status_code == 404
    assert client.delete("/v1/jobs/team-a:same-1", headers=h(tokens, "b")).status_code == 404
    assert client.get("/v1/jobs/team-b:same-1", headers=h(tokens, "b")).json()["id"] == "same-1"
    r = client.get("/v1/jobs/same-1", headers=h(tokens, "admin"))
    assert r.status_code == 409 and "team-a, team-b" in r.json()["error"], r.text
    assert "TENANT:same-1" in r.json()["fix"]
    for who in ("a", "b"):
        tenant = f"team-{who}"
        wait_for(finished(client, h(tokens, "admin"), f"{tenant}:same-1"), what=tenant)
        j = client.get(f"/v1/jobs/{tenant}:same-1", headers=h(tokens, "admin")).json()
        assert j["tenant"] == tenant and j["state"] == "finished" and j["ref"] == \
            f"{tenant}:same-1"
        assert j["result"]["outputs"].endswith(f"/jobs/{tenant}:same-1")  # a folder each
    from utilon.service.client import _segment  # the CLI's client encodes ':' as %3A

    assert _segment("team-b:same-1") == "team-b%3Asame-1"
    assert client.get("/v1/jobs/team-b%3Asame-1", headers=h(tokens, "admin")).json()[
        "tenant"] == "team-b"


def test_tenants_see_and_cancel_only_their_own(service: tuple[TestClient, ServiceEngine],
                                               tokens: dict[str, Any]) -> None:
    client, _ = service
    assert client.post("/v1/jobs", json=sleepy("iso-a"), headers=h(tokens, "a")).status_code \
        == 201
    assert client.post("/v1/jobs", json=sleepy("iso-b"), headers=h(tokens, "b")).status_code \
        == 201
    assert client.get("/v1/jobs/iso-a", headers=h(tokens, "b")).status_code == 404
    assert client.delete("/v1/jobs/iso-a", headers=h(tokens, "b")).status_code == 404
    mine = {j["id"] for j in client.get("/v1/jobs?limit=1000", headers=h(tokens, "b"))
            .json()["jobs"]}
    assert "iso-b" in mine and "iso-a" not in mine
    assert all(j["tenant"] == "team-b" for j in client.get(
        "/v1/jobs?limit=1000", headers=h(tokens, "b")).json()["jobs"])
    assert client.get("/v1/jobs?tenant=team-a", headers=h(tokens, "b")).status_code == 403
    every = client.get("/v1/jobs?limit=1000", headers=h(tokens, "admin")).json()
    assert {"iso-a", "iso-b"} <= {j["id"] for j in every["jobs"]}
    only_a = client.get("/v1/jobs?tenant=team-a&limit=1000", headers=h(tokens, "admin")).json()
    assert {j["tenant"] for j in only_a["jobs"]} == {"team-a"}
    cl = client.get("/v1/cluster", headers=h(tokens, "b")).json()
    assert set(cl["allocation"]["tenants"]) <= {"team-b"}
    assert all(not j.startswith("iso-a") for j in cl["allocation"]["jobs"])


def test_tenant_weights_reach_the_policy(service: tuple[TestClient, ServiceEngine],
                                         tokens: dict[str, Any]) -> None:
    client, engine = service
    assert client.post("/v1/jobs", json=sleepy("w-b", seconds=0.1), headers=h(tokens, "b")
                       ).status_code == 201
    wait_for(lambda: engine.core is not None and "team-b:w-b" in engine.core.jobs, what="w-b")
    assert engine.core is not None and engine.core.jobs["team-b:w-b"].job.weight == 3.0


def test_cancel_kills_the_running_tasks(service: tuple[TestClient, ServiceEngine],
                                        tokens: dict[str, Any]) -> None:
    client, _ = service
    assert client.post("/v1/jobs", json=sleepy("long-1", tasks=2, seconds=30, deadline=600),
                       headers=h(tokens, "a")).status_code == 201
    wait_for(lambda: client.get("/v1/jobs/long-1", headers=h(tokens, "a")).json()["state"]
             == "running", what="long-1 running")
    r = client.delete("/v1/jobs/long-1", headers=h(tokens, "a"))
    assert r.status_code == 202 and r.json()["cancel_requested"]
    wait_for(finished(client, h(tokens, "a"), "long-1"), what="long-1 cancelled")
    j = client.get("/v1/jobs/long-1", headers=h(tokens, "a")).json()
    assert j["state"] == "cancelled" and j["result"] is None
    assert {a["outcome"] for a in j["attempts"]} == {"killed"}
    # an admin may cancel anyone's; a job that is over stays as it was
    assert client.delete("/v1/jobs/long-1", headers=h(tokens, "admin")).json()["state"] \
        == "cancelled"


def test_cluster_and_policy_views(service: tuple[TestClient, ServiceEngine],
                                  tokens: dict[str, Any]) -> None:
    client, _ = service
    cl = client.get("/v1/cluster", headers=h(tokens, "admin")).json()
    assert cl["slot_resource"] == "slots" and len(cl["machines"]) == 2
    assert all(m["capacity"]["slots"] == 1 for m in cl["machines"])
    pol = client.get("/v1/policy", headers=h(tokens, "a")).json()
    assert pol["name"] == "fair" and pol["decisions"] > 0 and pol["decide_ms_p50"] > 0


def test_export_writes_a_batch_runs_files(service: tuple[TestClient, ServiceEngine],
                                          tmp_path: Path) -> None:
    from utilon.report.data import load_run

    _, engine = service
    n = export(engine.store.url, tmp_path / "x")
    assert n >= 1
    run = load_run(tmp_path / "x")
    assert len(run.jobs.id) == n and json.loads((tmp_path / "x" / "summary.json")
                                                .read_text())["finished"] == n


def test_tenants_file_errors_are_one_line(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    with pytest.raises(UtilonError, match="no tenants file"):
        TenantBook.load(f)
    f.write_text("tenants: {a: {token_sha256: xyz}}\n")
    with pytest.raises(UtilonError, match="token_sha256") as ei:
        TenantBook.load(f)
    assert "\n" not in ei.value.one_line()
    f.write_text(": : :\n")
    with pytest.raises(UtilonError, match="YAML"):
        TenantBook.load(f)
    tok = create_token(f.with_name("ok.yaml"), "x")
    book = TenantBook.load(f.with_name("ok.yaml"))
    assert book.authenticate(tok) is not None and book.authenticate(tok + "x") is None
    assert tok not in f.with_name("ok.yaml").read_text()  # stored hashed


# ------------------------------------------------------------------------------ the process
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp: Path, tenants: Path, port: int, *extra: str) -> subprocess.Popen[bytes]:
    log = (tmp / f"serve-{time.time_ns()}.log").open("wb")
    p = subprocess.Popen([sys.executable, "-m", "utilon.cli", "serve", "--db",
                          str(tmp / "u.db"), "--tenants", str(tenants), "--port", str(port),
                          *extra], stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    c = Client(f"http://127.0.0.1:{port}")
    try:
        wait_for(lambda: _up(c), timeout=60, what="utilon serve to start")
    finally:
        c.close()
    return p


def _up(c: Client) -> bool:
    try:
        return c.health()["status"] == "ok"
    except ClientError:
        return False


def _all(c: Client) -> dict[str, dict[str, Any]]:
    return {j["id"]: j for j in c.jobs(limit=1000)["jobs"]}


@pytest.mark.slow
def test_kill_9_mid_run_then_restart_finds_every_job(tmp_path: Path,
                                                     tokens: dict[str, Any]) -> None:
    port = _free_port()
    proc = _serve(tmp_path, tokens["file"], port)
    url = f"http://127.0.0.1:{port}"
    try:
        with Client(url, tokens["a"]) as a, Client(url, tokens["b"]) as b:
            a.submit(sleepy("k-quick", tasks=1, seconds=0.05))
            wait_for(lambda: a.job("k-quick")["state"] == "finished", what="k-quick")
            for i in range(3):
                a.submit(sleepy(f"k-a{i}", tasks=2, seconds=2.0, deadline=600))
                b.submit(sleepy(f"k-b{i}", tasks=2, seconds=2.0, deadline=600))
            wait_for(lambda: any(j["state"] == "running" for j in _all(a).values()),
                     what="a running job")
            a.cancel("k-a2")
            before = {**_all(a), **_all(b)}
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert before["k-quick"]["state"] == "finished"
        proc = _serve(tmp_path, tokens["file"], port)
        with Client(url, tokens["admin"]) as admin:
            wait_for(lambda: all(j["state"] in ("finished", "cancelled")
                                 for j in _all(admin).values()), timeout=90,
                     what="every job to finish after the restart")
            after = _all(admin)
            assert set(before) <= set(after)  # every accepted job is there
            assert after["k-a2"]["state"] == "cancelled"
            assert after["k-quick"]["finished"] == before["k-quick"]["finished"]
            for jid, j in after.items():
                kinds = [e["kind"] for e in admin.job(jid)["events"]]
                assert kinds.count("finished") <= 1, (jid, kinds)  # never twice
                if j["state"] == "finished":
                    assert admin.job(jid)["result"]["row"]["id"] == f"{j['tenant']}:{jid}"
            ran = [jid for jid in after if before[jid]["state"] == "running"]
            for jid in ran:  # re-queued by the restart, then run to the end
                assert "queued" in [e["kind"] for e in admin.job(jid)["events"]]
                assert any(a["outcome"] == "lost" for a in admin.job(jid)["attempts"])
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.slow
def test_sigterm_checkpoints_and_a_restart_resumes(tmp_path: Path,
                                                   tokens: dict[str, Any]) -> None:
    port = _free_port()
    proc = _serve(tmp_path, tokens["file"], port)
    url = f"http://127.0.0.1:{port}"
    try:
        with Client(url, tokens["a"]) as a:
            a.submit(sleepy("t-1", tasks=2, seconds=20, deadline=600))
            wait_for(lambda: a.job("t-1")["state"] == "running", what="t-1 running")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises it after its shutdown
        store = Store(str(tmp_path / "u.db"))
        [rec] = store.open_jobs()
        assert rec.name == "t-1" and rec.id == "team-a:t-1" and rec.state == "queued"
        assert {a["outcome"] for a in store.attempts_of(rec.id)} == {"stopped"}
        store.close()
        proc = _serve(tmp_path, tokens["file"], port)
        with Client(url, tokens["a"]) as a:
            wait_for(lambda: a.job("t-1")["state"] == "running", what="t-1 running again")
    finally:
        proc.kill()
        proc.wait(10)


def test_the_cli_client_against_a_server(tmp_path: Path, tokens: dict[str, Any]) -> None:
    port = _free_port()
    proc = _serve(tmp_path, tokens["file"], port)
    env = {**os.environ, "UTILON_SERVER": f"http://127.0.0.1:{port}",
           "UTILON_TOKEN": tokens["a"]}
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(json.dumps({"jobs": [sleepy("cli-1", seconds=0.05),
                                         sleepy("cli-2", seconds=30, deadline=600)]}))

    def cli(*args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
        e = env if token is None else {**env, "UTILON_TOKEN": token}
        return subprocess.run([sys.executable, "-m", "utilon.cli", *args], env=e,
                              capture_output=True, text=True, timeout=60)

    try:
        r = cli("submit", str(jobs))
        assert r.returncode == 0 and "cli-1" in r.stdout and "cli-2" in r.stdout, r.stderr
        with Client(env["UTILON_SERVER"], tokens["a"]) as c:
            wait_for(lambda: c.job("cli-1")["state"] == "finished", what="cli-1")
        r = cli("jobs", "--state", "finished")
        assert r.returncode == 0 and "cli-1" in r.stdout and "cli-2" not in r.stdout
        r = cli("job", "cli-1")
        assert r.returncode == 0 and "finished" in r.stdout and "met" in r.stdout
        r = cli("cancel", "cli-2")
        assert r.returncode == 0 and "cli-2" in r.stdout
        r = cli("cluster")
        assert r.returncode == 0 and " decisions, decide p50 " in r.stdout  # (any policy)
        r = cli("job", "cli-1", token=tokens["b"])
        assert r.returncode == 2 and "404" in r.stderr and r.stderr.count("\n") == 1
        r = cli("jobs", token="wrong")
        assert r.returncode == 2 and "401" in r.stderr
    finally:
        proc.kill()
        proc.wait(10)
    r = subprocess.run([sys.executable, "-m", "utilon.cli", "jobs", "--server",
                        f"http://127.0.0.1:{port}"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 2 and "cannot reach the server" in r.stderr


def test_past_runs_stay_inside_their_folder(tmp_path: Path) -> None:
    from utilon.service.runs import list_runs, resolve

    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "summary.json").write_text('{"policy": "fifo"}')
    (tmp_path / "runs" / "a" / "jobs.csv").write_text("id\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "summary.json").write_text("{}")
    root = tmp_path / "runs"
    assert resolve(root, "a") == (root / "a").resolve()
    assert resolve(root, "../outside") is None and resolve(root, "/etc") is None
    assert resolve(root, "missing") is None
    # issue 46: a NUL byte or a name too long for the file system is no run, not a 500
    assert resolve(root, "a\x00b") is None and resolve(root, "x" * 5000) is None
    assert resolve(root, "y" * 300) is None
    assert [r["path"] for r in list_runs(root)] == ["a"]
    assert list_runs(tmp_path / "nowhere") == []


def test_runs_and_timeline_over_the_api(service: tuple[TestClient, ServiceEngine],
                                        tokens: dict[str, Any]) -> None:
    client, _ = service
    r = client.get("/v1/runs/..%2F..%2Fetc", headers=h(tokens, "admin"))
    assert r.status_code == 404
    for odd in ("%00", "a%00b", "%2e%2e", "x" * 300, "%ff%fe"):  # issue 46: never a 5xx
        assert client.get(f"/v1/runs/{odd}", headers=h(tokens, "admin")).status_code == 404
    assert client.get("/v1/runs", headers=h(tokens, "a")).status_code == 200
    samples = client.get("/v1/timeline", headers=h(tokens, "a")).json()["samples"]
    assert all(set(s["tenants"]) <= {"team-a"} for s in samples)
    assert client.get("/").status_code == 200 and "utilon" in client.get("/").text
    assert client.get("/static/dashboard.js").status_code == 200
    assert client.get("/static/../api.py").status_code == 404
    assert client.get("/metrics").status_code == 401  # issue 46: not public by default
    assert client.get("/metrics", headers=h(tokens, "admin")).text.count("utilon_jobs") >= 1


def test_client_sends_a_job_id_as_one_path_segment() -> None:
    """Issue 46: `utilon job ../cluster` asked GET /v1/cluster; an id is percent-encoded into
    one segment, so the server sees a job id (and answers 404), never another endpoint."""
    import httpx

    from utilon.service.client import Client

    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return httpx.Response(404, json={"error": "no job", "fix": ""})

    with Client("http://127.0.0.1:1") as c:
        c.http = httpx.Client(base_url="http://127.0.0.1:1/v1",
                              transport=httpx.MockTransport(handler))
        for job_id in ("../cluster", "a/b", "x?y#z", "%00"):
            with pytest.raises(UtilonError, match="404"):
                c.job(job_id)
        with pytest.raises(UtilonError, match="404"):
            c.cancel("../cluster")
    assert seen == ["/v1/jobs/..%2Fcluster", "/v1/jobs/a%2Fb", "/v1/jobs/x%3Fy%23z",
                    "/v1/jobs/%2500", "/v1/jobs/..%2Fcluster"]


def test_store_urls_are_printed_without_their_password() -> None:
    """Issue 46: the PostgreSQL URL's password was in the banner and connection errors."""
    from utilon.service.store import Store, redacted

    assert redacted("postgresql://ops:s3cret@db.local:5432/utilon") == (
        "postgresql://ops:***@db.local:5432/utilon")
    assert redacted("sqlite:///x.db") == "sqlite:///x.db"
    with pytest.raises(UtilonError) as ei:  # no driver or no server: the error hides it
        Store("postgresql+nodriver://ops:s3cret@127.0.0.1:1/utilon")
    assert "s3cret" not in ei.value.one_line() and "***" in ei.value.one_line()


def test_metrics_and_runs_show_a_tenant_only_its_own(tmp_path: Path) -> None:
    """Issue 46: /metrics and /v1/runs showed every tenant's names and counts to anyone."""
    from utilon.service.metrics import own_series
    from utilon.service.runs import list_runs
    from utilon.service.tenants import Principal

    text = (b'# HELP utilon_jobs jobs\n'
            b'utilon_jobs{state="finished",tenant="team-a"} 3.0\n'
            b'utilon_jobs{state="finished",tenant="team-b"} 5.0\n'
            b'utilon_deadline_misses_total{tenant="team-a\\"x"} 1.0\n'
            b'utilon_up 1.0\n')
    mine = own_series(text, "team-a")
    assert b"team-b" not in mine and b'team-a"x' not in mine
    assert b'tenant="team-a"} 3.0' in mine and b"utilon_up 1.0" in mine
    assert b'team-a\\"x' in own_series(text, 'team-a"x')
    root = tmp_path / "runs"
    for name, rows in (("ab", "a1,team-a,false\na2,team-b,true\nb1,team-b,true\n"),
                       ("b", "b2,team-b,false\n")):
        (root / name).mkdir(parents=True)
        (root / name / "summary.json").write_text('{"jobs": 3, "misses": 2}')
        (root / name / "jobs.csv").write_text("id,tenant,missed\n" + rows)
    a = list_runs(root, Principal("team-a", admin=False))
    assert [(r["path"], r["jobs"], r["misses"]) for r in a] == [("ab", 1, 0)]
    b = list_runs(root, Principal("team-b", admin=False))
    assert [(r["path"], r["jobs"], r["misses"]) for r in b] == [("ab", 2, 2), ("b", 1, 0)]
    assert len(list_runs(root, Principal("ops", admin=True))) == 2


def test_an_admin_submits_only_for_tenants_that_exist(service: tuple[TestClient, ServiceEngine],
                                                      tokens: dict[str, Any]) -> None:
    """Issue 46: an admin could submit for a tenant no token belongs to."""
    client, _ = service
    r = client.post("/v1/jobs", json=sleepy("ghost-1") | {"tenant": "nobody"},
                    headers=h(tokens, "admin"))
    assert r.status_code == 422 and "no tenant 'nobody'" in r.json()["error"]
    r = client.post("/v1/jobs", json=sleepy("for-a-1") | {"tenant": "team-a"},
                    headers=h(tokens, "admin"))
    assert r.status_code == 201 and r.json()["tenant"] == "team-a"


def test_allocation_returns_to_zero_after_the_last_task(
        service: tuple[TestClient, ServiceEngine], tokens: dict[str, Any]) -> None:
    """Issue 46: the allocation gauge and chart never returned to 0 after the last task (a
    sample was taken only once a second, on batches with stimuli)."""
    client, engine = service
    assert client.post("/v1/jobs", json=sleepy("drain-1", tasks=1, seconds=0.3),
                       headers=h(tokens, "a")).status_code == 201
    wait_for(lambda: client.get("/v1/jobs/drain-1", headers=h(tokens, "a")).json()["state"]
             == "finished", what="drain-1 to finish")
    wait_for(lambda: not engine.core.active or not any(
        rt.running for rt in engine.core.active.values()), what="nothing running")
    samples = client.get("/v1/timeline", headers=h(tokens, "admin")).json()["samples"]
    assert any(s["tenants"] for s in samples)  # it held slots while it ran
    assert samples[-1]["tenants"] == {}
    text = client.get("/metrics", headers=h(tokens, "admin")).text
    assert 'utilon_allocation_slots{tenant="team-a"}' not in text or \
        'utilon_allocation_slots{tenant="team-a"} 0.0' in text
