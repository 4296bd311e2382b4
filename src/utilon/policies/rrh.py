"""RRH: the risk-reward heuristic of Irwin, Grit & Chase ("Balancing risk and reward in a
market-based task service", HPDC 2004), as the CORA paper describes and uses it (§III-B):
"scheduling decisions are made based on the future utility gain and opportunity cost of
reallocating resources ... the opportunity cost is calculated using the decay rate (equivalent
to the slope of the job utility function at the target completion time)".

Our exact formula (Irwin et al.'s FirstReward, with CORA's reading of its terms).  For every
active job i with work left, at time ``now``:

* RPT_i, remaining processing time: expected container-seconds left (Σ over unfinished tasks of
  slot size × expected duration) / the containers it could use at once (min(cluster capacity,
  its remaining tasks × slot size)) — how long it takes if it runs now with all it can use;
* PV_i, present value: U_i(now + RPT_i), the utility it earns if it runs now to completion;
* decay_i: the slope of U_i at its target completion time, −dU_i/dt at t = goal, by a central
  difference over ±h (h = 0.1% of goal − submit, at least 0.01 s); for CORA's sigmoid this is
  p_i μ_i / 4;
* cost_i, opportunity cost: RPT_i × Σ_{j ≠ i} decay_j — the utility the other jobs lose while
  i holds the cluster, at their decay rates;
* reward_i = (α PV_i − (1 − α) cost_i) / RPT_i, reward per unit of remaining work (α = 0.5 by
  default; Irwin et al.'s discount-rate weighting of present value is folded into α).

Jobs are served in decreasing reward (ties: arrival order); like FIFO, the head job gets every
container it can use and nothing running is killed.  The order is recomputed at every event
CORA decides on, including task completions.
"""

from __future__ import annotations

from utilon.core.decision import Decision, Grant
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView
from utilon.model.utility import TimeUtility
from utilon.policies.base import EVENT_TRIGGERS, Policy, register


def decay_rate(u: TimeUtility, submit: float) -> float:
    """−dU/dt at the utility's goal (0 for a utility without one)."""
    goal = u.goal
    if goal is None:
        return 0.0
    h = max(0.01, 0.001 * (goal - submit))
    return max(0.0, (u.value(goal - h) - u.value(goal + h)) / (2 * h))


def rewards(snapshot: ClusterSnapshot, alpha: float) -> dict[str, float]:
    capacity = max(snapshot.total_slots, 1e-9)
    jobs = [j for j in snapshot.jobs if j.remaining > 0]
    decay = {j.id: decay_rate(j.utility, j.submit) for j in jobs}
    total_decay = sum(decay.values())
    out = {}
    for j in jobs:
        work = sum(s.remaining * s.expected_duration * s.slot_size for s in j.stages)
        width = min(capacity, sum(s.remaining * s.slot_size for s in j.stages))
        rpt = work / max(width, 1e-9)
        pv = j.utility.value(snapshot.now + rpt)
        cost = rpt * (total_decay - decay[j.id])
        out[j.id] = (alpha * pv - (1 - alpha) * cost) / max(rpt, 1e-9)
    return out


@register
class RiskReward(Policy):
    name = "rrh"
    summary = "risk-reward heuristic: serve the highest reward per unit of remaining work"
    paper = "Irwin, Grit & Chase, HPDC 2004, as used by CORA (Huang et al., INFOCOM 2015)"
    triggers = EVENT_TRIGGERS | {Trigger.TASK_FINISHED}

    def __init__(self, alpha: float = 0.5) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError("alpha must be within [0, 1]")
        self.alpha = alpha

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        r = rewards(snapshot, self.alpha)

        def key(j: JobView) -> tuple[float, float]:
            return (-r.get(j.id, float("-inf")), j.submit)

        order = sorted(snapshot.jobs, key=key)  # stable: arrival order among ties
        return Decision(grants=tuple(Grant(j.id) for j in order))
