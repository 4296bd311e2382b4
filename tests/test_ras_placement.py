"""RAS's placement algorithm (Algorithm 1): resources never exceeded, reducers spread,
max-min balancing of map slots."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
