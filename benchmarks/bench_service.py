"""The scheduler service under load: a burst of submissions, and its overhead per task.

1. **Burst.**  ``utilon serve`` (fair, this machine's cores as slots, SQLite store) gets
   ``--submissions`` jobs from ``--clients`` concurrent HTTP clients on loopback, as fast as
   they can send.  Reported: submissions per second, p50/p99 latency of an accepted
   submission, and how many the store holds afterwards -- every 201 must be there (lost = 0).
2. **Overhead per task.**  The same jobs (``--jobs`` jobs of ``--tasks`` sleep tasks of
   ``--seconds``) run once by ``utilon run`` (a batch) and once submitted at once to
   ``utilon serve``; overhead per task = (makespan - total work / slots) / tasks.

Results go to ``benchmarks/results-service.json``; the README's Benchmark section quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml

from utilon.service.store import Store
from utilon.service.tenants import create_token

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(tmp: Path, tenants: Path, port: int) -> subprocess.Popen[bytes]:
    log = (tmp / "serve.log").open("ab")
    p = subprocess.Popen([sys.executable, "-m", "utilon.cli", "serve", "--db",
                          str(tmp / "u.db"), "--tenants", str(tenants), "--port", str(port)],
                         stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health").json()["status"] == "ok":
                return p
        except httpx.HTTPError:
            time.sleep(0.1)
    p.kill()
    raise SystemExit(f"utilon serve did not start; see {tmp / 'serve.log'}")


def job(i: int, tasks: int, seconds: float, prefix: str = "b") -> dict[str, Any]:
    return {"id": f"{prefix}{i:06d}", "admission": "accept",
            "stages": [{"name": "s", "tasks": tasks, "duration": seconds,
                        "demand": {"slots": 1}}],
            "utility": {"kind": "deadline", "deadline": 3600}}


def burst(port: int, tokens: list[str], n: int, clients: int) -> dict[str, Any]:
    lat: list[list[float]] = [[] for _ in range(clients)]
    ok: list[list[str]] = [[] for _ in range(clients)]
    errors: list[str] = []

    def client(k: int) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/v1", timeout=120,
                          headers={"Authorization": f"Bearer {tokens[k % len(tokens)]}"}) as c:
            for i in range(k, n, clients):
                t0 = time.perf_counter()
                r = c.post("/jobs", json=job(i, 1, 0.01))
                lat[k].append(time.perf_counter() - t0)
                if r.status_code == 201:
                    ok[k].append(r.json()["id"])
                else:
                    errors.append(f"{r.status_code} {r.text[:200]}")

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    all_lat = np.array([x for xs in lat for x in xs]) * 1000
    accepted = [x for xs in ok for x in xs]
    return {"submissions": n, "clients": clients, "accepted": len(accepted),
            "refused": len(errors), "first_errors": errors[:3], "wall_s": round(wall, 3),
            "per_s": round(len(accepted) / wall, 1),
            "latency_ms_p50": round(float(np.percentile(all_lat, 50)), 2),
            "latency_ms_p99": round(float(np.percentile(all_lat, 99)), 2),
            "accepted_ids": accepted}


def overhead(tmp: Path, tenants: Path, token: str, jobs: int, tasks: int,
             seconds: float) -> dict[str, Any]:
    slots = max(1, os.cpu_count() or 1)
    work = jobs * tasks * seconds
    # batch: utilon run on the same cluster the service defaults to
    scen = {"name": "overhead", "seed": 1,
            "cluster": {"machines": [{"id": "local", "count": slots,
                                      "capacity": {"slots": 1, "mem": 4}}]},
            "workload": {"jobs": [{**{k: v for k, v in job(i, tasks, seconds, "o").items()
                                      if k != "admission"}, "submit": 0}
                                  for i in range(jobs)]}}
    f = tmp / "overhead.yaml"
    f.write_text(yaml.safe_dump(scen))
    subprocess.run([sys.executable, "-m", "utilon.cli", "run", str(f), "--policy", "fair",
                    "--out", str(tmp / "run")], check=True, capture_output=True)
    s = json.loads((tmp / "run" / "summary.json").read_text())
    batch = float(s["makespan"])
    # service: the same jobs submitted at once to a fresh store
    stmp = tmp / "svc-overhead"
    stmp.mkdir()
    port = free_port()
    proc = serve(stmp, tenants, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/v1", timeout=60,
                          headers={"Authorization": f"Bearer {token}"}) as c:
            for i in range(jobs):
                assert c.post("/jobs", json=job(i, tasks, seconds, "o")).status_code == 201
            while c.get("/jobs", params={"state": ["queued", "running"]}).json()["total"]:
                time.sleep(0.05)
            page = c.get("/jobs", params={"limit": 1000}).json()["jobs"]
        first = min(j["submitted"] for j in page)
        service = max(j["finished"] for j in page) - first
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    n = jobs * tasks
    return {"jobs": jobs, "tasks": n, "task_seconds": seconds, "slots": slots,
            "ideal_makespan_s": round(work / slots, 3),
            "batch_makespan_s": round(batch, 3), "service_makespan_s": round(service, 3),
            "batch_overhead_ms_per_task": round((batch - work / slots) / n * 1000, 2),
            "service_overhead_ms_per_task": round((service - work / slots) / n * 1000, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submissions", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--tasks", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.2)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results-service.json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="utilon-bench-service-") as d:
        tmp = Path(d)
        tenants = tmp / "tenants.yaml"
        toks = [create_token(tenants, "team-a"), create_token(tenants, "team-b")]
        # the burst measures throughput, not quotas: each tenant may hold the whole burst
        data = yaml.safe_load(tenants.read_text())
        data["limits"] = {"max_queued_jobs": max(1000, a.submissions)}
        tenants.write_text(yaml.safe_dump(data))
        port = free_port()
        proc = serve(tmp, tenants, port)
        try:
            b = burst(port, toks, a.submissions, a.clients)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        store = Store(str(tmp / "u.db"))
        held = {r.name for r in store.page(limit=10**9)[0]}  # (ids are per tenant)
        store.close()
        ids = b.pop("accepted_ids")
        b["in_store"] = len(held)
        b["lost"] = len(set(ids) - held)
        print(f"burst: {b['accepted']}/{b['submissions']} accepted from {b['clients']} "
              f"clients in {b['wall_s']:.1f} s = {b['per_s']:.0f}/s; latency p50 "
              f"{b['latency_ms_p50']:.1f} ms, p99 {b['latency_ms_p99']:.1f} ms; in store "
              f"{b['in_store']}, lost {b['lost']}")
        o = overhead(tmp, tenants, toks[0], a.jobs, a.tasks, a.seconds)
        print(f"overhead: {o['tasks']} tasks of {o['task_seconds']} s on {o['slots']} slots: "
              f"ideal {o['ideal_makespan_s']} s; utilon run {o['batch_makespan_s']} s "
              f"({o['batch_overhead_ms_per_task']} ms/task); utilon serve "
              f"{o['service_makespan_s']} s ({o['service_overhead_ms_per_task']} ms/task)")
    result = {"burst": b, "overhead": o,
              "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    a.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"results: {a.out}")


if __name__ == "__main__":
    main()
