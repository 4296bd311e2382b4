"""Failover of ``utilon serve``: an active server and its standby on one PostgreSQL store.

Two servers (fair, two logical slots each, this machine) share a store; ``--kills`` times the
active one is killed with SIGKILL while jobs run, and two times are measured from the kill:

* **takeover**: until the standby's ``/v1/health`` says ``ok`` (it holds the lease, recovered
  and schedules);
* **first write**: until a submission through a client given both addresses is accepted
  (what a user sees: the client retries through connection refusals and the standby's 503s).

The killed server is then started again (same port), becomes the standby, and the next round
kills whichever is active.  At the end every job must have finished exactly once.

The store is ``--db`` (a PostgreSQL URL), or a throwaway PostgreSQL server started in a
temporary folder with Debian's binaries (as root, as the ``postgres`` user).  Results go to
``benchmarks/results-failover.json``.  About 3 minutes here (two cores shared with other
work): each round restarts a server, about 10 s, and waits for the takeover, about 5 s.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

from utilon.service.client import Client, ClientError
from utilon.service.lease import DEFAULT_TTL
from utilon.service.store import events
from utilon.service.tenants import create_token

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def throwaway_postgres(port: int = 54333) -> Iterator[str]:
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        raise SystemExit("no PostgreSQL server binaries (apt-get install postgresql), and "
                         "no --db given")
    bindir = Path(bins[-1]).parent
    d = Path(tempfile.mkdtemp(prefix="utilon-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(d, "postgres")
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(d / "data"), "-A", "trust",
                    "-U", "postgres"], check=True, capture_output=True)
    subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(d / "data"), "-o",
                    f"-k {d} -c listen_addresses='' -p {port}", "-w", "-l", str(d / "log"),
                    "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@/postgres?host={d}&port={port}"
    finally:
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(d / "data"), "-m",
                        "fast", "stop"], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def status(url: str) -> str:
    try:
        with Client(url, timeout=5) as c:
            return str(c.health()["status"])
    except ClientError:
        return "down"


def wait(fn: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if fn():
            return
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


class Servers:
    def __init__(self, tmp: Path, db: str, ttl: float) -> None:
        self.tmp, self.db, self.ttl = tmp, db, ttl
        self.tenants = tmp / "tenants.yaml"
        self.token = create_token(self.tenants, "ops", admin=True)
        create_token(self.tenants, "bench")  # whose jobs these are
        (tmp / "cluster.yaml").write_text(json.dumps({
            "name": "failover", "workload": {},
            "cluster": {"machines": [{"id": "m", "count": 2,
                                      "capacity": {"slots": 1, "mem": 4}}]}}))
        self.ports = [free_port(), free_port()]
        self.urls = [f"http://127.0.0.1:{p}" for p in self.ports]
        self.procs: list[subprocess.Popen[bytes] | None] = [None, None]

    def start(self, i: int) -> None:
        log = (self.tmp / f"serve-{i}.log").open("ab")
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "utilon.cli", "serve", str(self.tmp / "cluster.yaml"),
             "--policy", "fair", "--db", self.db, "--tenants", str(self.tenants),
             "--port", str(self.ports[i]), "--lease-ttl", str(self.ttl),
             "--state-dir", str(self.tmp / f"state-{i}")],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp)

    def roles(self) -> tuple[int, int]:
        wait(lambda: sorted(map(status, self.urls)) == ["ok", "standby"], 120,
             "one active server and one standby")
        active = 0 if status(self.urls[0]) == "ok" else 1
        return active, 1 - active

    def kill(self, i: int) -> None:
        p = self.procs[i]
        assert p is not None
        p.send_signal(signal.SIGKILL)
        p.wait(10)

    def close(self) -> None:
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)


def job(job_id: str, seconds: float) -> dict[str, Any]:
    return {"id": job_id, "tenant": "bench", "stages": [
        {"name": "s", "tasks": 2, "duration": seconds, "demand": {"slots": 1}}],
        "utility": {"kind": "deadline", "deadline": 3600}}


def one_kill(s: Servers, k: int) -> dict[str, Any]:
    active, standby = s.roles()
    with Client(s.urls, s.token) as c:
        for j in range(2):
            c.submit(job(f"k{k}-{j}", 2.0))
        wait(lambda: any(x["state"] == "running" for x in c.jobs(limit=1000)["jobs"]), 30,
             "a job running")
        took: dict[str, float] = {}

        def watch() -> None:
            while status(s.urls[standby]) != "ok":
                time.sleep(0.05)
            took["takeover"] = time.monotonic() - killed

        s.kill(active)
        killed = time.monotonic()
        watcher = threading.Thread(target=watch)
        watcher.start()
        c.submit(job(f"k{k}-after", 0.2))
        first_write = time.monotonic() - killed
        watcher.join(60)
    s.start(active)  # back as the standby
    print(f"kill {k + 1}: takeover {took['takeover']:.2f} s, first write {first_write:.2f} s",
          flush=True)
    return {"kill": k + 1, "killed": s.urls[active], "new_active": s.urls[standby],
            "takeover_s": round(took["takeover"], 3), "first_write_s": round(first_write, 3)}


def summary(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs)
    return {"min": float(a.min()), "p50": float(np.percentile(a, 50)),
            "mean": float(a.mean()), "p90": float(np.percentile(a, 90)),
            "max": float(a.max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--lease-ttl", type=float, default=DEFAULT_TTL)
    ap.add_argument("--db", help="an empty PostgreSQL database's URL (default: a throwaway "
                    "server)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results-failover.json")
    a = ap.parse_args()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="utilon-failover-") as tmp, (
            throwaway_postgres() if a.db is None else _given(a.db)) as db:
        s = Servers(Path(tmp), db, a.lease_ttl)
        try:
            s.start(0)
            s.start(1)
            kills = [one_kill(s, k) for k in range(a.kills)]
            s.roles()
            with Client(s.urls, s.token) as c:
                wait(lambda: all(x["state"] == "finished"
                                 for x in c.jobs(limit=1000)["jobs"]), 120,
                     "every job to finish")
                n_jobs = c.jobs(limit=1)["total"]
            engine = sa.create_engine(db)
            with engine.connect() as conn:
                finished: dict[str, int] = {str(j): int(n) for j, n in conn.execute(
                    sa.select(events.c.job, sa.func.count())
                    .where(events.c.kind == "finished").group_by(events.c.job)).all()}
            engine.dispose()
        finally:
            s.close()
    once = sum(1 for n in finished.values() if n == 1)
    result = {
        "what": "SIGKILL of the active utilon serve; an idle-but-warm standby on the same "
                "PostgreSQL store takes over",
        "lease_ttl_s": a.lease_ttl, "renew_every_s": a.lease_ttl / 5,
        "poll_s": min(0.5, a.lease_ttl / 10), "kills": kills,
        "takeover_s": summary([k["takeover_s"] for k in kills]),
        "first_write_s": summary([k["first_write_s"] for k in kills]),
        "jobs": n_jobs, "finished_exactly_once": once,
        "finished_twice": sum(1 for n in finished.values() if n > 1),
        "lost": n_jobs - len(finished),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_1m_at_end": os.getloadavg()[0]},
        "wall_s": round(time.monotonic() - t0, 1),
    }
    a.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    ts, fw = result["takeover_s"], result["first_write_s"]
    print(f"takeover p50 {ts['p50']:.2f} s, max {ts['max']:.2f} s; first write p50 "
          f"{fw['p50']:.2f} s, max {fw['max']:.2f} s; {once}/{n_jobs} jobs finished exactly "
          f"once; {result['wall_s']} s; {a.out}")
    if result["finished_twice"] or result["lost"]:
        raise SystemExit("a job was lost or finished twice")


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


if __name__ == "__main__":
    main()
