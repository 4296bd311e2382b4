"""Triage: utilon's own policy, the default of every command.

EDF is optimal while every deadline can be met and collapses under overload: it serves the
job whose goal is earliest, which under overload is a job that is already late, and every job
behind it slips in turn (the domino effect).  Dropping late jobs fixes the misses and wrecks
lateness: a job that is abandoned finishes arbitrarily late (the penalty of such a heuristic was
4-60x Fair's on SWIM, issue 45).  Triage keeps EDF where it is right and changes only which
jobs wait when not everyone can be on time, with a bound on how long a late job may wait.

At every decision it predicts, for each active job, the time it needs and when it would finish
in a given order, and sorts the jobs into three tiers:

1. **On time** (and late jobs past their bound): in EDF order.  They are chosen by Moore and
   Hodgson's rule (the schedule that minimises the number of late jobs on one machine): walk the
   jobs in goal order, accumulating their work; when the job at hand is predicted late, take out
   the job of the prefix whose removal costs least -- first a job that is late anyway and still
   within its bound (the one whose penalty grows slowest per unit of capacity it frees), else the
   on-time job with the least utility at stake per unit of work.
2. **Deferred**: the jobs taken out.  They run on whatever the first tier leaves (grants are
   work-conserving), in Smith's order for weighted lateness: least remaining work per unit of
   penalty rate (``weight / window``) first, which minimises the penalty they add.
3. **No goal** (constant utility): last, in arrival order; nothing is lost by their waiting.

**The bound.**  A late job is deferred only while its predicted relative lateness
``(finish - goal) / (goal - submit)`` stays within ``bound`` (default 3: a late job is not made
to wait once it would finish more than three of its own windows after its goal; 1 until the
fourth held-out set, docs/league.md: pinning a late 500-task job ahead of on-time 2-s jobs at
one window cost those jobs more windows of lateness than it saved).  Past it the job is
pinned in tier 1, ahead of on-time jobs by its goal, as EDF would serve it.  So a job is never
abandoned: once pinned it is served first, and it finishes at most ``bound`` windows late plus
the time the pinned jobs ahead of it need.

**The prediction** uses only what a real scheduler has: each stage's expected task duration
(an estimate, learned online under ``estimates: realistic``), its task counts, how long its
running tasks have run, and the cluster's capacity now.  A job's *work* is its slot-seconds
left (a running task is credited for the time it has run, keeping at least a tenth of its
expected time left: an overdue task is not done); its *path* is the time it needs alone on the
cluster (its stages one after another, each in waves of as many tasks as the cluster holds).
In an order, the job at position k finishes at ``now + max(W_k / C, path_k)`` with ``W_k`` the
work of the jobs up to and including it and ``C`` the cluster's slot capacity: a fluid bound.

**Forecast.**  Jobs that arrive later with earlier goals will take capacity before a job's
goal: the prediction adds, for a goal x seconds away, the work that arrived over the last
``history`` seconds from jobs whose window was at most x, at that rate, for x seconds.

**Reserve.**  A no-kill scheduler cannot start a job at once while every slot runs a long
task.  Jobs whose whole window is shorter than the mean expected duration of the running
tasks cannot wait for one to end; twice the slots they held on average (Little's law over
``history``, doubled for bursts) is kept from jobs with time to spare.  Jobs that cannot wait
themselves (laxity under that mean duration, their unchecked stages planned at estimate /
doubt: ``wary``) are granted without a cap if the reserve is for them -- their whole window
is under that mean duration (``reserve_for: short``, the default); a longer job that cannot
wait grows within the budget like the others, since its long tasks in the kept slots would
block the short jobs they are kept for (``reserve_for: all``: every job that cannot wait).
How the rest is shared (``reserve``):
``adaptive`` (the default) is *strict* while the jobs want more slots than the cluster has --
the first job with time to spare grows within what is left and the others keep what they
run, so what it does not take stays free for short arrivals -- and *exact* while the cluster
could serve everyone: only the reserve is held back.  ``strict`` is strict always (the default
until the third held-out set; on light hours it delays jobs with time to spare for short jobs
that do not come), ``off`` grants whole jobs.  docs/league.md has the experiments.

**Doubt.**  Under online estimates a stage none of whose tasks has finished is planned at
its estimate times the estimator's measured error (the ``confidence`` quantile of
``|ln(measured / prior)|`` over the stages seen so far; a factor of two until 20 are
measured): the policy calls a job late, and defers anyone for it, only if it is late even if
its estimate was that much too high.  With exact estimates there is no doubt.

**Utilities.**  A job's stake is what missing loses: its utility's range (``bounds``: for a
deadline step its value, for CORA's sigmoid ``p``).  A job whose utility has no goal has no
deadline to miss.  The policy reports every deferred job as ``infeasible`` with why, and
clears the reason when it is no longer deferred: the live view and the dashboard show it.

**Sizing.**  Work is counted in the cluster's slot resource.  With ``sizing: dominant`` a
task counts as its dominant share of the cluster instead (the largest of its demand over the
cluster's total, per resource, in slots): on machines where disk bandwidth, not cores, limits
how many tasks run, a job is planned as slow as it is.  A named variant, not the default: on
the multi-resource example it took 2.2 misses to 2.0, too little evidence to change the
default (docs/league.md, "What the first held-out set taught").

What the papers teach and where it lives: utilities and their slopes (CORA, RRH) in the stake
and penalty rate; risk of missing under uncertain remaining work (RDS) in the doubt and the
forecast; slots as a resource to reserve (RAS) in the reserve, and resource-aware sizing
(RAS) in ``sizing: dominant``.  Placement preferences (alsched) and capacity forecasts (RDS)
are not used: see docs/policies.md.

**Cost.**  Every decision looks at every active job, deferred ones included.  A job's row is
kept while its view is the same object (a running job's plan, while the clock moves its
outlook), the orders are numpy sorts of a table of the rows, and what Moore-Hodgson needs
element by element is computed for all jobs at once, with the same floating-point operations
in the same order: the same decisions as the plain loops (docs/policies.md, "What a decision
costs"; ``validate`` checks the cache against a fresh computation).
"""

