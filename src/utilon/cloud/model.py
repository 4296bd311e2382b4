"""Cura's cloud (§2, §4.1): physical servers, VM types, VM pools, moldable MapReduce jobs.

A job runs on a *cluster configuration* ``C^{k,n}``: ``n`` VMs of type ``k`` for ``t_run`` seconds,
where ``t_run`` comes from the profile store (:mod:`utilon.cloud.profile`) and already includes
loading the input into HDFS, Hadoop's start-up and the prediction-error bound.  Its resource
usage cost is ``Cost = t_run × n × R_k / M`` (§3.1.1): ``R_k`` is the VM's share of a server of
``M`` units.  Resources are one scalar: every VM type has as many GB as VCPUs and a server has
16 cores and 16 GB, so cores and memory always run out together (the paper's footnote 4 allows
either a vector or a scalar).

The policies of this world (:mod:`utilon.policies.cura`) see a :class:`PoolView` and return
:data:`Command` lists; the simulator (:mod:`utilon.cloud.sim`) and the live driver
(:mod:`utilon.cloud.live`) carry them out.  That is the same one-policy-two-worlds shape as the
slot world's ``SchedulerCore``, with moldable clusters instead of task grants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from utilon.errors import ModelError


@dataclass(frozen=True)
class VMType:
    """A VM instance type: ``cores`` VCPUs (and as many GB of memory)."""

    name: str
    cores: int

    def __post_init__(self) -> None:
        if self.cores <= 0:
            raise ModelError(f"VM type {self.name!r}: cores must be positive",
                             fix="give every VM type at least one core")


def default_vm_types() -> tuple[VMType, ...]:
    """§4.1: six types from 2 VCPU / 2 GB to 12 VCPU / 12 GB in steps of 2."""
    return tuple(VMType(f"vm{i}", 2 * i) for i in range(1, 7))


@dataclass(frozen=True)
class CloudSpec:
    """The cloud's fixed parameters (§4.1 and §4.2 defaults)."""

    vm_types: tuple[VMType, ...] = field(default_factory=default_vm_types)
    server_cores: int = 16
    boot_time: float = 60.0
    """seconds to create and boot the VMs of a per-job cluster.  The paper gives no number; 60 s
    is a typical EC2 Linux launch-to-SSH time (Garfinkel's measurements, [22], are of this
    order).  Pools of pre-created VMs (Cura's instant allocation) never pay it."""
    hadoop_start: float = 10.0
    """seconds to start a Hadoop instance on a cluster (§4.2)."""
    load_mbps: float = 50.0
    """MB/s each VM loads input from storage at (§4.2, footnote 5)."""
    reconf_overhead: float | None = None
    """Reconf_overhead of §3.2: resource usage (cost units: server-seconds) spent on each VM a
    reconfiguration shuts down or creates.  ``None``: one boot of that VM, ``boot_time × R_k / M``
    (the paper gives no value)."""

    def __post_init__(self) -> None:
        if not self.vm_types:
            raise ModelError("cloud: no VM types", fix="list at least one VM type")
        names = [v.name for v in self.vm_types]
        if len(set(names)) != len(names):
            raise ModelError(f"cloud: duplicate VM type names {names}",
                             fix="give each VM type its own name")
        too_big = [v.name for v in self.vm_types if v.cores > self.server_cores]
        if too_big:
            raise ModelError(f"cloud: VM types {too_big} do not fit on a "
                             f"{self.server_cores}-core server",
                             fix="make VM types no larger than a server")
        for name in ("boot_time", "hadoop_start", "reconf_overhead"):
            if (getattr(self, name) or 0) < 0:
                raise ModelError(f"cloud: {name} must be >= 0")
        if self.load_mbps <= 0:
            raise ModelError("cloud: load_mbps must be positive")

    @property
    def k(self) -> int:
        return len(self.vm_types)

    @property
    def cores(self) -> np.ndarray:
        return np.array([v.cores for v in self.vm_types], dtype=float)

    def index(self, name: str) -> int:
        for i, v in enumerate(self.vm_types):
            if v.name == name:
                return i
        raise ModelError(f"unknown VM type {name!r}",
                         fix=f"use one of {[v.name for v in self.vm_types]}")

    def overhead(self, k: int) -> float:
        """Reconf_overhead for one VM of type ``k``."""
        if self.reconf_overhead is not None:
            return self.reconf_overhead
        return self.boot_time * self.share(k)

    def share(self, k: int) -> float:
        """``R_k / M``: the fraction of a server one VM of type ``k`` takes."""
        return self.vm_types[k].cores / self.server_cores


