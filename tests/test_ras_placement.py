"""RAS's placement algorithm (Algorithm 1): resources never exceeded, reducers spread,
max-min balancing of map slots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _ras_placement_reference import place as reference_place
from utilon.policies.ras.placement import PlacementJob, place

# resources: cpu, io, mem as fractions of one TaskTracker (Table 2 style)
SORT = dict(map_demand=np.array([0.30, 0.45, 0.25]), reduce_demand=np.array([0.20, 0.50, 0.60]),
            shuffle_per_map=np.array([0.0, 0.0015, 0.0]))
SELECT = dict(map_demand=np.array([0.15, 0.20, 0.10]),
              reduce_demand=np.array([0.10, 0.10, 0.25]),
              shuffle_per_map=np.array([0.0, 0.00015, 0.0]))


def job(jid: str, prof: dict, s_pend: int, s_req: int, r_pend: int, **kw) -> PlacementJob:
    return PlacementJob(jid, s_pend=s_pend, s_req=s_req, r_pend=r_pend, **prof, **kw)


def usage(p, jobs, tts: int) -> np.ndarray:
    """Each TaskTracker's demand, recomputed from the matrices alone."""
    used = np.zeros((tts, 3))
    for j, jb in enumerate(jobs):
        s_alloc = int(p.maps[j].sum())
        red = jb.reduce_demand if jb.reduce_phase else jb.shuffle_per_map * min(
            s_alloc, jb.parallel_copies)
        used += np.outer(p.maps[j], jb.map_demand) + np.outer(p.reducers[j], red)
    return used


def test_reducers_are_spread_one_per_tasktracker() -> None:
    jobs = [job("a", SELECT, 10, 2, 4), job("b", SELECT, 10, 2, 3)]
    p = place(jobs, np.ones((4, 3)))
    assert p.reducers[0].tolist() == [1, 1, 1, 1]
    assert p.reducers[1].max() == 1 and p.reducers[1].sum() == 3  # never two of one job
    assert p.reducers.sum(axis=0).max() - p.reducers.sum(axis=0).min() <= 1


def test_maps_fill_what_fits_and_balance_utilities() -> None:
    # two identical jobs: a max-min placement splits the cluster between them
    jobs = [job("a", SELECT, 100, 10, 0), job("b", SELECT, 100, 10, 0)]
    p = place(jobs, np.ones((5, 3)))
    per_job = p.maps.sum(axis=1)
    assert abs(per_job[0] - per_job[1]) <= 1
    assert np.all(usage(p, jobs, 5) <= 1 + 1e-9)
    # cpu 0.15 per map: 6 maps fit on a TaskTracker (io 0.2 -> 5): 5 per TaskTracker
    assert p.maps.sum() == 25


def test_urgent_job_gets_what_it_requires_first() -> None:
    jobs = [job("relaxed", SORT, 100, 1, 0), job("urgent", SELECT, 100, 12, 0)]
    p = place(jobs, np.ones((4, 3)))
    assert p.maps[1].sum() >= 12  # the urgent job reaches its requirement
    assert p.maps[0].sum() >= 1  # and the relaxed one is not starved
    assert p.utility.min() >= 0.0


def test_newcomer_on_a_full_cluster_takes_slots_from_the_richest() -> None:
    # the incumbent fills both TaskTrackers (start_map: 2 Sort maps each, I/O 0.9); the
    # newcomer has no free room anywhere, yet max-min moves slots to it (line 11's reading)
    jobs = [job("old", SORT, 100, 1, 0), job("new", SORT, 100, 1, 0)]
    p = place(jobs, np.ones((2, 3)), start_map=np.array([[2, 2], [0, 0]]))
    assert p.maps[1].sum() >= 1 and p.maps[0].sum() >= 1
    assert np.all(usage(p, jobs, 2) <= 1 + 1e-9)
    assert np.array_equal(p.maps, reference_place(
        jobs, np.ones((2, 3)), start_map=np.array([[2, 2], [0, 0]])).maps)


def test_order_offers_free_tasktrackers_first() -> None:
    # TaskTracker 0 is planned full with "old" (its tasks run there); 1 is empty.  Visited
    # in index order the newcomer takes a planned slot on 0 (where it would wait for "old"'s
    # task to end); visited free-first it lands on the idle TaskTracker 1
    jobs = [job("old", SORT, 2, 1, 0), job("new", SORT, 1, 1, 0)]
    start = np.array([[2, 0], [0, 0]])
    by_index = place(jobs, np.ones((2, 3)), start_map=start)
    free_first = place(jobs, np.ones((2, 3)), start_map=start, order=[1, 0])
    assert by_index.maps[1].tolist() == [1, 0]
    assert free_first.maps[1].tolist() == [0, 1] and free_first.maps[0].tolist() == [2, 0]
    with pytest.raises(ValueError, match="every TaskTracker exactly once"):
        place(jobs, np.ones((2, 3)), order=[0, 0])


