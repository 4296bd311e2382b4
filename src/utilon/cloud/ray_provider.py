"""VMs as Ray nodes: a :class:`~utilon.cloud.provider.Provider` and an
:class:`~utilon.cloud.live.Executor` on a Ray cluster started on this machine.

:class:`RayProvider` starts a head node (no CPUs, so no job runs there) with Ray's
``cluster_utils.Cluster`` and makes every VM a node of its own: ``num_cpus`` = the VM type's
cores and two custom resources, ``vm:<id>`` (to pin work to exactly this VM) and
``vmtype:<name>``.  A VM is ready when Ray lists its node as alive (starting a node's raylet
takes seconds; that is the live counterpart of ``boot_time``); terminating removes the node.

:class:`RayExecutor` runs a job as one sleeping Ray task per VM, each pinned to its VM by a
small amount of that VM's ``vm:<id>`` resource; the job is finished when all its tasks are.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from utilon.cloud.live import Executor
from utilon.cloud.model import CloudSpec, VMType
from utilon.cloud.provider import Provider, ProviderEvent, VMFailed, VMGone, VMReady
from utilon.errors import UtilonError

log = logging.getLogger(__name__)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UtilonError("Ray is not installed", fix="pip install 'utilon[ray]'") from None
    return ray


def _nap(seconds: float) -> float:
    """A job's work on one VM (it runs in a Ray worker)."""
    time.sleep(seconds)
    return seconds


class RayProvider(Provider):
    """Each VM is a Ray node of a local ``cluster_utils.Cluster``.

    ``boot_timeout`` (wall seconds): a node not alive by then is reported failed and removed.
    ``node_poll``: ``ray.nodes()`` is asked at most this often (wall seconds)."""

    def __init__(self, cloud: CloudSpec, boot_timeout: float = 60.0,
                 node_poll: float = 0.1, object_store_mb: int = 100) -> None:
        ray = _ray()
        from ray.cluster_utils import Cluster

        if ray.is_initialized():
            raise UtilonError("RayProvider starts its own Ray cluster, but this process is "
                              "already connected to one", fix="call ray.shutdown() first")
        self.cloud = cloud
        self.boot_timeout = boot_timeout
        self.node_poll = node_poll
        self.object_store = object_store_mb * 2**20
        self.cluster = Cluster(initialize_head=True, connect=True,
                               head_node_args={"num_cpus": 0})
        self._seq = 0
        self._nodes: dict[str, Any] = {}                # vm id -> cluster_utils node
        self._types: dict[str, VMType] = {}
        self._booting: dict[str, float] = {}            # vm id -> launched at (monotonic)
        self._events: list[ProviderEvent] = []
        self._last_poll = 0.0
        self.launched = 0
        self.terminated = 0
        self.shapes_added: list[tuple[str, int]] = []   # (vm type, cores) per node added
        self.shapes_removed: list[tuple[str, int]] = []

    def launch(self, vm_type: VMType, count: int) -> list[str]:
        ids = []
        for _ in range(count):
            vid = f"rvm{self._seq}"
            self._seq += 1
            self._types[vid] = vm_type
            self._booting[vid] = time.monotonic()
            try:
                # wait=False: readiness is seen in poll(), when Ray lists the node as alive
                self._nodes[vid] = self.cluster.add_node(
                    wait=False, num_cpus=vm_type.cores, object_store_memory=self.object_store,
                    resources={f"vm:{vid}": 1, f"vmtype:{vm_type.name}": 1})
            except Exception as e:   # a node that cannot start is a failed boot
                del self._types[vid], self._booting[vid]
                self._events.append(VMFailed(vid, vm_type, f"ray node did not start: {e}"))
            else:
                self.launched += 1
                self.shapes_added.append((vm_type.name, vm_type.cores))
            ids.append(vid)
        return ids

    def terminate(self, vm_ids: list[str]) -> None:
        for vid in vm_ids:
            node = self._nodes.pop(vid, None)
            if node is None:
                continue
            self.cluster.remove_node(node, allow_graceful=True)
            vm_type = self._types.pop(vid)
            self._booting.pop(vid, None)
            self.terminated += 1
            self.shapes_removed.append((vm_type.name, vm_type.cores))
            self._events.append(VMGone(vid))

    def _alive(self) -> set[str]:
        """VM ids whose nodes Ray lists as alive."""
        out: set[str] = set()
        for node in _ray().nodes():
            if node.get("Alive"):
                out.update(r[3:] for r in (node.get("Resources") or {}) if r.startswith("vm:"))
        return out

    def poll(self) -> list[ProviderEvent]:
        now = time.monotonic()
        if self._booting or now - self._last_poll >= self.node_poll:
            self._last_poll = now
            alive = self._alive()
            for vid, at in list(self._booting.items()):
                if vid in alive:
                    del self._booting[vid]
                    self._events.append(VMReady(vid, self._types[vid]))
                elif now - at > self.boot_timeout:
                    vm_type = self._types[vid]
                    self.cluster.remove_node(self._nodes.pop(vid), allow_graceful=False)
                    del self._booting[vid], self._types[vid]
                    self._events.append(VMFailed(vid, vm_type, "ray node not alive after "
                                                 f"{self.boot_timeout:g} s"))
            for vid in [v for v in self._nodes if v not in self._booting and v not in alive]:
                del self._nodes[vid], self._types[vid]       # a ready node that died
                self._events.append(VMGone(vid))
        out, self._events = self._events, []
        return out

    def vms(self) -> dict[str, VMType]:
        return dict(self._types)

    def close(self) -> None:
        ray = _ray()
        if ray.is_initialized():
            ray.shutdown()
        self.cluster.shutdown()
        self._nodes.clear()
        self._types.clear()
        self._booting.clear()


class RayExecutor(Executor):
    """One sleeping task per VM, pinned to it; a job is done when all its tasks are."""

    def __init__(self) -> None:
        self._task = _ray().remote(_nap)
        self.jobs: dict[str, list[Any]] = {}
        self.errors: dict[str, str] = {}

    def run(self, job_id: str, vm_ids: list[str], seconds: float) -> None:
        self.jobs[job_id] = [self._task.options(num_cpus=1, resources={f"vm:{vid}": 0.01})
                             .remote(seconds) for vid in vm_ids]

    def poll(self) -> list[str]:
        ray = _ray()
        done = []
        for job, refs in list(self.jobs.items()):
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            if len(ready) < len(refs):
                continue
            try:
                ray.get(refs)
            except Exception as e:   # the VM died under the task: the job ends all the same
                self.errors[job] = str(e)
                log.warning("job %s: %s", job, e)
            del self.jobs[job]
            done.append(job)
        return done
