"""Resources: an immutable name -> amount mapping with vector conversion and arithmetic."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from utilon.errors import ModelError
from utilon.model import Resources

NAMES = ("cpu", "mem", "slots")
amounts = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
vectors = st.fixed_dictionaries({n: amounts for n in NAMES})


def test_absent_names_are_zero_and_zeros_are_dropped() -> None:
    r = Resources(cpu=4, mem=0)
    assert r["cpu"] == 4.0
    assert r["mem"] == 0.0
    assert r["gpu"] == 0.0
    assert r.get("gpu", 7.0) == 7.0
    assert r.names == ("cpu",)
    assert r == Resources(cpu=4)
    assert not Resources()
    assert not Resources(cpu=0)
    assert Resources(cpu=1)


def test_mapping_and_keywords_merge_and_sort() -> None:
    r = Resources({"mem": 2, "cpu": 1}, slots=3, mem=5)
    assert r.items == (("cpu", 1.0), ("mem", 5.0), ("slots", 3.0))
    assert r.as_dict() == {"cpu": 1.0, "mem": 5.0, "slots": 3.0}
    assert hash(r) == hash(Resources(slots=3, cpu=1, mem=5))
    assert repr(r) == "Resources(cpu=1, mem=5, slots=3)"


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_non_finite_amount_raises(bad: float) -> None:
    with pytest.raises(ModelError, match="'cpu' must be finite"):
        Resources(cpu=bad)


def test_frozen() -> None:
    r = Resources(cpu=1)
    with pytest.raises(AttributeError):
        r.items = ()  # type: ignore[misc]


def test_vector_round_trip_orders_by_given_names() -> None:
    r = Resources(cpu=2, mem=8)
    assert r.vector(("mem", "cpu", "slots")) == (8.0, 2.0, 0.0)
    assert Resources.from_vector(("mem", "cpu", "slots"), (8.0, 2.0, 0.0)) == r
    with pytest.raises(ValueError):
        Resources.from_vector(("cpu",), (1.0, 2.0))


def test_arithmetic() -> None:
    a = Resources(cpu=4, mem=16)
    b = Resources(cpu=1, slots=1)
    assert a + b == Resources(cpu=5, mem=16, slots=1)
    assert a - b == Resources(cpu=3, mem=16, slots=-1)
    assert (a - a) == Resources()
    assert a * 0.5 == Resources(cpu=2, mem=8)
    assert 2 * b == Resources(cpu=2, slots=2)
    assert not (a - b).is_nonnegative()
    assert a.is_nonnegative()


def test_fits_with_tolerance_and_missing_names() -> None:
    cap = Resources(cpu=4, mem=16)
    assert Resources(cpu=4, mem=16).fits(cap)
    assert Resources(cpu=4 + 1e-12).fits(cap)
    assert not Resources(cpu=4.001).fits(cap)
    assert not Resources(gpu=1).fits(cap)  # a resource the machine lacks
    assert Resources().fits(cap)
    assert Resources(cpu=1) <= cap
    assert not cap <= Resources(cpu=1)


@given(vectors, vectors)
def test_add_sub_inverse_and_fits(x: dict[str, float], y: dict[str, float]) -> None:
    a, b = Resources(x), Resources(y)
    s = a + b
    for n in NAMES:
        assert s[n] == pytest.approx(x[n] + y[n])
        assert (s - b)[n] == pytest.approx(x[n], abs=1e-6 * (1 + x[n] + y[n]))
    assert a.fits(s) and b.fits(s)
    assert s.vector(NAMES) == tuple(s[n] for n in NAMES)