@dataclass(frozen=True)
class CloudJob:
    """One job instance: which profiled job it runs, on how much input, when it is due."""

    id: str
    customer: int
    kind: str
    """the profiled job (a key of the profile store)."""
    size_mb: float
    arrival: float
    deadline: float
    """absolute time by which the job must be finished."""
    category: str = ""
    """small / medium / large (§4.2), for reporting."""

    def __post_init__(self) -> None:
        if self.deadline <= self.arrival:
            raise ModelError(f"job {self.id}: deadline {self.deadline:g} is not after its "
                             f"arrival {self.arrival:g}", fix="give every job a positive "
                             "relative deadline")
        if self.size_mb < 0:
            raise ModelError(f"job {self.id}: negative input size")


@dataclass(frozen=True)
class ConfigTable:
    """A job's cluster configurations, cheapest first (ties: fewer VMs, then lower type).

    ``t_run`` is the scheduling estimate (prediction plus error bound); ``t_pred`` the
    prediction; ``cost`` is ``t_run × n × R_k / M``.
    """

    k: np.ndarray
    n: np.ndarray
    t_run: np.ndarray
    t_pred: np.ndarray
    cost: np.ndarray

    def __len__(self) -> int:
        return len(self.k)

    @cached_property
    def rows(self) -> list[tuple[int, int, float, float]]:
        """``(k, n, t_run, cost)`` per row as Python numbers (the scheduler's hot loop)."""
        return list(zip(self.k.tolist(), self.n.tolist(), self.t_run.tolist(),
                        self.cost.tolist(), strict=True))

    def optimal(self, within: float) -> int | None:
        """Index of the per-job optimal configuration: the cheapest whose ``t_run`` fits in
        ``within`` seconds, or ``None`` when none does."""
        ok = np.flatnonzero(self.t_run <= within + 1e-9)
        return int(ok[0]) if len(ok) else None


# -- what a policy sees and what it may ask for ---------------------------------------------


@dataclass(frozen=True)
class PoolView:
    """The pools at a decision instant.  ``size[k]`` VMs of type ``k`` exist or are booting
    (``booting[k]`` of them); ``idle[k]`` are ready and free.  ``server_free`` is, per server, the
    capacity no VM uses."""

    size: tuple[int, ...]
    idle: tuple[int, ...]
    booting: tuple[int, ...]
    server_free: tuple[int, ...]
    """cores no VM uses, per server (what per-job clusters are created from)."""

    @property
    def servers(self) -> int:
        return len(self.server_free)


@dataclass(frozen=True)
class Start:
    """Run ``job`` now on ``count`` VMs of type ``k``: idle pool VMs, or, with ``fresh``, VMs
    created for it (they boot first and are destroyed when it ends: a per-job cluster)."""

    job: str
    k: int
    count: int
    fresh: bool = False


@dataclass(frozen=True)
class Drop:
    """Give up on ``job``: it cannot meet its deadline (it counts as a failure)."""

    job: str
    reason: str


@dataclass(frozen=True)
class Resize:
    """Reshape the pools to ``target[k]`` VMs of each type (§3.2).  VMs to remove are shut down
    when idle; new VMs are created (and boot) as server room allows."""

    target: tuple[int, ...]


Command = Start | Drop | Resize


@dataclass(frozen=True)
class Finished:
    job: str
    at: float