from __future__ import annotations

import heapq
import math
from bisect import insort
from collections.abc import Callable
from functools import reduce
from itertools import compress
from operator import add, attrgetter, getitem, itemgetter
from operator import not_ as _not
from typing import NamedTuple, cast

import numpy as np

from utilon.core.decision import Decision, Grant, Infeasible
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView
from utilon.policies.base import EVENT_TRIGGERS, Policy, register

# Measured estimate errors needed before their quantile replaces the factor-of-two default.
_MIN_ERRORS = 20
# An overdue running task keeps this share of its expected time left (it is not done).
_OVERDUE_LEFT = 0.1


class Outlook(NamedTuple):
    """What the policy predicts for one job."""

    work: float  # slot-seconds left
    path: float  # seconds it needs with the whole cluster to itself
    goal: float
    window: float  # goal - submit (at least 1 s)
    stake: float  # utility lost by missing the goal
    rate: float  # penalty per second late: weight / window
    held: float  # slots its running tasks hold
    running: int  # its running tasks
    busy_time: float  # sum of its running tasks' expected durations
    size: float  # slot size of its next task (its first stage with tasks left)
    task: float  # expected duration of its next task
    ready: float  # slots its ready tasks would take now


class Plan(NamedTuple):
    """A job's outlook but for the clock, fixed while its view is: what each stage adds to
    the work and the path (``_at``), and the fields of the outlook that do not move."""

    stages: tuple[tuple[float, ...], ...]
    held: float
    running: int
    busy_time: float
    size: float
    task: float
    ready: float
    goal: float
    window: float
    stake: float
    rate: float


