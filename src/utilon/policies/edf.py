"""Earliest-deadline-first, non-preemptive (EDF-N) and preemptive (EDF-P), as in RDS §6.

The deadline of a job is its utility function's goal (deadline, soft bound, sigmoid midpoint);
jobs without one come last, ties go to the earlier submission.

* EDF-N "enforces the EDF policy at the job queue – there is always only one job, the job with
  the earliest deadline, in the running queue.  Even if a job with an earlier deadline arrives,
  it needs to wait for the running job's completion."  One grant, to the running job (or, when
  none runs, to the queued job with the earliest deadline); slots it cannot use stay idle.
* EDF-P "allows multiple jobs in the running queue.  A job can preempt a running job's slots.
  However, EDF-P does not kill the running tasks of the preempted job but waits for their
  completion."  Every job is granted in deadline order with no cap: a freed slot goes to the
  earliest-deadline job that has a ready task — the no-kill preemption.  Like FIFO, its
  order depends only on which jobs are active, so it decides on arrivals, failures and
  capacity changes only.

EDF-N's earliest deadline over the whole queue (when no job has started) is kept in a heap
rather than found by a scan of every queued job: on the full SWIM day its queue holds
thousands of jobs and the scan was most of the run's time.  The heap gives the same job as
``min(jobs, key=deadline_key)``, because the snapshot lists jobs in arrival order
(``ClusterSnapshot.jobs``): a job first seen later arrived later, so its discovery number
breaks ties as the scan's position does.  An entry is used only while its job is in the
snapshot with the same key; the heap starts empty at every run (``bind``).
"""

from __future__ import annotations

import heapq
from operator import itemgetter

from utilon.core.decision import Decision, Grant
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView
from utilon.model.cluster import Cluster
from utilon.policies.base import Policy, register


def deadline_key(job: JobView) -> tuple[float, float]:
    return (job.goal, job.submit)


_id = itemgetter(0)  # JobView.id, C-level


@register
class EdfNonPreemptive(Policy):
    name = "edf-n"
    summary = "EDF, non-preemptive: one job runs at a time, chosen by earliest deadline (RDS §6)"
    paper = "rds"

    def __init__(self) -> None:
        self.bind(None)

    def bind(self, cluster: Cluster | None) -> None:
        # (goal, submit, discovery number, id) of every job seen queued, and each id's key
        self._heap: list[tuple[float, float, int, str]] = []
        self._keys: dict[str, tuple[float, float]] = {}
        self._seen = 0

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        jobs = snapshot.jobs
        started = [j for j in jobs if j.started is not None]
        if started:
            head = min(started, key=deadline_key)
        elif jobs:
            head = self._earliest(jobs)
        else:
            return Decision()
        return Decision(grants=(Grant(head.id),))

    def _earliest(self, jobs: tuple[JobView, ...]) -> JobView:
        """``min(jobs, key=deadline_key)``, from the heap (module docstring)."""
        keys, heap = self._keys, self._heap
        by_id = dict(zip(map(_id, jobs), jobs, strict=True))
        if not by_id.keys() <= keys.keys():
            for j in jobs:  # in arrival order, so discovery numbers follow it
                if j.id not in keys:
                    key = keys[j.id] = deadline_key(j)
                    self._seen += 1
                    heapq.heappush(heap, (*key, self._seen, j.id))
        while heap:
            goal, submit, _, job_id = heap[0]
            view = by_id.get(job_id)
            if view is not None:
                if deadline_key(view) == (goal, submit):
                    return view
                break  # the same id with another key: not this run's job (start afresh)
            heapq.heappop(heap)  # finished or gone: forget it
            del keys[job_id]
        self.bind(None)
        return min(jobs, key=deadline_key)


@register
class EdfPreemptive(Policy):
    name = "edf-p"
    summary = "EDF, preemptive without killing: freed slots go to the earliest deadline (RDS §6)"
    paper = "rds"
    triggers = frozenset({Trigger.ARRIVAL, Trigger.TASK_FAILED, Trigger.CAPACITY})
    order_only = True  # an arrival after every deadline so far just joins the end

    def order_key(self, job: JobView) -> tuple[float, float]:
        return deadline_key(job)

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        order = sorted(snapshot.jobs, key=deadline_key)  # = order_key
        return Decision(grants=tuple(Grant(j.id) for j in order))
