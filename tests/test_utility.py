"""Time-utility functions: values, vectorisation, monotonicity, bounds, goals, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from utilon.errors import ModelError
from utilon.model import (
    UTILITY_KINDS,
    Constant,
    DeadlineStep,
    PiecewiseLinear,
    Sigmoid,
    SoftHard,
    TimeUtility,
    TruncatedLinear,
)
from utilon.model.utility import is_non_increasing

finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=0, max_value=1e4, allow_nan=False, allow_infinity=False)
times = st.lists(st.floats(min_value=-1e5, max_value=1e5, allow_nan=False), min_size=2,
                 max_size=40)


@st.composite
def utilities(draw: st.DrawFn) -> TimeUtility:
    kind = draw(st.sampled_from(sorted(UTILITY_KINDS)))
    if kind == "deadline":
        hi = draw(finite)
        return DeadlineStep(draw(finite), hi, hi - draw(positive))
    if kind == "soft_hard":
        origin = draw(finite)
        soft = origin + draw(st.floats(min_value=1e-3, max_value=1e4))
        return SoftHard(origin, soft, soft + draw(positive), draw(positive))
    if kind == "truncated_linear":
        origin = draw(finite)
        hi = draw(finite)
        return TruncatedLinear(origin, origin + draw(positive),
                               draw(st.floats(min_value=0, max_value=10)), hi,
                               hi - draw(positive))
    if kind == "sigmoid":
        return Sigmoid(draw(positive), draw(st.floats(min_value=0, max_value=100)), draw(finite))
    if kind == "piecewise":
        n = draw(st.integers(1, 6))
        ts = sorted(draw(st.sets(st.integers(-10_000, 10_000), min_size=n, max_size=n)))
        us = sorted(draw(st.lists(finite, min_size=n, max_size=n)), reverse=True)
        return PiecewiseLinear(tuple(zip(map(float, ts), us, strict=True)))
    return Constant(draw(finite))


def test_every_kind_is_registered_under_its_name() -> None:
    assert set(UTILITY_KINDS) == {"deadline", "soft_hard", "truncated_linear", "sigmoid",
                                  "piecewise", "constant"}
    for name, cls in UTILITY_KINDS.items():
        assert cls.kind == name


# ------------------------------------------------------------------------------ values
def test_deadline_step_values() -> None:
    u = DeadlineStep(100, 5, 1)
    assert u.value(0) == 5
    assert u.value(100) == 5  # completing exactly at the deadline meets it
    assert u.value(100.0001) == 1
    assert u.goal == 100
    assert u.bounds == (1, 5)
    assert u.to_dict() == {"kind": "deadline", "deadline": 100, "value": 5, "late_value": 1}
    assert DeadlineStep(10).bounds == (0.0, 1.0)


def test_soft_hard_values() -> None:
    u = SoftHard(origin=0, soft=100, hard=150, value_before=2)
    assert u.value(50) == 2
    assert u.value(100) == 2
    assert u.value(125) == pytest.approx(2 - 2 / 100 * 25)  # slope value / (soft - origin)
    assert u.value(150) == pytest.approx(1.0)
    assert u.value(150.5) == 0.0  # after the hard bound
    assert u.goal == 100
    assert u.bounds == (0.0, 2)
    # hard > 2 x soft: the linear decay reaches 0 before the hard bound and is clamped
    v = SoftHard(origin=0, soft=10, hard=100)
    assert v.value(20) == 0.0
    assert v.value(30) == 0.0
    assert v.to_dict()["kind"] == "soft_hard"


def test_truncated_linear_values() -> None:
    u = TruncatedLinear(origin=10, deadline=60, slope=0.01, value_before=1, late_value=0.2)
    assert u.value(5) == 1  # before the origin: full value
    assert u.value(10) == 1
    assert u.value(40) == pytest.approx(0.7)
    assert u.value(60) == pytest.approx(0.5)
    assert u.value(61) == 0.2
    assert u.goal == 60
    assert u.bounds == (0.2, 1)
    steep = TruncatedLinear(origin=0, deadline=100, slope=1, value_before=1, late_value=0.1)
    assert steep.value(50) == 0.1  # the linear part never drops below late_value


def test_sigmoid_values() -> None:
    u = Sigmoid(p=4, mu=0.5, d=100)
    assert u.value(100) == pytest.approx(2)
    assert u.value(0) == pytest.approx(4)
    assert u.value(1e6) == pytest.approx(0, abs=1e-12)
    assert u.value(102) == pytest.approx(4 / (1 + math.exp(1)))
    assert u.value(98) == pytest.approx(4 / (1 + math.exp(-1)))
    assert u.goal == 100
    assert u.bounds == (0.0, 4)
    flat = Sigmoid(p=4, mu=0, d=100)
    assert flat.value(-1e9) == flat.value(1e9) == 2
    assert flat.bounds == (2, 2)


def test_piecewise_values_and_goal() -> None:
    u = PiecewiseLinear(((0.0, 10.0), (100.0, 10.0), (200.0, 0.0), (300.0, -5.0)))
    assert u.value(-50) == 10  # constant outside the table
    assert u.value(100) == 10
    assert u.value(150) == pytest.approx(5)
    assert u.value(250) == pytest.approx(-2.5)
    assert u.value(1e9) == -5
    assert u.goal == 100  # the last time at full value
    assert u.bounds == (-5, 10)
    assert u.to_dict() == {"kind": "piecewise",
                           "points": [[0.0, 10.0], [100.0, 10.0], [200.0, 0.0], [300.0, -5.0]]}
    assert PiecewiseLinear(((5.0, 1.0),)).goal is None
    assert PiecewiseLinear(((5.0, 1.0), (9.0, 1.0))).goal is None  # never decreases
    # lists are accepted and normalised to tuples
    assert PiecewiseLinear([[0, 1], [1, 0]]).points == ((0.0, 1.0), (1.0, 0.0))  # type: ignore


def test_constant_values() -> None:
    u = Constant(3)
    assert u.value(-1e9) == u.value(1e9) == 3
    assert u.goal is None
    assert u.bounds == (3, 3)
    assert Constant().value(0) == 1.0
    np.testing.assert_array_equal(u.values(np.zeros((2, 3))), np.full((2, 3), 3.0))


# ------------------------------------------------------------------------------ properties
@given(utilities(), times)
def test_vectorised_values_match_scalar_value(u: TimeUtility, ts: list[float]) -> None:
    arr = np.asarray(ts)
    vec = u.values(arr)
    assert vec.shape == arr.shape
    scalar = np.array([u.value(t) for t in ts])
    np.testing.assert_allclose(vec, scalar, rtol=1e-9, atol=1e-12)


@given(utilities(), times)
def test_non_increasing_and_within_bounds(u: TimeUtility, ts: list[float]) -> None:
    assert is_non_increasing(u, ts)
    vals = u.values(np.sort(np.asarray(ts)))
    assert np.all(np.diff(vals) <= 1e-9)
    lo, hi = u.bounds
    assert lo <= hi
    for t in ts:
        v = u.value(t)
        assert math.isfinite(v)
        assert lo - 1e-9 <= v <= hi + 1e-9


@given(utilities())
def test_goal_and_dict(u: TimeUtility) -> None:
    assert u.to_dict()["kind"] == u.kind
    g = u.goal
    assert g is None or math.isfinite(g)


def test_values_keeps_array_shape() -> None:
    grid = np.linspace(0, 200, 12).reshape(3, 4)
    for u in (DeadlineStep(100), SoftHard(0, 50, 150), TruncatedLinear(0, 100, 0.001),
              Sigmoid(1, 0.1, 100), PiecewiseLinear(((0.0, 1.0), (100.0, 0.0))), Constant()):
        out = u.values(grid)
        assert out.shape == grid.shape
        np.testing.assert_allclose(out.ravel(), [u.value(t) for t in grid.ravel()])


def test_is_non_increasing_helper_detects_a_rise() -> None:
    class Rising(Constant):
        def value(self, t: float) -> float:
            return t

    assert not is_non_increasing(Rising(), [0.0, 1.0])
    assert is_non_increasing(Constant(), [3.0, 1.0, 2.0])


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: DeadlineStep(10, 1, 2), "late_value 2 exceeds value 1.*must not increase"),
        (lambda: DeadlineStep(math.inf), "'deadline' must be a finite number"),
        (lambda: DeadlineStep(10, math.nan), "'value' must be a finite number"),
        (lambda: DeadlineStep(10, 1, -math.inf), "'late_value' must be a finite number"),
        (lambda: SoftHard(10, 10, 20), "soft bound 10 must be after the job's submit time 10"),
        (lambda: SoftHard(0, 20, 10), "hard bound 10 is before soft bound 20"),
        (lambda: SoftHard(0, 10, 20, -1), "value must be >= 0"),
        (lambda: SoftHard(0, math.nan, 20), "'soft' must be a finite number"),
        (lambda: TruncatedLinear(0, 10, -0.5), "slope -0.5 is negative"),
        (lambda: TruncatedLinear(10, 5, 0.1), "deadline is before the job's submit time"),
        (lambda: TruncatedLinear(0, 10, 0.1, 1, 2), "late_value exceeds value"),
        (lambda: TruncatedLinear(0, 10, math.inf), "'slope' must be a finite number"),
        (lambda: Sigmoid(-1, 1, 0), "priority p=-1"),
        (lambda: Sigmoid(1, -0.1, 0), "mu=-0.1 must be >= 0.*grow with completion time"),
        (lambda: Sigmoid(1, 1, math.inf), "'d' must be a finite number"),
        (lambda: PiecewiseLinear(()), "at least one"),
        (lambda: PiecewiseLinear(((0.0, 1.0), (0.0, 0.5))), "times must increase strictly"),
        (lambda: PiecewiseLinear(((5.0, 1.0), (1.0, 0.5))), "times must increase strictly"),
        (lambda: PiecewiseLinear(((0.0, 1.0), (10.0, 2.0))),
         "rises from 1.0 to 2.0 between t=0.0 and t=10.0.*must not increase"),
        (lambda: PiecewiseLinear(((0.0, math.nan),)), "'utility' must be a finite number"),
        (lambda: PiecewiseLinear(((math.inf, 1.0),)), "'time' must be a finite number"),
        (lambda: Constant(math.inf), "'value' must be a finite number"),
    ],
)
def test_invalid_parameters_raise_model_error(build, match: str) -> None:  # type: ignore
    with pytest.raises(ModelError, match=match) as info:
        build()
    # one printable line, no traceback noise
    assert "\n" not in info.value.one_line()
    assert str(info.value) == info.value.one_line()
