"""The grant table: the installed decision, in the order the dispatcher serves it.

``install`` turns a policy's ``Decision`` into ``GrantState``s (a job's single whole-job grant
is carried over and re-ranked, not rebuilt: its running count is kept up to date); a decision
that only appends whole-job grants to the installed ones is installed incrementally
(``install_extension``); under an order-only policy, jobs that arrive after the installed order
are appended without calling ``decide`` at all (``extend_order``).

Beside the grants the table keeps the two dispatch indexes, in step with every grant's job
(``touch``): ``with_ready``, the grants whose job has a ready task, and ``hungry``, those also
under their limit.  The dispatcher walks these (usually short) sets in grant order instead of
every grant, so a task event costs O(hungry grants), not O(active jobs).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, Final

from mypy_extensions import mypyc_attr

from utilon.core.decision import Decision, Grant
from utilon.core.make import grant
from utilon.core.messages import TaskRef
from utilon.core.records import FastPaths
from utilon.core.snapshot import JobView
from utilon.core.state import GrantState, JobRT, RunningCounts

INF: Final = float("inf")
_NONE: Final = {None}
_slots: Final = attrgetter("slots")


def scoped(g: Grant) -> bool:
    """Not a plain whole-job grant: a stage, machines, kill_excess or gang."""
    return g.stage is not None or g.machines is not None or g.kill_excess or g.gang


@mypyc_attr(allow_interpreted_subclasses=True)  # pickles when compiled (setup.py)
class GrantTable:
    def __init__(self, order_key: Callable[[JobView], Any] | None, fast: FastPaths) -> None:
        self.decision = Decision()
        self.backfill = False  # decision.backfill, as a native field (read per completion)
        self.installed: list[GrantState] = []
        self.hungry: set[int] = set()  # grant orders (``touch``)
        self.with_ready: set[int] = set()
        self.widen = False  # a grant became hungry: offer it every open machine
        self.infeasible: dict[str, str] = {}  # job -> why, as the decisions reported it
        self.fast = fast
        # every installed grant is whole-job: a decision that extends them can be installed
        # incrementally
        self.all_whole = True
        # An order-only policy (``Policy.order_only``): while the installed grants are its
        # order of the jobs they name (``in_order``), jobs that arrive after all of them may be
        # appended without a call to ``decide`` (``extend_order``).
        self.order_key = order_key
        self.in_order = False
        # while ``in_order``: the installed grants of the jobs still active, by job, in order
        # (a job that finishes or is cancelled leaves it)
        self.ordered: dict[str, Grant] = {}

    # -- the dispatch indexes --------------------------------------------------------------
    def touch(self, job: JobRT) -> None:
        """Bring the dispatch indexes in step with one job's grants."""
        ready = job.n_ready > 0
        for gs in job.gstates:
            o = gs.order
            if ready:
                self.with_ready.add(o)
                if gs.running < gs.limit:
                    if o not in self.hungry:
                        # It may now use a machine other than the one that just freed up.
                        self.hungry.add(o)
                        self.widen = True
                else:
                    self.hungry.discard(o)
            else:
                self.with_ready.discard(o)
                self.hungry.discard(o)

    def launched(self, job: JobRT, gs: GrantState) -> None:
        """``gs`` launched a task of ``job``."""
        gs.running += 1
        if not job.n_ready:
            self.touch(job)  # out of ready tasks: every grant of the job leaves both indexes
        elif gs.running >= gs.limit:
            # touch(job) with ready tasks left: only this grant's count moved (the job's
            # grants have disjoint scopes), so only it can leave the hungry index
            self.hungry.discard(gs.order)

    def released(self, job: JobRT, stage: int, machine: int) -> None:
        """A task of ``job``'s ``stage`` stopped running on ``machine``."""
        gstates = job.gstates
        if gstates:
            first = gstates[0]
            gs: GrantState | None = first
            if len(gstates) > 1 or first.stage is not None or first.mask is not None:
                gs = self.grant_for(job, stage, machine)
            if gs is not None:
                gs.running -= 1
            if job.n_ready:  # (with none, no grant of the job is in either index)
                self.touch(job)

    def grant_for(self, job: JobRT, stage: int, machine: int) -> GrantState | None:
        for gs in job.gstates:
            if gs.covers(stage, machine):
                return gs
        return None

    def job_left(self, job_id: str) -> None:
        """The job finished or was cancelled: it leaves the installed order."""
        self.ordered.pop(job_id, None)

    # -- installing ------------------------------------------------------------------------
    def install(self, decision: Decision, active: dict[str, JobRT],
                machine_index: dict[str, int]) -> list[tuple[JobRT, TaskRef]]:
        """Install ``decision``; the running tasks its ``kill_excess`` grants kill, the most
        recently started first (the caller requeues them)."""
        previous = self.decision
        self.decision = decision
        self.backfill = decision.backfill
        for item in decision.infeasible:
            self.infeasible[item.job] = item.reason
        if (self.all_whole and self.fast.extend_installs
                and self.install_extension(previous.grants, decision.grants, active)):
            return []
        self.all_whole = not any(map(scoped, decision.grants))
        reusable: dict[str, GrantState] = {}
        for gs in self.installed:  # only jobs that held grants have any to drop
            job = gs.job
            if gs.stage is None and gs.mask is None and not gs.gang and len(job.gstates) == 1:
                reusable[job.id] = gs
            job.gstates = []
        grants: list[GrantState] = []
        take = reusable.pop
        self.hungry = set()
        self.with_ready = set()
        to_touch: dict[str, JobRT] = {}  # jobs with a ready task, touched once at the end
        counts: dict[str, RunningCounts] = {}  # running tasks by scope, for scoped grants
        for order, g in enumerate(decision.grants):
            job = active[g.job]
            limit = INF if g.slots is None else g.slots
            if g.stage is None and g.machines is None and not g.gang:
                kept = take(g.job, None)
                if kept is None:
                    gs = GrantState(order, job, None, None, limit)
                    gs.running = len(job.running)
                else:
                    gs = kept
                    gs.order = order
                    gs.limit = limit
            else:
                stage = job.job.stage_index(g.stage) if g.stage is not None else None
                mask = (frozenset(machine_index[x] for x in g.machines)
                        if g.machines is not None else None)
                gs = GrantState(order, job, stage, mask, limit, g.gang)
                held = counts.get(g.job)
                if held is None:
                    held = counts[g.job] = RunningCounts(job)
                gs.running = held.covered(stage, mask)
            job.gstates.append(gs)
            grants.append(gs)
            if job.n_ready:
                to_touch[g.job] = job
        self.installed = grants
        for job in to_touch.values():  # (the indexes do not depend on the order, and a touch
            self.touch(job)            # indexes all the job's grants)
        victims: list[tuple[JobRT, TaskRef]] = []
        if any(g.kill_excess for g in decision.grants):
            for g, gs in zip(decision.grants, grants, strict=True):
                if g.kill_excess and gs.running > gs.limit:
                    excess = int(gs.running - gs.limit)
                    found = [r for r, run in reversed(gs.job.running.items())
                             if gs.covers(r.stage, run.machine)][:excess]
                    victims.extend((gs.job, r) for r in found)
        return victims

    def install_extension(self, before: tuple[Grant, ...], grants: tuple[Grant, ...],
                          active: dict[str, JobRT]) -> bool:
        """Install ``grants`` incrementally when they are the installed whole-job grants of
        the jobs still active, in the same order, followed by new whole-job grants (FIFO at an
        arrival: the new job joins the end); False, having changed nothing, otherwise.

        The result is the one the full install gives: the kept grants are the very objects it
        would carry over (a whole-job grant keeps its running count), renumbered in order; the
        dispatch indexes hold the same grants, since they are kept in step with every grant's
        job between decisions; the new grants are built as it builds them.
        """
        kept = [g for g in before if g.job in active]
        k = len(kept)
        if len(grants) < k or grants[:k] != tuple(kept):
            return False
        tail = grants[k:]
        if any(map(scoped, tail)):
            return False
        self.append(tail, active)
        self.fast.install_extensions += 1
        return True

    def append(self, tail: tuple[Grant, ...], active: dict[str, JobRT]) -> None:
        """The installed grants stay, in order; the whole-job grants ``tail`` are built after
        them.  The grants of jobs that finished stay too, idle (a finished job has no ready
        task, so they are in neither dispatch index), until they outnumber the active jobs:
        then they are dropped and the rest renumbered, in O(1) per job amortised rather than
        O(active jobs) at every arrival."""
        old = self.installed
        if len(old) > 2 * len(active) + 64:
            remap: dict[int, int] = {}
            new_grants: list[GrantState] = []
            for gs in old:
                if gs.job.id in active:
                    remap[gs.order] = len(new_grants)
                    gs.order = len(new_grants)
                    new_grants.append(gs)
                else:
                    gs.job.gstates = []
            self.hungry = {remap[o] for o in self.hungry if o in remap}
            self.with_ready = {remap[o] for o in self.with_ready if o in remap}
            self.installed = old = new_grants
        for order, g in enumerate(tail, len(old)):
            job = active[g.job]
            gs = GrantState(order, job, None, None, INF if g.slots is None else g.slots)
            gs.running = len(job.running)
            job.gstates.append(gs)
            old.append(gs)
            if job.n_ready:
                self.touch(job)

    # -- order-only policies ---------------------------------------------------------------
    def decided(self, decision: Decision) -> None:
        """After a full decision: may later arrivals extend it without a call to decide?"""
        grants = decision.grants
        self.in_order = (self.order_key is not None and self.all_whole
                         and set(map(_slots, grants)) <= _NONE and not decision.backfill
                         and decision.slot_limit is None and not decision.infeasible
                         and decision.solver_seconds is None)  # (a solver's time: its own)
        if self.in_order:
            self.ordered = {g.job: g for g in grants}  # (every granted job is active now)
            self.in_order = len(self.ordered) == len(grants)  # and named once

    def extend_order(self, arrived: list[JobRT], active: dict[str, JobRT],
                     job_view: Callable[[JobRT], JobView]) -> int:
        """Jobs that arrived under an order-only policy and all sort after the installed
        order: append them, which is the decision ``decide`` would return (its sort is stable,
        so the jobs already granted keep their order and equal keys stay in arrival order),
        with no snapshot, call to ``decide`` or validation of the whole order.  Returns how
        many grants it appended: 0, having changed nothing, when they do not all sort after it
        (the caller then decides)."""
        key = self.order_key
        assert key is not None
        new = sorted([job_view(j) for j in arrived if j.id in active], key=key)
        if not new:
            return 0
        kept = self.ordered
        if kept and key(job_view(active[next(reversed(kept))])) > key(new[0]):
            return 0  # a new job goes before the last granted job still active
        if len(kept) + len(new) != len(active):
            return 0
        tail = tuple([grant(job=v.id) for v in new])
        # install for this decision: nothing infeasible, no slot limit before or after, and
        # the kept grants are the installed ones (install_extension's test holds by design)
        self.decision = Decision(grants=(*kept.values(), *tail))
        self.backfill = False
        for g in tail:
            kept[g.job] = g
        self.append(tail, active)
        self.fast.order_extensions += 1
        return len(tail)
