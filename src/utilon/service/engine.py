"""The service's engine: the scheduler core and a live backend, running until told to stop,
taking jobs at any time, and writing every change to the store.

It is ``LiveRun``'s loop (``utilon.live.runner``) without a fixed list of jobs: submissions and
cancellations arrive through a queue from the API's threads; a job with input is prepared (its
input generated) in a bounded pool, fairly across tenants (``service.prepare``), then handed to
the core as ``JobSubmitted``; a cancel is the core's ``JobCancelled``.  A submission is held to
its tenant's limits (``service.quotas``), and a tenant with a running quota to it by the
policy's decisions (``service.capping``).  After every batch the loop records, in one
transaction, the attempts it launched, finished, failed or killed, the jobs that started, and
the jobs that finished (with their ``jobs.csv`` row and output verification) or were
cancelled; that transaction is the store writer's next group, shared with the submissions
waiting then (``Store.write``).

**Submissions** are checked and built on the caller's thread (the API's event loop) and
committed by the store's writer with those of other requests (``submit_nowait`` returns a
future; the job is queued for the core once committed).  While they stream in, the loop
paces itself (``PACE``): a decision over a long queue holds the interpreter, which every
request would wait for.

**Ids.**  A job's id is its tenant's: two tenants may both have a job ``pi-1``.  Inside the
service (the store's key, the core's job id, its folder) a job is ``TENANT:ID``
(``job_key``); the API shows ``ID`` and takes either.

**Time.**  The service clock is seconds since the store's epoch (the first start of
``utilon serve`` on it), so that a job's deadline means the same after a restart.  Each start
is an *incarnation*: its backend's clock starts at 0, and service time = backend time + the
incarnation's offset from the epoch.  Job directories are per incarnation, so a task orphaned
by a crash never writes into the re-run's files.

**Recovery.**  On start, every job the store holds as queued or running is rebuilt from its
submitted spec and queued again; attempts a crash left open are closed as ``lost``; a job
whose cancel was requested is cancelled.  A job is marked finished only from an open state, in
the same transaction as its result, so no job completes twice.

**Stop.**  ``stop()`` (SIGTERM through uvicorn) checkpoints: running tasks are stopped, their
attempts closed as ``stopped``, their jobs re-queued in the store; the next start runs them.

**Standby.**  With a ``lease`` (``service.lease``: two servers on one PostgreSQL store) the
engine starts only once its server holds the lease; until then it is the standby (``role``)
and the API answers 503 naming the active server.  Taking over is a start like any other, so
it recovers as a restart does.  Before every dispatch batch the loop checks that the lease is
still held, and every transaction checks it in the store: a server that lost it stops
dispatching at once, kills what it runs (the new active server re-runs it) and hands over to
``on_deposed`` (``utilon serve`` exits).
"""

from __future__ import annotations

import json
import logging
import math
import queue
import re
import secrets
import shutil
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from utilon.core.feasibility import Unrunnable, check_workload
from utilon.core.messages import (
    CapacityChanged,
    JobCancelled,
    JobSubmitted,
    Launch,
    MachineAdded,
    Preempt,
    Stimulus,
    TaskFailed,
    TaskFinished,
    Tick,
)
from utilon.core.policy import Policy
from utilon.core.scheduler import SchedulerCore
from utilon.core.tolerance import missed
from utilon.errors import UtilonError
from utilon.jobs.plan import JobPlan
from utilon.live.backend import Backend
from utilon.live.catalog import TaskCatalog
from utilon.live.runner import check_resources
from utilon.metrics.outputs import job_row
from utilon.model.cluster import Cluster
from utilon.model.job import Job
from utilon.model.lifecycle import JobState
from utilon.scenario.build import build_job
from utilon.scenario.spec import JobSpec, ScenarioSpec
from utilon.service.capping import TenantCaps
from utilon.service.errors import RequestError
from utilon.service.lease import Elector, Lease
from utilon.service.osthread import name_this_thread
from utilon.service.prepare import Prep, Preparer
from utilon.service.quotas import (
    DEFAULT_LIMITS,
    Held,
    InputSize,
    Limits,
    Usage,
    check_declared,
    check_input,
    check_job,
    check_payload,
    input_size,
)
from utilon.service.store import JobRecord, LeaseLost, Store, attempts
from utilon.service.tenants import Principal

