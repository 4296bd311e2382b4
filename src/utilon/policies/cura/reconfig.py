"""Reconfiguration-based VM pool management (§3.2) and the full ``cura`` policy.

At the end of every reconfiguration time window the manager looks at the jobs that arrived in
it and at each one's optimal configuration ``C_opt`` (the cheapest that meets its deadline):

* ``P_k``: the share of the window's optimal resource usage that falls on VM type ``k``;
* ``V'_k = P_k · R_total / R_k`` with ``R_total = Σ_k V_k R_k`` the pools' cores now
  (trimmed to what first-fit packs on the servers, spare room to the smallest type);
* benefit = observed cost − estimated cost, over the jobs started in the window: what their
  actual configurations cost minus what their optimal ones would have;
* reconfiguration cost = ``Σ_k |V'_k − V_k| · Reconf_overhead`` (by default one boot of the
  VM: ``boot_time × R_k / M`` server-seconds);

and reshapes the pools only if ``benefit ≥ β · cost`` with ``β > 1``.

Readings (docs/policies.md#cura): the paper's ``P_k`` weighs each job by ``t_run × n`` (VM
seconds), which under-weights big VM types that ``V'_k = P_k R_total / R_k`` then turns back
into VM counts; we weigh by resource usage (``t_run × n × R_k``, the cost of §3.1.1) so that
``P_k`` is the share of *physical resources* the text says it is.  The paper writes the benefit
as estimate − actual, which is negative whenever reconfiguring helps; we use actual − estimate.
After a reshape every tentative reservation is cancelled and the windows reset (the pools
they were made on have changed).

``cura-capacity`` is our variant, not the paper's (docs/reproduction-cura.md says why): the
same V'_k, cost and β, but (1) P_k is taken over every job seen so far, not only the last
window (on windows of a few dozen jobs the shares swing so much that reshaping to them costs
servers), and (2) the benefit is the *capacity* the current mix strands: with ``Q_k`` the
pools' share of cores, the pools can serve the demand mix ``P`` only up to the fraction
``u(V) = min_k Q_k / P_k`` of the fleet before the bottleneck pool is full, so reshaping frees
``(u(V') − u(V)) × servers`` servers, counted over the time since the pools were last set (the
paper's benefit is likewise what the past window cost).  §3.2's benefit, the configuration
cost jobs paid above their optimum, is near zero even when a mismatch costs a quarter of the
servers: a fleet sized for every deadline runs jobs at their optimum and pays in idle pools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from utilon.cloud.model import CloudJob, CloudSpec, Command, Finished, PoolView, Resize
from utilon.cloud.packing import fill
from utilon.cloud.profile import ProfileStore
from utilon.policies.base import register
from utilon.policies.cura.vmaware import VMAware


@dataclass(frozen=True)
class Plan:
    target: tuple[int, ...]
    share: tuple[float, ...]
    benefit: float
    cost: float
    triggered: bool


def plan(store: ProfileStore, arrived: list[CloudJob], used: list[tuple[CloudJob, float]],
         pools: tuple[int, ...], servers: int, beta: float) -> Plan | None:
    """The §3.2 decision for one window; ``used`` is ``(job, cost of its actual
    configuration)`` for the jobs started in it (whenever they arrived).  ``None`` when no job
    arrived."""
    cloud: CloudSpec = store.cloud
    usage = [0.0] * cloud.k
    for j in arrived:
        t = store.configs(j)
        i = t.optimal(j.deadline - j.arrival)
        if i is not None:
            usage[int(t.k[i])] += float(t.cost[i])
    total = sum(usage)
    if total <= 0:
        return None
    share = tuple(u / total for u in usage)
    r_total = sum(v * t.cores for v, t in zip(pools, cloud.vm_types, strict=True))
    want = [int(p * r_total / t.cores) for p, t in zip(share, cloud.vm_types, strict=True)]
    target = fill(cloud, servers, want)
    observed = estimate = 0.0
    for job, cost in used:
        t = store.configs(job)
        i = t.optimal(job.deadline - job.arrival)
        if i is None:
            continue
        observed += cost
        estimate += float(t.cost[i])
    benefit = observed - estimate
    rcost = sum(abs(a - b) * cloud.overhead(k)
                for k, (a, b) in enumerate(zip(target, pools, strict=True)))
    moved = target != tuple(pools)
    return Plan(target, share, benefit, rcost, moved and benefit >= beta * rcost)


def usable(cloud: CloudSpec, pools: tuple[int, ...], share: tuple[float, ...]) -> float:
    """``u = min_k Q_k / P_k`` (at most 1): the fraction of the pools' cores usable by a
    demand with resource shares ``share`` before the pool it needs most relatively is full."""
    cores = [v * t.cores for v, t in zip(pools, cloud.vm_types, strict=True)]
    total = sum(cores)
    if total <= 0:
        return 0.0
    return min([1.0] + [c / total / p for c, p in zip(cores, share, strict=True) if p > 0])


def capacity_plan(store: ProfileStore, seen: list[CloudJob], pools: tuple[int, ...],
                  servers: int, beta: float, elapsed: float) -> Plan | None:
    """``cura-capacity``'s decision: §3.2's target from every job ``seen``, its cost, and the
    capacity benefit ``(u(V') − u(V)) × servers × elapsed`` (server-seconds)."""
    p = plan(store, seen, [], pools, servers, beta)
    if p is None:
        return None
    gain = usable(store.cloud, p.target, p.share) - usable(store.cloud, pools, p.share)
    benefit = max(0.0, gain) * servers * elapsed
    moved = p.target != tuple(pools)
    return Plan(p.target, p.share, benefit, p.cost, moved and benefit >= beta * p.cost)


@register
class Cura(VMAware):
    name = "cura"
    summary = "Cura: the VM-aware scheduler with reconfiguration-based VM pool management"

    def __init__(self, store: ProfileStore, window_bound: float = 600.0,
                 reconf_window: float = 300.0, beta: float = 1.5) -> None:
        super().__init__(store, window_bound=window_bound)
        if beta <= 1:
            raise ValueError(f"beta must be > 1 (the benefit is only an estimate), got {beta}")
        if reconf_window <= 0:
            raise ValueError("reconf_window must be positive")
        self.reconf_window = reconf_window
        self.beta = beta
        self._window_start = 0.0
        self._arrived: list[CloudJob] = []
        self._seen_started = 0
        self.plans: list[dict[str, Any]] = []

    def decide(self, now: float, view: PoolView, arrived: list[CloudJob],
               finished: list[Finished]) -> list[Command]:
        out: list[Command] = []
        if now >= self._window_start + self.reconf_window:
            out += self._reconfigure(now, view)
        self._arrived += arrived
        return out + super().decide(now, view, arrived, finished)

    def _plan(self, now: float, view: PoolView, pools: tuple[int, ...]) -> Plan | None:
        used = [(self.jobs[jid], cost) for t, jid, _, _, cost
                in self.started[self._seen_started:] if t >= self._window_start]
        self._seen_started = len(self.started)
        return plan(self.store, self._arrived, used, pools, view.servers, self.beta)

    def _reconfigure(self, now: float, view: PoolView) -> list[Command]:
        pools = tuple(self.target) if self.target is not None else view.size
        p = self._plan(now, view, pools)
        self._window_start = now
        self._arrived = []
        if p is None:
            return []
        self.plans.append({"at": now, "benefit": round(p.benefit, 3), "cost": round(p.cost, 3),
                           "triggered": p.triggered, "target": list(p.target)})
        if not p.triggered:
            return []
        self.target = list(p.target)
        for j in self._cancel(list(self.reserved)):
            self.waiting[j.id] = j
        self.deciders = {}
        self.windows = [now] * self.cloud.k       # expired: reset at this decision
        return [Resize(p.target)]

    def report(self) -> dict[str, Any]:
        return {**super().report(), "reconfigurations": sum(p["triggered"] for p in self.plans),
                "plans": self.plans}


@register
class CuraCapacity(Cura):
    name = "cura-capacity"
    summary = ("Cura with reconfiguration priced by the capacity a pool mismatch strands, on "
               "every job seen (our variant of §3.2)")

    def __init__(self, store: ProfileStore, window_bound: float = 600.0,
                 reconf_window: float = 300.0, beta: float = 1.5) -> None:
        super().__init__(store, window_bound=window_bound, reconf_window=reconf_window,
                         beta=beta)
        self._seen: list[CloudJob] = []
        self._pools_set = 0.0

    def _plan(self, now: float, view: PoolView, pools: tuple[int, ...]) -> Plan | None:
        self._seen += self._arrived
        p = capacity_plan(self.store, self._seen, pools, view.servers, self.beta,
                          now - self._pools_set)
        if p is not None and p.triggered:
            self._pools_set = now
        return p
