"""Cura's headline claims, checked on every seed (issue 44).

Each claim is stated as the paper states it (§4.2.1, Fig. 5 and 6, Appendix B), with the rule
that decides it on one seed; the rules and the reasons for their thresholds are also in
``docs/reproduction-cura.md``, written before the multi-seed run.

* The **faithful system** is ``cura`` (the VM-aware scheduler with §3.2's reconfiguration as
  the paper writes it).  ``cura-capacity`` (our reconfiguration benefit, an extension the paper
  does not describe) is a **named variant** with its own rows.  ``baselines`` is the row of the
  claims the paper makes about its baselines alone (per-job against dedicated clusters).
* "Up to X" claims are the largest value over the sweep's points (the paper's figures are
  over its x-axis); the rule accepts the paper's figure down to the lower end of its rounding
  (80% -> 75%, 65% -> 64.5%, 7x -> 6.5x, 2.6x -> 2.55x, 45% -> 44.5%).  Direction claims
  hold when the order holds at every point of the sweep.
* Appendix B is deterministic: its observation is the same on every seed (one per seed so that
  the share is over the same seeds as the rest).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from utilon.repro.claims import Claim, Observation

FAITHFUL, VARIANT, BASELINES = "cura", "cura-capacity", "baselines"
SYSTEMS = (FAITHFUL, VARIANT, BASELINES)
PER_JOB, DEDICATED, PER_JOB_OPT, VM_AWARE = "per-job-cluster", "dedicated", "per-job-opt", \
    "vm-aware"

CLAIMS = (
    Claim("fig5a.baselines",
          "Per-job cluster services need fewer servers than dedicated clusters, which are "
          "sized for each customer's peak (§4.2.1, Fig. 5(a))",
          "per-job < dedicated",
          "per-job's servers < dedicated's at every mean deadline of the sweep; value: "
          "per-job's smallest saving against dedicated", "%"),
    Claim("fig5a.order",
          "Cura needs fewer servers than per-job and dedicated cluster services (Fig. 5(a))",
          "Cura < per-job < dedicated",
          "system's servers < per-job's < dedicated's at every mean deadline; value: the "
          "system's smallest saving against per-job", "%"),
    Claim("fig5a.saving",
          "Cura needs up to 80% fewer servers (Fig. 5(a); abstract: more than 80% less "
          "infrastructure cost)",
          "up to 80%",
          "largest saving against per-job or dedicated over the sweep >= 75% (80% to one "
          "significant figure)", "%"),
    Claim("fig5b.lower",
          "Cura and dedicated clusters have lower mean response time than per-job clusters, "
          "which create and boot VMs per job (Fig. 5(b))",
          "lower",
          "mean response < per-job's at every mean deadline (baselines row: dedicated's); "
          "value: the smallest reduction", "%"),
    Claim("fig5b.size",
          "... up to 65% lower response time (Fig. 5(b), abstract)",
          "up to 65%",
          "largest reduction against per-job over the sweep >= 64.5% (65% to two significant "
          "figures)", "%"),
    Claim("fig5d.higher",
          "Per-job and dedicated cluster services have much lower effective utilization than "
          "Cura (Fig. 5(d))",
          "Cura highest",
          "system's effective utilization > per-job's and dedicated's at every mean deadline; "
          "value: the smallest ratio to the better of them", "x"),
    Claim("fig5d.size",
          "Cura: up to 7x the effective utilization of the other techniques (Fig. 5(d))",
          "up to 7x",
          "largest ratio to per-job's or dedicated's over the sweep >= 6.5 (7 to one "
          "significant figure)", "x"),
    Claim("fig6a.perjobopt",
          "Per-job optimization needs up to 2.6x the servers of Cura (Fig. 6(a))",
          "up to 2.6x",
          "largest ratio per-job-opt / system over the sweep >= 2.55 (2.6 to two significant "
          "figures)", "x"),
    Claim("fig6a.reconfig",
          "Reconfiguration-based VM management cuts the VM-aware scheduler's servers by up to "
          "45% (Fig. 6(a))",
          "up to 45%",
          "largest saving against vm-aware over the sweep >= 44.5% (45% to two significant "
          "figures)", "%"),
    Claim("appb.table5",
          "Appendix B, Table 5: the VM-aware scheduler meets all 15 deadlines (40 VMs per type)",
          "15/15",
          "ours meets 15 with the jobs as printed (deterministic: the same on every seed)", ""),
    Claim("appb.table6",
          "Appendix B, Table 6: with reconfigured pools the paper's schedule meets 12 of 15",
          "12/15",
          "ours (pools from §3.2 on the same jobs) meets at least 12 (deterministic)", ""),
)

Points = Mapping[str, Mapping[str, Mapping[str, Any]]]   # mean deadline -> service -> summary
UTIL = "effective_utilization"


def _v(point: Mapping[str, Mapping[str, Any]], svc: str, metric: str = "servers") -> float:
    return float(point[svc][metric])


def _saving(points: Points, svc: str, other: Callable[[Mapping[str, Mapping[str, Any]]], float],
            metric: str = "servers") -> dict[str, float]:
    """Per mean deadline: how much less (in %) ``svc``'s ``metric`` is than ``other``'s."""
    return {x: round(100 * (1 - _v(p, svc, metric) / other(p)), 4) for x, p in points.items()}


def _ratio(points: Points, svc: str, other: Callable[[Mapping[str, Mapping[str, Any]]], float],
           metric: str = "servers") -> dict[str, float]:
    return {x: round(_v(p, svc, metric) / other(p), 4) for x, p in points.items()}


def observe(seed: int, points: Points) -> list[Observation]:
    """The Fig. 5-6 claims on one seed's sweep (``points[x][service]`` is
    :func:`utilon.cloud.metrics.summarize` of that service at mean deadline ``x``)."""
    out: list[Observation] = []

    def add(key: str, system: str, holds: bool, value: float, by: dict[str, float]) -> None:
        out.append(Observation(key, system, seed, holds, round(value, 4), {"by_deadline": by}))

    def per_job(p: Mapping[str, Mapping[str, Any]], m: str = "servers") -> float:
        return _v(p, PER_JOB, m)

    def per_job_resp(p: Mapping[str, Mapping[str, Any]]) -> float:
        return _v(p, PER_JOB, "mean_response_s")

    def worse_servers(p: Mapping[str, Mapping[str, Any]]) -> float:
        return max(_v(p, PER_JOB), _v(p, DEDICATED))

    def better_util(p: Mapping[str, Mapping[str, Any]]) -> float:
        return max(_v(p, PER_JOB, UTIL), _v(p, DEDICATED, UTIL))

    def worse_util(p: Mapping[str, Mapping[str, Any]]) -> float:
        return min(_v(p, PER_JOB, UTIL), _v(p, DEDICATED, UTIL))

    def opt(p: Mapping[str, Mapping[str, Any]]) -> float:
        return _v(p, PER_JOB_OPT)

    def vm_aware(p: Mapping[str, Mapping[str, Any]]) -> float:
        return _v(p, VM_AWARE)

    def dedicated(p: Mapping[str, Mapping[str, Any]]) -> float:
        return _v(p, DEDICATED)

    # the baselines alone: per-job below dedicated in servers, dedicated below per-job in
    # response time
    by = _saving(points, PER_JOB, dedicated)
    add("fig5a.baselines", BASELINES, all(v > 0 for v in by.values()), min(by.values()), by)
    by = _saving(points, DEDICATED, per_job_resp, "mean_response_s")
    add("fig5b.lower", BASELINES, all(v > 0 for v in by.values()), min(by.values()), by)

    for sys_ in (FAITHFUL, VARIANT):
        if not all(sys_ in p for p in points.values()):
            continue
        by = _saving(points, sys_, per_job)
        order = all(_v(p, sys_) < _v(p, PER_JOB) < _v(p, DEDICATED) for p in points.values())
        add("fig5a.order", sys_, order, min(by.values()), by)
        by = _saving(points, sys_, worse_servers)
        add("fig5a.saving", sys_, max(by.values()) >= 75.0, max(by.values()), by)
        by = _saving(points, sys_, per_job_resp, "mean_response_s")
        add("fig5b.lower", sys_, all(v > 0 for v in by.values()), min(by.values()), by)
        add("fig5b.size", sys_, max(by.values()) >= 64.5, max(by.values()), by)
        by = _ratio(points, sys_, better_util, UTIL)
        add("fig5d.higher", sys_, all(v > 1 for v in by.values()), min(by.values()), by)
        by = _ratio(points, sys_, worse_util, UTIL)
        add("fig5d.size", sys_, max(by.values()) >= 6.5, max(by.values()), by)
        if all(PER_JOB_OPT in p for p in points.values()):
            by = {x: round(opt(p) / _v(p, sys_), 4) for x, p in points.items()}
            add("fig6a.perjobopt", sys_, max(by.values()) >= 2.55, max(by.values()), by)
        if all(VM_AWARE in p for p in points.values()):
            by = _saving(points, sys_, vm_aware)
            add("fig6a.reconfig", sys_, max(by.values()) >= 44.5, max(by.values()), by)
    return out


def observe_appendix_b(seeds: list[int], ab: Mapping[str, Any]) -> list[Observation]:
    """Tables 5 and 6 (deterministic): the same observation on every seed."""
    t5, t6 = ab["table5"], ab["table6"]
    extra5 = {"paper": t5["met_paper"], "retyped_met": ab.get("job7", {}).get("retyped_met")}
    return [o for seed in seeds for o in (
        Observation("appb.table5", FAITHFUL, seed, t5["met_ours"] == 15, t5["met_ours"],
                    extra5),
        Observation("appb.table6", FAITHFUL, seed, t6["met_ours"] >= 12, t6["met_ours"],
                    {"paper": t6["met_paper"]}))]