log = logging.getLogger(__name__)
ADMISSION = ("reject", "accept")
OVER = ("finished", "cancelled", "failed")
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
LATENCY_WINDOW = 2000
SAMPLES = 3600
"""allocation samples kept (one per ``sample_every`` at most: an hour at 1 s)"""
SAMPLE_JOBS = 12
"""jobs kept per sample (the largest holders); the rest count in their tenant only"""
PACE = 12.0
"""while submissions arrive, the loop waits this many times the CPU time of its last batch
before the next (at most ``MAX_GAP``): it holds the interpreter a thirteenth of the time at
most.  A decision costs O(jobs queued), so during a burst fewer, larger batches cost less
CPU a submission (docs/service.md#a-burst-of-submissions has the numbers)"""
MAX_GAP = 0.5
"""seconds the loop waits at most between batches while pacing: task ends and starts (and
so another tenant's job's start) are never held back longer by a burst"""
SUBMIT_WINDOW = 1.0
"""seconds after a submission during which the loop paces itself"""


def job_key(tenant: str, job_id: str) -> str:
    """The service's own name of ``tenant``'s job ``job_id`` (ids are per tenant)."""
    return f"{tenant}:{job_id}"


@dataclass
class _Built:
    job: Job
    plan: JobPlan | None
    standalone: float
    size: InputSize = field(default_factory=InputSize)

    @property
    def prepares(self) -> bool:
        return self.plan is not None and self.plan.prepare is not None

    @property
    def holds(self) -> Held:
        """What it counts against its tenant's quotas while it is open."""
        stages = self.job.stages
        return Held(1, self.size.written, sum(len(st.tasks) for st in stages), len(stages))


@dataclass
class EngineStats:
    started_wall: float = 0.0
    batches: int = 0
    recovered: int = 0
    lost_attempts: int = 0
    decide_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))
    samples: deque[Sample] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    on_decide: list[Callable[[float], None]] = field(default_factory=list)
    """called with each decision's milliseconds (the /metrics histogram)"""


@dataclass(frozen=True)
class Sample:
    """The slot resource held at one instant: per tenant, per job (the largest few), and the
    up capacity (the dashboard's allocation chart)."""

    t: float
    capacity: float
    tenants: dict[str, float]
    jobs: dict[str, tuple[str, float]]  # job -> (tenant, held)


