"""The services Cura is compared with (§4.1), each with the per-job optimal configuration.

A job's *per-job optimal configuration* is what Starfish would pick for it alone: the cheapest
``(VM type, count)`` whose ``t_run`` meets the deadline if the job started on arrival (a
per-job cluster also has to boot first).  All three services keep that choice, queue a job
until its resources are free (first come first served, later jobs may pass a blocked one), and
drop it once waiting longer would miss the deadline.

* ``per-job-cluster`` (Amazon Elastic MapReduce): no pools; every job gets VMs created for it
  (``boot_time``) on any server with room, destroyed when it ends.  Configurations the whole
  fleet could not host even when empty are never chosen (the job would wait forever).
* ``dedicated``: each customer leases its own VMs, as many of each type as its own jobs use at
  their peak (found by replaying its jobs at their optimal configurations from arrival), and
  runs Hadoop clusters on them on demand.  The fleet is what first-fit needs to host all
  customers' VMs; it is not searched (``fixed_servers``).  The peak is taken over the whole
  run, so it exceeds the customer's share of the shared peak only when the run spans many job
  lengths: on a run about one job long, every customer's jobs overlap and dedicated clusters
  need fewer servers than per-job clusters, the reverse of the paper's Fig. 5(a) (issue 44;
  ``utilon.repro.cura.ARRIVAL_RATE``).
* ``per-job-opt``: Cura's instant allocation from shared pools (equal core share per type),
  but always the per-job optimal configuration (the first of Cura's sub-techniques, Fig. 6).
  Configurations larger than their type's whole pool are never chosen (they could never run).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from utilon.cloud.model import CloudJob, Command, Drop, Finished, PoolView, Start
from utilon.cloud.packing import servers_for, take_room
from utilon.cloud.policy import CloudPolicy
from utilon.cloud.profile import ProfileStore
from utilon.policies.base import register


class _Queueing(CloudPolicy):
    """Fixed configuration per job, FCFS with backfilling, drop when hopeless."""

    delay: float = 0.0   # seconds between start and run (boot of a per-job cluster)

    def __init__(self, store: ProfileStore) -> None:
        super().__init__(store)
        self.queue: dict[str, tuple[CloudJob, int, int, float]] = {}   # in arrival order
        self.dropped = 0

    def _choose(self, job: CloudJob, view: PoolView) -> tuple[int, int, float] | None:
        t = self.store.configs(job)
        ok = t.t_run <= job.deadline - job.arrival - self.delay + 1e-9
        ok &= self._allowed(t.k, t.n, view)
        idx = np.flatnonzero(ok)
        if not len(idx):
            return None
        i = int(idx[0])
        return int(t.k[i]), int(t.n[i]), float(t.t_run[i])

    def _allowed(self, k: np.ndarray, n: np.ndarray, view: PoolView) -> np.ndarray:
        return np.ones(len(k), dtype=bool)

    def decide(self, now: float, view: PoolView, arrived: list[CloudJob],
               finished: list[Finished]) -> list[Command]:
        out: list[Command] = []
        for j in arrived:
            choice = self._choose(j, view)
            if choice is None:
                out.append(Drop(j.id, "no configuration meets the deadline"))
                self.dropped += 1
            else:
                self.queue[j.id] = (j, *choice)
        room = self._room(view)
        for jid, (j, k, n, t_run) in list(self.queue.items()):
            if now + self.delay + t_run > j.deadline + 1e-9:
                del self.queue[jid]
                out.append(Drop(jid, "its configuration can no longer meet the deadline"))
                self.dropped += 1
            elif self._take(room, j, k, n):
                del self.queue[jid]
                out.append(Start(jid, k, n, fresh=not self.pooled))
        return out

    def _room(self, view: PoolView) -> Any:
        return list(view.idle)

    def _take(self, room: Any, job: CloudJob, k: int, n: int) -> bool:
        if room[k] < n:
            return False
        room[k] -= n
        return True

    def report(self) -> dict[str, Any]:
        return {"dropped": self.dropped}


@register
class PerJobCluster(_Queueing):
    name = "per-job-cluster"
    summary = "a fresh cluster of the per-job optimal configuration per job (boots first)"
    pooled = False

    def __init__(self, store: ProfileStore) -> None:
        super().__init__(store)
        self.delay = store.cloud.boot_time

    def _allowed(self, k: np.ndarray, n: np.ndarray, view: PoolView) -> np.ndarray:
        # a cluster the whole fleet could not host even when empty would wait forever
        per_server = self.cloud.server_cores // self.cloud.cores[k].astype(np.int64)
        return n <= per_server * view.servers

    def _room(self, view: PoolView) -> Any:
        return list(view.server_free)

    def _take(self, room: Any, job: CloudJob, k: int, n: int) -> bool:
        return take_room(room, self.cloud.vm_types[k].cores, n)


@register
class PerJobOpt(_Queueing):
    name = "per-job-opt"
    summary = "instant allocation from shared pools, always the per-job optimal configuration"

    def _allowed(self, k: np.ndarray, n: np.ndarray, view: PoolView) -> np.ndarray:
        return n <= np.asarray(view.size)[k]


@register
class Dedicated(_Queueing):
    name = "dedicated"
    summary = "each customer's own VMs, sized for its peak; clusters formed on demand"

    def __init__(self, store: ProfileStore) -> None:
        super().__init__(store)
        self.lease: dict[int, list[int]] = {}    # customer -> VMs per type
        self.free_vms: dict[int, list[int]] = {}
        self.owner: dict[str, tuple[int, int, int]] = {}

    def size_for(self, jobs: tuple[CloudJob, ...]) -> dict[int, list[int]]:
        """Each customer's peak concurrent VMs per type with every job at its optimal
        configuration from its arrival."""
        events: dict[int, list[tuple[float, int, int, int]]] = defaultdict(list)
        for j in jobs:
            t = self.store.configs(j)
            i = t.optimal(j.deadline - j.arrival)
            if i is None:
                continue
            k, n, d = int(t.k[i]), int(t.n[i]), float(t.t_run[i])
            events[j.customer] += [(j.arrival, 1, k, n), (j.arrival + d, 0, k, -n)]
        lease: dict[int, list[int]] = {}
        for c, ev in sorted(events.items()):
            ev.sort()
            use, peak = [0] * self.cloud.k, [0] * self.cloud.k
            for _, _, k, dn in ev:      # ends (0) before starts (1) at one instant
                use[k] += dn
                peak[k] = max(peak[k], use[k])
            lease[c] = peak
        return lease

    def initial_pools(self, servers: int, jobs: tuple[CloudJob, ...]) -> tuple[int, ...]:
        self.lease = self.size_for(jobs)
        self.free_vms = {c: list(v) for c, v in self.lease.items()}
        return tuple(int(sum(v[k] for v in self.lease.values())) for k in range(self.cloud.k))

    def fixed_servers(self, jobs: tuple[CloudJob, ...]) -> int:
        lease = self.size_for(jobs)
        total = [sum(v[k] for v in lease.values()) for k in range(self.cloud.k)]
        return servers_for(self.cloud, total)

    def _allowed(self, k: np.ndarray, n: np.ndarray, view: PoolView) -> np.ndarray:
        return np.ones(len(k), dtype=bool)

    def decide(self, now: float, view: PoolView, arrived: list[CloudJob],
               finished: list[Finished]) -> list[Command]:
        for f in finished:
            c, k, n = self.owner.pop(f.job)
            self.free_vms[c][k] += n
        return super().decide(now, view, arrived, finished)

    def _room(self, view: PoolView) -> Any:
        return self.free_vms

    def _take(self, room: Any, job: CloudJob, k: int, n: int) -> bool:
        mine = room.get(job.customer)
        if mine is None or mine[k] < n:
            return False
        mine[k] -= n
        self.owner[job.id] = (job.customer, k, n)
        return True

    def report(self) -> dict[str, Any]:
        return {"dropped": self.dropped, "customers": len(self.lease),
                "leased_vms": [int(sum(v[k] for v in self.lease.values()))
                               for k in range(self.cloud.k)]}
