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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from utilon.cloud.model import CloudJob, CloudSpec, Command, Finished, PoolView, Resize
from utilon.cloud.packing import fill
from utilon.cloud.profile import ProfileStore
from utilon.policies.cura.base import register
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

    def _reconfigure(self, now: float, view: PoolView) -> list[Command]:
        used = [(self.jobs[jid], cost) for t, jid, _, _, cost
                in self.started[self._seen_started:] if t >= self._window_start]
        self._seen_started = len(self.started)
        pools = tuple(self.target) if self.target is not None else view.size
        p = plan(self.store, self._arrived, used, pools, view.servers, self.beta)
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
