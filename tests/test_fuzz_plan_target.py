"""Fuzzing the ``--target`` parser of ``utilon plan``: a ``Target`` or one clean line."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from fuzzing import assert_clean_error, fuzz_settings
from utilon.errors import UtilonError
from utilon.plan import METRICS, OPS, parse_target

_PIECES = st.sampled_from([*METRICS, "p99 delta", "p0 delta", "p100 delta", "p99.9 delta",
                           "delta", "p", "", " "])
_NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                     st.integers(-10**30, 10**30).map(str), st.sampled_from(
                         ["1%", "1e999", "-0", ".5", "5.", "1e-400", "%", "nan", "inf"]))


def _check(text: str) -> None:
    try:
        t = parse_target(text)
    except UtilonError as e:
        assert_clean_error(e, "--target")
        return
    assert t.op in OPS and math.isfinite(t.value)
    assert t.metric in (*METRICS, "delta")
    assert (t.quantile is None) == (t.metric != "delta")
    if t.quantile is not None:
        assert 0 < t.quantile <= 1
    t.miss_budget(300)  # never raises


@fuzz_settings()
@given(st.text(max_size=60))
def test_arbitrary_text(text: str) -> None:
    _check(text)


@fuzz_settings()
@given(_PIECES, st.sampled_from([*OPS, "=", "==", "=<", "", "<<"]), _NUMBERS,
       st.sampled_from(["", " ", "  ", "\t"]))
def test_near_valid_targets(metric: str, op: str, number: str, space: str) -> None:
    _check(f"{metric}{space}{op}{space}{number}")