def test_reducers_come_before_carried_over_maps() -> None:
    # "done" has no maps left and 2 reducers pending (reduce profile: mem 0.6); the previous
    # placement filled both TaskTrackers with maps of "busy": maps make way for the reducers
    done = job("done", SORT, 0, 0, 2, reduce_phase=True)
    busy = job("busy", SELECT, 100, 1, 0)
    start = np.array([[0, 0], [5, 5]])  # 5 Select maps: I/O 1.0 on each TaskTracker
    p = place([done, busy], np.ones((2, 3)), start_map=start)
    assert p.reducers[0].tolist() == [1, 1]
    assert np.all(usage(p, [done, busy], 2) <= 1 + 1e-9)
    assert np.array_equal(p.maps, reference_place([done, busy], np.ones((2, 3)),
                                                  start_map=start).maps)


def test_pending_bounds_and_restart_from_an_infeasible_start() -> None:
    jobs = [job("a", SORT, 3, 3, 1), job("b", SELECT, 2, 1, 0)]
    p = place(jobs, np.ones((3, 3)))
    assert p.maps[0].sum() <= 3 and p.maps[1].sum() <= 2 and p.reducers[0].sum() <= 1
    bad = np.array([[9, 9, 9], [0, 0, 0]])
    q = place(jobs, np.ones((3, 3)), start_map=bad)
    assert np.all(usage(q, jobs, 3) <= 1 + 1e-9)


def test_shuffling_reducers_count_against_every_host() -> None:
    heavy = dict(map_demand=np.array([0.1, 0.0, 0.1]),
                 reduce_demand=np.array([0.1, 0.1, 0.1]),
                 shuffle_per_map=np.array([0.0, 0.3, 0.0]))
    jobs = [job("s", heavy, 50, 50, 2, parallel_copies=5)]
    p = place(jobs, np.ones((2, 3)))
    # each reducer shuffles from at most 3 maps before its host's I/O is full (3 x 0.3)
    assert p.maps.sum() == 3
    assert np.all(usage(p, jobs, 2) <= 1 + 1e-9)


profiles = st.sampled_from([SORT, SELECT])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(profiles, st.integers(0, 40), st.integers(0, 40), st.integers(0, 6),
                          st.booleans()), min_size=1, max_size=6),
       st.integers(1, 6), st.integers(1, 3))
def test_never_exceeds_any_resource(specs, tts: int, rounds: int) -> None:
    jobs = [job(f"j{i}", prof, s_pend, min(s_req, s_pend), r_pend, reduce_phase=rp)
            for i, (prof, s_pend, s_req, r_pend, rp) in enumerate(specs)]
    cap = np.ones((tts, 3))
    p = place(jobs, cap, rounds=rounds)
    assert np.all(usage(p, jobs, tts) <= cap + 1e-9)
    for j, jb in enumerate(jobs):
        assert p.maps[j].sum() <= jb.s_pend and p.reducers[j].sum() <= jb.r_pend
        assert p.reducers[j].max(initial=0) <= max(1, -(-jb.r_pend // tts))
    # work conserving: no job with maps left fits anywhere after the last round
    if p.rounds < rounds:
        for jb_i, jb in enumerate(jobs):
            if p.maps[jb_i].sum() < jb.s_pend:
                free = cap - usage(p, jobs, tts)
                assert not np.any(np.all(free + 1e-9 >= jb.map_demand, axis=1)) or (
                    not jb.reduce_phase and p.reducers[jb_i].any())


@pytest.mark.parametrize("rounds", [1, 3])
def test_deterministic(rounds: int) -> None:
    jobs = [job("a", SORT, 30, 5, 2), job("b", SELECT, 30, 20, 1), job("c", SORT, 5, 5, 0)]
    a = place(jobs, np.ones((4, 3)), rounds=rounds)
    b = place(jobs, np.ones((4, 3)), rounds=rounds)
    assert np.array_equal(a.maps, b.maps) and np.array_equal(a.reducers, b.reducers)


# -- the optimised place() against the implementation it replaced ---------------------------
# tests/_ras_placement_reference.py is the straightforward version (vectorised room checks
# recomputed from the matrices); the incremental one must give the very same Placement.

COMBINE = dict(map_demand=np.array([0.25, 0.10, 0.10]),
               reduce_demand=np.array([0.10, 0.10, 0.25]),
               shuffle_per_map=np.array([0.0, 0.00015, 0.0]))
HEAVY = dict(map_demand=np.array([0.1, 0.0, 0.1]), reduce_demand=np.array([0.1, 0.1, 0.1]),
             shuffle_per_map=np.array([0.0, 0.3, 0.0]))
NOMAP = dict(map_demand=np.zeros(3), reduce_demand=np.array([0.3, 0.2, 0.3]),
             shuffle_per_map=np.array([0.05, 0.1, 0.0]))


def same_placement(jobs: list[PlacementJob], cap: np.ndarray, **kw) -> None:
    reference: Callable[..., Any] = reference_place  # takes our PlacementJobs alike
    want, got = reference(jobs, cap, **kw), place(jobs, cap, **kw)
    assert got.maps.dtype == want.maps.dtype
    assert np.array_equal(got.maps, want.maps)
    assert np.array_equal(got.reducers, want.reducers)
    assert np.array_equal(got.utility, want.utility)
    assert got.rounds == want.rounds


def random_jobs(rng: np.random.Generator, n: int) -> list[PlacementJob]:
    out: list[PlacementJob] = []
    for i in range(n):
        if out and rng.random() < 0.3:  # a twin of an earlier job: ties in utility
            twin = out[int(rng.integers(len(out)))]
            out.append(PlacementJob(f"j{i}", *list(vars(twin).values())[1:]))
            continue
        if rng.random() < 0.25:  # a random profile (some with zero entries)
            prof = {k: rng.choice([0.0, 0.05, 0.1, 0.2, 0.35, 0.5], 3) * s for k, s in
                    (("map_demand", 1), ("reduce_demand", 1), ("shuffle_per_map", 0.5))}
        else:
            prof = [SORT, SELECT, COMBINE, HEAVY, NOMAP][rng.integers(5)]
        s_pend = int(rng.integers(0, 60))
        out.append(job(f"j{i}", prof, s_pend, int(rng.integers(0, s_pend + 1)),
                       int(rng.integers(0, 8)), reduce_phase=bool(rng.random() < 0.3),
                       parallel_copies=int(rng.integers(0, 7))))
    return out


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 10), st.integers(0, 4),
       st.sampled_from(["none", "previous", "random"]), st.booleans(), st.booleans())
