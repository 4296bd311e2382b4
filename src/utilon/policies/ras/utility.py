"""RAS's job utility (§3.3, Eqs. 1–3) of a placement: map slots against the number required
to meet the completion-time goal, minus unsatisfied reduce demand.

    u_j = u_M + u_R, capped at 1                                          (Eq. 1)
    u_M = (s_alloc − s_req) / (s_pend − s_req)      if s_alloc ≥ s_req     (Eq. 2)
        = log(s_alloc) / log(s_req) − 1             otherwise
    u_R = log(r_alloc) / log(r_pend) − 1                                  (Eq. 3)

The paper leaves the corners open; our readings (each tested):

* ``s_alloc = 0 < s_req``: log 0 = −∞, so u_M = −∞ — "it is critical for a job to make
  progress and therefore at least one slot must be allocated".  Placement compares such jobs
  by ``s_req`` (``order_key``): among starving jobs, the one that needs more comes first.
* ``s_req = 1``: log 1 = 0 makes the log branch 0/0; with s_alloc < 1 only s_alloc = 0 is
  possible, which is the −∞ case above.
* ``s_req = s_pend`` (every pending map is required): the linear branch is 0/0; a job given
  all it requires has every pending task placed, the paper's maximum satisfaction, so u_M = 1.
* ``s_pend = 0`` (no map left): u_M = 1 — nothing is missing — and the job's utility is its
  reduce term (plus 1, capped at 1).
* Eq. 3 "ranges over [−1, 0]": we clip it there, so ``r_alloc = 0`` (log 0) gives −1 as
  r_alloc = 1 does; ``r_pend ≤ 1`` gives 0 when every pending reducer is placed, else −1;
  ``r_pend = 0`` gives 0.
* ``s_alloc > s_pend`` (more slots than tasks) caps at 1, as the paper says.
"""

from __future__ import annotations

import math
from typing import NamedTuple


def map_utility(s_alloc: float, s_req: float, s_pend: float) -> float:
    """Eq. 2, with the corners above."""
    if s_pend <= 0:
        return 1.0
    if s_alloc >= s_req:
        if s_pend <= s_req:
            return 1.0
        return min(1.0, (s_alloc - s_req) / (s_pend - s_req))
    if s_alloc <= 0:
        return -math.inf
    # here 0 < s_alloc < s_req, so s_req > 1 for integer allocations
    return math.log(s_alloc) / math.log(s_req) - 1.0 if s_req > 1 else -math.inf


def reduce_utility(r_alloc: float, r_pend: float) -> float:
    """Eq. 3, clipped to the paper's range [−1, 0]."""
    if r_pend <= 0 or r_alloc >= r_pend:
        return 0.0
    if r_alloc <= 1 or r_pend <= 1:
        return -1.0
    return max(-1.0, min(0.0, math.log(r_alloc) / math.log(r_pend) - 1.0))


def job_utility(s_alloc: float, s_req: float, s_pend: float, r_alloc: float,
                r_pend: float) -> float:
    """Eq. 1: map plus reduce utility, capped at 1."""
    return min(1.0, map_utility(s_alloc, s_req, s_pend) + reduce_utility(r_alloc, r_pend))


class OrderKey(NamedTuple):
    """Sort key for "the job with the lowest utility": utility first; among jobs at −∞ the
    one that requires more map slots is the more unsatisfied."""

    utility: float
    neg_required: float


def order_key(utility: float, s_req: float) -> OrderKey:
    return OrderKey(utility, -s_req if utility == -math.inf else 0.0)
