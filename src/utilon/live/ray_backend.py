"""RayBackend: real tasks on a Ray cluster, each pinned to the node the dispatcher chose.

* **Machines.** Every alive Ray node becomes a utilon machine ``node-<first 8 hex of its id>``.
  Its capacity: ``cpu`` and ``slots`` = the node's CPUs, ``mem`` = its memory in GiB, ``gpu``
  if it has GPUs, and every custom resource under its own name; its labels (and its address,
  as ``host``) become attributes.  The scenario's own machines are not used on Ray.
* **Executors pinned to nodes.** Tasks run in *executor actors*, each created with hard node
  affinity (``NodeAffinitySchedulingStrategy(soft=False)``) and ``num_cpus=0``: the dispatcher
  alone decides how many tasks a node runs, Ray only places and executes them.  A pool of
  executors per node (one per CPU, started before the clock, grown on demand, reused) plays the
  part of LocalBackend's worker processes.  Why actors rather than one Ray task per utilon
  task: a Ray task needs a worker lease from the node's raylet, and Ray returns the lease as
  soon as the owner has no queued task of that shape -- which is always the case here, since
  utilon submits a task only when a slot frees up -- so every task paid a lease round trip
  (utilon kept 74% of raw Ray's throughput on 10 ms tasks that way).  An actor call goes
  straight to its worker.  Neither Ray nor the executors retry: a failed or lost task is
  re-queued by the core, which knows why.
* **Completions** come from ``ray.wait`` over the running attempts; ``ray.get`` of a finished
  one either returns (``TaskFinished``) or raises (``TaskFailed`` with the cause).
* **Preemption** kills the task's executor (``ray.kill``; Python code cannot be interrupted
  safely, and Ray cannot force-cancel an actor call) and a fresh one replaces it later.
* **Nodes** are listed every ``node_poll`` seconds (and at once after a system error): a new
  alive node is reported as ``MachineAdded``, a node that died as a ``LEAVE`` capacity change,
  whose running tasks the core then re-queues as lost.

Workers must be able to import utilon (true for a local Ray; on a real cluster install utilon
on every node), and the run directory must be on a filesystem every node sees (jobs exchange
their shuffle data through it).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

from utilon.core.messages import (
    CapacityChanged,
    Command,
    Launch,
    MachineAdded,
    Stimulus,
    TaskFailed,
    TaskFinished,
    TaskRef,
)
from utilon.live.backend import Backend, BackendError
from utilon.live.catalog import TaskCatalog
from utilon.live.guard import CapacityGuard
from utilon.live.worker import execute
from utilon.model.cluster import CapacityAction, CapacityChange, Cluster, Machine
from utilon.model.resources import Resources
from utilon.parallel import check_reachable

log = logging.getLogger(__name__)
GIB = 2.0**30
_SKIP = ("object_store_memory", "memory", "CPU", "GPU")


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BackendError("Ray is not installed", where="--backend ray",
                           fix="pip install 'utilon[ray]'") from None
    return ray


def machine_of(node: dict[str, Any]) -> Machine:
    """A utilon machine from one entry of ``ray.nodes()``."""
    res: dict[str, float] = node.get("Resources") or {}
    cap = {"cpu": float(res.get("CPU", 0.0)), "slots": float(res.get("CPU", 0.0)),
           "mem": round(float(res.get("memory", 0.0)) / GIB, 3)}
    if res.get("GPU"):
        cap["gpu"] = float(res["GPU"])
    for k, v in res.items():
        if k not in _SKIP and not k.startswith(("node:", "accelerator_type:")):
            cap[k] = float(v)
    attrs: dict[str, str | int | float | bool] = {"host": str(node.get("NodeManagerAddress"))}
    for k, v in (node.get("Labels") or {}).items():
        if k != "ray.io/node-id":
            attrs[k] = v
    return Machine(machine_id(node["NodeID"]), Resources(cap), tuple(attrs.items()))


def machine_id(node_hex: str) -> str:
    return f"node-{node_hex[:8]}"


class Executor:
    """The body of an executor actor: runs task attempts one at a time."""

    def ping(self) -> bool:
        import numpy  # noqa: F401  # preload what most tasks import, before the clock starts

        from utilon.jobs import builtin, kinds  # noqa: F401  # kinds: every built-in kind
        return True

    def run(self, attempt: tuple[Any, ...]) -> dict[str, Any]:
        # one argument: Ray serializes each argument of a call separately, and the driver
        # pays for that on every task
        return execute(*attempt)


class RayBackend(Backend):
    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None,
                 node_poll: float = 1.0, init_kwargs: dict[str, Any] | None = None) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self.node_poll = node_poll
        self.init_kwargs = dict(init_kwargs or {})
        self._started_ray = False
        self._t0 = 0.0
        self._nodes: dict[str, str] = {}  # machine id -> Ray node id (hex)
        self._dead: set[str] = set()
        self._running: dict[Any, tuple[TaskRef, str, Any]] = {}  # ObjectRef -> (task,
        # machine, executor)
        self._idle: dict[str, list[Any]] = {}  # machine -> idle executors
        self._by_task: dict[TaskRef, Any] = {}
        self._tries: dict[TaskRef, int] = {}
        self._last_check = 0.0
        self.guard: CapacityGuard | None = None
        self.results: dict[TaskRef, dict[str, Any]] = {}
        self.errors: list[tuple[TaskRef, str]] = []
        self._closed = False

    # -- Backend ----------------------------------------------------------------------------
    def start(self, cluster: Cluster, catalog: TaskCatalog) -> Cluster:
        ray = _ray()
        self.catalog = catalog
        if not ray.is_initialized():
            kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "configure_logging": False, **self.init_kwargs}
            if self.address is None and self.num_cpus is not None:
                kw["num_cpus"] = self.num_cpus
            if self.address is not None:
                check_reachable(self.address, where=f"--ray-address {self.address}",
                                otherwise="omit --ray-address to start one here")
            try:
                ray.init(address=self.address, **kw)
            except (ConnectionError, RuntimeError, ValueError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise BackendError(f"cannot connect to Ray: {first}",
                                   where=f"--ray-address {self.address or '(local)'}",
                                   fix="start a cluster with `ray start --head` and pass its "
                                       "address, or omit --ray-address") from None
            self._started_ray = True
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._affinity = NodeAffinitySchedulingStrategy
        self._executor = ray.remote(Executor)
        machines = []
        for node in ray.nodes():
            if node.get("Alive"):
                m = machine_of(node)
                self._nodes[m.id] = node["NodeID"]
                machines.append(m)
        if not machines:
            raise BackendError("the Ray cluster has no alive node", where="--backend ray")
        known = {m.id for m in machines}
        unknown = sorted({c.machine for c in cluster.timeline} - known)
        if unknown:
            raise BackendError(f"the capacity timeline names machine {unknown[0]!r}, which is "
                               "not a node of the Ray cluster", where="cluster.capacity",
                               fix=f"use the Ray machine ids: {', '.join(sorted(known))}")
        found = Cluster(tuple(machines), cluster.timeline)
        self.guard = CapacityGuard(found, self.strict_capacity)
        pings = []
        for m in machines:  # one executor per CPU of each node, ready before the clock
            self._idle[m.id] = [self._spawn(m.id) for _ in range(max(1, int(m.capacity["cpu"])))]
            pings += [e.ping.remote() for e in self._idle[m.id]]
        ray.get(pings)
        self._t0 = self._last_check = time.perf_counter()
        return found

    def now(self) -> float:
        return time.perf_counter() - self._t0

    def apply(self, commands: Sequence[Command]) -> None:
        guard = self.guard
        if guard is None:
            raise BackendError("RayBackend.apply before start()")
        placed = self.catalog.placement_args(commands)
        for c in commands:
            ref = c.task
            spec = self.catalog.task(ref)
            if type(c) is Launch:
                if ref in self._by_task:
                    raise BackendError(f"task {ref} launched while already running")
                guard.launch(c.machine, spec.demand, f"task {ref}")
                tries = self._tries[ref] = self._tries.get(ref, 0) + 1
                idle = self._idle[c.machine]
                executor = idle.pop() if idle else self._spawn(c.machine)
                obj = executor.run.remote((spec.call, ref.job, spec.stage, ref.index,
                                           spec.tasks, tries, str(spec.job_dir),
                                           {**spec.args, **placed.get(ref, {})}))
                self._running[obj] = (ref, c.machine, executor)
                self._by_task[ref] = obj
            else:
                obj = self._by_task.get(ref)
                if obj is None:
                    raise BackendError(f"preempt of task {ref}, which is not running")
                self._cancel(obj)

    def poll(self, timeout: float) -> list[Stimulus]:
        ray = _ray()
        out: list[Stimulus] = []
        wait = max(0.0, min(timeout, self._last_check + self.node_poll - time.perf_counter()))
        system_error = False
        if self._running:
            refs = list(self._running)
            ready, rest = ray.wait(refs, num_returns=1, timeout=wait, fetch_local=True)
            if ready and rest:  # take everything else that is already done too
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0, fetch_local=True)
                ready += more
            for obj in ready:
                stim, system = self._collect(ray, obj)
                if stim is not None:
                    out.append(stim)
                system_error |= system
        elif wait > 0:
            time.sleep(wait)
        if system_error or time.perf_counter() - self._last_check >= self.node_poll:
            out += self._check_nodes(ray)
        return out

    def apply_capacity(self, change: CapacityChange) -> None:
        guard = self.guard
        assert guard is not None
        if change.machine not in guard.base:
            raise BackendError(f"the capacity timeline names machine {change.machine!r}, "
                               "which is not a node of the Ray cluster",
                               fix=f"use the Ray machine ids: {', '.join(sorted(guard.base))}")
        if change.action is CapacityAction.LEAVE:
            for obj, (_, m, _) in list(self._running.items()):
                if m == change.machine:
                    self._cancel(obj)
        guard.apply(change)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for obj in list(self._running):
            self._cancel(obj)
        ray = _ray()
        for pool in self._idle.values():
            for e in pool:
                with contextlib.suppress(Exception):
                    ray.kill(e)
        self._idle.clear()
        if self._started_ray:
            ray.shutdown()

    # -- helpers ----------------------------------------------------------------------------
    def _collect(self, ray: Any, obj: Any) -> tuple[Stimulus | None, bool]:
        entry = self._running.pop(obj, None)
        if entry is None:
            return None, False
        ref, machine, executor = entry
        del self._by_task[ref]
        assert self.guard is not None
        self.guard.release(machine, self.catalog.task(ref).demand)
        try:
            self.results[ref] = ray.get(obj)
            self._reuse(machine, executor)
            return TaskFinished(ref), False
        except ray.exceptions.RayActorError as e:  # executor, worker or node died
            reason = f"lost: {type(e).__name__}"
            system = True
        except ray.exceptions.RayTaskError as e:  # the task's own code raised
            cause = e.cause if getattr(e, "cause", None) is not None else e
            reason = f"{type(cause).__name__}: {cause}".splitlines()[0]
            system = False
            self._reuse(machine, executor)
        except ray.exceptions.RayError as e:  # object lost, ...
            reason = f"lost: {type(e).__name__}"
            system = True
        log.warning("task %s failed on %s: %s", ref, machine, reason)
        self.errors.append((ref, reason))
        return TaskFailed(ref, reason), system

    def _spawn(self, machine: str) -> Any:
        return self._executor.options(
            scheduling_strategy=self._affinity(self._nodes[machine], soft=False),
            num_cpus=0, max_restarts=0, max_task_retries=0,
        ).remote()

    def _reuse(self, machine: str, executor: Any) -> None:
        if machine in self._nodes and self.guard is not None and self.guard.up[machine]:
            self._idle[machine].append(executor)
        else:
            with contextlib.suppress(Exception):
                _ray().kill(executor)

    def _cancel(self, obj: Any) -> None:
        ref, machine, executor = self._running.pop(obj)
        del self._by_task[ref]
        assert self.guard is not None
        self.guard.release(machine, self.catalog.task(ref).demand)
        try:
            _ray().kill(executor, no_restart=True)
        except Exception as e:  # already gone with its node: nothing to stop
            log.debug("kill of the executor of %s: %s", ref, e)

    def _check_nodes(self, ray: Any) -> list[Stimulus]:
        self._last_check = time.perf_counter()
        assert self.guard is not None
        out: list[Stimulus] = []
        alive: set[str] = set()
        for node in ray.nodes():
            mid = machine_id(node["NodeID"])
            if not node.get("Alive"):
                continue
            alive.add(mid)
            if mid not in self._nodes and mid not in self._dead:
                m = machine_of(node)
                self._nodes[mid] = node["NodeID"]
                self.guard.add(m)
                self._idle[mid] = [self._spawn(mid) for _ in range(max(1, int(m.capacity["cpu"])))]
                log.info("Ray node %s joined: %s", mid, m.capacity)
                out.append(MachineAdded(m))
        for mid in list(self._nodes):
            if mid in alive:
                continue
            log.info("Ray node %s left", mid)
            for obj, (_, on, _) in list(self._running.items()):
                if on == mid:  # its tasks are lost: the core re-queues them
                    self._cancel(obj)
            for e in self._idle.pop(mid, []):
                with contextlib.suppress(Exception):
                    ray.kill(e)
            self.guard.set_up(mid, False)
            del self._nodes[mid]
            self._dead.add(mid)
            out.append(CapacityChanged(CapacityChange(self.now(), mid, CapacityAction.LEAVE)))
        return out

    @property
    def running(self) -> int:
        return len(self._running)
