"""Cura's cloud world live: the same :class:`~utilon.cloud.policy.CloudPolicy` object the
simulator runs, driven in real (scaled) time against a VM :class:`~utilon.cloud.provider.Provider`
and a job :class:`Executor`.

Virtual time is wall time since the start divided by ``time_scale``.  The loop has the
simulator's shape (:mod:`utilon.cloud.sim`): at every instant something happened (arrivals due,
jobs the executor reports finished, pool VMs the provider reports ready or failed, a wake-up the
policy asked for) the policy is called once with all of it, and its commands are carried out:

* ``Start`` on pool VMs hands concrete idle VMs of that type to the executor at once;
* ``Start(fresh=True)`` launches VMs for the job, runs it when all are ready and terminates
  them when it ends (a per-job cluster; a VM that fails to boot is relaunched);
* ``Resize`` terminates idle pool VMs above the target and launches missing ones;
* ``Drop`` marks the job as given up.

What the policy sees (:class:`~utilon.cloud.model.PoolView`) is kept as the simulator keeps it:
``servers`` servers of ``server_cores``, every VM placed first-fit on a server when launched,
and a pool VM that failed is removed and relaunched to keep the target.  The initial pools are
launched and waited for before time 0 (the paper's pre-created VMs).  Every launch and
termination is logged in :attr:`LiveCloud.log`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from utilon.cloud.model import CloudJob, Command, Drop, Finished, PoolView, Resize, Start
from utilon.cloud.profile import ProfileStore
from utilon.cloud.provider import Provider, ProviderEvent, VMFailed, VMGone, VMReady
from utilon.cloud.sim import CloudResult, JobRecord, check_start, order_jobs
from utilon.errors import InvalidDecision, ModelError, UtilonError


class Executor(ABC):
    """Runs a job on VMs for a given number of (wall) seconds."""

    @abstractmethod
    def run(self, job_id: str, vm_ids: list[str], seconds: float) -> None:
        """Start ``job_id`` on ``vm_ids``; it should take ``seconds`` wall seconds."""

    @abstractmethod
    def poll(self) -> list[str]:
        """Ids of the jobs that finished since the last call."""

    def due(self) -> float | None:
        """The clock time of the next completion already known; ``None`` when unknown."""
        return None

    def close(self) -> None:
        """Release whatever the executor holds."""
        return None


class SleepExecutor(Executor):
    """A job is a timer: it finishes ``seconds`` after it started, on ``clock``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.running: dict[str, float] = {}
        self.ran: list[tuple[str, tuple[str, ...]]] = []

    def run(self, job_id: str, vm_ids: list[str], seconds: float) -> None:
        if job_id in self.running:
            raise UtilonError(f"executor: job {job_id} is already running")
        self.running[job_id] = self.clock() + seconds
        self.ran.append((job_id, tuple(vm_ids)))

    def poll(self) -> list[str]:
        now = self.clock()
        done = sorted((at, j) for j, at in self.running.items() if at <= now)
        for _, j in done:
            del self.running[j]
        return [j for _, j in done]

    def due(self) -> float | None:
        return min(self.running.values(), default=None)


class CloudTimeout(UtilonError):
    """A live cloud run did not end within its wall-clock timeout."""


class LogEntry(NamedTuple):
    at: float
    """virtual time."""
    action: str
    """``launch`` or ``terminate``."""
    vm_type: str
    n: int
    """how many VMs."""


@dataclass
class _VM:
    id: str
    k: int
    server: int
    pool: bool
    state: str = "booting"      # booting | idle | busy
    job: str | None = None


