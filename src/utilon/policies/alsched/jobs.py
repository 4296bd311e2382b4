"""The job types of §5.1, as utilon jobs carrying alsched requests.

Each job is one stage of ``tasks`` one-core tasks of equal ``duration``; what differs is the
request (the agent's utility function) and how the duration depends on the placement:

- ``NBODY``: tightly coupled; runs anywhere but ``speedup`` times faster when all its tasks
  start together on one of the *desired* machines.  Its request is §3.4's soft locality
  expression with ``k = tasks``::

      (max (scale 1 (barrier k (max nck(i, k, k))))          i: each desired machine
           (scale 0.5 (barrier k lnck(all, k, k))))           anywhere, half the utility

  The desired machines are what §5.2 says they are: "one of the desired machines, i.e., one
  of the machines with enough cores to accommodate all tasks" (``desired="fits"``, the
  default): ``i`` ranges over every machine and ``nck(i, k, k)`` is worth something only on
  one that holds all k tasks -- a 32-core machine for a job of more than 8 tasks, any machine
  for a smaller one.  The 32-core machines are still the "scarce and contended" ones: only
  they hold the larger jobs.  ``desired="large"`` (only the 32-core machines) is the reading
  this module used before issue 24; it is kept for the ablation in
  docs/reproduction-alsched.md.  Table 1's Hard and None columns support the literal reading
  (same document).  The speedup is physical (``Stage.colocate_speedup``): it applies to any
  single machine that hosts the whole job, whatever the policy, and a job spread over several
  machines runs without it -- the cost of ignoring the preference.  None takes cores
  first-fit, so some of its jobs land whole on one machine by chance and keep the speedup
  (issue 44; ``fill="spread"``, the earlier reading, never does).
- ``HADOOP-PI``: embarrassingly parallel, no locality: ``lnck(all, k, k)``, linear in the
  units it gets; the tasks need not start together.
- ``LOCAL``: one address space, so all tasks on one machine: ``(max nck(i, k, k))`` over every
  machine, a hard constraint under every policy (its branches tie).  §5.2 names LOCAL beside
  NBODY for the locality speedup, but a LOCAL job always runs on one machine, so a speedup
  would only rescale its duration; Table 1's LOCAL row (33 = three rounds of 10, the same
  rounds as PI's 22 = two) shows none, so none here.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from utilon.model.job import Job, Stage, Task
from utilon.model.resources import Resources
from utilon.policies.alsched.lang import ClassQuery, Request, parse

NBODY_EXPR = ("(max (scale 1 (barrier tasks (max nck(i, tasks, tasks)))) "
              "(scale 0.5 (barrier tasks lnck(all, tasks, tasks))))")
PI_EXPR = "lnck(all, tasks, tasks)"
LOCAL_EXPR = "(max nck(i, tasks, tasks))"
KINDS = ("nbody", "pi", "local")

DESIRED = {"fits": ClassQuery.from_spec({}, where="nbody.each.i"),
           "large": ClassQuery.from_spec({"kind": "large"}, where="nbody.each.i")}
"""NBODY's desired machines: every machine (``nck`` keeps those that hold all its tasks), or
only the 32-core ones (the ablation)."""


def request_for(kind: str, desired: str = "fits") -> Request:
    """The request of a §5.1 job type (``tasks`` is bound to the stage's ready tasks);
    parsed once per type and shared by its jobs (a request is immutable)."""
    return _request(kind, desired)


@functools.cache
def _request(kind: str, desired: str) -> Request:
    if kind == "nbody":
        if desired not in DESIRED:
            raise ValueError(f"unknown desired machines {desired!r}; valid: "
                             f"{', '.join(DESIRED)}")
        return Request(parse(NBODY_EXPR), (), (("i", DESIRED[desired]),))
    if kind == "pi":
        return Request(parse(PI_EXPR), (), ())
    if kind == "local":
        return Request(parse(LOCAL_EXPR), (), (("i", ClassQuery.from_spec({}, "local")),))
    raise ValueError(f"unknown job type {kind!r}; valid: {', '.join(KINDS)}")


def make_job(job_id: str, kind: str, tasks: int, duration: float, *, speedup: float = 1.0,
             submit: float = 0.0, desired: str = "fits") -> Job:
    """One §5.1 job: ``tasks`` one-core tasks of ``duration`` each."""
    if tasks < 1:
        raise ValueError("a job needs at least one task")
    stage = Stage(kind, Task.many([duration] * tasks, Resources(cpu=1.0)), kind="task",
                  colocate_speedup=speedup if kind == "nbody" else 1.0,
                  request=request_for(kind, desired))
    return Job(job_id, submit, (stage,), job_class=kind)


def workload(kinds: Sequence[str], n: int, *, duration: float, speedup: float,
             seed: int, tasks_n: int = 64, tasks_p: float = 1 / 8,
             desired: str = "fits") -> list[Job]:
    """``n`` jobs at t = 0 (§5.2), tasks ~ Binomial(tasks_n, tasks_p) (at least 1), the type
    drawn uniformly from ``kinds`` (one kind: a homogeneous workload)."""
    rng = np.random.default_rng(seed)
    sizes = np.maximum(rng.binomial(tasks_n, tasks_p, size=n), 1)
    picks = rng.integers(0, len(kinds), size=n) if len(kinds) > 1 else np.zeros(n, dtype=int)
    return [make_job(f"j{i:04d}", kinds[int(picks[i])], int(sizes[i]), duration,
                     speedup=speedup, desired=desired) for i in range(n)]
