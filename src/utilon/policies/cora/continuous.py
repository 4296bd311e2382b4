"""CORA's lexicographic max-min in continuous time: ``cora-ct``, the variant of issue 21.

``cora`` (the paper's method) plans in slots of one task wave and charges every job the
utility at the *end* of the slot it completes in.  On the paper's workload a CT-critical job's
sigmoid falls from p/2 to ~0 within a minute, about two such slots, and its window (1.25 x its
standalone time) spans two or three: the slotted plan cannot tell finishing 5 s before the
target from 10 s after it, and measured end to end it loses to EDF (docs/reproduction-cora.md,
"Plan vs execution").  This module solves the *same* problem -- maximise, lexicographically,
the sorted vector of the jobs' utilities at their completion times -- with completion times
that are continuous (a fine grid), over the fluid model of the paper's §II:

* job i has W_i container-seconds of work left, may hold at most P_i containers at once (its
  tasks left) and cannot finish before E_i (its stages one after another); the cluster has C
  containers (the same quantities ``slotted_instance`` builds, before they are cut into slots);
* a vector of completion deadlines D is **feasible** iff some fluid schedule meets it.  With a
  constant capacity this is the continuous form of the exact solver's Lemma B (prefix sets
  suffice, see exact.py): for every tau >= 0,
      sum_i clip(W_i - P_i (D_i - now - tau), 0, W_i) <= C tau,
  "what job i cannot do between now + tau and D_i at its cap must be done before now + tau";
  the left side is piecewise linear with kinks at D_i - now and D_i - now - W_i / P_i, so
  checking those 2N points is exact (``fluid_feasible``, O(N^2) vectorised);
* **progressive filling** (as in the exact solver, §3 of exact.py): raise a common level v;
  every unfixed job takes the latest grid time at which its utility is still >= v as its
  deadline; the largest feasible v is found by bisection on log v; jobs that cannot rise above
  it (saturated at their best value, or blocked: moving their deadline one grid step earlier
  alone is infeasible) are fixed; repeat until every job is fixed.  Jobs still >= v at the
  grid's end have no deadline (CT-insensitive jobs never get one, so they yield to every job
  with a target -- the behaviour the paper reports for CORA, §III-D).

Execution is re-planned at every event ``cora`` re-plans at (with ``replan: slot``, task
completions within one task wave of the last plan follow it): grants are the jobs in order of
planned deadline (no deadline last, by submission), each taking what it can, with backfill -- EDF on
the plan's deadlines, not on the owners' targets.  The planned completion of each job (for the
plan-vs-execution report) is that order's fluid schedule.

``above_min`` changes what is optimised above the first level (docs/policies.md#cora-ct):
``leximin`` (default) the whole lexicographic vector; ``edf`` only the first level, EDF
above it; ``sum`` the *run's* first level (the present jobs' max-min level, or the lowest
utility a finished job got if that is lower: a job ending above it cannot lower the run's
minimum) as floors, and above them the order that maximises the sum of utilities by
Smith's rule on the utilities' loss rates (``loss_rate_order``, ``protect_floors``).

What this is not: the fluid model ignores that a task occupies a container for its whole
duration (a plan may split a task's work across time) and lets a capacity change take effect
only at the next decision; both are what re-planning absorbs, and the safety margin of the
policy (each utility read (1 - 1/C) task durations after the fluid finish -- Graham's bound
on how much later a list schedule of whole tasks on C containers finishes; nothing on one
container, issue 44 -- never past the point where it falls to its floor) covers in the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from utilon.core.snapshot import ClusterSnapshot, JobView
from utilon.policies.cora.table import utility_table

GRID = 1024
"""Candidate completion times per decision (the grid's step is at least ``resolution``)."""


@dataclass(frozen=True)
class FluidPlan:
    """The continuous-time solution for the jobs of one snapshot."""

    jobs: tuple[JobView, ...]
    deadline: np.ndarray  # (N,) absolute planned deadline, inf = none
    level: np.ndarray  # (N,) the utility each job is planned to reach
    order: tuple[int, ...]  # dispatch order (indices into jobs)
    finish: np.ndarray  # (N,) fluid completion in dispatch order (the plan's prediction)
    step: float  # the grid's step, seconds
    rounds: int  # progressive-filling rounds
    stuck: int  # rounds where no job was individually blocked (all at the level fixed)
    moved: tuple[str, ...] = ()  # above_min edf/sum: jobs served ahead of their EDF place
    repaired: bool = False  # above_min sum: the floors changed the loss-rate order


def fluid_need(now: float, capacity: float, work: np.ndarray, cap: np.ndarray,
               deadline: np.ndarray) -> float:
    """The largest violation of the prefix conditions for ``deadline`` (<= 0: feasible)."""
    fin = np.isfinite(deadline)
    if not fin.any():
        return 0.0
    w, p, a = work[fin], cap[fin], deadline[fin] - now
    taus = np.maximum(np.concatenate([a, a - w / p]), 0.0)
    need = np.clip(w[:, None] - p[:, None] * (a[:, None] - taus[None, :]), 0.0,
                   w[:, None]).sum(axis=0)
    return float((need - capacity * taus).max())


def fluid_feasible(now: float, capacity: float, work: np.ndarray, cap: np.ndarray,
                   deadline: np.ndarray) -> bool:
    """Whether a fluid schedule finishes every job by its deadline (inf: no deadline)."""
    scale = float(work.sum()) + 1.0
    return fluid_need(now, capacity, work, cap, deadline) <= 1e-9 * scale


@dataclass(frozen=True)
class Pieces:
    """Each job as two fluid pieces: its current stage (``head``), due ``offset`` seconds
    before the job's deadline -- the time its later stages need at full width -- and its later
    stages (``tail``), due at the deadline.  Without the split a job's reduces would count as
    work that can run beside its maps, and a plan would promise finishes no schedule keeps."""

    work: np.ndarray  # (2N,) head of job i at i, tail at N + i
    cap: np.ndarray  # (2N,)
    offset: np.ndarray  # (2N,)

    def deadlines(self, job_deadline: np.ndarray) -> np.ndarray:
        return np.concatenate([job_deadline, job_deadline]) - self.offset


def solve_fluid(now: float, capacity: float, pieces: Pieces, earliest: np.ndarray,
                utility: np.ndarray, grid: np.ndarray, max_rounds: int = 0
                ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Progressive filling over the candidate times ``grid`` (absolute, increasing).

    ``utility[i, k]`` is job i's utility if it finishes at max(grid[k], earliest[i]), non-
    increasing in k.  ``max_rounds`` > 0 stops after that many rounds (1: only the max-min
    level, every job's deadline the latest time it is still worth it).  Returns (deadlines,
    levels, rounds, stuck)."""
    work, cap = pieces.work, pieces.cap
    n = utility.shape[0]
    times = np.maximum(grid[None, :], earliest[:, None])
    top = utility[:, 0]
    deadline = np.full(n, np.inf)
    level = np.zeros(n)
    fixed = np.zeros(n, dtype=bool)

    def at(v: float, rows: np.ndarray) -> np.ndarray:
        """Deadlines of ``rows`` at level v (each capped at its own top value)."""
        return latest_at(utility[rows], times[rows], v)

    def feasible_with(rows: np.ndarray, d: np.ndarray) -> bool:
        trial = deadline.copy()
        trial[rows] = d
        return fluid_feasible(now, capacity, work, cap, pieces.deadlines(trial))

    rounds = stuck = 0
    current = 0.0
    while not fixed.all():
        rounds += 1
        rows = np.flatnonzero(~fixed)
        hi = float(top[rows].max())
        if hi <= 0.0 or feasible_with(rows, at(hi, rows)):
            best = hi
        else:
            lo_log = math.log(max(current, 1e-300))
            hi_log = math.log(hi)
            for _ in range(60):  # bisection on log v: levels span many orders of magnitude
                mid = 0.5 * (lo_log + hi_log)
                if feasible_with(rows, at(math.exp(mid), rows)):
                    lo_log = mid
                else:
                    hi_log = mid
                if hi_log - lo_log < 1e-12:
                    break
            best = math.exp(lo_log) if lo_log > math.log(1e-300) else 0.0
        current = max(current, best)
        deadline[rows] = at(current, rows)
        level[rows] = np.minimum(current, top[rows])
        if max_rounds and rounds >= max_rounds:
            break
        # saturated: already at their best value
        sat = rows[top[rows] <= current * (1 + 1e-12)]
        fixed[sat] = True
        free = rows[top[rows] > current * (1 + 1e-12)]
        blocked = []
        for i in free:  # can job i alone rise to its next better value?
            better = utility[i] > level[i] * (1 + 1e-12)
            j = int(better.sum()) - 1
            if j < 0:
                blocked.append(i)
                continue
            if not feasible_with(np.array([i]), np.array([times[i, j]])):
                blocked.append(i)
        if blocked:
            fixed[np.array(blocked)] = True
        elif len(free) and not len(sat):
            # every job could rise alone but not together at the grid's resolution:
            # fix the jobs at the level (the exact solver branches here; the fluid model's
            # grid makes such ties an artefact of the step, so we do not)
            stuck += 1
            fixed[free] = True
    return deadline, level, rounds, stuck


def latest_at(utility: np.ndarray, times: np.ndarray, v: float) -> np.ndarray:
    """Each job's latest time on ``times`` at which its utility is still >= v (capped at its
    own best value; inf: still worth it at the grid's end)."""
    k = utility.shape[1]
    vv = np.minimum(v, utility[:, 0])
    idx = (utility >= vv[:, None] * (1 - 1e-12)).sum(axis=1) - 1
    out = times[np.arange(len(utility)), np.maximum(idx, 0)]
    out[idx >= k - 1] = np.inf
    return out


def dispatch_order(jobs: tuple[JobView, ...], deadline: np.ndarray) -> tuple[int, ...]:
    """Planned deadline first; jobs without one after, oldest first."""
    return tuple(sorted(range(len(jobs)),
                        key=lambda i: (float(deadline[i]), jobs[i].submit, jobs[i].id)))


def protected_edf_order(jobs: tuple[JobView, ...], floor: np.ndarray, now: float,
                        capacity: float, pieces: Pieces, earliest: np.ndarray
                        ) -> tuple[tuple[int, ...], np.ndarray]:
    """EDF on the owners' goals, except that a job the max-min level needs is moved up.

    ``floor[i]`` is the latest finish at which job i still reaches the max-min level.  Start
    from EDF's order; while the order's fluid schedule finishes some job after its floor, that
    job's key becomes its floor (it is served by when the minimum needs it, not by its goal).
    When a late job already has the earlier key (others ahead of it make it late), every job
    takes the earlier of its goal and its floor; failing that, the max-min plan's own order
    (by floor), which the bisection proved feasible.  Returns (order, fluid finish)."""
    goal = np.array([j.goal for j in jobs], dtype=float)
    tol = 1e-6 * max(1.0, float(np.abs(earliest).max(initial=1.0)))
    key = goal.copy()
    tried: list[tuple[tuple[int, ...], np.ndarray]] = []
    for _ in range(len(jobs) + 1):
        order = dispatch_order(jobs, key)
        finish = fluid_finish(order, now, capacity, pieces, earliest)
        late = finish > floor + tol
        if not late.any():
            return order, finish
        tried.append((order, finish))
        moved = late & (floor < key)
        if not moved.any():
            break
        key[moved] = floor[moved]
    for key in (np.minimum(goal, floor), floor):
        order = dispatch_order(jobs, key)
        finish = fluid_finish(order, now, capacity, pieces, earliest)
        if not (finish > floor + tol).any():
            return order, finish
        tried.append((order, finish))
    # none keeps every floor in the greedy fluid schedule: the one that misses the least
    return min(tried, key=lambda t: float(np.maximum(t[1] - floor, 0.0).max()))


def loss_rate_order(jobs: tuple[JobView, ...], now: float, capacity: float, pieces: Pieces,
                    earliest: np.ndarray, window: np.ndarray) -> tuple[int, ...]:
    """A sum-maximising order (Smith's rule with the utilities' own weights): jobs by the
    utility they lose per second of delay, per container-second of work they hold the
    cluster for.

    Job i's loss rate is read from the time it would finish if it were served first (its
    fluid finish alone, t_i) over the next ``window[i]`` seconds: (U(t_i) - U(t_i + w)) / w.
    A sensitive sigmoid loses value long before its goal and goes ahead; a steep one whose
    cliff is more than a window away loses nothing yet and waits -- the floors
    (``protect_floors``) keep it from waiting past the guaranteed level; a job whose utility
    no longer falls goes last.  Ties (equal rates, e.g. zero) by goal, then submission."""
    n = len(jobs)
    total = pieces.work[:n] + pieces.work[n:]
    rate = np.zeros(n)
    for i in range(n):
        t = float(fluid_finish((i,), now, capacity, pieces, earliest)[i])
        w = float(window[i])
        u = jobs[i].utility
        rate[i] = max(0.0, (u.value(t) - u.value(t + w)) / w)
    prio = rate / np.maximum(total, 1e-9)
    return tuple(sorted(range(n), key=lambda i: (-float(prio[i]), jobs[i].goal,
                                                 jobs[i].submit, jobs[i].id)))


def protect_floors(order: tuple[int, ...], floor: np.ndarray, now: float, capacity: float,
                   pieces: Pieces, earliest: np.ndarray
                   ) -> tuple[tuple[int, ...], np.ndarray] | None:
    """``order`` with every job its fluid schedule finishes after its floor moved up, one
    place at a time, until it keeps its floor (the earliest late job first); None when no
    such repair keeps every floor.  Returns (order, fluid finish)."""
    tol = 1e-6 * max(1.0, float(np.abs(earliest).max(initial=1.0)))
    cur = list(order)
    n = len(cur)
    for _ in range(n * n + 1):
        finish = fluid_finish(tuple(cur), now, capacity, pieces, earliest)
        late = [k for k, i in enumerate(cur) if finish[i] > floor[i] + tol]
        if not late:
            return tuple(cur), finish
        k = late[0]
        if k == 0:
            return None
        cur[k - 1], cur[k] = cur[k], cur[k - 1]
    return None


def fluid_finish(order: tuple[int, ...], now: float, capacity: float, pieces: Pieces,
                 earliest: np.ndarray) -> np.ndarray:
    """Completion times of the greedy fluid schedule that serves ``order`` by priority, each
    job's head then its tail, at up to the piece's cap (and not before its earliest finish)."""
    n = len(earliest)
    left = pieces.work.astype(float).copy()
    out = np.full(n, np.inf)
    t = now
    alive = [i for i in order if left[i] + left[n + i] > 0]
    for i in set(order) - set(alive):  # only running tasks' last moments left
        out[i] = max(now, float(earliest[i]))
    for _ in range(4 * n + 4):  # every step finishes at least one piece
        if not alive:
            break
        room, rates = capacity, {}
        for i in alive:
            piece = i if left[i] > 0 else n + i
            r = min(float(pieces.cap[piece]), room)
            if r <= 0:
                break
            rates[piece] = r
            room -= r
        if not rates:
            break
        dt = min(left[q] / r for q, r in rates.items())
        t += dt
        for q, r in rates.items():
            left[q] -= r * dt
            if left[q] <= 1e-9 * (pieces.work[q] + 1):
                left[q] = 0.0
        for i in [i for i in alive if left[i] == 0.0 and left[n + i] == 0.0]:
            out[i] = max(t, float(earliest[i]))
            alive.remove(i)
    return out


def make_grid(now: float, capacity: float, work: np.ndarray, earliest: np.ndarray,
              resolution: float) -> np.ndarray:
    """Candidate completion times: from now to past the point where every job could have
    finished one after another (twice the busy period, so a job whose utility no longer falls
    can be put after it), in steps of at least ``resolution`` seconds."""
    busy = float(work.sum()) / capacity + float((earliest - now).max(initial=0.0))
    horizon = 2.0 * busy + resolution
    step = max(resolution, horizon / GRID)
    return now + step * np.arange(1, math.ceil(horizon / step) + 1)


def plan(snapshot: ClusterSnapshot, jobs: list[JobView], capacity: float, pieces: Pieces,
         earliest: np.ndarray, resolution: float, margin: float = 1.0,
         above_min: str = "leximin", keep: float = math.inf, window: float = 2.0,
         floors: bool = True) -> FluidPlan:
    """The continuous-time lexicographic max-min plan for ``jobs`` (see the module doc);
    each job's utility is read ``margin`` of its current task duration late (at most as late
    as its utility stays above its floor: ``_room``).

    ``above_min: edf`` keeps only the max-min level and orders the jobs above it by EDF
    (``protected_edf_order``).  ``above_min: sum`` keeps the *run's* first level -- the
    lower of the max-min level of the jobs present and ``keep``, the lowest utility a
    finished job got (a job that ends above it cannot lower the run's minimum) -- and
    orders the jobs above it for the sum (``loss_rate_order``, each job's loss rate read
    over ``window`` of its task durations), moving up any job that order would push below
    the level (``protect_floors``; failing that, ``protected_edf_order``); without
    ``floors``, the loss-rate order as it is (an ablation: what the guarantee costs)."""
    now = snapshot.now
    grid = make_grid(now, capacity, pieces.work, earliest, resolution)
    times = np.maximum(grid[None, :], earliest[:, None])
    # plan against finishing one margin later than the fluid model says: the fluid schedule
    # splits tasks and stages share containers, so a real finish lands after the fluid one
    # -- enough to lose most of a CT-critical job's sigmoid.  By how much: Graham's list-
    # scheduling bound.  A task starts no later than when the work ahead of it, spread over
    # the C containers, is done, so it ends at most (1 - 1/C) of its own duration after the
    # fluid finish: a margin of one task duration times (1 - 1/C).  On one container the
    # fluid schedule is the real one and there is nothing to cover (issue 44: a full task
    # of margin there served two single-task jobs in EDF's order, min 3.11 / sum 8.11, where
    # the other order gives 4.09 / 9.00)
    pad = margin * (1.0 - 1.0 / max(capacity, 1.0)) * np.array(
        [next((s.expected_duration for s in j.stages if s.total - s.done), 0.0)
         for j in jobs])
    pad = np.minimum(pad, _room(jobs, times, earliest))
    utility = np.minimum.accumulate(utility_table(jobs, times + pad[:, None]), axis=1)
    utility = np.maximum(utility, 0.0)
    views = tuple(jobs)
    first = 1 if above_min in ("edf", "sum") else 0
    deadline, level, rounds, stuck = solve_fluid(now, capacity, pieces, earliest, utility,
                                                 grid, max_rounds=first)
    moved: tuple[str, ...] = ()
    repaired = False
    if above_min in ("edf", "sum"):
        guard = float(level.min(initial=np.inf))
        if above_min == "sum":
            guard = min(guard, keep)
        floor = latest_at(utility, times, guard)
        kept = None
        if above_min == "sum":
            task = np.array([next((s.expected_duration for s in j.stages if s.total - s.done),
                                  1.0) for j in jobs])
            base = loss_rate_order(views, now, capacity, pieces, earliest,
                                   window * np.maximum(task, 1.0))
            kept = (protect_floors(base, floor, now, capacity, pieces, earliest) if floors
                    else (base, fluid_finish(base, now, capacity, pieces, earliest)))
            repaired = kept is None or kept[0] != base
        if kept is None:
            kept = protected_edf_order(views, floor, now, capacity, pieces, earliest)
        order, finish = kept
        edf = {i: k for k, i in enumerate(dispatch_order(views, np.array(
            [j.goal for j in views], dtype=float)))}
        moved = tuple(views[i].id for k, i in enumerate(order) if k < edf[i])
    else:
        order = dispatch_order(views, deadline)
        finish = fluid_finish(order, now, capacity, pieces, earliest)
    return FluidPlan(views, deadline, level, order, finish, float(grid[0] - now), rounds,
                     stuck, moved, repaired)


def _room(jobs: list[JobView], times: np.ndarray, earliest: np.ndarray) -> np.ndarray:
    """How long after its earliest finish each job's utility stays above its floor (its
    value at the horizon's end), on the grid ``times``.  The safety margin never exceeds it:
    a job that can still beat a cliff (a deadline, a truncated line) is planned to, with what
    margin it has, instead of being written off because a full margin would miss it."""
    plain = np.minimum.accumulate(utility_table(jobs, times), axis=1)
    above = plain > plain[:, -1:] + 1e-12
    last = np.where(above.any(axis=1),
                    times[np.arange(len(jobs)), above.shape[1] - 1 - np.argmax(above[:, ::-1],
                                                                               axis=1)],
                    earliest)
    return np.maximum(0.0, last - earliest)


def job_pieces(j: JobView, now: float, capacity: float, unit: float, elapsed: bool
               ) -> tuple[float, float, float, float, float, float]:
    """(head work, head cap, tail work, tail cap, tail time, earliest finish) of job ``j`` in
    containers of ``unit`` slot-resource units; the head is the first stage with work left
    (with every stage that runs beside it), the tail the stages after it.  Times count waves:
    a stage of k tasks on c containers takes ceil(k / c) task durations at full width."""
    head_w = head_p = tail_w = tail_p = tail_t = 0.0
    earliest = now
    in_head = True
    for s in j.stages:
        left = s.total - s.done
        if not left:
            continue
        d = s.expected_duration
        size = s.slot_size / unit
        w = left * d * size
        ran = min(s.elapsed(now), s.running * d) if (elapsed and s.running) else 0.0
        w -= ran * size
        width = max(1, math.floor(capacity / max(size, 1e-9)))
        waves = math.ceil(left / width)
        t = waves * d  # the stage ends when its last task does: no credit for the mean run
        if in_head and (s.ready or s.running or head_w == 0.0):
            head_w += w
            head_p = max(head_p, left * size)
            earliest = max(earliest, now + t)
        else:
            in_head = False
            tail_w += w
            tail_p = max(tail_p, left * size)
            tail_t += t
    earliest += tail_t
    return head_w, min(head_p, capacity), tail_w, min(tail_p, capacity), tail_t, earliest
