"""The per-job story: a bounded log of what happened to each job and why (Dask's ``story(key)``).

The scheduler core calls a few hooks (each marked ``# story:``, in ``core/transitions.py``
and ``core/scheduler.py``):
a stimulus handled (a job submitted, a stage or job finished, a task failed, a capacity
change, a cancel), a decision installed (the grants it gave, changed or took away, and the
policy's per-job reasons) and a task killed, lost or re-queued.  Every stimulus and decision
gets an id (``s3`` the third submission, ``d17`` the 17th decision, ``c2`` the second capacity
change, ``f5`` the fifth task failure, ``x1`` the first cancel); every entry gets a sequence
number and names, as ``cause``, the id of what brought it about, so "task killed" reads
"killed by decision d17".  Nothing here reads a clock or draws a number: the story of a run is
a pure function of the scenario, the seed and the policy, like the rest of its outputs.

Bounds (docs/explain.md): each job keeps its first ``HEAD`` and last ``TAIL`` entries and counts
the ones in between that it dropped; the stories held in all are at most ``MAX_ENTRIES``
entries: beyond, whole stories of finished jobs go, on-time ones first (oldest first), and the
run counts them; the cluster's own log (decisions and capacity changes) keeps its last
``CLUSTER`` entries.  So a day of 24,000 jobs writes about ``MAX_ENTRIES + CLUSTER`` lines
(more only while over ``MAX_ENTRIES / (HEAD + TAIL)`` jobs are active at once).

Costs are kept off the hot path: a task completion that does not end its stage records nothing,
launches are not recorded (a job's start is in ``jobs.csv``), a decision that leaves every
grant as it was costs one tuple comparison, and one that changes many grants' slots (Fair's)
notes them in C-level loops and logs each job's latest change later (``_diff``).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from itertools import compress, repeat
from operator import itemgetter, ne
from pathlib import Path
from typing import IO, Any, NamedTuple

from utilon.core.decision import Decision, Grant
from utilon.core.tolerance import missed

HEAD = 8  # a job's first entries, always kept: how it arrived and was first granted
TAIL = 24  # its most recent entries
MAX_ENTRIES = 100_000  # per-job entries held in all (then finished jobs' stories go)
CLUSTER = 2_000  # the cluster log's most recent entries (decisions, capacity changes)
NOTES = 1_000  # decisions whose grant changes may wait to be logged (see Story._diff)
FORMAT = 1  # story.jsonl's format version (its first line)


class Entry(NamedTuple):
    """One thing that happened.  ``cause`` is the id of the stimulus or decision behind it
    (``d17``, ``c2``, ``f5``, ``x1``, ``s3``) or ``""``; ``info`` holds the kind's own fields."""

    seq: int
    time: float
    job: str
    kind: str
    cause: str
    info: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"seq": self.seq, "t": round(self.time, 6), "job": self.job,
                             "kind": self.kind}
        if self.cause:
            d["cause"] = self.cause
        d.update(self.info)
        return d


class JobStory:
    """One job's entries: the first ``HEAD``, the last ``TAIL`` and how many in between went."""

    __slots__ = ("dropped", "head", "tail")

    def __init__(self) -> None:
        self.head: list[Entry] = []
        self.tail: deque[Entry] = deque(maxlen=TAIL)
        self.dropped = 0

    def __len__(self) -> int:
        return len(self.head) + len(self.tail)

    def entries(self) -> list[Entry]:
        return [*self.head, *self.tail]


_job = itemgetter(0)  # Grant.job


def _granted(grants: tuple[Grant, ...], g: Any,
             rank: dict[str, int] | None = None) -> tuple[tuple[str, Any], ...]:
    """A grant entry's fields: the job's rank in the decision's ``grants`` (from ``rank``
    if given) and its scope (``g``: its grant, or its several grants)."""
    single = isinstance(g[0], str)
    first = g if single else g[0]
    r = rank[first[0]] if rank is not None else grants.index(first) + 1
    scope = _scope(g) if single else (("grants", len(g)),)
    return (("rank", r), ("of", len(grants)), *scope)