def plan(job: JobView, capacity: float, doubt: float = 1.0,
         scale: tuple[tuple[str, float], ...] = ()) -> Plan:
    """``outlook`` up to the terms that depend on the clock (those of running tasks).  A
    stage none of whose tasks has finished is planned at ``doubt`` x its estimate (an
    estimate not yet checked against a measurement: ``Triage._doubt``).  With ``scale``
    (resource, slots per unit of it cluster-wide) a task's size is its dominant share of the
    cluster in slots: a task that needs a fifth of the cluster's disk bandwidth counts as a
    fifth of its slots, however few cores it asks for."""
    stages: list[tuple[float, ...]] = []
    held = busy_time = ready = 0.0
    running = 0
    first = task = 0.0
    for s in job.stages:
        left = s.total - s.done
        if left <= 0:
            continue
        e = s.expected_duration if s.done else s.expected_duration * doubt
        size = s.slot_size
        if scale:
            demand = s.demand
            for name, per in scale:
                size = max(size, demand.get(name) * per)
        if not first and (s.ready or s.running):
            first, task = size, e
        ready += s.ready * size
        r = s.running
        unstarted = left - r
        width = max(1, int(capacity / size + 1e-9))
        free = width - r  # the unstarted tasks run in waves of what the cluster holds
        if r:
            held += r * size
            running += r
            busy_time += r * e
            # how the path continues after the running tasks' mean time left (``_at``)
            if unstarted <= free:
                way, then = 0, e if unstarted else 0.0
            elif free > 0:  # a wave starts now, the rest follow in waves of the width
                way, then = 1, math.ceil((unstarted - free) / width) * e
            else:  # every slot it could use is running: waves after the running tasks
                way, then = 2, math.ceil(unstarted / width) * e
            stages.append((way, size, unstarted * e, r * e, _OVERDUE_LEFT * r * e, r,
                           s.started_sum, e, then))
        else:  # nothing running: its terms do not move (head = 0)
            if unstarted <= free:
                step = max(0.0, e if unstarted else 0.0)
            elif free > 0:
                step = max(0.0, e) + math.ceil((unstarted - free) / width) * e
            else:
                step = 0.0 + math.ceil(unstarted / width) * e
            stages.append((size * unstarted * e, step))
    goal = job.utility.goal
    if goal is None:
        goal = window = math.inf
        rate = 0.0
    else:
        window = max(goal - job.submit, 1.0)
        rate = job.weight / window
    lo, hi = job.utility.bounds
    return Plan(tuple(stages), held, running, busy_time, first or job.slot_size, task, ready,
                goal, window, max(hi - lo, 1e-9), rate)


def _at(p: Plan, now: float) -> Outlook | None:
    """The outlook of a plan at ``now``, or ``None`` when the job has no task left: the work
    and the path summed stage by stage, a running stage's tasks credited for the time they
    have run (keeping at least a tenth of their expected time left: an overdue task is not
    done), its path their mean time left, then its unstarted tasks' waves."""
    work = path = 0.0
    for st in p.stages:
        if len(st) == 2:
            work += st[0]
            path += st[1]
            continue
        way, size, unstarted_e, r_e, overdue, r, started_sum, e, then = st
        run_left = max(r_e - (r * now - started_sum), overdue)
        work += size * (unstarted_e + run_left)
        head = run_left / r
        if way == 0:
            path += max(head, then)
        elif way == 1:
            path += max(head, e) + then
        else:
            path += head + then
    if p.running == 0 and work == 0.0:
        return None
    return Outlook(work, path, p.goal, p.window, p.stake, p.rate, p.held, p.running,
                   p.busy_time, p.size, p.task, p.ready)


def outlook(job: JobView, now: float, capacity: float, doubt: float = 1.0,
            scale: tuple[tuple[str, float], ...] = ()) -> Outlook | None:
    """The job's outlook at ``now``, or ``None`` when it has no task left (``plan``, then
    ``_at``)."""
    return _at(plan(job, capacity, doubt, scale), now)


def dominant_scale(snapshot: ClusterSnapshot) -> tuple[tuple[str, float], ...]:
    """Slots per unit of each other resource, cluster-wide (``outlook``'s ``scale``); empty
    when the slot resource is the cluster's only one."""
    names = snapshot.resource_names
    if len(names) < 2:
        return ()
    totals = snapshot.capacity_matrix(names).sum(axis=0)
    slots = snapshot.total_slots
    return tuple((r, slots / float(t)) for r, t in zip(names, totals, strict=True)
                 if r != snapshot.slot_resource and t > 0)


