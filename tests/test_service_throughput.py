"""Issue 46, item 8: the submission path made fast without giving up "201 means durable".

* group commit: concurrent submissions share a transaction, and each answer comes only after
  the transaction holding it has committed; the engine's own writes join the same group, and
  one bad item of a group fails only its own caller;
* ``POST /v1/jobs`` answered by ``FastSubmit`` says exactly what the FastAPI route says;
* a tenant at its ``max_queued_jobs`` is refused before its job is built;
* ``kill -9`` during a burst: every submission that got a 201 is in the store.

Functional checks only: how fast it goes is ``benchmarks/bench_service.py``'s business.
"""

from __future__ import annotations

import gc
import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi.testclient import TestClient

from builders import wait_for
from utilon.live import LocalBackend
from utilon.policies import make_policy
from utilon.scenario import build_cluster, parse_scenario
from utilon.service.api import create_app
from utilon.service.engine import ServiceEngine
from utilon.service.heap import THRESHOLDS, server_gc
from utilon.service.quotas import Limits
from utilon.service.store import Store
from utilon.service.tenants import TenantBook, create_token
from utilon.service.writer import GroupWriter

CLUSTER = {"machines": [{"id": "m", "count": 2, "capacity": {"slots": 1, "mem": 4}}]}


def sleepy(job_id: str, seconds: float = 0.05, **extra: Any) -> dict[str, Any]:
    return {"id": job_id, "stages": [{"name": "s", "tasks": 1, "duration": seconds}],
            "utility": {"kind": "deadline", "deadline": 600}} | extra


# ------------------------------------------------------------------------------ the writer
def test_the_writer_groups_what_waits_and_answers_each_after_its_write() -> None:
    written: list[list[int]] = []
    entered, gate = threading.Event(), threading.Event()

    def write(batch: list[int]) -> list[int]:
        if not entered.is_set():  # the first group is held while the others queue up
            entered.set()
            gate.wait(5)
        written.append(list(batch))
        return [x * 10 for x in batch]

    w: GroupWriter[int] = GroupWriter(write)
    first = w.put(0)
    assert entered.wait(5)
    rest = [w.put(i) for i in range(1, 20)]
    assert not first.done() and not any(f.done() for f in rest)  # nothing before its write
    gate.set()
    assert [f.result(5) for f in [first, *rest]] == [i * 10 for i in range(20)]
    assert written == [[0], list(range(1, 20))]  # the 19 that waited: one group
    w.close()


def test_a_failed_group_is_written_again_one_item_at_a_time() -> None:
    calls: list[list[str]] = []
    entered, gate = threading.Event(), threading.Event()

    def write(batch: list[str]) -> list[str]:
        if batch == ["slow"]:  # holds the writer while the next group queues up
            entered.set()
            gate.wait(5)
        calls.append(list(batch))
        if "bad" in batch:
            raise ValueError("bad item")
        return [s.upper() for s in batch]

    w: GroupWriter[str] = GroupWriter(write)
    slow = w.put("slow")
    assert entered.wait(5)
    futs = {s: w.put(s) for s in ("a", "bad", "b")}
    gate.set()
    assert slow.result(5) == "SLOW"
    assert futs["a"].result(5) == "A" and futs["b"].result(5) == "B"
    with pytest.raises(ValueError, match="bad item"):
        futs["bad"].result(5)
    assert calls[1:] == [["a", "bad", "b"], ["a"], ["bad"], ["b"]]  # the group, then singly
    w.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(str(tmp_path / "u.db"))
    s.begin_incarnation(1000.0)
    yield s
    s.close()


