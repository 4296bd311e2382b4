"""Make an allocation minimal: "It is the job of the cluster scheduler to avoid assigning
resources that do not improve the utility value" (§3.4).

For each job, machine by machine, the units are cut to the fewest that keep the job's utility
(a binary search on the count: utility is monotone in every machine's units).  One pass is
enough for *single-unit minimality* -- removing any one unit afterwards lowers the job's
utility: when machine ``m`` was cut to ``x``, its ``x - 1`` already fell short, and later cuts
of other machines can only lower utilities further (monotonicity).  Every solver applies it
to its output.
"""

from __future__ import annotations

from collections.abc import Mapping

from utilon.policies.alsched.lang.ast import TOL
from utilon.policies.alsched.solvers.problem import Problem, Request, class_units


def trim(problem: Problem, alloc: Mapping[str, Mapping[int, int]]) -> dict[str, dict[int, int]]:
    """A minimal copy of ``alloc`` (job -> machine -> units) with every utility unchanged."""
    out: dict[str, dict[int, int]] = {}
    for r in problem.requests:
        units = alloc.get(r.job)
        if units:
            kept = trim_job(r, units)
            if kept:
                out[r.job] = kept
    return out


def trim_job(r: Request, units: Mapping[int, int]) -> dict[int, int]:
    """The fewest units per machine (in machine order) keeping ``r``'s utility."""
    x = {m: int(u) for m, u in units.items() if u > 0}
    d = class_units(r, x)
    target = r.expr.evaluate(d) - TOL
    member: dict[int, list[str]] = {}
    for cls, ms in r.classes.items():
        for m in ms:
            member.setdefault(m, []).append(cls)
    for m in sorted(x):
        classes = member.get(m, [])
        have = x[m]

        def ok(count: int, classes: list[str] = classes, have: int = have) -> bool:
            for c in classes:
                d[c] += count - have
            value = r.expr.evaluate(d)
            for c in classes:
                d[c] -= count - have
            return value >= target

        lo, hi = 0, have  # ok(hi) holds; find the smallest count that is ok
        while lo < hi:
            mid = (lo + hi) // 2
            if ok(mid):
                hi = mid
            else:
                lo = mid + 1
        for c in classes:
            d[c] += lo - have
        x[m] = lo
    return {m: u for m, u in sorted(x.items()) if u > 0}
