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
``(finish - goal) / (goal - submit)`` stays within ``bound`` (default 1: a late job is not made
to wait once it would finish more than its own window after its goal).  Past it the job is
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
doubt: ``wary``) are granted without a cap.  How the rest is shared (``reserve``):
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
"""

from __future__ import annotations

import bisect
import heapq
import math
from bisect import insort
from itertools import compress
from operator import attrgetter, itemgetter
from operator import not_ as _not
from typing import NamedTuple

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


def outlook(job: JobView, now: float, capacity: float, doubt: float = 1.0,
            scale: tuple[tuple[str, float], ...] = ()) -> Outlook | None:
    """The job's outlook at ``now``, or ``None`` when it has no task left.  A stage none of
    whose tasks has finished is planned at ``doubt`` x its estimate (an estimate not yet
    checked against a measurement: ``Triage._doubt``).  With ``scale`` (resource, slots per
    unit of it cluster-wide) a task's size is its dominant share of the cluster in slots: a
    task that needs a fifth of the cluster's disk bandwidth counts as a fifth of its slots,
    however few cores it asks for."""
    work = path = held = busy_time = ready = 0.0
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
        if r:
            run_left = max(r * e - (r * now - s.started_sum), _OVERDUE_LEFT * r * e)
            work += size * (unstarted * e + run_left)
            head = run_left / r  # running tasks first (their mean time left) ...
            held += r * size
            running += r
            busy_time += r * e
        else:
            work += size * unstarted * e
            head = 0.0
        free = width - r  # ... then the unstarted ones, in waves of what the cluster holds
        if unstarted <= free:
            path += max(head, e if unstarted else 0.0)
        elif free > 0:  # a wave starts now, the rest follow in waves of the cluster's width
            path += max(head, e) + math.ceil((unstarted - free) / width) * e
        else:  # every slot it could use is running: waves after the running tasks
            path += head + math.ceil(unstarted / width) * e
    if running == 0 and work == 0.0:
        return None
    goal = job.utility.goal
    if goal is None:
        goal = window = math.inf
        rate = 0.0
    else:
        window = max(goal - job.submit, 1.0)
        rate = job.weight / window
    lo, hi = job.utility.bounds
    return Outlook(work, path, goal, window, max(hi - lo, 1e-9), rate, held, running,
                   busy_time, first or job.slot_size, task, ready)


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
    """One job in a decision: its sort key (goal, submit, first sight) and what the passes
    after the sort need, built once per change of the job's view."""

    goal: float
    submit: float
    seq: int  # first sight: unique, so rows never compare past it
    outlook: Outlook
    job: JobView
    smith: float  # Smith's key: work per unit of penalty rate
    whole: Grant  # Grant(job): as many slots as it can use
    none: Grant  # Grant(job, 0): nothing new


_grant = itemgetter(6)
_window = itemgetter(2)  # of an arrival (submit, work, window)
_smith = attrgetter("smith", "goal", "seq")