def test_engine_writes_share_the_submissions_transaction(store: Store,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    groups: list[list[str]] = []
    commit = store._commit_group
    gate = threading.Event()

    def held(batch):  # type: ignore[no-untyped-def]
        groups.append([type(x).__name__ for x in batch])
        gate.wait(5)
        commit(batch)

    monkeypatch.setattr(store, "_commit_group", held)
    first = store.submit_job("t:a", "t", {"id": "a"}, 0.0, None)
    wait_for(lambda: bool(groups), what="the first group")
    later = store.submit_job("t:b", "t", {"id": "b"}, 1.0, None)
    out: dict[str, Any] = {}

    def engine_write() -> None:
        out["moved"] = store.write(lambda c: store.transition(c, "t:a", "running", 2.0,
                                                              started=2.0))

    t = threading.Thread(target=engine_write)
    t.start()
    wait_for(lambda: len(store.writer._waiting) == 2, what="both queued")
    gate.set()
    assert first.result(5) is not None and later.result(5) is not None
    t.join(5)
    assert out["moved"] is True
    assert sorted(groups[1]) == ["_Submission", "_Work"]  # one transaction for both
    assert [e["kind"] for e in store.events_of("t:a")] == ["submitted", "running"]


def test_a_failing_engine_write_fails_only_its_caller(store: Store,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    commit = store._commit_group
    entered, gate = threading.Event(), threading.Event()

    def held(batch):  # type: ignore[no-untyped-def]
        if not entered.is_set():  # the first group waits while the next one gathers
            entered.set()
            gate.wait(5)
        commit(batch)

    monkeypatch.setattr(store, "_commit_group", held)
    first = store.submit_job("t:x", "t", {}, 0.0, None)
    assert entered.wait(5)
    box: dict[str, BaseException] = {}

    def boom(_c: Any) -> None:
        raise RuntimeError("the engine's bug")

    def failing() -> None:
        try:
            store.write(boom)
        except BaseException as e:
            box["e"] = e

    t = threading.Thread(target=failing)
    t.start()
    ok = store.submit_job("t:y", "t", {}, 1.0, None)
    wait_for(lambda: len(store.writer._waiting) == 2, what="both in the next group")
    gate.set()
    t.join(5)
    assert isinstance(box.get("e"), RuntimeError)
    assert first.result(5) is not None and ok.result(5) is not None
    assert store.get("t:y") is not None and store.get("t:x") is not None


# ------------------------------------------------------------------------------ the API
@pytest.fixture
def service(tmp_path: Path) -> Iterator[dict[str, Any]]:
    f = tmp_path / "tenants.yaml"
    toks = {"a": create_token(f, "team-a"), "admin": create_token(f, "ops", admin=True)}
    data = yaml.safe_load(f.read_text())
    data["tenants"]["team-a"]["limits"] = {"max_queued_jobs": 3}
    f.write_text(yaml.safe_dump(data))
    book = TenantBook.load(f)
    spec = parse_scenario({"name": "t", "cluster": CLUSTER, "workload": {}})
    engine = ServiceEngine(Store(str(tmp_path / "u.db")), spec, build_cluster(spec.cluster),
                           make_policy("fair"), LocalBackend(), tmp_path / "state",
                           limits=book.limits)
    with TestClient(create_app(engine, book)) as client:
        yield {"client": client, "engine": engine, "db": tmp_path / "u.db",
               "a": {"Authorization": f"Bearer {toks['a']}"},
               "admin": {"Authorization": f"Bearer {toks['admin']}"}}


def _post(client: TestClient, job: dict[str, Any], headers: dict[str, str],
          content_type: str) -> httpx.Response:
    return client.post("/v1/jobs", content=json.dumps(job),
                       headers=headers | {"content-type": content_type})


def test_the_fast_path_answers_as_the_route_does(service: dict[str, Any]) -> None:
    """``application/json`` goes through FastSubmit; ``application/x+json`` (JSON to FastAPI
    too) through the route: the same status and body for each case."""
    c, a, admin = service["client"], service["a"], service["admin"]
    service["engine"].limits = lambda _t: Limits(max_queued_jobs=10**6)

    def both(make: Any, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        fast = _post(c, make("FFF"), headers, "application/json")
        route = _post(c, make("RRR"), headers, "application/x+json")
        assert fast.status_code == route.status_code, (fast.text, route.text)
        fj, rj = fast.json(), route.json()
        for j in (fj, rj):
            for k in ("submitted", "goal"):
                j.pop(k, None)
        assert json.dumps(fj).replace("FFF", "ID") == json.dumps(rj).replace("RRR", "ID"), (
            fast.text, route.text)
        return fast.status_code, fj

    assert both(lambda p: sleepy(f"{p}-ok"), a)[0] == 201
    assert both(lambda p: sleepy(f"{p}-ok"), a)[0] == 409  # taken: each its own
    assert both(lambda p: {"id": f"{p}-bad", "stages": "x"}, a)[0] == 422
    assert both(lambda p: sleepy(f"{p}-x"), {})[0] == 401
    assert both(lambda p: sleepy(f"{p}-x") | {"tenant": "nobody"}, admin)[0] == 422
    assert both(lambda p: sleepy(f"{p}-x") | {"tenant": "ops"}, a)[0] == 403
    # bodies the fast path leaves to the route: not JSON, not an object
    for body in ("{", "[1, 2]", "\xff"):
        r = c.post("/v1/jobs", content=body.encode("latin-1"),
                   headers=a | {"content-type": "application/json"})
        assert 400 <= r.status_code < 500 and r.json()["error"], r.text


def test_a_tenant_at_its_queued_quota_is_refused_before_building(
        service: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    c, a, engine = service["client"], service["a"], service["engine"]
    for i in range(3):
        assert c.post("/v1/jobs", json=sleepy(f"q{i}", seconds=30), headers=a
                      ).status_code == 201
    built: list[str] = []
    build = engine.build
    monkeypatch.setattr(engine, "build", lambda *x, **k: built.append("x") or build(*x, **k))
    r = c.post("/v1/jobs", json=sleepy("q3"), headers=a)
    assert r.status_code == 429 and "max_queued_jobs is 3" in r.json()["error"]
    assert built == []
    for i in range(3):
        c.delete(f"/v1/jobs/q{i}", headers=a)


def test_every_201_is_committed_before_it_is_sent(service: dict[str, Any]) -> None:
    """Concurrent submissions: when a client has its 201, another connection to the store
    already sees the job (and they were written in groups)."""
    c, a, engine = service["client"], service["a"], service["engine"]
    engine.limits = lambda _t: Limits(max_queued_jobs=10**6)
    other = Store(str(service["db"]))
    seen: list[bool] = []

    def submit(k: int) -> None:
        for i in range(10):
            r = c.post("/v1/jobs", json=sleepy(f"c{k}-{i}", admission="accept"), headers=a)
            assert r.status_code == 201, r.text
            seen.append(other.get(f"team-a:c{k}-{i}") is not None)

    threads = [threading.Thread(target=submit, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    other.close()
    assert len(seen) == 80 and all(seen)


NO_DRAWS = [
    sleepy("nd-1"),
    {"id": "nd-2", "stages": [{"name": "map", "tasks": 3, "duration": 2.0},
                              {"name": "reduce", "durations": [1.0, 4.0]}],
     "utility": {"kind": "soft_hard", "soft": "3x", "hard": 900, "value": 2},
     "weight": 3, "priority": 1, "class": "etl"},
    {"id": "nd-3", "stages": [{"name": "s", "tasks": 2, "duration": 1.5,
                               "demand": {"slots": 1, "mem": 2}}],
     "utility": {"kind": "piecewise", "points": [[1, 1.0], ["2x", 0.5], [600, 0.0]]}},
]
DRAWS = [sleepy("d-1", seconds={"dist": "lognormal", "median": 1.0, "sigma": 1.0}),
         {"id": "d-2", "stages": [{"name": "s", "tasks": {"dist": "uniform", "low": 1,
                                                          "high": 50}, "duration": 1}]},
         {"id": "d-3", "run": {"kind": "pi", "maps": 2, "samples": 1000}}]


@pytest.mark.parametrize("payload", NO_DRAWS + DRAWS, ids=lambda p: p["id"])
def test_a_job_that_draws_nothing_is_the_same_whatever_its_seed(payload: dict[str, Any],
                                                                tmp_path: Path) -> None:
    """The engine derives a job's seed only for a job that draws (a distribution, or a real
    job's plan): ``draws`` must say so for every job whose seed changes what is built."""
    from utilon.scenario.build import build_job
    from utilon.scenario.spec import JobSpec
    from utilon.service.engine import draws

    spec = parse_scenario({"name": "t", "cluster": CLUSTER, "workload": {}})
    cluster = build_cluster(spec.cluster)
    js = JobSpec.model_validate(payload | {"submit": 10.0, "tenant": "a"})
    built = [build_job(spec, cluster, js, seed=seed, index=7, base_dir=tmp_path)
             for seed in (1, 2**40 + 3)]
    same = (built[0][0] == built[1][0] and built[0][2] == built[1][2]
            and (built[0][1] is None) == (built[1][1] is None))
    if draws(payload) or js.run is not None:
        assert payload in DRAWS
        assert js.run is not None or not same  # (its draws do change with the seed)
    else:
        assert payload in NO_DRAWS and same, payload


def test_the_server_gc_settings_come_back() -> None:
    before = gc.get_threshold()
    with server_gc():
        assert gc.get_threshold() == THRESHOLDS and gc.get_freeze_count() > 0
    assert gc.get_threshold() == before


# ------------------------------------------------------------------------------ kill -9
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.live
def test_kill_9_during_a_burst_loses_no_accepted_submission(tmp_path: Path) -> None:
    f = tmp_path / "tenants.yaml"
    token = create_token(f, "team-a")
    data = yaml.safe_load(f.read_text())
    data["limits"] = {"max_queued_jobs": 100_000}
    f.write_text(yaml.safe_dump(data))
    port = _free_port()
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "utilon.cli", "serve", "--db",
                             str(tmp_path / "u.db"), "--tenants", str(f), "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_for(lambda: _healthy(url), timeout=60, what="utilon serve to start")
        accepted: list[str] = []
        stop = threading.Event()

        def client(k: int) -> None:
            with httpx.Client(base_url=url, timeout=10,
                              headers={"Authorization": f"Bearer {token}"}) as h:
                i = 0
                while not stop.is_set():
                    try:
                        r = h.post("/jobs", json=sleepy(f"k{k}-{i}", seconds=0.01,
                                                         admission="accept"))
                    except httpx.HTTPError:
                        return  # the server is gone: this one has no answer
                    if r.status_code == 201:
                        accepted.append(r.json()["id"])
                    i += 1

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        wait_for(lambda: len(accepted) >= 200, timeout=60, what="200 accepted")
        proc.send_signal(signal.SIGKILL)  # mid-burst: groups are being written
        proc.wait(10)
        stop.set()
        for t in threads:
            t.join(15)
    finally:
        proc.kill()
        proc.wait(10)
    s = Store(str(tmp_path / "u.db"))
    held = {r.name for r in s.page(limit=10**6)[0]}
    s.close()
    assert accepted and set(accepted) <= held


def _healthy(url: str) -> bool:
    try:
        return bool(httpx.get(f"{url}/health", timeout=2).json()["status"] == "ok")
    except httpx.HTTPError:
        return False


def test_fast_path_keeps_the_route_in_the_openapi_schema(service: dict[str, Any]) -> None:
    schema = service["client"].get("/openapi.json").json()
    post = schema["paths"]["/v1/jobs"]["post"]
    assert "201" in post["responses"] and "requestBody" in post