class ServiceEngine:
    def __init__(self, store: Store, spec: ScenarioSpec, cluster: Cluster, policy: Policy,
                 backend: Backend, state_dir: Path, *, weights: Callable[[str], float]
                 = lambda _t: 1.0, admission: str = "reject", seed: int = 0,
                 max_wait: float = 0.2, sample_every: float = 1.0,
                 limits: Callable[[str], Limits] = lambda _t: DEFAULT_LIMITS,
                 caps_running: bool = False, prep_workers: int = 2,
                 lease: Lease | None = None,
                 on_deposed: Callable[[str], None] | None = None,
                 warm_standby: bool = False, pace: float = PACE) -> None:
        if admission not in ADMISSION:
            raise UtilonError(f"unknown admission {admission!r}", where="--admission",
                              fix="reject or accept")
        if lease is not None and lease.store is not store:
            raise ValueError("the lease must be on the engine's own store: it fences its "
                             "transactions")
        self.store = store
        self.spec = spec
        self.declared = cluster
        self.policy = policy
        self.backend = backend
        self.state_dir = state_dir
        self.weights = weights
        self.admission = admission
        self.seed = seed
        self.max_wait = max_wait
        self.sample_every = sample_every
        self.limits = limits
        self.caps_running = caps_running
        self.usage = Usage()
        self.preparer = Preparer(prep_workers, done=self._prepared, failed=self._unprepared)
        self._preparing: dict[str, _Built] = {}  # key -> built, while in the preparer
        self.prep_seconds: dict[str, float] = {}  # key -> how long its input took
        self.lock = threading.RLock()  # the core and the catalog; held by the loop per batch
        self.ready: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.stats = EngineStats()
        self.core: SchedulerCore | None = None
        self.cluster: Cluster = cluster
        self.catalog: TaskCatalog | None = None
        self.offset = 0.0
        self.error = ""
        self._stop = threading.Event()
        self._running = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started_jobs: set[str] = set()
        self.lease = lease
        self.on_deposed = on_deposed
        self._elector: Elector | None = None
        self.role = "standby" if lease is not None else "active"
        """standby, starting (taking over), active, deposed (lost the lease) or stopped"""
        self.warm_standby = warm_standby
        self._backend_started = False
        self._lost_once = threading.Lock()
        self.pace = pace
        self._last_submit = -math.inf  # time.monotonic() of the last submission
        self._slots_of: tuple[Cluster, float, str] | None = None

    # -- life cycle ---------------------------------------------------------------------
    def start(self) -> None:
        """Serve: at once without a lease or when this server acquires it now; otherwise as
        the standby, which starts when the lease is free (``_take_over``)."""
        if self.lease is None:
            self._activate()
            return
        if self.warm_standby:
            self._start_backend(self.state_dir / "runs" / "standby")
        self._elector = Elector(self.lease, on_active=self._take_over, on_lost=self._lost)
        if not self._elector.start():
            log.info("standby: %s holds the lease", self.lease.active_address() or "another")
            return
        try:
            self._activate()
        except BaseException:
            self._elector.stop(release=True)
            raise

    def _take_over(self) -> None:
        """The standby acquired the lease: start as a restart does (recovery re-queues what
        the dead server ran).  A start that fails lets the lease go and stops this server."""
        self.role = "starting"
        log.warning("taking over as the active server")
        try:
            self._activate()
        except Exception as e:
            log.exception("could not take over")
            self.error = f"could not take over: {type(e).__name__}: {e}"
            if self._elector is not None:
                self._elector.stop(release=True)
            self._lost(self.error)

    def _start_backend(self, run_dir: Path) -> None:
        """Start the backend; a standby with ``warm_standby`` does it while it waits (local
        workers take seconds to import their modules: not spent on a takeover), and its
        catalog learns its incarnation's folder when it takes over."""
        self.catalog = TaskCatalog(run_dir, [], {})
        self.backend.strict_capacity = not self.policy.overcommits
        self.cluster = self.backend.start(self.declared, self.catalog)
        self._backend_started = True

    def _activate(self) -> None:
        epoch, inc = self.store.begin_incarnation()
        run_dir = self.state_dir / "runs" / f"incarnation-{inc}"
        if self._backend_started and self.catalog is not None:
            self.catalog.run_dir = run_dir  # no job was added under the standby's folder
        else:
            self._start_backend(run_dir)
        self.offset = time.time() - self.backend.now() - epoch
        policy = self.policy
        if self.caps_running:
            policy = TenantCaps(self.policy, self._running_cap)
        self.core = SchedulerCore(self.cluster, policy, record_attempts=False,
                                  estimates="online")
        self.stats.started_wall = time.time()
        self._recover()
        self.preparer.start()
        t = threading.Thread(target=self._guarded(self._loop), name="utilon-engine",
                             daemon=True)
        t.start()
        self._threads.append(t)
        self._running.set()
        if self.role != "deposed":
            self.role = "active"

    def stop(self, timeout: float = 30.0) -> None:
        """Checkpoint and stop: running tasks are stopped and their jobs re-queued; then the
        lease goes, so that a standby takes over at once.  A standby, or a server that lost
        the lease, writes nothing: the store is another server's."""
        self._stop.set()
        self.preparer.stop()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout)
        active = self.role == "active"
        if active:
            self._checkpoint()
        if self._elector is not None:
            self._elector.stop(release=active)
        if self._backend_started:
            self.backend.close()
        self._running.clear()
        if self.role != "deposed":
            self.role = "stopped"

    def _lost(self, reason: str) -> None:
        """The lease is no longer this server's: stop dispatching at once, kill what runs here
        (the active server re-runs it) and hand over to ``on_deposed``.  Called once, from
        the lease's thread or the loop's."""
        if not self._lost_once.acquire(blocking=False):
            return
        self.role = "deposed"
        self.error = self.error or f"lost the lease: {reason}"
        log.error("this server is no longer the active one: %s", reason)
        self._stop.set()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(10)
        self.preparer.stop()
        if self._backend_started:
            self.backend.close()
        if self.on_deposed is not None:
            self.on_deposed(reason)

    @property
    def active(self) -> bool:
        """Whether this server is the one that schedules (a standby, or one that is taking
        over or lost the lease, answers 503)."""
        return self.role == "active"

    def active_address(self) -> str:
        """Where the active server is, as this one last saw the lease ("" unknown)."""
        if self.lease is None:
            return ""
        return self.lease.address if self.active else self.lease.active_address()

    @property
    def running(self) -> bool:
        return self._running.is_set() and not self._stop.is_set() and not self.error

    def now(self) -> float:
        """Service time: seconds since the store's epoch."""
        return self.backend.now() + self.offset

    def _guarded(self, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except LeaseLost as e:  # a transaction found the lease another server's
                self._lost(e.message)
            except Exception as e:  # the engine must say why it stopped, not die silently
                log.exception("service engine stopped")
                self.error = f"{type(e).__name__}: {e}"
        return run

    # -- submissions (API threads) ------------------------------------------------------
    def build(self, payload: dict[str, Any], tenant: str, submit: float,
              limits: Limits | None = None) -> _Built:
        """The job a payload describes (its ``id`` the job's key), built on the service's
        cluster; a bad payload, or one past ``limits``, is a ``RequestError`` naming the
        field."""
        from pydantic import ValidationError

        data = dict(payload)
        data["submit"] = submit
        data["tenant"] = tenant
        try:
            js = JobSpec.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(x) for x in first["loc"] if not str(x).startswith("function"))
            raise RequestError(first["msg"], where=loc or "(job)",
                                  fix="see docs/scenario.md#jobs") from None
        size = input_size(js.run, self.state_dir) if js.run is not None else InputSize()
        if limits is not None:
            check_input(size, limits)
        factor = self.weights(tenant)
        if factor != 1.0:  # (a copy of the spec is a tenth of the build: not for nothing)
            js = js.model_copy(update={"weight": js.weight * factor})
        # drawn from the job's id, so that a restart rebuilds the very same job; a job that
        # draws nothing is the same job whatever its seed, and deriving one (numpy's
        # SeedSequence) is work no one uses then
        index = zlib.crc32(js.id.encode("utf-8"))
        seed = self.seed
        if js.run is not None or draws(payload):
            seed = int(np.random.SeedSequence([self.seed, index]).generate_state(1)[0])
        try:
            job, plan, standalone = build_job(self.spec, self.cluster, js, seed=seed,
                                              index=index, base_dir=self.state_dir)
        except UtilonError as e:
            raise RequestError(e.message, where=e.where, fix=e.fix) from None
        if limits is not None:
            check_job(job, limits, *self._slots())
        try:
            check_workload(self.cluster, [job], self.policy)
            check_resources(self.cluster, [job], self.backend.name)
        except (Unrunnable, UtilonError) as e:
            raise RequestError(e.message, where="stages", fix=e.fix) from None
        return _Built(job, plan, standalone, size)

    def submit(self, who: Principal, payload: dict[str, Any]) -> JobRecord:
        """Accept a job: checked against its tenant's limits, built, durable in the store,
        then prepared (if it has input) and queued for the core.  Blocks until its
        transaction has committed (``submit_nowait`` does not)."""
        return self.submit_nowait(who, payload).result()

    def submit_nowait(self, who: Principal, payload: dict[str, Any]) -> Future[JobRecord]:
        """``submit`` without the wait: a bad payload raises at once; otherwise the job goes
        to the store's writer (group commit) and the future resolves once it is committed
        (its record; a ``RequestError`` 409 when the id is taken).  The job is queued for the
        core as soon as it is committed, whether or not anyone waits for the future."""
        if not self.running:
            raise RequestError("the service is not running" + (
                f" ({self.error})" if self.error else ""), status=503)
        self._last_submit = time.monotonic()
        data = dict(payload)
        admission = data.pop("admission", self.admission)
        if admission not in ADMISSION:
            raise RequestError(f"unknown admission {str(admission)[:80]!r}",
                               where="admission", fix="reject or accept")
        if "submit" in data:
            raise RequestError("submit is set by the service (the time it accepts the job)",
                                  where="submit", fix="leave submit out")
        tenant = str(data.get("tenant") or who.name)
        if not who.may_see(tenant):
            raise RequestError(f"tenant {who.name!r} cannot submit for {tenant[:80]!r}",
                                  status=403, where="tenant", fix="leave tenant out")
        limits = self.limits(tenant)
        self.usage.room(tenant, limits)
        check_payload(data, limits)
        self.usage.room(tenant, limits, check_declared(data, limits))
        name = str(data.get("id") or f"{tenant}-{secrets.token_hex(5)}")
        if not _JOB_ID.match(name):  # it names the job's directory: no paths, no oddities
            raise RequestError(f"bad job id {name[:80]!r}", where="id",
                                  fix="letters, digits, '_', '.', '-', at most 128, starting "
                                      "with a letter or digit (or leave id out)")
        # (a taken id is found by the writer's transaction, which must check anyway: no
        # read of the store here, so a submission costs the store one grouped write only)
        key = job_key(tenant, name)
        data["id"] = key
        now = self.now()
        built = self.build(data, tenant, now, limits)
        goal = built.job.utility.goal
        prep = self.preparer.estimate(tenant, built.size.written) if built.prepares else 0.0
        if admission == "reject" and goal is not None and now + prep + built.standalone > goal:
            needs = (f"{prep:.1f} s to prepare its input and " if prep >= 0.05 else "")
            raise RequestError(
                f"the deadline cannot be met: the job needs {needs}{built.standalone:.1f} s "
                f"alone on the whole cluster and has {goal - now:.1f} s", where="utility",
                fix="give a later deadline, or submit with admission: accept")
        spec = {k: v for k, v in data.items()}
        spec["id"] = name
        spec["submit"] = now
        spec["tenant"] = tenant
        self.usage.admit(tenant, key, built.holds, limits)
        out: Future[JobRecord] = Future()

        def committed(written: Future[JobRecord | None]) -> None:
            # on the writer's thread, right after the commit
            try:
                rec = written.result()
                if rec is None:
                    raise self._taken(name)
                self._enqueue(key, tenant, built)
            except BaseException as e:
                self.usage.release(key)
                out.set_exception(e)
                return
            out.set_result(rec)

        try:
            self.store.submit_job(key, tenant, spec, now, goal).add_done_callback(committed)
        except BaseException:
            self.usage.release(key)
            raise
        return out

    @staticmethod
    def _taken(name: str) -> RequestError:
        # only ever about the tenant's own jobs: ids are per tenant (issue 46: a 409 told
        # one tenant which ids another had)
        return RequestError(f"you already have a job with id {name!r}", status=409,
                            where="id", fix="give another id, or leave id out")

    def cancel(self, who: Principal, key: str) -> JobRecord:
        rec = self.store.get(key)
        if rec is None or not who.may_see(rec.tenant):
            raise RequestError(f"no job {key.partition(':')[2] or key!r}", status=404,
                               where="id")
        if rec.state in ("queued", "running"):
            self.store.request_cancel(key, self.now())
            self.preparer.cancel(key)  # its preparation stops now, and its files go
            self.ready.put(("cancel", key))
        out = self.store.get(key)
        assert out is not None
        return out

    def _slots(self) -> tuple[float, str]:
        """The cluster's slot resource and its declared capacity, found once per cluster
        (every submission asks)."""
        cl = self.cluster
        if self._slots_of is None or self._slots_of[0] is not cl:
            r = cl.slot_resource
            self._slots_of = (cl, sum(m.capacity[r] for m in cl.machines), r)
        return self._slots_of[1], self._slots_of[2]

    def _running_cap(self, tenant: str, capacity: float) -> float:
        return self.limits(tenant).running_cap(capacity)

    # -- preparation --------------------------------------------------------------------
    def _enqueue(self, key: str, tenant: str, built: _Built) -> None:
        """To the core now, or once its input is prepared."""
        if not built.prepares:
            self.ready.put(("job", (key, built)))
            return
        assert self.catalog is not None and built.plan is not None
        assert built.plan.prepare is not None
        self._preparing[key] = built
        self.preparer.put(Prep(key, tenant, self.catalog.job_dir(key), built.plan.prepare,
                               built.size.written, built))

    def _prepared(self, p: Prep) -> None:
        self.usage.resize(p.key, p.written)
        self.prep_seconds[p.key] = p.seconds or 0.0
        self._preparing.pop(p.key, None)
        self.ready.put(("job", (p.key, p.payload)))

    def _unprepared(self, p: Prep, reason: str) -> None:
        self._preparing.pop(p.key, None)
        now = self.now()
        self.store.write(lambda c: self._close(c, p.key, "failed", now, detail=reason,
                                               reason=reason))

    def _close(self, c: Any, key: str, state: str, at: float, *, detail: str = "",
               **values: Any) -> bool:
        """Move an open job to ``state`` in the store (``Store.transition``); once it is
        over its tenant's use drops, and a cancelled or failed job's files go."""
        moved = self.store.transition(c, key, state, at, detail=detail, **values)
        if moved and state in OVER:
            self.usage.release(key)
            self._preparing.pop(key, None)
            if state != "finished" and self.catalog is not None:
                shutil.rmtree(self.catalog.job_dir(key), ignore_errors=True)
        return moved

    # -- the loop -----------------------------------------------------------------------
    def _recover(self) -> None:
        now = self.now()
        self.stats.lost_attempts = self.store.close_open_attempts(now, "lost")
        for rec in self.store.open_jobs():
            if rec.cancel_requested:
                with self.store.tx() as c:
                    self._close(c, rec.id, "cancelled", now,
                                detail="cancel requested before a restart")
                continue
            if rec.state == "running":
                with self.store.tx() as c:
                    self.store.transition(c, rec.id, "queued", now, detail=(
                        "re-queued: the standby took over while it ran"
                        if self.role == "starting" else
                        "re-queued: the service restarted while it ran"))
            try:
                spec = {k: v for k, v in rec.spec.items() if k not in ("submit", "tenant")}
                spec["id"] = rec.id
                built = self.build(spec, rec.tenant, float(rec.spec["submit"]))
            except UtilonError as e:
                with self.store.tx() as c:
                    self._close(c, rec.id, "failed", now,
                                detail=f"cannot be rebuilt: {e.one_line()}",
                                reason=e.one_line())
                continue
            self.stats.recovered += 1
            self.usage.hold(rec.tenant, rec.id, built.holds)
            self._enqueue(rec.id, rec.tenant, built)

    def _loop(self) -> None:
        name_this_thread("utilon-engine")
        core = self.core
        assert core is not None
        backend = self.backend
        tick = self.policy.tick
        next_tick = math.inf
        pending_cancel: set[str] = set()
        last_sample = -math.inf
        idle_until = -math.inf
        while not self._stop.is_set():
            # while submissions stream in, the loop yields the interpreter to the API: a
            # decision over a long queue is CPU work that the GIL makes every request wait
            # for, so after a batch that cost c CPU seconds it gathers events for pace * c
            # before the next (the events of that time go in one decision)
            rest = idle_until - time.monotonic()
            if rest > 0 and time.monotonic() - self._last_submit < SUBMIT_WINDOW:
                self._stop.wait(rest)
            now = self.now()
            batch = backend.wait_until(min(next_tick, now + self.max_wait) - self.offset)
            now = self.now()
            # the simulator's phase order: task events, then capacity, then arrivals
            stimuli: list[Stimulus] = [s for s in batch
                                       if isinstance(s, TaskFinished | TaskFailed)]
            stimuli += [s for s in batch if isinstance(s, CapacityChanged | MachineAdded)]
            cancelled_now: list[str] = []
            items: list[tuple[str, Any]] = []
            while True:
                try:
                    items.append(self.ready.get_nowait())
                except queue.Empty:
                    break
            # the store's word on every job of the batch in one query (a burst hands over
            # hundreds at a time)
            known = self.store.states([item[0] for kind, item in items if kind == "job"])
            for kind, item in items:
                if kind == "job":
                    job_id, built = item
                    state, cancel_requested = known.get(job_id, ("", False))
                    if state not in ("queued", "running"):
                        continue
                    if cancel_requested or job_id in pending_cancel:
                        cancelled_now.append(job_id)
                        continue
                    assert self.catalog is not None
                    self.catalog.add(built.job, built.plan)
                    if built.plan is not None:
                        # a job of plain stages runs sleeps that write nothing: no folder (a
                        # mkdir each was a fifth of this loop's time in a burst)
                        self.catalog.job_dir(job_id).mkdir(parents=True, exist_ok=True)
                    stimuli.append(JobSubmitted(built.job))
                elif kind == "cancel":
                    if item in core.active:
                        stimuli.append(JobCancelled(item))
                    else:  # not handed to the core yet (or only in this batch): never starts
                        pending_cancel.add(item)
                        stimuli = [s for s in stimuli if not (type(s) is JobSubmitted
                                                              and s.job.id == item)]
                        if item not in core.jobs:
                            cancelled_now.append(item)
            if tick is not None:
                if next_tick == math.inf and (core.active or stimuli):
                    next_tick = now + tick
                if next_tick <= now:
                    stimuli.append(Tick())
                    next_tick = now + tick if (core.active or stimuli) else math.inf
            if cancelled_now:
                def cancel(c: Any, jids: list[str] = cancelled_now, at: float = now) -> None:
                    for jid in jids:
                        self._close(c, jid, "cancelled", at, detail="cancelled")
                self.store.write(cancel)
            if not stimuli:
                continue
            if self.lease is not None and not self.lease.held():
                # fenced: the lease may be another server's by now, so nothing more is
                # dispatched from here (issue 46)
                self._lost("the lease lapsed before a dispatch")
                return
            cpu = time.thread_time()
            with self.lock:
                before = set(core.active)
                decisions = core.stats.decisions
                cmds = core.handle(now, stimuli)
                backend.apply(cmds)
                if core.stats.decisions > decisions:
                    new_ms = [1000.0 * x for x in core.stats.decide_seconds[decisions:]]
                    self.stats.decide_ms.extend(new_ms)
                    for hook in self.stats.on_decide:
                        for ms in new_ms:
                            hook(ms)
                self.stats.batches += 1
                self._record(now, stimuli, cmds, before)
                samples = self.stats.samples
                # the sample after the last task ends is kept whatever its spacing, so the
                # allocation returns to 0 on the chart and the gauge (issue 46)
                drained = (bool(samples) and bool(samples[-1].tenants)
                           and not any(rt.running for rt in core.active.values()))
                if now - last_sample >= self.sample_every or drained:
                    samples.append(self._sample(now))
                    last_sample = now
            idle_until = time.monotonic() + min(self.pace * (time.thread_time() - cpu),
                                                MAX_GAP)

    def _record(self, now: float, stimuli: list[Stimulus], cmds: list[Any],
                before: set[str]) -> None:
        core = self.core
        assert core is not None and self.catalog is not None
        store = self.store
        over = (before | {s.job.id for s in stimuli if type(s) is JobSubmitted}) - set(
            core.active)
        # verified before the transaction: reading outputs must not hold it (nor, with a
        # standby, the lease row's lock that blocks renewals)
        verified = {jid: self._verify(jid) for jid in over
                    if core.jobs[jid].state is JobState.DONE}
        started = list(dict.fromkeys(cmd.task.job for cmd in cmds if type(cmd) is Launch
                                     and cmd.task.job not in self._started_jobs))
        closes: list[tuple[str, dict[str, Any]]] = []
        for jid in sorted(over):
            rt = core.jobs[jid]
            if rt.state is JobState.DONE:
                row = job_row(rt.job, rt.start, rt.finish, rt.cost, now)
                result = {"row": row, "verification": verified[jid],
                          "outputs": str(self.catalog.job_dir(jid))}
                closes.append((jid, {"state": "finished", "finished": rt.finish,
                                     "result": json.dumps(result),
                                     "missed": bool(row["missed"]),
                                     "utility": float(row["utility"]),
                                     "detail": "met" if not row["missed"] else "missed"}))
            elif rt.state is JobState.CANCELLED:
                closes.append((jid, {"state": "cancelled", "detail": "cancelled"}))

        closed = [(s.task.job, s.task.stage, s.task.index, now,
                   f"failed: {s.reason}"[:32] if isinstance(s, TaskFailed) else "done")
                  for s in stimuli if type(s) is TaskFinished or type(s) is TaskFailed]
        closed += [(cmd.task.job, cmd.task.stage, cmd.task.index, now, "killed")
                   for cmd in cmds if type(cmd) is Preempt]
        opened = [(cmd.task.job, cmd.task.stage, cmd.task.index, cmd.machine, now)
                  for cmd in cmds if type(cmd) is Launch]
        if not (closed or opened or started or closes):
            return  # a tick that changed nothing: no transaction

        def write(c: Any) -> None:
            store.close_attempts(c, closed)
            store.open_attempts(c, opened)
            for jid in started:
                store.transition(c, jid, "running", now, started=now)
            for jid, values in closes:
                self._close(c, jid, at=now, **values)

        # with the submissions' group (one fsync for both), not queued behind it
        store.write(write)
        self._started_jobs.update(started)

    def _sample(self, now: float) -> Sample:
        core = self.core
        assert core is not None
        slot = core.names.index(core.slot_resource)
        tenants: dict[str, float] = {}
        jobs: list[tuple[float, str, str]] = []
        for jid, rt in core.active.items():
            if not rt.running:  # (most of a long queue: skipped cheaply)
                continue
            held = sum(rt.stages[r[1]].vectors[r[2]][slot] for r in rt.running)
            if held > 0:
                tenants[rt.job.tenant] = tenants.get(rt.job.tenant, 0.0) + held
                jobs.append((held, jid, rt.job.tenant))
        jobs.sort(key=lambda x: (-x[0], x[1]))
        cap = sum(m.cap[slot] for m in core.machines if m.state.name == "UP")
        return Sample(now, cap, tenants, {j: (t, h) for h, j, t in jobs[:SAMPLE_JOBS]})

    def timeline(self, who: Principal, since: float = -math.inf) -> list[dict[str, Any]]:
        """The allocation samples after ``since`` as ``who`` may see them."""
        out = []
        for smp in list(self.stats.samples):
            if smp.t <= since:
                continue
            tenants = {t: v for t, v in smp.tenants.items() if who.may_see(t)}
            jobs = {j: v for j, (t, v) in smp.jobs.items() if who.may_see(t)}
            out.append({"t": smp.t, "capacity": smp.capacity, "tenants": tenants,
                        "jobs": jobs})
        return out

    def _verify(self, job_id: str) -> dict[str, Any]:
        assert self.catalog is not None
        plan = self.catalog.plans.get(job_id)
        if plan is None or plan.verify is None:
            return {"ok": None, "detail": "this job kind has no verifier"}
        try:
            v = plan.verify(self.catalog.job_dir(job_id))
            return {"ok": v.ok, "detail": v.detail}
        except Exception as e:  # a verifier crash is a failed verification
            return {"ok": False, "detail": f"verifier raised {type(e).__name__}: {e}"}

    def _checkpoint(self) -> None:
        """After the loop stopped: what ran goes back to the queue, in the store."""
        try:
            now = self.now()
        except Exception:
            now = time.time() - self.store.epoch
        try:
            with self.store.tx() as c:
                for rec in self.store.open_jobs():
                    if rec.state == "running":
                        self.store.transition(c, rec.id, "queued", now,
                                              detail="re-queued: the service stopped")
                c.execute(attempts.update().where(attempts.c.end.is_(None))
                          .where(attempts.c.incarnation == self.store.incarnation)
                          .values(end=now, outcome="stopped"))
        except Exception:  # the store may be gone already; recovery closes them as lost
            log.exception("checkpoint on stop failed")

    # -- views (API threads) ------------------------------------------------------------
    def live_view(self, job_id: str) -> dict[str, Any] | None:
        """What the core knows of a job now: tasks, estimated completion, utility."""
        core = self.core
        if core is None:
            return None
        with self.lock:
            rt = core.jobs.get(job_id)
            if rt is None:
                return self._preparation_view(job_id)
            now = self.now()
            total = sum(st.total for st in rt.stages)
            done = sum(st.done for st in rt.stages)
            running = len(rt.running)
            remaining = sum(st.expected * (st.total - st.done) for st in rt.stages)
            # at the parallelism it has now (one task if none runs): a rough, honest guess
            est = rt.finish if rt.finish is not None else now + remaining / max(running, 1)
            u = rt.job.utility
            goal = u.goal
            t = rt.finish if rt.finish is not None else now
            stages = [{"name": st.stage.name, "tasks": st.total, "done": st.done,
                       "running": st.running} for st in rt.stages]
            reason = core.infeasible.get(job_id, "")  # why the policy cannot honour it
        status = deadline_status(goal, rt.finish, now, est)
        prep = self.prep_seconds.get(job_id)
        return {"tasks": total, "tasks_done": done, "tasks_running": running,
                "estimated_completion": est, "utility_now": u.value(t), "goal": goal,
                "deadline_status": status, "stages": stages, "policy_reason": reason,
                "preparation": {"phase": "done" if prep is not None else "none",
                                "prep_s": prep}}

    def _preparation_view(self, key: str) -> dict[str, Any] | None:
        """The live view of a job whose input is waiting or being prepared: its estimated
        completion is the preparation left (at the measured rate) plus its time alone."""
        built = self._preparing.get(key)
        phase = self.preparer.status(key)
        if built is None or phase is None:
            return None
        now = self.now()
        expect = built.size.written / self.preparer.rate
        est = now + max(0.0, expect - phase.get("prep_s", 0.0)) + built.standalone
        job = built.job
        goal = job.utility.goal
        return {"tasks": sum(len(st.tasks) for st in job.stages), "tasks_done": 0,
                "tasks_running": 0, "estimated_completion": est,
                "utility_now": job.utility.value(now), "goal": goal,
                "deadline_status": deadline_status(goal, None, now, est),
                "stages": [{"name": st.name, "tasks": len(st.tasks), "done": 0, "running": 0}
                           for st in job.stages], "policy_reason": "", "preparation": phase}

    def cluster_view(self, who: Principal) -> dict[str, Any]:
        core = self.core
        machines: list[dict[str, Any]] = []
        per_job: dict[str, float] = {}
        per_tenant: dict[str, float] = {}
        if core is not None:
            with self.lock:
                slot = core.slot_resource
                si = core.names.index(slot)
                for m in core.machines:
                    used = m.used
                    machines.append({"id": m.id, "up": m.state.name == "UP",
                                     "capacity": dict(zip(core.names, m.cap, strict=True)),
                                     "used": {n: round(u, 6) for n, u in
                                              zip(core.names, used, strict=True)},
                                     "tasks": m.ntasks})
                for jid, rt in core.active.items():
                    held = sum(rt.stages[r[1]].vectors[r[2]][si] for r in rt.running)
                    if held <= 0:
                        continue
                    tenant = rt.job.tenant
                    per_tenant[tenant] = per_tenant.get(tenant, 0.0) + held
                    if who.may_see(tenant):
                        per_job[jid] = held
        else:
            slot = self.cluster.slot_resource
        if not who.admin:
            per_tenant = {t: v for t, v in per_tenant.items() if t == who.name}
        return {"slot_resource": slot, "machines": machines,
                "allocation": {"jobs": per_job, "tenants": per_tenant}}

    def policy_view(self) -> dict[str, Any]:
        ms = sorted(self.stats.decide_ms)
        return {"name": self.policy.name, "params": {k: _plain(v) for k, v in
                                                      self.policy.params().items()},
                "decisions": self.core.stats.decisions if self.core else 0,
                "decide_ms_p50": _pct(ms, 50), "decide_ms_p95": _pct(ms, 95),
                "decide_ms_max": ms[-1] if ms else None, "window": len(ms)}


def draws(payload: Any) -> bool:
    """Whether a job's spec draws a number (a distribution: a mapping with ``dist``) -- the
    only use its seed has but a real job's (``run:``), whose plan is seeded too."""
    stack = [payload]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if "dist" in v:
                return True
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def deadline_status(goal: float | None, finish: float | None, now: float,
                    estimate: float | None) -> str:
    """``none`` (no goal), ``met``/``missed`` once finished, else ``late`` (past the goal),
    ``at-risk`` (the estimated completion is past it) or ``on-track``."""
    if goal is None:
        return "none"
    if finish is not None:
        return "missed" if missed(finish, goal) else "met"
    if now > goal:
        return "late"
    if estimate is None or estimate > goal:
        return "at-risk"
    return "on-track"


def _pct(xs: list[float], q: float) -> float | None:
    return float(np.percentile(xs, q)) if xs else None


def _plain(v: Any) -> Any:
    if isinstance(v, int | float | str | bool) or v is None:
        return v
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return str(v)