class Row(NamedTuple):
    """One job in a decision: its sort key (goal, submit, first sight), its outlook and the
    grants it may get, built once per change of the job's view.  What the passes over every
    job read is also in ``Triage._table``, one line per first sight, for numpy."""

    goal: float
    submit: float
    seq: int  # first sight: unique, so rows never compare past it
    outlook: Outlook
    job: JobView
    whole: Grant  # Grant(job): as many slots as it can use
    none: Grant  # Grant(job, 0): nothing new
    keep: Grant  # Grant(job, running): what it runs, no more
    id: str
    wants: float  # slots it holds and its ready tasks would take now


# the columns of ``Triage._table``
GOAL, SUBMIT, WORK, PATH, WINDOW, LATE_COST, STAKE_COST, SMITH, _COLUMNS = range(9)

_seq = itemgetter(2)
_grant = itemgetter(5)
_id = itemgetter(8)
_wants = itemgetter(9)
_WHOLE, _KEEP = 5, 7  # Row fields, picked by index for many rows at once
_field = cast(Callable[[Row, int], Grant], getitem)
_window = itemgetter(2)  # of an arrival (submit, work, window)
_job = attrgetter("job")


@register
class Triage(Policy):
    name = "triage"
    summary = ("utilon's own: EDF while goals can be met; when not, Moore-Hodgson defers the "
               "cheapest jobs, late jobs never beyond a bound (the default policy)")
    paper = "ours (issue 45): EDF, Moore & Hodgson 1968, Smith 1956; utilities after CORA/RRH"
    # every event but a stage's end: deciding there too gave the same misses on the tuning
    # workloads tried (docs/policies.md), at the cost of more decisions
    triggers = EVENT_TRIGGERS - {Trigger.STAGE_FINISHED}

    def __init__(self, bound: float = 3.0, forecast: bool = True,
                 reserve: bool | str = "adaptive",
                 history: float = 600.0, confidence: float = 0.8,
                 sizing: str = "slots", wary: bool = True, reserve_for: str = "short") -> None:
        self.wary = wary
        if reserve_for not in ("short", "all"):
            raise ValueError("reserve_for must be 'short' or 'all'")
        self.reserve_all = reserve_for == "all"
        if not (math.isfinite(bound) and bound >= 0):
            raise ValueError("bound must be a finite number >= 0")
        if not (math.isfinite(history) and history > 0):
            raise ValueError("history must be a finite number of seconds > 0")
        if not 0.0 <= confidence < 1.0:
            raise ValueError("confidence must be within [0, 1)")
        if sizing not in ("slots", "dominant"):
            raise ValueError("sizing must be 'slots' or 'dominant'")
        modes = {True: "adaptive", False: "off", "adaptive": "adaptive", "strict": "strict",
                 "off": "off"}
        if reserve not in modes:
            raise ValueError("reserve must be 'adaptive', 'strict' or 'off' (or true / false)")
        self.reserve_mode = modes[reserve]
        reserve = self.reserve_mode != "off"
        self.sizing = sizing
        self.bound = bound
        self.confidence = confidence
        self.forecast = forecast
        self.reserve = reserve
        self.history = history
        self.bind(None)

    def bind(self, cluster: object) -> None:
        self._seq: dict[str, int] = {}  # every job seen, by first sight (arrival order)
        self._arrivals: list[tuple[float, float, float]] = []  # (submit, work, window)
        self._deferred: set[str] = set()
        self._busy = (0.0, 0.0)
        self._running: set[str] = set()
        self._reasons: set[str] = set()  # the jobs last told they are deferred
        self._priors: dict[tuple[str, int], float] = {}
        self._errors: list[float] = []  # |ln(measured / prior)|, sorted
        self._sorted: tuple[np.ndarray, np.ndarray] = (np.empty(0), np.zeros(1))
        self._sorted_key: tuple[int, object] = (-1, None)
        self._doubt_now = 1.0
        # by first sight: each job's last row, and what the passes over all jobs read of it
        # (``Row``, and heap keys, Smith's key: ``_table_line``)
        self._by_seq: list[Row] = []
        self._table = np.empty((0, _COLUMNS))
        self._lines: list[int] = []  # rows built since the table was last written
        self._values: list[tuple[float, ...]] = []
        self.forget()

    def forget(self) -> None:
        """Drop what carries over between decisions only to make them cheaper: the cached
        rows and the last goal and Smith orders.  The next decision is the same without them
        (a test holds a run to that), only slower."""
        # id(view) -> row of a job with nothing running; the row holds its view, so the id
        # cannot be reused by another object while the entry exists
        self._cache: dict[int, Row] = {}
        self._cache_key: tuple[object, ...] | None = None  # (capacity, doubt, scale)
        # id(view) -> (view, plan) of a running job: its outlook at the next decision
        self._plans: dict[int, tuple[JobView, Plan]] = {}

    def validate(self, snapshot: ClusterSnapshot) -> None:
        """Check what the last ``decide(snapshot)`` cached against what it derives from
        (for tests): every cached row is that of a job of ``snapshot`` with nothing
        running, its outlook the one computed afresh with this decision's capacity, doubt
        and scale, and its line of the table its own; every kept plan that of a running
        job's view, as computed afresh.  ``AssertionError`` if not."""
        capacity = max(snapshot.total_slots, 1e-9)
        scale = dominant_scale(snapshot) if self.sizing == "dominant" else ()
        views = {id(j): j for j in snapshot.jobs}
        for key, row in self._cache.items():
            job = views.get(key)
            assert job is not None and row.job is job, f"cached row of a gone view: {row.id}"
            o = outlook(job, snapshot.now, capacity, self._doubt_now, scale)
            assert o == row.outlook and not o.running, f"stale row: {row.id}"
            assert self._by_seq[row.seq] is row, f"not the last row of {row.id}"
            line = self._table[row.seq]
            assert (line[GOAL], line[WORK], line[PATH]) == (o.goal, o.work, o.path), row.id
        for key, (job, p) in self._plans.items():
            assert views.get(key) is job, f"plan of a gone view: {job.id}"
            assert p == plan(job, capacity, self._doubt_now, scale), f"stale plan: {job.id}"

    def _learn(self, job: JobView) -> None:
        """Measure the estimator: a stage's estimate before any of its tasks finished (its
        prior) against the estimate after the first did (a measurement)."""
        priors = self._priors
        for s in job.stages:
            key = (job.id, s.index)
            if s.done == 0:
                priors.setdefault(key, s.expected_duration)
            else:
                prior = priors.pop(key, None)
                if prior is not None and prior > 0 and s.expected_duration > 0:
                    insort(self._errors, abs(math.log(s.expected_duration / prior)))

    def _doubt(self) -> float:
        """How far down an unchecked estimate may be off: the ``confidence`` quantile of the
        estimator's measured errors (a factor of two until ``_MIN_ERRORS`` are measured, the
        3Sigma threshold for a bad prediction).  Planning unchecked stages that much shorter
        makes the policy call a job late, and defer anyone for it, only when it is late even
        if its estimate was too high: with wrong estimates a deferral is a bet that can lose."""
        errors = self._errors
        if len(errors) < _MIN_ERRORS:
            return 0.5
        q = errors[min(len(errors) - 1, int(self.confidence * len(errors)))]
        return math.exp(-q)

    def _interference(self, now: float) -> tuple[np.ndarray, np.ndarray, float]:
        """Work that arrived in the last ``history`` seconds, sorted by window, as prefix
        sums, and the span it arrived over: future jobs with a window up to x bring about
        rate(x) * x of work before a goal x seconds away."""
        arr = self._arrivals
        cut = now - self.history
        if arr and arr[0][0] < cut:
            self._arrivals = arr = [a for a in arr if a[0] >= cut]
        key = (len(arr), arr[0] if arr else None)
        if key != self._sorted_key:  # arrivals came or went: sort again
            by_window = sorted(arr, key=_window)
            sums = [0.0]
            for a in by_window:
                sums.append(sums[-1] + a[1])
            self._sorted = (np.array([a[2] for a in by_window], dtype=float), np.array(sums))
            self._sorted_key = key
        # over the whole window even before it has passed: early on that underestimates the
        # rate (a few jobs at the start are not a flood), it never inflates it
        return self._sorted[0], self._sorted[1], self.history

    def _row(self, job: JobView, o: Outlook) -> Row:
        jid = job[0]
        seq = self._seq.get(jid)
        if seq is None:
            seq = self._seq[jid] = len(self._seq)
            if self.forecast or self.reserve:
                self._arrivals.append((job[2], o[0], o[3]))
            self._by_seq.append(None)  # type: ignore[arg-type]  # set below
        last = self._by_seq[seq]
        whole, none = (Grant(jid), Grant(jid, 0)) if last is None else (last[5], last[6])
        row = self._by_seq[seq] = Row(o[2], job[2], seq, o, job, whole, none,
                                      Grant(jid, o[7]) if o[7] else none, jid, o[6] + o[11])
        per_work = max(o[0], 1e-12)
        self._lines.append(seq)  # written into the table at once, by ``_rows``
        self._values.append((o[2], job[2], o[0], o[1], o[3],
                             o[5] / per_work,  # removing it while late: penalty rate, per
                             o[4] / per_work,  # ... while on time: utility at stake, per
                             o[0] / max(o[5], 1e-300)))  # Smith: work per penalty rate
        return row

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        now = snapshot.now
        capacity = max(snapshot.total_slots, 1e-9)
        online = snapshot.online_estimates
        doubt = self._doubt() if online else 1.0
        self._doubt_now = doubt
        scale = dominant_scale(snapshot) if self.sizing == "dominant" else ()
        live = self._rows(snapshot.jobs, now, (capacity, doubt, scale), online)
        wanted = reduce(add, map(_wants, live), 0.0)  # in the jobs' order, as a loop adds
        seqs = np.fromiter(map(_seq, live), dtype=np.intp, count=len(live))
        lines = self._table[seqs]  # in the jobs' (arrival) order
        # EDF order: by goal, then submission, then first sight (unique); the jobs with no
        # goal (an infinite one) sort after all others, and keep their arrival order
        has_goal = lines[:, GOAL] < math.inf
        edf = np.lexsort((seqs, lines[:, SUBMIT], lines[:, GOAL]))[:int(has_goal.sum())]
        untimed = seqs[~has_goal]
        timed, lines = seqs[edf], lines[edf]
        removed = self._moore_hodgson(now, lines, capacity)
        if removed:
            out = np.zeros(len(timed), dtype=bool)
            out[removed] = True
            kept, deferred, lines = timed[~out], timed[out], lines[out]
            # Smith's order for weighted lateness: least work per unit of penalty rate
            deferred = deferred[np.lexsort((deferred, lines[:, GOAL], lines[:, SMITH]))]
        else:
            kept, deferred = timed, timed[:0]
        ordered_seqs = np.concatenate((kept, deferred, untimed))
        ordered = list(map(self._by_seq.__getitem__, ordered_seqs.tolist()))
        if self.reserve:
            grants = self._reserving(now, ordered, ordered_seqs, capacity, wanted)
        else:
            grants = list(map(_grant, ordered))
        return Decision(grants=tuple(grants), infeasible=self._explain(
            ordered[len(kept):len(kept) + len(deferred)], live))

    def _rows(self, jobs: tuple[JobView, ...], now: float, key: tuple[float, float, tuple[
              tuple[str, float], ...]], online: bool) -> list[Row]:
        """The rows of the jobs with work left, in the snapshot's order.  A job with nothing
        running keeps its row while its view is the same object (the core rebuilds a view
        only when its job changed) and ``key`` (capacity, doubt, scale) holds: most of a long
        queue costs a lookup.  A running job's outlook moves with the clock: rebuilt from its
        plan, itself kept while its view is the same."""
        cache = self._cache
        plans = self._plans
        if key != self._cache_key:
            cache.clear()
            plans.clear()
            self._cache_key = key
        rows: list[Row | None] = list(map(cache.get, map(id, jobs)))
        missing = list(compress(range(len(rows)), map(_not, rows)))
        current = len(rows) - len(missing)  # entries of the cache that are current views
        capacity, doubt, scale = key
        busy = busy_time = 0.0
        self._running = running = set()
        self._plans = kept = {}
        for i in missing:  # in the jobs' order: first sights and sums as before the cache
            j = jobs[i]
            held = plans.get(id(j))  # held with its view, so that the id stays the view's
            if held is None:
                p = plan(j, capacity, doubt, scale)
                if online:  # (learning from a view seen before tells nothing new)
                    self._learn(j)
            else:
                p = held[1]
            o = _at(p, now)
            if o is None:
                continue
            row = rows[i] = self._row(j, o)
            if o[7]:
                running.add(row[8])
                busy += o[7]
                busy_time += o[8]
                kept[id(j)] = (j, p)
            else:
                cache[id(j)] = row
                current += 1
        if len(cache) > current:  # views replaced or of jobs gone: forget them
            for gone in cache.keys() - set(map(id, jobs)):
                del cache[gone]
        self._busy = (busy, busy_time)
        if self._lines:  # the rebuilt rows' lines of the table
            table = self._table
            if len(self._by_seq) > len(table):
                self._table = table = np.concatenate(
                    (table, np.empty((max(64, len(self._by_seq)), _COLUMNS))))
            table[self._lines] = self._values
            self._lines, self._values = [], []
        return list(filter(None, rows))

    def _moore_hodgson(self, now: float, rows: np.ndarray, capacity: float) -> list[int]:
        """Moore-Hodgson over the goal order (``rows``: the table's lines in that order):
        the positions of the jobs taken out, in the order taken.  The heap holds the
        removable jobs of the prefix, cheapest to remove first: late-within-bound jobs (tier
        0 of the key) before on-time ones, each by its own cost per unit of work freed (the
        position breaks ties: keys are unique).  What does not depend on the order taken is
        computed for all jobs at once, element by element as the loop did (the same
        floating-point operations in the same order: the same decisions)."""
        n = len(rows)
        if n == 0:
            return []
        eps = 1e-9
        goal = rows[:, GOAL]
        work = rows[:, WORK]
        alone = now + rows[:, PATH]
        late = alone > goal + eps  # late whatever the order: removing others cannot help
        ahead = goal - now
        if self.forecast:
            windows, sums, span = self._interference(now)
            # jobs arriving later with a window up to ``ahead`` take their share first
            limit = np.where(ahead > 0, ahead + eps - sums[np.searchsorted(
                windows, ahead, side="right")] / span * ahead / capacity, ahead + eps)
        else:
            limit = ahead + eps  # on time while load / C is under
        limit[late] = math.inf  # a late job is not checked
        # While nothing is kept the load is exactly 0 and the heap empty: a job on time
        # alone whose own work is over its limit (0 + w = w) is taken out at once, leaving
        # the load at exactly 0 (w - w).  The leading run of those, found for all at once.
        over = ~late & (work / capacity > limit) & np.isfinite(work)
        start = n if over.all() else int(over.argmin())
        removed = list(range(start))
        if start == n:
            return removed
        late = late[start:]
        # the heap's keys: a late job within its bound may be deferred, cheapest first by
        # the rate its penalty grows; an on-time job by the utility it puts at stake
        entries: list[tuple[int, float, int] | None] = list(zip(
            (~late).astype(np.intp).tolist(),
            np.where(late, rows[start:, LATE_COST], rows[start:, STAKE_COST]).tolist(),
            range(start, n), strict=True))
        past = late & ~((alone[start:] - goal[start:]) / rows[start:, WINDOW] <= self.bound)
        for k in np.flatnonzero(past).tolist():
            entries[k] = None  # past its bound: never deferred
        works = work.tolist()
        push, pop = heapq.heappush, heapq.heappop
        heap: list[tuple[int, float, int]] = []
        load = 0.0
        for w, entry, lim in zip(works[start:], entries, limit[start:].tolist(), strict=True):
            load += w
            if entry is not None:
                push(heap, entry)
            if load / capacity > lim:  # predicted late: take out the cheapest of the prefix
                k = entry[2]  # type: ignore[index]  # a job with a limit has an entry
                while True:
                    r = pop(heap)[2]
                    removed.append(r)
                    load -= works[r]
                    if r == k or not heap or not load / capacity > lim:
                        break
        return removed

    def _explain(self, deferred: list[Row], live: list[Row]) -> tuple[Infeasible, ...]:
        """Why each job is deferred, said when it is deferred, and an empty reason when an
        active job no longer is (the core keeps the last reason a policy gave)."""
        reasons = self._reasons
        if not deferred and not reasons:
            return ()
        now_deferred = set(map(_id, deferred))
        newly = now_deferred - reasons
        why = ("deferred: predicted to miss its goal whatever the order (it runs on what "
               f"on-time jobs leave; late at most {self.bound:g} x its goal window before it "
               "is served first)")
        items = [Infeasible(jid, why) for jid in newly]
        undeferred = reasons - now_deferred
        if undeferred:  # those still active (with work left) hear that they no longer are
            active = set(map(_id, live))
            items += [Infeasible(jid, "") for jid in undeferred if jid in active]
        self._reasons = now_deferred
        self._deferred |= newly
        items.sort(key=_job)  # a set's order is not reproducible across runs
        return tuple(items)

    def _reserving(self, now: float, ordered: list[Row], seqs: np.ndarray, capacity: float,
                   wanted: float) -> list[Grant]:
        """Whole-job grants, except that jobs with time to spare may not take the last
        slots: those are kept for the short jobs that arrive meanwhile and cannot wait for a
        running task to end (a no-kill scheduler has no other way to start them at once).

        While the jobs want more slots than the cluster has (``wanted``: what they run and
        could start now), the reserve is *strict*: the first job with time to spare, in the
        order, grows within what is left, and the others only keep what they run -- what the
        first does not take stays free too.  Growing several such jobs at once commits slots
        to long tasks exactly when short jobs will find none.  While the cluster could serve
        everyone, only the reserve itself is held back and the rest is shared out: holding
        more then only delays jobs with time to spare (the light hours of docs/league.md)."""
        busy, busy_time = self._busy
        tau = busy_time / busy if busy else 0.0  # mean expected duration of a running task
        _, _, span = self._interference(now)
        windows, sums = self._sorted  # arrivals by window (``_interference``)
        # the short jobs: those whose whole window is shorter than a running task; Little's
        # law gives the slots they hold on average, doubled for their bursts
        need = 2.0 * float(sums[int(np.searchsorted(windows, tau))]) / span
        if need < 1.0:  # less than one slot: nothing to hold back
            return list(map(_grant, ordered))
        strict = self.reserve_mode == "strict" or wanted > capacity + 1e-9
        # "Can it wait?" plans its unchecked stages at their estimates / doubt (wary): a job
        # that waits on an estimate that was too low misses.
        stretch = 1.0 / self._doubt_now if self.wary else 1.0
        budget = capacity - need
        # whether each job can wait, for all at once
        table = self._table
        cannot = table[seqs, GOAL] - now - table[seqs, PATH] * stretch < tau
        # a job that cannot wait takes the reserve too if the reserve is for it
        # (``reserve_for``): with "short", only if its whole window is under tau
        takes = (cannot if self.reserve_all else cannot & (table[seqs, WINDOW] < tau)).tolist()
        grants: list[Grant] = []
        append = grants.append
        for row, take in zip(ordered, takes, strict=True):
            if budget <= 0.0:  # spent (it never grows back): the rest below, all at once
                break
            o = row[3]
            if take:  # cannot wait and the reserve is for it: the reserve is its too
                budget -= o[6] if strict else o[6] + o[11]
                append(row[5])
                continue
            # it keeps (and refills) what it runs, and grows only within the budget
            size = o[9]
            more = max(0, int(max(budget - o[6], 0.0) / size + 1e-9))
            if not strict:  # only what it can start now
                more = min(more, int(o[11] / size + 1e-9))
            budget -= o[6] + more * size
            append(Grant(row[8], o[7] + more))
        # No budget left: a job that takes the reserve gets all it can use, any other keeps
        # what it runs and grows no more.
        head = len(grants)
        grants += map(_field, ordered[head:], [_WHOLE if t else _KEEP for t in takes[head:]])
        return grants

    def report(self) -> dict[str, int]:
        return {"jobs_deferred": len(self._deferred)}
