"""Hypothesis strategies for random clusters and workloads, and the oracle of which jobs *can*
run on a cluster: they live in ``utilon.checks``, which ``utilon check-policy`` runs on any
policy, and are re-exported here for the tests.

``scenarios()`` draws what the liveness property is about: heterogeneous machines with several
resources (with or without a ``slots`` resource), tasks whose demands go up to a machine's
whole capacity, gang stages, chains and fans of stages, and capacity timelines with joins,
leaves, scale and speed changes.  Every machine listed in ``anchors`` is up at the end of the
timeline at a scale of at least 1, and every task fits one of them, so every job can run.

``runnable(job, cluster)`` is the test's own, independent statement of "this job can run": at
the end of the timeline (when nothing changes any more), every stage fits the machines that
are up -- each task on some machine, a gang stage all at once (exhaustive search on these
small instances).
"""

from __future__ import annotations

import itertools

from utilon.checks import (
    Scenario,
    clusters,
    demands,
    final_state,
    halves,
    runnable,
    scenarios,
    utilities,
)

__all__ = ["Scenario", "all_gang_layouts", "clusters", "demands", "final_state", "halves",
           "runnable", "scenarios", "utilities"]


def all_gang_layouts(n: int, machines: int) -> list[tuple[int, ...]]:
    """Every way to put ``n`` gang members on ``machines`` machines (tests of the oracle)."""
    return list(itertools.product(range(machines), repeat=n))