def _scope(g: Grant) -> tuple[tuple[str, Any], ...]:
    """What a grant allows, as entry fields (only the parts that are set)."""
    out: list[tuple[str, Any]] = [("slots", g[1])]
    if g[2] is not None:
        out.append(("stage", g[2]))
    if g[3] is not None:
        out.append(("machines", sorted(g[3])))
    if g[4]:
        out.append(("kill_excess", True))
    if g[5]:
        out.append(("gang", True))
    return tuple(out)


class Story:
    """The run's stories: per job (bounded) and the cluster's (decisions, capacity)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.jobs: dict[str, JobStory] = {}
        self.cluster: deque[Entry] = deque(maxlen=CLUSTER)
        self.held = 0  # per-job entries held in all
        self.seq = 0
        self.dropped_entries = 0  # per-job entries dropped (the middle of long stories)
        self.dropped_jobs = 0  # whole stories of finished jobs dropped (MAX_ENTRIES)
        self.dropped_cluster = 0
        self._ids = {"s": 0, "d": 0, "c": 0, "f": 0, "x": 0}
        self._cause = ""  # the stimulus or decision being applied (its entries' cause)
        self._failure = ""  # the reason of the task failure being applied
        # each job's grants as the story last saw them: one Grant, or a tuple of several
        self._held: dict[str, Any] = {}
        self._last: tuple[Grant, ...] = ()
        self._reason: dict[str, str] = {}  # each job's last policy reason, to log changes
        # each job's latest grant change not logged yet, as an index into ``_notes``: the
        # decisions that made them, (time, id, grants, grants by job) (see _diff)
        self._pending: dict[str, int] = {}
        self._notes: list[tuple[float, str, tuple[Grant, ...], dict[str, Any]]] = []
        self._on_time: deque[str] = deque()  # finished jobs, oldest first: evicted first
        self._late: deque[str] = deque()

    # ------------------------------------------------------------------ recording
    def _id(self, prefix: str) -> str:
        n = self._ids[prefix] + 1
        self._ids[prefix] = n
        return f"{prefix}{n}"

    def _add(self, t: float, job: str, kind: str, cause: str,
             info: tuple[tuple[str, Any], ...] = ()) -> None:
        if job in self._pending:
            self._flush(job)
        self.seq += 1
        self._put(job, Entry(self.seq, t, job, kind, cause, info))

    def _put(self, job: str, e: Entry) -> None:
        js = self.jobs.get(job)
        if js is None:
            js = self.jobs[job] = JobStory()
        if len(js.head) < HEAD:
            js.head.append(e)
        else:
            if len(js.tail) == TAIL:
                js.dropped += 1
                self.dropped_entries += 1
                self.held -= 1
            js.tail.append(e)
        self.held += 1
        if self.held > MAX_ENTRIES:
            self._evict()

    def _evict(self) -> None:
        """Drop whole stories of finished jobs, on-time ones first, until under the bound
        (active jobs keep theirs: at most HEAD + TAIL entries each)."""
        while self.held > MAX_ENTRIES and (self._on_time or self._late):
            job = (self._on_time or self._late).popleft()
            js = self.jobs.pop(job, None)
            self._pending.pop(job, None)
            if js is not None:
                self.held -= len(js)
                self.dropped_jobs += 1

    def _note(self, t: float, kind: str, cause: str, info: tuple[tuple[str, Any], ...]) -> None:
        self.seq += 1
        if len(self.cluster) == CLUSTER:
            self.dropped_cluster += 1
        self.cluster.append(Entry(self.seq, t, "", kind, cause, info))

    def submitted(self, t: float, job: Any) -> None:
        """``job``: the ``model.job.Job``."""
        if not self.enabled:
            return
        goal = job.utility.goal
        self._add(t, job.id, "submitted", self._id("s"), (
            ("goal", None if goal is None else round(goal, 6)),
            ("tasks", sum(len(st.tasks) for st in job.stages))))

    def stage_done(self, t: float, job: str, stage: str) -> None:
        if self.enabled:
            self._add(t, job, "stage_done", "", (("stage", stage),))

    def finished(self, t: float, job: Any) -> None:
        """``job``: the core's ``JobRT``, just finished."""
        if not self.enabled:
            return
        goal = job.job.utility.goal
        late = missed(t, goal)  # the one rule (core/tolerance.py), as jobs.csv's
        info: tuple[tuple[str, Any], ...] = ()
        if goal is not None:
            info = (("goal", round(goal, 6)), ("late", late))
        self._add(t, job.id, "finished", "", info)
        self._gone(job.id)
        (self._late if late else self._on_time).append(job.id)

    def cancelled(self, t: float, job: str, reason: str) -> None:
        if not self.enabled:
            return
        self._cause = self._id("x")
        self._add(t, job, "cancelled", self._cause, (("reason", reason),))
        self._gone(job)
        self._late.append(job)

    def _gone(self, job: str) -> None:
        """A job that left the active set: its grants end without being taken away."""
        self._held.pop(job, None)
        self._reason.pop(job, None)

    def failed(self, t: float, ref: tuple[str, int, int], reason: str) -> None:
        """A task failed: the stimulus; its re-queue (``requeued``) is the job's entry."""
        if self.enabled:
            self._cause = self._id("f")
            self._failure = reason

    def capacity(self, t: float, machine: str, action: str, factor: float) -> None:
        if not self.enabled:
            return
        self._cause = self._id("c")
        self._note(t, "capacity", self._cause,
                   (("machine", machine), ("action", action), ("factor", factor)))

    def requeued(self, t: float, ref: tuple[str, int, int], stage: str, machine: str,
                 outcome: str, reason: str) -> None:
        """A running task stopped and went back to ready: ``outcome`` killed, lost or failed;
        caused by the stimulus or decision being applied."""
        if self.enabled:
            if outcome == "failed":
                reason = self._failure
            elif outcome == "lost":
                reason = "its machine left"
            self._add(t, ref[0], outcome, self._cause,
                      (("stage", stage), ("task", ref[2]), ("machine", machine),
                       ("reason", reason)))

    def decided(self, t: float, number: int, decision: Decision,
                active: Mapping[str, object]) -> None:
        """Decision ``number`` is about to be installed: log the grants it gave, changed or
        took away (from jobs still active) and the policy's reasons that changed."""
        if not self.enabled:
            return
        did = f"d{number}"
        self._cause = did
        grants = decision.grants
        changed = 0
        if grants != self._last:
            changed = self._diff(t, did, grants, active)
            self._last = grants
        for item in decision.infeasible:
            if self._reason.get(item.job, "") != item.reason and item.job in active:
                self._reason[item.job] = item.reason
                self._add(t, item.job, "reason", did, (("reason", item.reason),))
                changed += 1
        self._note(t, "decision", did, (("grants", len(grants)), ("changes", changed)))

    def extended(self, t: float, number: int, decision: Decision, new: int) -> None:
        """Decision ``number`` is the installed order with ``new`` whole-job grants appended
        (an order-only policy's arrivals: ``GrantTable.extend_order``)."""
        if not self.enabled:
            return
        did = f"d{number}"
        self._cause = did
        total = len(decision.grants)
        first = total - new
        for i, g in enumerate(decision.grants[first:]):
            self._held[g[0]] = g
            self._add(t, g[0], "granted", did, (("rank", first + i + 1), ("of", total),
                                                 *_scope(g)))
        self._last = ()  # (the next full decision is diffed against the held grants)
        self._note(t, "decision", did, (("grants", total), ("changes", new)))

    def _diff(self, t: float, did: str, grants: tuple[Grant, ...],
              active: Mapping[str, object]) -> int:
        """Log each job whose grants differ from the ones held (O(grants) per decision, but
        in C-level loops: the story must cost < 5% of the simulator's time, issue 48)."""
        new: dict[str, Any] = dict(zip(map(_job, grants), grants, strict=True))
        multi = len(new) != len(grants)
        if multi:  # a job with several grants: all of them, in order
            several: dict[str, list[Grant]] = {}
            for g in grants:
                several.setdefault(g[0], []).append(g)
            new = {j: (gs[0] if len(gs) == 1 else tuple(gs)) for j, gs in several.items()}
        old = self._held
        self._held = new
        # the jobs whose grants differ, in grant order; C-level iteration throughout
        changed = list(compress(new, map(ne, new.values(), map(old.get, new))))
        gone = sorted(j for j in old.keys() - new.keys() if j in active)
        if not changed and not gone:
            return 0
        # A changed grant is noted, not logged: Fair's shares move for every job at every
        # decision, which would cost a record each (measured: +24% CPU) and fill the
        # stories.  The job's next entry (or a read) logs the latest change (``_flush``).
        # (One shared record per decision, not one per job: a tuple per job per decision
        # measured +10% CPU under Fair, most of it garbage collection.)
        moved = [j for j in changed if j in old]
        if moved:
            if len(self._notes) >= NOTES:
                self._flush_all()
            self._pending.update(zip(moved, repeat(len(self._notes))))
            self._notes.append((t, did, grants, new))
        fresh = [j for j in changed if j not in old]
        rank = None
        if len(fresh) > 16:  # (else a C-level search each; reversed: a job's first grant)
            rank = dict(zip(map(_job, reversed(grants)), range(len(grants), 0, -1),
                            strict=True))
        for j in fresh:
            self._add(t, j, "granted", did, _granted(grants, new[j], rank))
        for j in gone:
            self._add(t, j, "revoked", did)
        return len(changed) + len(gone)

    def _flush(self, job: str) -> None:
        """Log the job's latest noted grant change (``_diff``), with the decision and the
        time it was made."""
        t, did, grants, held = self._notes[self._pending.pop(job)]
        self.seq += 1
        self._put(job, Entry(self.seq, t, job, "grant_changed", did,
                             _granted(grants, held[job])))

    def _flush_all(self) -> None:
        for job in list(self._pending):  # (flushing may evict: a copy of the keys)
            if job in self._pending:
                self._flush(job)
        self._notes = []

    # ------------------------------------------------------------------ reading
    def of(self, job: str) -> list[dict[str, Any]]:
        """The job's entries held now, as dicts (a ``dropped`` marker where the middle went)."""
        if job in self._pending:
            self._flush(job)
        js = self.jobs.get(job)
        if js is None:
            return []
        out = [e.to_dict() for e in js.head]
        if js.dropped:
            out.append({"kind": "dropped", "job": job, "n": js.dropped})
        out += [e.to_dict() for e in js.tail]
        return out

    def header(self) -> dict[str, Any]:
        return {"story": FORMAT, "enabled": self.enabled,
                "bounds": {"head": HEAD, "tail": TAIL, "max_entries": MAX_ENTRIES,
                           "cluster": CLUSTER},
                "entries": self.held, "jobs": len(self.jobs),
                "dropped": {"entries": self.dropped_entries, "jobs": self.dropped_jobs,
                            "cluster": self.dropped_cluster}}

    def write(self, path: Path) -> None:
        """``story.jsonl``: a header line, the cluster log, then each job's entries in
        arrival order (docs/explain.md)."""
        self._flush_all()  # (before the header: flushing may evict)
        with path.open("w", encoding="utf-8") as f:
            _line(f, self.header())
            for e in self.cluster:
                _line(f, e.to_dict())
            for job in self.jobs:
                for d in self.of(job):
                    _line(f, d)


def _line(f: IO[str], d: dict[str, Any]) -> None:
    f.write(json.dumps(d, separators=(",", ":"), allow_nan=False) + "\n")