@register
class Triage(Policy):
    name = "triage"
    summary = ("utilon's own: EDF while goals can be met; when not, Moore-Hodgson defers the "
               "cheapest jobs, late jobs never beyond a bound (the default policy)")
    paper = "ours (issue 45): EDF, Moore & Hodgson 1968, Smith 1956; utilities after CORA/RRH"
    # every event but a stage's end: deciding there too gave the same misses on the tuning
    # workloads tried (docs/policies.md), at the cost of more decisions
    triggers = EVENT_TRIGGERS - {Trigger.STAGE_FINISHED}

    def __init__(self, bound: float = 1.0, forecast: bool = True,
                 reserve: bool | str = "adaptive",
                 history: float = 600.0, confidence: float = 0.8,
                 sizing: str = "slots", wary: bool = True) -> None:
        self.wary = wary
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
        self._cache: dict[str, tuple[JobView, tuple[object, ...], Row | None]] = {}
        self._busy = (0.0, 0.0)
        self._running: set[str] = set()
        self._reasons: dict[str, str] = {}
        self._priors: dict[tuple[str, int], float] = {}
        self._errors: list[float] = []  # |ln(measured / prior)|, sorted
        self._sorted: tuple[list[float], list[float]] = ([], [0.0])
        self._sorted_key: tuple[int, object] = (-1, None)
        self._doubt_now = 1.0

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

    def _interference(self, now: float) -> tuple[list[float], list[float], float]:
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
            windows = [a[2] for a in by_window]
            sums = [0.0]
            for a in by_window:
                sums.append(sums[-1] + a[1])
            self._sorted = (windows, sums)
            self._sorted_key = key
        # over the whole window even before it has passed: early on that underestimates the
        # rate (a few jobs at the start are not a flood), it never inflates it
        return self._sorted[0], self._sorted[1], self.history

    def _row(self, job: JobView, o: Outlook) -> Row:
        seq = self._seq.get(job[0])
        if seq is None:
            seq = self._seq[job[0]] = len(self._seq)
            if self.forecast or self.reserve:
                self._arrivals.append((job[2], o[0], o[3]))
        return Row(o[2], job[2], seq, o, job, o[0] / max(o[5], 1e-300),
                   Grant(job[0]), Grant(job[0], 0))

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        now = snapshot.now
        capacity = max(snapshot.total_slots, 1e-9)
        online = snapshot.online_estimates
        doubt = self._doubt() if online else 1.0
        self._doubt_now = doubt
        scale = dominant_scale(snapshot) if self.sizing == "dominant" else ()
        key = (capacity, doubt, scale)
        # Rows (goal, submit, first sight, ...) sort as plain tuples without a key function;
        # first sights are unique, so outlooks and views are never compared.  A job with
        # nothing running keeps its row until its view changes (views are rebuilt only on
        # change): most of a long queue costs a lookup and an append.
        timed: list[Row] = []
        untimed: list[Row] = []
        cache = self._cache
        fresh: dict[str, tuple[JobView, tuple[object, ...], Row | None]] = {}
        busy = busy_time = wanted = 0.0
        self._running = running = set()
        for j in snapshot.jobs:
            jid = j[0]
            hit = cache.get(jid)
            if hit is not None and hit[0] is j and hit[1] == key:
                row = hit[2]
            else:
                o = outlook(j, now, capacity, doubt, scale)
                if online:
                    self._learn(j)
                row = None if o is None else self._row(j, o)
            if row is None:
                continue
            o = row[3]
            wanted += o[6] + o[11]
            if o[7]:  # running: its outlook moves with the clock
                running.add(jid)
                busy += o[7]
                busy_time += o[8]
            else:
                fresh[jid] = (j, key, row)
            if o[2] < math.inf:
                timed.append(row)
            else:
                untimed.append(row)
        self._cache = fresh
        self._busy = (busy, busy_time)
        timed.sort()

        # Moore-Hodgson over the goal order; the heap holds the removable jobs of the
        # prefix, cheapest to remove first: late-within-bound jobs (tier 0 of the key)
        # before on-time ones, each by its own cost per unit of work freed.
        forecast = self.forecast
        if forecast:
            windows, sums, span = self._interference(now)
            bisect_right = bisect.bisect_right
        push, pop = heapq.heappush, heapq.heappop
        heap: list[tuple[int, float, int]] = []
        removed: list[int] = []
        load = 0.0
        bound = self.bound
        eps = 1e-9
        for k, t in enumerate(timed):
            work, path, goal, window, stake, rate = t[3][:6]
            load += work
            alone = now + path
            if alone > goal + eps:  # late whatever the order
                if (alone - goal) / window <= bound:
                    # deferring it costs penalty at rate ``rate`` per second: cheapest first
                    push(heap, (0, rate / max(work, 1e-12), k))
                continue  # removing others cannot make it on time
            push(heap, (1, stake / max(work, 1e-12), k))
            ahead = goal - now
            if forecast and ahead > 0:
                limit = ahead + eps - sums[bisect_right(windows, ahead)] / span * ahead / capacity
            else:
                limit = ahead + eps  # on time while load / C is under
            while heap and load / capacity > limit:
                r = pop(heap)[2]
                removed.append(r)
                load -= timed[r][3][0]
                if r == k:
                    break

        if removed:
            out = bytearray(len(timed))
            for r in removed:
                out[r] = 1
            kept = list(compress(timed, map(_not, out)))
            # Smith's order for weighted lateness: least work per unit of penalty rate
            deferred = sorted((timed[r] for r in removed), key=_smith)
        else:
            kept = timed
            deferred = []
        ordered = kept + deferred + untimed
        if self.reserve:
            grants = self._reserving(now, ordered, capacity, wanted)
        else:
            grants = list(map(_grant, ordered))
        return Decision(grants=tuple(grants), infeasible=self._explain(deferred, fresh))

    def _explain(self, deferred: list[Row],
                 rows: dict[str, tuple[JobView, tuple[object, ...], Row | None]]
                 ) -> tuple[Infeasible, ...]:
        """Why each job is deferred, said when it is deferred, and an empty reason when an
        active job no longer is (the core keeps the last reason a policy gave)."""
        reasons = self._reasons
        if not deferred and not reasons:
            return ()
        now_deferred = {r[4][0] for r in deferred}
        items = [Infeasible(jid, "deferred: predicted to miss its goal whatever the order "
                            "(it runs on what on-time jobs leave; late at most "
                            f"{self.bound:g} x its goal window before it is served first)")
                 for jid in now_deferred if jid not in reasons]
        # a job that left the deferred set and is still active (in ``rows``, or running)
        items += [Infeasible(jid, "") for jid in reasons
                  if jid not in now_deferred and (jid in rows or jid in self._running)]
        self._reasons = dict.fromkeys(now_deferred, "")
        self._deferred |= now_deferred
        items.sort(key=lambda it: it.job)  # a set's order is not reproducible across runs
        return tuple(items)

    def _reserving(self, now: float, ordered: list[Row], capacity: float,
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
        need = 2.0 * sums[bisect.bisect_left(windows, tau)] / span
        if need < 1.0:  # less than one slot: nothing to hold back
            return list(map(_grant, ordered))
        strict = self.reserve_mode == "strict" or wanted > capacity + 1e-9
        # "Can it wait?" plans its unchecked stages at their estimates / doubt (wary): a job
        # that waits on an estimate that was too low misses.
        stretch = 1.0 / self._doubt_now if self.wary else 1.0
        budget = capacity - need
        grants: list[Grant] = []
        append = grants.append
        for row in ordered:
            o = row[3]
            spare = o[2] - now - o[1] * stretch >= tau
            if budget <= 0.0 and o[7] == 0:  # the budget is spent: no more for anyone
                append(row[7] if spare else row[6])
                continue
            if not spare:  # cannot wait: the reserve is its too
                budget -= o[6] if strict else o[6] + o[11]
                append(row[6])
                continue
            # it keeps (and refills) what it runs, and grows only within the budget
            size = o[9]
            more = max(0, int(max(budget - o[6], 0.0) / size + 1e-9))
            if not strict:  # only what it can start now
                more = min(more, int(o[11] / size + 1e-9))
            budget -= o[6] + more * size
            append(Grant(row[4][0], o[7] + more))
        return grants

    def report(self) -> dict[str, int]:
        return {"jobs_deferred": len(self._deferred)}
