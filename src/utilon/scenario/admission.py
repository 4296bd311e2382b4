"""Goals no schedule can meet: refused up front, or run and counted.

A job's *standalone runtime* (``Workload.standalone``) is its critical path on the whole
cluster with nothing else running: each stage takes at least its longest task and at least
its work spread over every place where its tasks fit.  It is a lower bound, so a goal earlier
than ``submit + standalone`` cannot be met by any policy.  By default (``admission: refuse``)
such a scenario is refused with one line naming the job and the time it needs; with
``admission: accept`` it runs and the summary counts those jobs (``impossible_goals``).
"""

from __future__ import annotations

from dataclasses import dataclass

from utilon.errors import ScenarioError
from utilon.scenario.build import Workload

#: a goal this close to the bound counts as reachable (float noise of '1x' goals)
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class ImpossibleGoal:
    job: str
    allowed: float  # goal - submit, seconds
    needs: float    # standalone runtime, seconds


def impossible_goals(workload: Workload) -> list[ImpossibleGoal]:
    """The jobs whose goal comes before their standalone runtime, in workload order."""
    out = []
    for j in workload.jobs:
        goal, needs = j.utility.goal, workload.standalone.get(j.id)
        if goal is None or needs is None:
            continue
        allowed = goal - j.submit
        if allowed < needs * (1 - _EPS) - _EPS:
            out.append(ImpossibleGoal(j.id, allowed, needs))
    return out


def check_admission(workload: Workload, where: str) -> list[ImpossibleGoal]:
    """Raise on the first impossible goal unless the scenario accepts them; return them."""
    bad = impossible_goals(workload)
    if bad and workload.spec.admission == "refuse":
        b = bad[0]
        more = f" (and {len(bad) - 1} more job(s))" if len(bad) > 1 else ""
        raise ScenarioError(
            f"job {b.job!r} must finish {b.allowed:g} s after its submission but needs at "
            f"least {b.needs:g} s alone on the whole cluster; no schedule can meet its goal"
            + more, where=where,
            fix="give it a later goal, or set `admission: accept` to run it and count it")
    return bad