class LiveCloud:
    """One live run of ``policy`` over ``jobs`` on ``servers`` servers of VMs from
    ``provider``; jobs run through ``executor``.

    ``clock`` and ``sleep`` default to the real ones; a :class:`~utilon.cloud.provider.
    ManualClock` (with its ``sleep``) replays the simulator's timeline deterministically.
    ``timeout`` (wall seconds) bounds the run: exceeding it raises :class:`CloudTimeout`.
    """

    def __init__(self, store: ProfileStore, policy: Any, jobs: Sequence[CloudJob],
                 provider: Provider, executor: Executor, time_scale: float = 0.01,
                 poll_interval: float = 0.002, *, servers: int, seed: int = 0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 timeout: float | None = None) -> None:
        if servers < 0:
            raise ModelError(f"servers must be >= 0, got {servers}")
        if time_scale <= 0 or poll_interval <= 0:
            raise ModelError("time_scale and poll_interval must be positive")
        self.store = store
        self.cloud = store.cloud
        self.policy = policy
        self.jobs, self.u = order_jobs(jobs, seed)   # the same runtime draws as CloudSim
        self.provider = provider
        self.executor = executor
        self.time_scale = time_scale
        self.poll_interval = poll_interval
        self.servers = servers
        self.clock = clock
        self.sleep = sleep
        self.timeout = timeout
        self.cores = [v.cores for v in self.cloud.vm_types]
        self.records = {j.id: JobRecord(j) for j in self.jobs}
        self.vms: dict[str, _VM] = {}
        self.waiting: dict[str, set[str]] = {}   # fresh job -> its VMs not yet ready
        self.running: set[str] = set()
        self.target: list[int] | None = None
        self.wakes: set[float] = set()
        self.log: list[LogEntry] = []
        self.failures: list[tuple[float, str, str]] = []   # (virtual time, vm id, reason)
        self.reconfigurations = 0
        self.reconfigured_vms = 0
        self.t0 = 0.0
        self._wall_end: float | None = None

    # -- time ------------------------------------------------------------------------------
    def now(self) -> float:
        return float((self.clock() - self.t0) / self.time_scale)

    def _check_timeout(self) -> None:
        if self._wall_end is not None and time.monotonic() > self._wall_end:
            raise CloudTimeout(f"live cloud run of {self.policy.name} did not end within "
                               f"{self.timeout:g} s", fix="raise the timeout or check the "
                               "provider and executor")

    def _wait(self, *wall_times: float | None) -> None:
        """Sleep until the earliest known event, at most ``poll_interval``."""
        now = self.clock()
        target = min([now + self.poll_interval, *(t for t in wall_times if t is not None)])
        self.sleep(max(0.0, target - now))

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> CloudResult:
        wall = time.perf_counter()
        if self.timeout is not None:
            self._wall_end = time.monotonic() + self.timeout
        pools = self.policy.initial_pools(self.servers, tuple(self.jobs))
        if any(pools):
            self._set_target(list(pools))
            self._grow(0.0)
            self._warm_up()
        self.t0 = self.clock()
        decide_ms: list[float] = []
        nxt = 0
        now = 0.0
        while True:
            self._check_timeout()
            now = self.now()
            arrived: list[CloudJob] = []
            while nxt < len(self.jobs) and self.jobs[nxt].arrival <= now:
                arrived.append(self.jobs[nxt])
                nxt += 1
            finished: list[Finished] = []
            for jid in self.executor.poll():
                if jid in self.running:
                    self._finish(now, jid)
                    finished.append(Finished(jid, now))
            changed = False
            for ev in self.provider.poll():
                changed |= self._on_event(now, ev)
            woke = any(w <= now for w in self.wakes)
            self.wakes = {w for w in self.wakes if w > now}
            if not (arrived or finished or changed or woke):
                if self._done(nxt):
                    break
                arrival = (self.t0 + self.jobs[nxt].arrival * self.time_scale
                           if nxt < len(self.jobs) else None)
                wake = self.t0 + min(self.wakes) * self.time_scale if self.wakes else None
                self._wait(arrival, wake, self.provider.due(), self.executor.due())
                continue
            self._grow(now)
            t = time.perf_counter()
            commands = self.policy.decide(now, self.view(), arrived, finished)
            decide_ms.append((time.perf_counter() - t) * 1e3)
            for c in commands:
                self._apply(now, c)
            w = self.policy.wakeup()
            if w is not None and w > now:
                self.wakes.add(float(w))
        self._release(now)
        return self._result(decide_ms, time.perf_counter() - wall)

    def _done(self, nxt: int) -> bool:
        return (nxt == len(self.jobs) and not self.running and not self.wakes
                and all(vm.state != "booting" for vm in self.vms.values()))

    def _warm_up(self) -> None:
        """Wait for the initial pools to be ready (relaunching failures): they exist at 0."""
        while any(vm.state == "booting" for vm in self.vms.values()):
            self._check_timeout()
            for ev in self.provider.poll():
                self._on_event(0.0, ev)
            self._grow(0.0)
            if any(vm.state == "booting" for vm in self.vms.values()):
                self._wait(self.provider.due())

    def view(self) -> PoolView:
        K = self.cloud.k
        size, idle, booting = [0] * K, [0] * K, [0] * K
        for vm in self.vms.values():
            if vm.pool:
                size[vm.k] += 1
                idle[vm.k] += vm.state == "idle"
                booting[vm.k] += vm.state == "booting"
        return PoolView(tuple(size), tuple(idle), tuple(booting), tuple(self._free()))

    # -- commands --------------------------------------------------------------------------
    def _apply(self, now: float, c: Command) -> None:
        if isinstance(c, Start):
            self._start(now, c)
        elif isinstance(c, Drop):
            rec = self.records.get(c.job)
            if rec is None:
                raise InvalidDecision(f"{self.policy.name}: cannot drop unknown job {c.job!r}")
            if rec.start is None and not rec.dropped:
                rec.dropped = c.reason or "dropped"
        elif isinstance(c, Resize):
            size = self.view().size
            self._set_target(list(c.target))
            self.reconfigurations += 1
            self.reconfigured_vms += sum(abs(a - b) for a, b in zip(c.target, size,
                                                                     strict=True))
            self._shrink(now)
            self._grow(now)
        else:
            raise InvalidDecision(f"{self.policy.name}: unknown command {c!r}")

    def _start(self, now: float, c: Start) -> None:
        name = self.policy.name
        rec, i = check_start(name, self.store, self.records.get(c.job), now, c)
        table = self.store.configs(rec.job)
        vm_name = self.cloud.vm_types[c.k].name
        placed: list[int] | None = None
        idle: list[_VM] = []
        if c.fresh:
            placed = self._place(c.k, c.count)
            if placed is None:
                raise InvalidDecision(f"{name}: no server room for job {c.job}'s {c.count} "
                                      f"x {vm_name}")
        else:
            idle = [vm for vm in self.vms.values()
                    if vm.pool and vm.k == c.k and vm.state == "idle"]
            if len(idle) < c.count:
                raise InvalidDecision(f"{name}: job {c.job} wants {c.count} idle {vm_name}, "
                                      f"{len(idle)} are")
        rec.k, rec.n, rec.fresh = c.k, c.count, c.fresh
        rec.start = now
        rec.actual = self.store.actual(float(table.t_pred[i]), self.u[c.job])
        rec.t_run = float(table.t_run[i])
        if placed is not None:
            self.waiting[c.job] = set(self._launch(now, c.k, placed, pool=False, job=c.job))
        else:
            for vm in sorted(idle, key=lambda v: v.server)[:c.count]:   # first servers first
                vm.state, vm.job = "busy", c.job
            self._run(now, c.job)

    def _run(self, now: float, job: str) -> None:
        rec = self.records[job]
        rec.run_start = now
        self.running.add(job)
        ids = [vm.id for vm in self.vms.values() if vm.job == job]
        self.executor.run(job, ids, rec.actual * self.time_scale)

    def _finish(self, now: float, job: str) -> None:
        rec = self.records[job]
        rec.end = now
        self.running.discard(job)
        mine = [vm for vm in self.vms.values() if vm.job == job]
        if rec.fresh:
            self._terminate(now, mine)
        else:
            for vm in mine:
                vm.state, vm.job = "idle", None
            self._shrink(now)

    # -- provider events -------------------------------------------------------------------
    def _on_event(self, now: float, ev: ProviderEvent) -> bool:
        """Apply one provider event; True when the policy's view changed (a decision
        instant, as a pool VM's boot end is in the simulator)."""
        vm = self.vms.get(ev.vm_id)
        if vm is None:
            return False            # a VM we terminated (its VMGone) or never knew
        if isinstance(ev, VMReady):
            if vm.state != "booting":
                return False
            if vm.pool:
                vm.state = "idle"
                self._shrink(now)
                return True
            vm.state = "busy"
            assert vm.job is not None
            left = self.waiting[vm.job]
            left.discard(vm.id)
            if not left:
                del self.waiting[vm.job]
                self._run(now, vm.job)
            return False
        reason = ev.reason if isinstance(ev, VMFailed) else "lost"
        assert isinstance(ev, VMFailed | VMGone)
        self.failures.append((now, vm.id, reason))
        del self.vms[vm.id]
        if vm.pool:
            return True             # _grow relaunches it before the policy is asked
        if vm.state == "booting" and vm.job is not None:
            # a per-job cluster's VM failed to boot: a replacement on the same server
            new = self._launch(now, vm.k, [vm.server], pool=False, job=vm.job)[0]
            self.waiting[vm.job].discard(vm.id)
            self.waiting[vm.job].add(new)
        return False

    # -- servers and pools (as CloudSim keeps them) --------------------------------------------
    def _free(self) -> list[int]:
        free = [self.cloud.server_cores] * self.servers
        for vm in self.vms.values():
            free[vm.server] -= self.cores[vm.k]
        return free

    def _place(self, k: int, count: int, partial: bool = False) -> list[int] | None:
        """Servers for ``count`` VMs of type ``k``, first fit; ``None`` when they do not all
        fit (with ``partial``, as many as fit)."""
        c = self.cores[k]
        out: list[int] = []
        for s, f in enumerate(self._free()):
            take = min(f // c, count - len(out))
            out += [s] * take
            if len(out) == count:
                return out
        return out if partial else None

    def _set_target(self, target: list[int]) -> None:
        if len(target) != self.cloud.k or min(target) < 0:
            raise InvalidDecision(f"{self.policy.name}: pool target {target} must have one "
                                  f"count >= 0 per VM type")
        self.target = target

    def _shrink(self, now: float) -> None:
        """Terminate idle VMs of pools above their target (on the last servers first)."""
        if self.target is None:
            return
        for k in range(self.cloud.k):
            pool = [vm for vm in self.vms.values() if vm.pool and vm.k == k]
            idle = [vm for vm in pool if vm.state == "idle"]
            excess = min(len(pool) - self.target[k], len(idle))
            if excess > 0:
                idle.sort(key=lambda v: -v.server)
                self._terminate(now, idle[:excess])

    def _grow(self, now: float) -> None:
        """Launch VMs of pools below their target where servers have room (biggest first)."""
        if self.target is None:
            return
        size = self.view().size
        for k in sorted(range(self.cloud.k), key=lambda k: -self.cores[k]):
            want = self.target[k] - size[k]
            if want > 0:
                placed = self._place(k, want, partial=True)
                if placed:
                    self._launch(now, k, placed, pool=True)

    def _launch(self, now: float, k: int, servers: list[int], pool: bool,
                job: str | None = None) -> list[str]:
        vm_type = self.cloud.vm_types[k]
        ids = self.provider.launch(vm_type, len(servers))
        if len(ids) != len(servers):
            raise UtilonError(f"provider returned {len(ids)} VMs for {len(servers)} launched")
        for vid, s in zip(ids, servers, strict=True):
            self.vms[vid] = _VM(vid, k, s, pool, job=job)
        self.log.append(LogEntry(now, "launch", vm_type.name, len(ids)))
        return ids

    def _terminate(self, now: float, vms: list[_VM]) -> None:
        if not vms:
            return
        self.provider.terminate([vm.id for vm in vms])
        for vm in vms:
            del self.vms[vm.id]
        for k, n in sorted(Counter(vm.k for vm in vms).items()):
            self.log.append(LogEntry(now, "terminate", self.cloud.vm_types[k].name, n))

    def _release(self, now: float) -> None:
        """The run is over: the pools' VMs go back to the provider."""
        self._terminate(now, list(self.vms.values()))

    def _result(self, decide_ms: list[float], wall: float) -> CloudResult:
        recs = [self.records[j.id] for j in self.jobs]
        usage = sum(r.actual * r.n * self.cores[r.k] for r in recs if r.end is not None)
        ends = [r.end for r in recs if r.end is not None]
        t0 = self.jobs[0].arrival if self.jobs else 0.0
        span = (max(ends) if ends else t0) - t0
        return CloudResult(self.policy.name, self.servers, recs, usage, span,
                           self.reconfigurations, self.reconfigured_vms,
                           self.policy.report(), decide_ms, wall)