def test_same_as_reference(seed: int, n: int, tts: int, rounds: int, start: str,
                           uneven: bool, twins: bool) -> None:
    rng = np.random.default_rng(seed)
    jobs = random_jobs(rng, n)
    if twins:  # all alike: utilities tie, and removals stop exactly at the floor
        jobs = [PlacementJob(f"t{i}", *list(vars(jobs[0]).values())[1:]) for i in range(n)]
    cap = rng.choice([0.5, 1.0, 1.0, 1.5], (tts, 3)) if uneven else np.ones((tts, 3))
    start_map = None
    if start == "previous":
        start_map = place(jobs, cap, rounds=1).maps
    elif start == "random":
        start_map = rng.integers(0, 4, (n, tts)) * (rng.random((n, tts)) < 0.3)
    same_placement(jobs, cap, rounds=rounds, start_map=start_map)


@pytest.mark.parametrize("seed", range(4))
def test_same_as_reference_at_scale(seed: int) -> None:
    # RAS-workload shaped (Table 2 profiles, s_pend in the hundreds), cold then warm
    rng = np.random.default_rng(seed)
    n, tts = 60, 40
    jobs = [job(f"j{i}", [SORT, SELECT, COMBINE][rng.integers(3)], int(sp),
                int(rng.integers(1, sp + 1)), int(rng.integers(1, 21)),
                reduce_phase=bool(rng.random() < 0.2))
            for i, sp in enumerate(rng.integers(100, 1000, n))]
    cap = np.ones((tts, 3))
    same_placement(jobs, cap)
    same_placement(jobs, cap, start_map=place(jobs, cap).maps)


def test_same_as_reference_edge_cases() -> None:
    cap = np.ones((3, 3))
    same_placement([], cap)
    same_placement([], cap, rounds=0)
    jobs = [job("a", SORT, 5, 0, 0), job("b", NOMAP, 0, 0, 3), job("c", HEAVY, 9, 9, 2)]
    same_placement(jobs, cap, rounds=0)
    same_placement(jobs, np.zeros((3, 3)))
    same_placement(jobs, cap, start_map=np.array([[1, 0, 2], [0, 0, 0], [3, 3, 3]]))
    # twins: taking job 2's map leaves it exactly at the floor (-inf, -32), which does not
    # cross it, so the map goes (to job 1, by index) -- only a strict < keeps the paper's rule
    twins = [job(f"t{i}", SORT, 34, 32, 0) for i in range(4)]
    same_placement(twins, np.ones((1, 3)), rounds=1, start_map=np.array([[0], [0], [1], [0]]))
    assert place(twins, np.ones((1, 3)), rounds=1,
                 start_map=np.array([[0], [0], [1], [0]])).maps.ravel().tolist() == [1, 1, 0, 0]
    # the richest holders tie at u = 0 (s_alloc = s_req) but fall differently: the lowest
    # index (a) goes first, crosses the floor of c (log 6 / log 10 - 1) and is put back
    tie = [job("a", SELECT, 10, 3, 0), job("b", SELECT, 10, 5, 0), job("c", SELECT, 10, 10, 0)]
    start = np.array([[3, 0], [5, 0], [0, 6]])
    same_placement(tie, np.full((2, 3), 1.8), rounds=1, start_map=start)
    got = place(tie, np.full((2, 3), 1.8), rounds=1, start_map=start)
    assert got.maps.tolist() == [[3, 0], [5, 0], [1, 9]]
