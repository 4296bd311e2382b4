"""The job types of §5.1, as utilon jobs carrying alsched requests.

Each job is one stage of ``tasks`` one-core tasks of equal ``duration``; what differs is the
request (the agent's utility function) and how the duration depends on the placement:

- ``NBODY``: tightly coupled; runs anywhere but ``speedup`` times faster when all its tasks
  start together on one of the *desired* machines.  Its request is §3.4's soft locality
  expression with ``k = tasks``::

      (max (scale 1 (barrier k (max nck(i, k, k))))          i: each desired machine
           (scale 0.5 (barrier k lnck(all, k, k))))           anywhere, half the utility

  The desired machines are the large ones (``kind: large``, the 32-core machines of §5.2):
  the paper calls them "scarce and contended" and varies their share of capacity to move the
  point where waiting for them pays off, which only matters if the preference is for them.
  The speedup is physical (``Stage.colocate_speedup``): it applies to any single machine that
  hosts the whole job, which with one-core tasks is one that "accommodates all tasks".
- ``HADOOP-PI``: embarrassingly parallel, no locality: ``lnck(all, k, k)``, linear in the
  units it gets; the tasks need not start together.
- ``LOCAL``: one address space, so all tasks on one machine: ``(max nck(i, k, k))`` over every
  machine, a hard constraint under every policy (its branches tie).  §5.1 mentions a speedup
  for LOCAL too, but a LOCAL job always runs on one machine, so a speedup would only rescale
  its duration; Table 1's LOCAL row (33 = about three rounds of 10) shows none, so none here.
"""

from __future__ import annotations

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

LARGE = ClassQuery.from_spec({"kind": "large"}, where="nbody.each.i")


def request_for(kind: str) -> Request:
    """The request of a §5.1 job type (``tasks`` is bound to the stage's ready tasks)."""
    if kind == "nbody":
        return Request(parse(NBODY_EXPR), (), (("i", LARGE),))
    if kind == "pi":
        return Request(parse(PI_EXPR), (), ())
    if kind == "local":
        return Request(parse(LOCAL_EXPR), (), (("i", ClassQuery.from_spec({}, "local")),))
    raise ValueError(f"unknown job type {kind!r}; valid: {', '.join(KINDS)}")


def make_job(job_id: str, kind: str, tasks: int, duration: float, *, speedup: float = 1.0,
             submit: float = 0.0) -> Job:
    """One §5.1 job: ``tasks`` one-core tasks of ``duration`` each."""
    if tasks < 1:
        raise ValueError("a job needs at least one task")
    stage = Stage(kind, Task.many([duration] * tasks, Resources(cpu=1.0)), kind="task",
                  colocate_speedup=speedup if kind == "nbody" else 1.0,
                  request=request_for(kind))
    return Job(job_id, submit, (stage,), job_class=kind)


def workload(kinds: Sequence[str], n: int, *, duration: float, speedup: float,
             seed: int, tasks_n: int = 64, tasks_p: float = 1 / 8) -> list[Job]:
    """``n`` jobs at t = 0 (§5.2), tasks ~ Binomial(tasks_n, tasks_p) (at least 1), the type
    drawn uniformly from ``kinds`` (one kind: a homogeneous workload)."""
    rng = np.random.default_rng(seed)
    sizes = np.maximum(rng.binomial(tasks_n, tasks_p, size=n), 1)
    picks = rng.integers(0, len(kinds), size=n) if len(kinds) > 1 else np.zeros(n, dtype=int)
    return [make_job(f"j{i:04d}", kinds[int(picks[i])], int(sizes[i]), duration,
                     speedup=speedup) for i in range(n)]
