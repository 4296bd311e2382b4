"""The cloud simulator: servers hosting VM pools (or per-job clusters), jobs, one policy.

Discrete events at exact times: arrivals, job ends, VMs finishing their boot, and wake-ups a
policy asks for (a reservation's start).  At every instant with events the policy is called
once with everything that happened then (the paper's scheduler runs once per time unit with
the jobs that arrived in it; with exact times, "the same instant" is that unit).

A job's actual runtime is its prediction times ``1 + error·u`` with ``u`` uniform in [-1, 1],
drawn from the seed per job, so a run is deterministic.  Per-job clusters boot for
``boot_time`` first; pool VMs start at once (instant VM allocation).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from utilon.cloud.model import (
    CloudJob,
    Command,
    Drop,
    Finished,
    PoolView,
    Resize,
    Start,
)
from utilon.cloud.packing import pack
from utilon.cloud.profile import ProfileStore
from utilon.errors import InvalidDecision, ModelError

_ARRIVE, _READY, _FINISH, _WAKE = 2, 0, 1, 3   # at one instant: boots, ends, arrivals, wakes


@dataclass
class JobRecord:
    job: CloudJob
    k: int = -1
    n: int = 0
    start: float | None = None
    """when its VMs were given to it (pool) or created (per-job cluster)."""
    run_start: float | None = None
    end: float | None = None
    t_run: float = 0.0
    """the reserved (predicted + error bound) runtime of its configuration."""
    actual: float = 0.0
    fresh: bool = False
    dropped: str = ""

    @property
    def met(self) -> bool:
        return self.end is not None and self.end <= self.job.deadline + 1e-6


@dataclass
class CloudResult:
    policy: str
    servers: int
    records: list[JobRecord]
    usage: float
    """core-seconds of useful job execution."""
    span: float
    reconfigurations: int = 0
    reconfigured_vms: int = 0
    report: dict[str, Any] = field(default_factory=dict)
    decide_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def success_rate(self) -> float:
        return sum(r.met for r in self.records) / max(1, len(self.records))

    @property
    def all_met(self) -> bool:
        return all(r.met for r in self.records)


class CloudSim:
    """One run of ``policy`` over ``jobs`` on ``servers`` servers."""

    def __init__(self, store: ProfileStore, policy: Any,
                 jobs: tuple[CloudJob, ...] | list[CloudJob], servers: int, seed: int = 0,
                 stop_on_failure: bool = False) -> None:
        if servers < 0:
            raise ModelError(f"servers must be >= 0, got {servers}")
        self.store = store
        self.cloud = store.cloud
        self.policy = policy
        self.jobs, self.u = order_jobs(jobs, seed)
        self.servers = servers
        K = self.cloud.k
        self.cores = self.cloud.cores.astype(np.int64)
        self.host = np.zeros((servers, K), dtype=np.int64)   # VMs (pool or per-job) per server
        self.free = np.full(servers, self.cloud.server_cores, dtype=np.int64)
        self.size = [0] * K          # pool VMs that exist (ready, busy or booting)
        self.idle = [0] * K
        self.booting = [0] * K
        self.target: list[int] | None = None
        self.records = {j.id: JobRecord(j) for j in self.jobs}
        self.fresh_hosts: dict[str, np.ndarray] = {}
        self.events: list[tuple[float, int, int, Any]] = []
        self.seq = 0
        self.wakes: set[float] = set()
        self.reconfigurations = 0
        self.reconfigured_vms = 0
        self.stop_on_failure = stop_on_failure
        self.failed = False
        """with ``stop_on_failure``: the run stopped at the first dropped job (a fleet search
        only needs to know whether every job met its deadline)."""

    # -- event plumbing ----------------------------------------------------------------
    def _push(self, t: float, kind: int, payload: Any) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, payload))

    def view(self) -> PoolView:
        return PoolView(tuple(self.size), tuple(self.idle), tuple(self.booting),
                        tuple(int(x) for x in self.free))

    # -- running -------------------------------------------------------------------------
    def run(self) -> CloudResult:
        wall = time.perf_counter()
        decide_ms: list[float] = []
        pools = self.policy.initial_pools(self.servers, tuple(self.jobs))
        if any(pools):
            self._resize(0.0, list(pools), boot=False)
        for j in self.jobs:
            self._push(j.arrival, _ARRIVE, j)
        while self.events:
            now = self.events[0][0]
            arrived: list[CloudJob] = []
            finished: list[Finished] = []
            while self.events and self.events[0][0] == now:
                _, kind, _, p = heapq.heappop(self.events)
                if kind == _ARRIVE:
                    arrived.append(p)
                elif kind == _FINISH:
                    self._finish(now, p)
                    finished.append(Finished(p, now))
                elif kind == _READY:
                    self._ready(now, p)
                else:
                    self.wakes.discard(now)
            self._grow(now)
            t0 = time.perf_counter()
            commands = self.policy.decide(now, self.view(), arrived, finished)
            decide_ms.append((time.perf_counter() - t0) * 1e3)
            for c in commands:
                self._apply(now, c)
            if self.failed:
                break
            w = self.policy.wakeup()
            if w is not None and w > now and w not in self.wakes:
                self.wakes.add(w)
                self._push(w, _WAKE, None)
        return self._result(decide_ms, time.perf_counter() - wall)

    def _apply(self, now: float, c: Command) -> None:
        if isinstance(c, Start):
            self._start(now, c)
        elif isinstance(c, Drop):
            rec = self.records[c.job]
            if rec.start is None and not rec.dropped:
                rec.dropped = c.reason or "dropped"
                self.failed = self.stop_on_failure
        elif isinstance(c, Resize):
            self.reconfigurations += 1
            self.reconfigured_vms += sum(abs(a - b) for a, b in zip(c.target, self.size,
                                                                     strict=True))
            self._resize(now, list(c.target), boot=True)
        else:  # pragma: no cover - the Command union is closed
            raise InvalidDecision(f"{self.policy.name}: unknown command {c!r}")

    def _start(self, now: float, c: Start) -> None:
        name = self.policy.name
        rec, i = check_start(name, self.store, self.records.get(c.job), now, c)
        table = self.store.configs(rec.job)
        actual = self.store.actual(float(table.t_pred[i]), self.u[c.job])
        if c.fresh:
            placed = self._place_fresh(c.k, c.count)
            if placed is None:
                raise InvalidDecision(f"{name}: no server room for job {c.job}'s {c.count} "
                                      f"x {self.cloud.vm_types[c.k].name}")
            self.fresh_hosts[c.job] = placed
            run_start = now + self.cloud.boot_time
        else:
            if self.idle[c.k] < c.count:
                raise InvalidDecision(f"{name}: job {c.job} wants {c.count} idle "
                                      f"{self.cloud.vm_types[c.k].name}, {self.idle[c.k]} are")
            self.idle[c.k] -= c.count
            run_start = now
        rec.k, rec.n, rec.fresh = c.k, c.count, c.fresh
        rec.start, rec.run_start, rec.actual = now, run_start, actual
        rec.t_run = float(table.t_run[i])
        rec.end = run_start + actual
        self._push(rec.end, _FINISH, c.job)

    def _finish(self, now: float, job: str) -> None:
        rec = self.records[job]
        if rec.fresh:
            placed = self.fresh_hosts.pop(job)
            self.host[:, rec.k] -= placed
            self.free += placed * self.cores[rec.k]
        else:
            self.idle[rec.k] += rec.n
            self._shrink()

    def _ready(self, now: float, p: tuple[int, int]) -> None:
        k, count = p
        self.booting[k] -= count
        self.idle[k] += count
        self._shrink()

    # -- servers and pools -----------------------------------------------------------------
    def _place_fresh(self, k: int, count: int) -> np.ndarray | None:
        c = int(self.cores[k])
        fits = self.free // c
        if fits.sum() < count:
            return None
        placed = np.zeros(self.servers, dtype=np.int64)
        left = count
        for s in np.flatnonzero(fits):       # first fit, server by server
            take = min(int(fits[s]), left)
            placed[s] = take
            left -= take
            if not left:
                break
        self.host[:, k] += placed
        self.free -= placed * c
        return placed

    def _resize(self, now: float, target: list[int], boot: bool) -> None:
        if len(target) != self.cloud.k or min(target) < 0:
            raise InvalidDecision(f"{self.policy.name}: pool target {target} must have one "
                                  f"count >= 0 per VM type")
        self.target = target
        self._shrink()
        self._grow(now, boot=boot)
        if not boot:
            self.booting = [0] * self.cloud.k

    def _shrink(self) -> None:
        """Shut down idle VMs of pools above their target."""
        if self.target is None:
            return
        for k in range(self.cloud.k):
            excess = min(self.size[k] - self.target[k], self.idle[k])
            if excess <= 0:
                continue
            self.idle[k] -= excess
            self.size[k] -= excess
            c = int(self.cores[k])
            for s in np.flatnonzero(self.host[:, k])[::-1]:   # from the last servers back
                take = min(int(self.host[s, k]), excess)
                self.host[s, k] -= take
                self.free[s] += take * c
                excess -= take
                if not excess:
                    break

    def _grow(self, now: float, boot: bool = True) -> None:
        """Create VMs of pools below their target where servers have room (biggest first)."""
        if self.target is None:
            return
        for k in sorted(range(self.cloud.k), key=lambda k: -self.cloud.vm_types[k].cores):
            want = self.target[k] - self.size[k]
            if want <= 0:
                continue
            placed = self._place_fresh(k, want)
            if placed is None:
                c = int(self.cores[k])
                can = int((self.free // c).sum())
                if can == 0:
                    continue
                placed = self._place_fresh(k, can)
                assert placed is not None
            got = int(placed.sum())
            self.size[k] += got
            if boot and self.cloud.boot_time > 0:
                self.booting[k] += got
                self._push(now + self.cloud.boot_time, _READY, (k, got))
            else:
                self.idle[k] += got

    def _result(self, decide_ms: list[float], wall: float) -> CloudResult:
        recs = [self.records[j.id] for j in self.jobs]
        usage = sum(r.actual * r.n * float(self.cores[r.k]) for r in recs if r.end is not None)
        ends = [r.end for r in recs if r.end is not None]
        t0 = self.jobs[0].arrival if self.jobs else 0.0
        span = (max(ends) if ends else t0) - t0
        return CloudResult(self.policy.name, self.servers, recs, usage, span,
                           self.reconfigurations, self.reconfigured_vms,
                           self.policy.report(), decide_ms, wall)


def order_jobs(jobs: Sequence[CloudJob], seed: int
               ) -> tuple[list[CloudJob], dict[str, float]]:
    """Jobs by arrival (then id) and each one's runtime draw ``u`` in [-1, 1] from ``seed``:
    the simulator and the live driver draw the same actual runtimes."""
    ordered = sorted(jobs, key=lambda j: (j.arrival, j.id))
    ids = [j.id for j in ordered]
    if len(set(ids)) != len(ids):
        raise ModelError("workload: duplicate job ids", fix="give each job its own id")
    u = np.random.default_rng(seed).uniform(-1.0, 1.0, len(ids))
    return ordered, dict(zip(ids, u.tolist(), strict=True))


def check_start(name: str, store: ProfileStore, rec: JobRecord | None, now: float, c: Start
                ) -> tuple[JobRecord, int]:
    """Validate a ``Start`` against the job's state and profile (shared by the simulator and
    the live driver); returns the record and the configuration's row."""
    if rec is None or rec.start is not None or rec.dropped:
        raise InvalidDecision(f"{name}: cannot start job {c.job!r} (unknown, started or "
                              "dropped)")
    if rec.job.arrival > now:
        raise InvalidDecision(f"{name}: job {c.job} started before it arrived")
    if not 0 <= c.k < store.cloud.k:
        raise InvalidDecision(f"{name}: job {c.job}: no VM type {c.k}")
    table = store.configs(rec.job)
    hit = np.flatnonzero((table.k == c.k) & (table.n == c.count))
    if not len(hit):
        raise InvalidDecision(f"{name}: job {c.job} has no configuration {c.count} x "
                              f"{store.cloud.vm_types[c.k].name}")
    return rec, int(hit[0])


def initial_host(store: ProfileStore, pools: tuple[int, ...], servers: int) -> np.ndarray:
    """Where first-fit puts ``pools`` on ``servers`` (for reports)."""
    return pack(store.cloud, pools, servers)[0]
