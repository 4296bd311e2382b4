"""Can a job ever run?  Gang packing, and the checks that refuse a workload before a run.

``pack`` places a group of tasks that must start together (a gang) on machines with free
capacity.  The dispatcher uses it to start gangs, policies use it to check the gangs they
grant, and ``why_never`` uses it to tell a gang that will never fit from one that waits.  It
tries first fit in the given order (what the dispatcher always did, so schedules that worked
stay the same), then first fit decreasing, then a depth-first search that skips symmetric
choices, within a node budget: gangs are small or made of equal tasks in practice, and the
search is exact on both.

``why_never(job, cluster)`` is the policy-independent half of "this job can never run": a
task that no machine available at or after the job's submission can ever hold (at the largest
capacity the timeline gives it), or a gang stage that does not fit all those machines at once
even if they were empty.  ``check_workload`` adds each policy's own reasons
(``Policy.unrunnable``: static slots, placement requests) and raises ``Unrunnable`` naming the
first job, its stage and why -- a run refuses such a workload up front instead of discovering
mid-run that nothing can happen.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import attrgetter, is_, le
from typing import TYPE_CHECKING, NamedTuple

from utilon.errors import UtilonError
from utilon.model.cluster import CapacityAction, Cluster
from utilon.model.job import Job, Stage

if TYPE_CHECKING:
    from utilon.core.policy import Policy

Vec = Sequence[float]
EPS = 1e-9
SEARCH_BUDGET = 20_000
"""Nodes the exact gang search may visit before it gives up (the gang then waits)."""


class Packing(NamedTuple):
    """Machine index per demand (input order), or None; ``complete`` says whether a None is
    a proof that no placement exists (False: the search ran out of budget)."""

    placement: list[int] | None
    complete: bool


def _first_fit(order: Sequence[int], demands: Sequence[Vec], free: Sequence[Vec],
               eligible: Callable[[int, int], bool] | None) -> list[int] | None:
    left = [list(f) for f in free]
    out = [0] * len(demands)
    for k in order:
        d = demands[k]
        for i, f in enumerate(left):
            if all(map(le, d, f)) and (eligible is None or eligible(k, i)):
                left[i] = [x - y for x, y in zip(f, d, strict=True)]
                out[k] = i
                break
        else:
            return None
    return out


def _size_order(demands: Sequence[Vec], free: Sequence[Vec]) -> list[int]:
    """Demands by their largest share of the biggest machine, largest first (stable)."""
    top = [max((f[r] for f in free), default=0.0) for r in range(len(demands[0]))]

    def share(k: int) -> float:
        return max((x / t for x, t in zip(demands[k], top, strict=True) if t > 0),
                   default=0.0)

    return sorted(range(len(demands)), key=lambda k: -share(k))


def pack(demands: Sequence[Vec], free: Sequence[Vec], *,
         eligible: Callable[[int, int], bool] | None = None,
         budget: int = SEARCH_BUDGET) -> Packing:
    """Place every demand on a machine so that what lands on each fits its ``free`` vector
    (and ``eligible(demand, machine)`` holds, if given)."""
    n = len(demands)
    if n == 0:
        return Packing([], True)
    if not free:
        return Packing(None, True)
    dims = len(demands[0])
    for r in range(dims):  # the cheap proof of impossibility: not enough in total
        if sum(d[r] for d in demands) > sum(f[r] for f in free) + EPS * n:
            return Packing(None, True)
    plain = _first_fit(range(n), demands, free, eligible)
    if plain is not None:
        return Packing(plain, True)
    order = _size_order(demands, free)
    ffd = _first_fit(order, demands, free, eligible)
    if ffd is not None:
        return Packing(ffd, True)
    return _search(order, demands, free, eligible, budget)


def _search(order: list[int], demands: Sequence[Vec], free: Sequence[Vec],
            eligible: Callable[[int, int], bool] | None, budget: int) -> Packing:
    left = [list(f) for f in free]
    out = [0] * len(demands)
    nodes = 0

    def place(pos: int, floor: int) -> bool | None:
        nonlocal nodes
        if pos == len(order):
            return True
        k = order[pos]
        d = demands[k]
        nxt = order[pos + 1] if pos + 1 < len(order) else None
        tried: set[tuple[object, ...]] = set()
        for i in range(floor, len(left)):
            f = left[i]
            key = (*f, i) if eligible is not None else tuple(f)
            if key in tried or not all(map(le, d, f)) or (
                    eligible is not None and not eligible(k, i)):
                continue
            tried.add(key)  # an equal free vector would lead to the same subtree
            nodes += 1
            if nodes > budget:
                return None
            left[i] = [x - y for x, y in zip(f, d, strict=True)]
            out[k] = i
            # equal demands go to non-decreasing machines: their order does not matter
            same = nxt is not None and demands[nxt] == d and eligible is None
            got = place(pos + 1, i if same else 0)
            left[i] = f
            if got is None or got:
                return got
        return False

    found = place(0, 0)
    if found is None:
        return Packing(None, False)
    return Packing(out if found else None, True)


# ------------------------------------------------------------------------------ refusals
class Unrunnable(UtilonError):
    """A job in the workload can never run on this cluster (under this policy)."""

    def __init__(self, job: str, reason: str, more: int = 0, *, where: str = "",
                 fix: str = "") -> None:
        extra = f" (and {more} more job(s) that can never run)" if more else ""
        super().__init__(f"job {job}: {reason}; it can never run{extra}", where=where,
                         fix=fix or "give the cluster a machine that can hold it, lower the "
                         "demand, or drop the job")
        self.job = job
        self.reason = reason


def reach_by_machine(cluster: Cluster, names: tuple[str, ...],
                     t: float) -> list[tuple[float, ...]]:
    """Per machine of ``cluster`` (in order), its largest declared capacity from ``t`` on if
    it is up at some instant at or after ``t``, else zeros (capacity changes at ``t`` come
    before arrivals at ``t``, as in the simulator)."""
    up = {m.id: m.id not in cluster.initially_down for m in cluster.machines}
    scale = {m.id: 1.0 for m in cluster.machines}
    later_up: dict[str, bool] = {}
    later_scale: dict[str, float] = {}
    for ch in sorted(cluster.timeline, key=lambda c: c.time):
        mid = ch.machine
        if ch.time <= t:
            if ch.action is CapacityAction.JOIN:
                up[mid] = True
            elif ch.action is CapacityAction.LEAVE:
                up[mid] = False
            elif ch.action is CapacityAction.SCALE:
                scale[mid] = ch.factor
        elif ch.action is CapacityAction.JOIN:
            later_up[mid] = True
        elif ch.action is CapacityAction.SCALE:
            later_scale[mid] = max(later_scale.get(mid, 0.0), ch.factor)
    out = []
    for m in cluster.machines:
        vec = m.capacity.vector(names)
        if up[m.id] or later_up.get(m.id):
            f = max(scale[m.id], later_scale.get(m.id, 0.0))
            out.append(tuple(c * f + EPS for c in vec))
        else:
            out.append(tuple(0.0 for _ in vec))
    return out


def reach(cluster: Cluster, names: tuple[str, ...], t: float) -> list[tuple[float, ...]]:
    """The largest capacities of the machines available at or after ``t`` (see
    ``reach_by_machine``), leaving out the others."""
    return [c for c in reach_by_machine(cluster, names, t) if any(c)]


_demand = attrgetter("demand")
# stage identity -> (the stage, its tasks' demand vectors): what a check computed, kept for the
# scheduler core to take at the stage's submission instead of computing it again (the stage
# is held with its vectors, so that an identity is never reused while its entry is there)
StageVectors = dict[int, tuple[Stage, list[tuple[float, ...]]]]


def _all_same(xs: Sequence[object]) -> bool:
    """Every element is the first object (identity, at C level: no ``__eq__`` calls)."""
    return all(map(is_, xs, repeat(xs[0])))


def _describe(names: tuple[str, ...], v: Vec) -> str:
    return "{" + ", ".join(f"{n}: {x:g}" for n, x in zip(names, v, strict=True) if x) + "}"


def demand_vectors(stage: Stage, names: tuple[str, ...]) -> list[tuple[float, ...]]:
    """Each task's demand as a vector over ``names``, one vector per distinct demand object
    (the tasks of a stage usually share one: a million tasks, a handful of vectors)."""
    demands = list(map(_demand, stage.tasks))
    if demands and _all_same(demands):  # one shared demand: C-level passes
        return [demands[0].vector(names)] * len(demands)
    by_demand: dict[int, tuple[float, ...]] = {}
    out = []
    for t in stage.tasks:
        v = by_demand.get(id(t.demand))
        if v is None:
            v = by_demand[id(t.demand)] = t.demand.vector(names)
        out.append(v)
    return out


def stage_never(stage: Stage, names: tuple[str, ...], caps: list[tuple[float, ...]],
                kinds: list[tuple[float, ...]] | None = None,
                vectors: StageVectors | None = None) -> str:
    """Why ``stage`` can never run on machines of (largest) capacities ``caps``, or ""
    (``kinds``: the distinct ``caps``, when the caller has them; ``vectors``: where to keep
    the stage's demand vectors for its submission, see ``StageVectors``)."""
    # tasks share demand vectors and machines share capacities: test each pair once
    demands = demand_vectors(stage, names)
    if vectors is not None:
        vectors[id(stage)] = (stage, demands)
    if kinds is None:
        kinds = list(dict.fromkeys(caps))
    distinct = ([demands[0]] if demands and _all_same(demands) else
                dict(zip(map(id, demands), demands, strict=True)).values())  # C-level
    never = [d for d in distinct if not any(all(map(le, d, c)) for c in kinds)]
    if never:
        i = min(map(demands.index, never))  # the first task that fits nowhere
        biggest = max(caps, key=sum) if caps else ()
        have = f" (the largest is {_describe(names, biggest)})" if caps else \
            " (no machine is up then)"
        return (f"stage {stage.name!r}: task {i} demands {_describe(names, demands[i])}, more "
                f"than any machine available after its submission ever has{have}")
    if stage.gang:
        found = pack(demands, caps)
        if found.placement is None and found.complete:
            return (f"gang stage {stage.name!r} needs its {len(demands)} tasks at once, and "
                    "they do not fit on all the cluster's machines together")
    return ""


def why_never(job: Job, cluster: Cluster, names: tuple[str, ...] | None = None,
              caps: list[tuple[float, ...]] | None = None,
              kinds: list[tuple[float, ...]] | None = None,
              vectors: StageVectors | None = None) -> str:
    """The policy-independent reason ``job`` can never run on ``cluster``, or "" (``caps``:
    ``reach`` at the job's submission, and ``kinds``, its distinct values, when the caller has
    them; ``vectors`` as for ``stage_never``)."""
    names = names if names is not None else cluster.resource_names
    if caps is None:
        caps = reach(cluster, names, job.submit)
    for stage in job.stages:
        why = stage_never(stage, names, caps, kinds, vectors)
        if why:
            return why
    return ""


def check_workload(cluster: Cluster, jobs: Sequence[Job], policy: Policy | None = None,
                   *, where: str = "", vectors: StageVectors | None = None) -> None:
    """Raise ``Unrunnable`` for the first job that can never run (counting the others);
    ``vectors`` keeps the demand vectors it computed (``StageVectors``)."""
    names = cluster.resource_names
    bad: list[tuple[str, str]] = []
    # ``reach`` changes only where the capacity timeline has an event: one per epoch
    times = sorted({ch.time for ch in cluster.timeline})
    by_epoch: dict[int, tuple[list[tuple[float, ...]], list[tuple[float, ...]]]] = {}
    for job in jobs:
        epoch = bisect.bisect_right(times, job.submit)
        got = by_epoch.get(epoch)
        if got is None:
            caps = reach(cluster, names, job.submit)
            got = by_epoch[epoch] = (caps, list(dict.fromkeys(caps)))
        why = why_never(job, cluster, names, *got, vectors)
        if not why and policy is not None:
            why = policy.unrunnable(job, cluster) or ""
            if why:
                why = f"{why} under policy {policy.name!r}"
        if why:
            bad.append((job.id, why))
    if bad:
        first, why = bad[0]
        raise Unrunnable(first, why, len(bad) - 1, where=where)
