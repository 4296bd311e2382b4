"""Each tenant's running quota, enforced where the scheduler hands out capacity: the policy's
decision.

``TenantCaps`` wraps the service's policy.  The policy decides as it always does; the wrapper
then rewrites the grants of every tenant that could otherwise pass its cap (the slot resource
its running tasks may hold: ``max_running_slots``, ``max_running_share`` of the up capacity),
so that the dispatcher starts no task that would take it over:

* a tenant whose running and ready tasks together fit in its cap is left alone (nothing it
  could start takes it over before the next decision);
* otherwise its jobs, in the policy's order, share what is left of its cap: each gets a grant
  for exactly the ready tasks that fit in it -- and in the free capacity now -- as a *gang*
  grant, and a job with none gets a grant on no machine.  A gang grant is the one kind of
  grant the dispatcher's backfill (work conservation, ``Decision.backfill``) never takes
  beyond its count; a plain grant's count backfill ignores.  Running tasks are never killed.

The wrapper is called at every event that changes what a tenant runs or could run (every
task completion too); the policy itself is asked only at its own triggers, and its last
decision is reused in between (with the grants of jobs that left dropped).  Only used when
some tenant has a cap: otherwise the policy runs unwrapped, with its fast paths.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from utilon.core.decision import Decision, Grant
from utilon.core.messages import Trigger
from utilon.core.policy import EVENT_TRIGGERS, Policy
from utilon.core.snapshot import ClusterSnapshot, JobView
from utilon.model.cluster import Cluster
from utilon.model.job import Job

EPS = 1e-9
NOWHERE: frozenset[str] = frozenset()


class TenantCaps(Policy):
    name = "tenant-caps"
    summary = "the service's policy with each tenant's running slots capped"
    uses_free_capacity = True

    def __init__(self, inner: Policy, cap: Callable[[str, float], float]) -> None:
        """``cap(tenant, capacity)``: the slot resource ``tenant``'s running tasks may hold
        when the up machines have ``capacity`` of it (``math.inf``: no cap)."""
        self.inner = inner
        self.cap = cap
        self.triggers = (inner.triggers | EVENT_TRIGGERS  # type: ignore[misc]
                         | {Trigger.TASK_FINISHED})
        self.tick = inner.tick
        self.uses_placement = inner.uses_placement  # type: ignore[misc]
        self.overcommits = inner.overcommits  # type: ignore[misc]
        self._last: Decision | None = None

    def bind(self, cluster: Cluster) -> None:
        self.inner.bind(cluster)

    def unrunnable(self, job: Job, cluster: Cluster) -> str | None:
        return self.inner.unrunnable(job, cluster)

    def job_finished(self, job_id: str, now: float) -> None:
        self.inner.job_finished(job_id, now)

    def report(self) -> dict[str, object]:
        return self.inner.report()

    def params(self) -> dict[str, object]:
        return self.inner.params()

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        own = snapshot.triggers & self.inner.triggers
        if self._last is None or own or not snapshot.triggers:
            self._last = self.inner.decide(dataclasses.replace(snapshot, triggers=own))
            decision = self._last
        else:  # not one of the policy's events: its last decision, for the jobs still here
            active = {j.id for j in snapshot.jobs}
            last = self._last
            decision = Decision(grants=tuple(g for g in last.grants if g.job in active),
                                infeasible=tuple(i for i in last.infeasible
                                                 if i.job in active),
                                backfill=last.backfill, slot_limit=last.slot_limit)
        return capped(decision, snapshot, self.cap)


def capped(decision: Decision, snap: ClusterSnapshot,
           cap: Callable[[str, float], float]) -> Decision:
    """``decision`` with the grants of every tenant that could pass its cap rewritten (see
    the module docstring); the other grants, and their order, as they were."""
    capacity = snap.total_slots
    held: dict[str, float] = {}
    could: dict[str, float] = {}
    limit: dict[str, float] = {}
    for j in snap.jobs:
        t = j.tenant
        if t not in limit:
            limit[t] = cap(t, capacity)
        if limit[t] == math.inf:
            continue
        run = sum(s.running * s.slot_size for s in j.stages)
        held[t] = held.get(t, 0.0) + run
        could[t] = could.get(t, 0.0) + run + sum(s.ready * s.slot_size for s in j.stages)
    left = {t: limit[t] - held[t] for t in held if could[t] > limit[t] + EPS}
    if not left:
        return decision
    jobs = {j.id: j for j in snap.jobs}
    slots_of: dict[str, float | None] = {}
    for g in decision.grants:  # what the policy allows each job in all (None: no limit)
        if g.job in slots_of and slots_of[g.job] is None:
            continue
        slots_of[g.job] = None if g.slots is None else (slots_of.get(g.job) or 0) + g.slots
    free = _free(snap)
    out: list[Grant] = []
    done: set[str] = set()
    for g in decision.grants:
        view = jobs.get(g.job)
        if view is None or view.tenant not in left:
            out.append(g)
            continue
        if g.job in done:
            continue  # a job's grants become one
        done.add(g.job)
        allowed = slots_of[g.job]
        most = math.inf if allowed is None else max(0.0, allowed - view.running)
        n = _allowance(view, left, free, snap.resource_names, most)
        out.append(Grant(g.job, slots=view.running + n, gang=True) if n else
                   Grant(g.job, slots=0, machines=NOWHERE))
    return Decision(grants=tuple(out), infeasible=decision.infeasible,
                    backfill=decision.backfill, slot_limit=decision.slot_limit,
                    solver_seconds=decision.solver_seconds)


def _free(snap: ClusterSnapshot) -> list[list[float]]:
    """Free capacity per up machine (rows of ``snap.free``), to place allowances in."""
    if snap.free is None:
        return []
    return [list(row) for m, row in zip(snap.machines, snap.free.tolist(), strict=True)
            if m.up]


def _allowance(j: JobView, left: dict[str, float], free: list[list[float]],
               names: tuple[str, ...], most: float) -> int:
    """How many of ``j``'s ready tasks start now: in stage order, while they fit in what
    is left of the tenant's cap and in the free capacity (both taken from)."""
    n = 0
    for st in j.stages:
        if not st.ready or most - n < 1:
            continue
        size = max(st.slot_size, EPS)
        budget = min(math.floor((left[j.tenant] + EPS) / size), most - n)
        want = st.ready if st.gang else min(st.ready, budget)
        if st.gang and (st.running or st.ready > budget):
            break  # a gang stage starts whole or not at all
        if want < 1:
            break
        vec = st.demand.vector(names)
        placed = _place(free, vec, int(want), whole=st.gang)
        n += placed
        left[j.tenant] -= placed * size
        if placed < want:
            break  # a later stage must not start before this one's tasks that wait
    return n


def _place(free: list[list[float]], vec: tuple[float, ...], want: int, whole: bool) -> int:
    """Take room for up to ``want`` tasks of demand ``vec`` from ``free`` (machine by
    machine); with ``whole``, all of them or none."""
    plan: list[tuple[int, int]] = []
    got = 0
    for i, row in enumerate(free):
        if got >= want:
            break
        k = min((math.floor((r + EPS) / v) for r, v in zip(row, vec, strict=True) if v > 0),
                default=want)
        k = min(k, want - got)
        if k > 0:
            plan.append((i, k))
            got += k
    if whole and got < want:
        return 0
    for i, k in plan:
        free[i] = [r - k * v for r, v in zip(free[i], vec, strict=True)]
    return got
