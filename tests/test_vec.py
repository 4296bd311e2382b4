"""``core.vec``: the written-out vector operations, and the compiled build's (``vec_native``),
equal the ``map`` forms bit for bit."""

from __future__ import annotations

from operator import add, gt, le, sub

import pytest
from hypothesis import given
from hypothesis import strategies as st

from utilon.core import vec_native
from utilon.core.vec import MAX_UNROLLED, hot_ops, ops

floats = st.floats(allow_nan=True, allow_infinity=True, width=64)


def bits(xs: list[float]) -> list[str]:
    return [x.hex() for x in xs]  # NaN and -0.0 compare by their bits


@given(st.integers(1, MAX_UNROLLED + 3).flatmap(
    lambda n: st.tuples(st.lists(floats, min_size=n, max_size=n),
                        st.lists(floats, min_size=n, max_size=n))))
def test_ops_equal_the_map_forms(pair: tuple[list[float], list[float]]) -> None:
    a, b = pair
    v = ops(len(a))
    assert bits(v.add(a, tuple(b))) == bits(list(map(add, a, b)))
    assert bits(v.sub(a, b)) == bits(list(map(sub, a, b)))
    assert v.le(a, b) == all(map(le, a, b))
    assert v.gt_any(a, b) == any(map(gt, a, b))


@given(st.integers(1, MAX_UNROLLED + 3).flatmap(
    lambda n: st.tuples(st.lists(floats, min_size=n, max_size=n),
                        st.lists(st.one_of(floats, st.integers(-2**40, 2**40)), min_size=n,
                                 max_size=n))))
def test_the_compiled_loops_equal_the_map_forms(pair: tuple[list[float], list[float]]) -> None:
    """As the hot path calls them: a machine's list of floats and a task's tuple, whose
    elements may be ints (read as doubles, as Python's mixed arithmetic does)."""
    a, b = pair
    t = tuple(b)
    assert bits(vec_native.add(a, t)) == bits(list(map(add, a, b)))
    assert bits(vec_native.sub(a, t)) == bits(list(map(sub, a, b)))
    assert vec_native.le(t, a) == all(map(le, b, a))
    assert vec_native.le(tuple(a), [float(x) for x in b]) == all(map(le, a, b))
    assert vec_native.gt_any(a, [float(x) for x in b]) == any(map(gt, a, b))


def test_the_hot_path_takes_the_compiled_loops_when_compiled() -> None:
    from utilon import native

    assert native.compiled() == vec_native.COMPILED
    h = hot_ops(3)
    assert (h.add is vec_native.add) == vec_native.COMPILED
    assert h.add([1.0, 2.0, 3.0], (1, 1, 1)) == [2.0, 3.0, 4.0]


def test_ops_are_cached_and_written_out_up_to_the_limit() -> None:
    assert ops(3) is ops(3)
    assert ops(3).add.__code__.co_filename == "<string>"  # generated
    assert ops(MAX_UNROLLED + 1).add.__code__.co_filename != "<string>"  # the map form
    assert ops(1).add([1.5], [2.0]) == [3.5]


def test_ops_refuse_an_empty_vector() -> None:
    with pytest.raises(ValueError, match="at least one element"):
        ops(0)


def test_generated_functions_pickle_by_reference_into_a_fresh_process() -> None:
    """Parallel runs send results (which hold the core, which holds these functions) between
    processes: a fresh interpreter that never generated them resolves them by name."""
    import pickle
    import subprocess
    import sys

    data = pickle.dumps(ops(5))
    code = ("import pickle, sys; v = pickle.loads(sys.stdin.buffer.read()); "
            "print(v.add([1.0] * 5, [0.5] * 5), v.le([1.0] * 5, [1.0] * 5))")
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True,
                         check=True).stdout.decode()
    assert out.strip() == "[1.5, 1.5, 1.5, 1.5, 1.5] True"
    assert pickle.loads(pickle.dumps(ops(MAX_UNROLLED + 2))).add([1.0] * 18, [1.0] * 18) == [
        2.0] * 18


def test_a_finished_simulation_pickles() -> None:
    import pickle

    from builders import make_cluster, make_job
    from utilon.policies import make_policy
    from utilon.sim import simulate

    res = simulate(make_cluster(2), [make_job("a"), make_job("b", 1.0)], make_policy("fifo"))
    back = pickle.loads(pickle.dumps(res))
    assert back.core.attempts == res.core.attempts and back.end_time == res.end_time


def test_an_unknown_attribute_is_still_an_error() -> None:
    import utilon.core.vec as vec

    for name in ("_add0", f"_add{MAX_UNROLLED + 1}", "_mul3", "nothing"):
        with pytest.raises(AttributeError):
            getattr(vec, name)
