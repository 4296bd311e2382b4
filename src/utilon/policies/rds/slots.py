"""RDS job management (§4.3): waiting and running queues, the fast path, Algorithm 1.

* **Queues.**  Every job enters the waiting queue; a job moves to the running queue when the
  optimizer gives it an allocation (``u_j(t) > 0``), and stays there while it has tasks
  running.  A job the optimizer gives nothing waits.
* **Fast path.**  A job whose deadline falls before the next control instant would miss it if
  it waited for the optimizer: RDS moves it to the running queue at once, here with a target
  of everything it can run and the first place in Algorithm 1's order.
* **Algorithm 1 (dynamic slots).**  "At each heartbeat, the job with the largest resource
  adjustment Δu_j is selected to run its task; after assigning one slot, Δu_j = Δu_j − r_slot"
  until the allocations add up to r_a.  In utilon a freed slot goes to the first grant, in
  order, that has room and a ready task, and the policy is called again after every task
  completion; so each call orders the running jobs by their current deficit
  Δu_j = target_j − running_j × r_slot (largest first) and caps each at its target in whole
  slots (target / r_slot, rounded half up).  Re-sorting at every completion is Algorithm 1's
  argmax-then-decrement, one slot per heartbeat.  A job with Δu_j < 0 is capped below what it
  runs: it gives up slots as its tasks end (RDS never kills a task).
* **"until Σ u = r_a".**  What the targets leave free is handed out in the same order
  (backfill), so the running queue uses the whole cluster.  With ``work_conserving`` (our
  default, a choice the paper does not discuss) waiting jobs come after them in deadline
  order, so capacity never idles while work waits; without it waiting jobs get nothing
  until the optimizer moves them.
* **Variants** (issue 22, not in the paper): ``priority`` replaces the deficit order (the
  ``deadline`` variant: soft bound; ``tardiness``: WMDD, ``order.py``) and ``capped=False``
  grants each running job everything it can use (a sequence in that order).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from utilon.core.decision import Decision, Grant
from utilon.core.snapshot import JobView


def whole_slots(target: float, r_slot: float) -> int:
    """A capacity target in whole slots (half up), at least one slot for any positive target."""
    if target <= 1e-12:
        return 0
    return max(1, math.floor(target / r_slot + 0.5))


def dynamic_slot_grants(jobs: Sequence[JobView], targets: Mapping[str, float],
                        first: Sequence[str], r_slot: float, *,
                        work_conserving: bool = True, by_deadline: bool = False,
                        priority: Mapping[str, float] | None = None,
                        capped: bool = True) -> Decision:
    """Algorithm 1 as an ordered grant list.

    ``targets``: capacity target (slots × speed) of each job in the running queue;
    ``first``: fast-path jobs, served before everyone else in the order given;
    ``by_deadline``: order the running queue by soft bound instead of deficit (the
    deadline-aware variant: when the cluster delivers less than planned, the earliest
    deadline keeps its slots);
    ``priority``: order the running and the waiting queue by this key instead, smaller first
    (the variants' orders; ``by_deadline`` is ``priority`` = soft bound);
    ``capped``: False grants the running queue everything it can use (a sequence in
    ``priority`` order, the ``tardiness`` variant) instead of capping each job at its target.
    """
    if by_deadline and priority is None:
        priority = {j.id: j.goal for j in jobs}
    r_slot = max(r_slot, 1e-12)
    front = set(first)
    running: list[tuple[float, float, int, JobView]] = []
    waiting: list[JobView] = []
    by_id = {j.id: j for j in jobs}
    for pos, j in enumerate(jobs):
        if j.id in front:
            continue
        if j.id in targets and (targets[j.id] > 1e-12 or j.running):
            key = (priority[j.id] if priority is not None
                   else -(targets[j.id] - j.running * r_slot))
            running.append((key, j.submit, pos, j))
        else:
            waiting.append(j)
    running.sort(key=lambda r: r[:3])
    grants = [Grant(by_id[i].id) for i in first if i in by_id]
    grants += [Grant(j.id, slots=whole_slots(targets[j.id], r_slot) if capped else None)
               for *_, j in running]
    if work_conserving:
        waiting.sort(key=lambda j: (j.goal if priority is None else priority[j.id],
                                    j.submit))
        grants += [Grant(j.id, slots=0) for j in waiting]
    return Decision(grants=tuple(grants), backfill=True)
