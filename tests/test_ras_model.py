"""RAS's performance model (Eqs. 1–3) and completion-time estimator (issue 8, first part)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from utilon.policies.ras.estimator import required_map_slots
from utilon.policies.ras.utility import job_utility, map_utility, order_key, reduce_utility


def test_fig2_example_values() -> None:
    """The job of the paper's Fig. 2: s_req = 20, s_pend = 35, r_pend = 10."""
    assert map_utility(20, 20, 35) == 0.0  # exactly satisfied
    assert map_utility(35, 20, 35) == 1.0  # every pending map placed
    assert map_utility(27.5, 20, 35) == pytest.approx(0.5)  # linear above s_req
    assert map_utility(10, 20, 35) == pytest.approx(math.log(10) / math.log(20) - 1)
    assert map_utility(1, 20, 35) == -1.0  # one slot: log 1 = 0
    assert map_utility(0, 20, 35) == -math.inf  # no progress at all
    assert reduce_utility(10, 10) == 0.0
    assert reduce_utility(5, 10) == pytest.approx(math.log(5) / math.log(10) - 1)
    assert reduce_utility(1, 10) == -1.0 and reduce_utility(0, 10) == -1.0
    assert job_utility(35, 20, 35, 10, 10) == 1.0
    assert job_utility(35, 20, 35, 5, 10) == pytest.approx(math.log(5) / math.log(10))


def test_corners() -> None:
    assert map_utility(0, 0, 0) == 1.0  # no map left
    assert map_utility(3, 3, 3) == 1.0  # s_req = s_pend: all required = all placed
    assert map_utility(0, 1, 5) == -math.inf  # s_req = 1, nothing placed
    assert map_utility(1, 1, 5) == 0.0
    assert map_utility(50, 20, 35) == 1.0  # more slots than tasks: capped
    assert reduce_utility(0, 0) == 0.0 and reduce_utility(0, 1) == -1.0
    assert reduce_utility(1, 1) == 0.0
    assert job_utility(0, 0, 0, 0, 0) == 1.0  # nothing pending: fully satisfied


def test_order_key_puts_hungrier_starving_jobs_first() -> None:
    a = order_key(-math.inf, 30)
    b = order_key(-math.inf, 5)
    c = order_key(-0.5, 40)
    assert sorted([c, b, a]) == [a, b, c]


small = st.integers(min_value=0, max_value=200)


@given(s_req=small, s_pend=small, r_pend=small, r_alloc=small, s_alloc=small)
def test_utility_is_monotone_and_bounded(s_req: int, s_pend: int, r_pend: int, r_alloc: int,
                                         s_alloc: int) -> None:
    s_req = min(s_req, s_pend)  # the estimator never requires more than is pending
    u = job_utility(s_alloc, s_req, s_pend, r_alloc, r_pend)
    assert u <= 1.0
    assert job_utility(s_alloc + 1, s_req, s_pend, r_alloc, r_pend) >= u
    assert job_utility(s_alloc, s_req, s_pend, r_alloc + 1, r_pend) >= u
    assert -1.0 <= reduce_utility(r_alloc, r_pend) <= 0.0
    assert map_utility(s_alloc, s_req, s_pend) <= 1.0


def test_required_map_slots() -> None:
    # 100 maps of 30 s in 600 s: 3,000 task-seconds over 600 s -> 5 at once
    assert required_map_slots(100, 30.0, goal=1600.0, now=1000.0) == 5
    assert required_map_slots(100, 30.0, goal=1601.0, now=1000.0) == 5  # rounds up
    assert required_map_slots(100, 31.0, goal=1600.0, now=1000.0) == 6
    assert required_map_slots(100, 30.0, goal=None, now=0.0) == 100  # as soon as possible
    assert required_map_slots(100, 30.0, goal=900.0, now=1000.0) == 100  # goal passed
    assert required_map_slots(100, 30.0, goal=1020.0, now=1000.0) == 100  # < one task left
    assert required_map_slots(4, 30.0, goal=1e9, now=0.0) == 1  # at least one
    assert required_map_slots(0, 30.0, goal=100.0, now=0.0) == 0
    with pytest.raises(ValueError, match="mean task length"):
        required_map_slots(3, 0.0, goal=100.0, now=0.0)


def test_required_map_slots_before_any_map_finished_and_with_a_reduce_phase() -> None:
    # no map measured yet: the job requires all its pending maps (§4.2, Fig. 5's Job 7) ...
    assert required_map_slots(100, 30.0, goal=1e9, now=0.0, measured=False) == 100
    # ... unless the declared prior is used instead
    assert required_map_slots(100, 30.0, goal=1e9, now=0.0, measured=False,
                              unmeasured="prior") == 1
    # the reduce phase after the last map takes its seconds off the time the maps have
    assert required_map_slots(100, 30.0, goal=1600.0, now=1000.0, reduce_length=300.0) == 10
    assert required_map_slots(100, 30.0, goal=1600.0, now=1000.0, reduce_length=590.0) == 100
