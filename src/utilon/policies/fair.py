"""Hadoop Fair Scheduler semantics: weighted max-min fair shares over jobs.

Each active job demands as many slots as it has runnable tasks (ready + running) times the slot
size of those tasks, in the cluster's slot resource.  Shares are the weighted max-min fair
allocation of the up capacity (water-filling: no job gets more than it demands, what one job
does not use is redistributed to the others in proportion to their weights), rounded to whole
tasks by largest remainder.  Grants are ordered by how far below its share each job runs, and
leftover capacity is backfilled in that order (work conservation), as Hadoop's Fair Scheduler
hands a freed slot to the job furthest below its share.  No tasks are killed.

``fair-slots`` is the same policy under Hadoop's static slot model (the configuration RAS
compares against): every machine runs at most ``k`` tasks (``reduce_k`` more for reduce tasks
in their own pool, if given) regardless of what they use, and shares are computed over those
slots.  The simulator's fluid model then shows what over- or under-committing machines does.

Simplification: Hadoop's pools (per-tenant shares, then jobs within a pool) are not modelled;
shares are over jobs, weighted by each job's weight.  Shares are recomputed at arrivals, stage
and job completions, failures and capacity changes, not at every task completion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import le

from utilon.core.decision import Decision, Grant, SlotLimit
from utilon.core.feasibility import pack, reach
from utilon.core.snapshot import ClusterSnapshot, JobView
from utilon.model.cluster import Cluster
from utilon.model.job import Job
from utilon.policies.base import Policy, register


def max_min_fair(capacity: float, demands: Sequence[float],
                 weights: Sequence[float]) -> list[float]:
    """Weighted max-min fair shares of ``capacity`` (water-filling), each capped at its demand."""
    n = len(demands)
    shares = [0.0] * n
    order = sorted(range(n), key=lambda i: demands[i] / weights[i])
    left = capacity
    wsum = sum(weights[i] for i in order)
    for pos, i in enumerate(order):
        if left <= 0 or wsum <= 0:
            break
        level = left / wsum
        if demands[i] <= level * weights[i]:
            shares[i] = demands[i]
        else:  # every remaining job is bottlenecked at this water level
            for k in order[pos:]:
                shares[k] = level * weights[k]
            break
        left -= shares[i]
        wsum -= weights[i]
    return shares


def whole_tasks(shares_in_tasks: Sequence[float], caps: Sequence[int], total: int) -> list[int]:
    """Round fractional task shares down, then hand out what is left by largest remainder."""
    base = [min(c, math.floor(s + 1e-9)) for s, c in zip(shares_in_tasks, caps, strict=True)]
    spare = total - sum(base)
    rema = sorted(range(len(base)), key=lambda i: -(shares_in_tasks[i] - base[i]))
    for i in rema:
        if spare <= 0:
            break
        if base[i] < caps[i] and shares_in_tasks[i] - base[i] > 1e-9:
            base[i] += 1
            spare -= 1
    return base


def fair_decision(jobs: Sequence[JobView], capacity: float,
                  slot_limit: SlotLimit | None = None) -> Decision:
    if not jobs:
        return Decision(slot_limit=slot_limit)
    size = [1.0 if slot_limit is not None else j.slot_size for j in jobs]
    runnable = [j.runnable for j in jobs]
    demands = [r * s for r, s in zip(runnable, size, strict=True)]
    shares = max_min_fair(capacity, demands, [j.weight for j in jobs])
    in_tasks = [sh / s for sh, s in zip(shares, size, strict=True)]
    total = math.floor(sum(in_tasks) + 1e-9)
    tasks = whole_tasks(in_tasks, runnable, total)
    # Most starved first: running / share ascending; jobs with no share last.
    def starvation(i: int) -> tuple[float, float, int]:
        share = tasks[i]
        ratio = jobs[i].running / share if share > 0 else math.inf
        return (ratio, jobs[i].submit, i)

    order = sorted(range(len(jobs)), key=starvation)
    grants = tuple(Grant(jobs[i].id, slots=tasks[i]) for i in order)
    return Decision(grants=grants, backfill=True, slot_limit=slot_limit)


@register
class Fair(Policy):
    name = "fair"
    summary = "Hadoop Fair Scheduler: weighted max-min fair shares over jobs, work-conserving"

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        return fair_decision(snapshot.jobs, snapshot.total_slots)


@register
class FairSlots(Policy):
    name = "fair-slots"
    overcommits = True  # k slots per machine, blind to the resources tasks declare
    summary = "Fair Scheduler with k static slots per machine, blind to resources (RAS baseline)"
    paper = "ras"

    def __init__(self, k: int = 4, reduce_k: int | None = None) -> None:
        if k < 1:
            raise ValueError("k must be >= 1")
        if reduce_k is not None and reduce_k < 1:
            raise ValueError("reduce_k must be >= 1")
        self.k = k
        self.reduce_k = reduce_k

    def unrunnable(self, job: Job, cluster: Cluster) -> str | None:
        """A gang stage needs as many static slots at once as it has tasks (each on a machine
        it fits): more than ``k`` (``reduce_k``) per machine allow, and it never starts."""
        if not any(st.gang for st in job.stages):
            return None  # the machines' reach is worked out only for a gang (validate's time)
        names = cluster.resource_names
        caps = reach(cluster, names, job.submit)
        for st in job.stages:
            if not st.gang:
                continue
            reduce_pool = self.reduce_k is not None and st.kind == "reduce"
            per = self.reduce_k if reduce_pool else self.k
            assert per is not None
            vecs = [t.demand.vector(names) for t in st.tasks]

            def fits_alone(k: int, i: int, v: list[tuple[float, ...]] = vecs) -> bool:
                return all(map(le, v[k], caps[i]))

            found = pack([(1.0,)] * len(vecs), [(float(per),)] * len(caps),
                         eligible=fits_alone)
            if found.placement is None and found.complete:
                param = "reduce_k" if reduce_pool else "k"
                return (f"gang stage {st.name!r} needs {len(vecs)} tasks at once, more than "
                        f"{len(caps)} machine(s) x {param}={per} static slots hold (raise "
                        f"{param})")
        return None

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        up = sum(1 for m in snapshot.machines if m.up)
        capacity = up * (self.k + (self.reduce_k or 0))
        return fair_decision(snapshot.jobs, capacity, SlotLimit(self.k, self.reduce_k))
