"""Issue 47: ``reproduce alsched --quick`` in under two minutes.  The policy re-submits every
pending stage's request each decision; what is derived from a bound request (its class
names, its value with nothing, its bound) is computed once per bound expression, not once
per request per decision.  Counted, not timed; and the memos never change an answer."""

from __future__ import annotations

from types import MappingProxyType

import pytest

import utilon.policies.alsched.solvers.problem as problem_module
from builders import check_run_invariants, run
from utilon.errors import UtilonError
from utilon.policies import make_policy
from utilon.policies.alsched.jobs import request_for, workload
from utilon.policies.alsched.lang import parse
from utilon.policies.alsched.lang.ast import Node
from utilon.policies.alsched.solvers import Problem, Request, solve_greedy
from utilon.policies.alsched.solvers.greedy import _kinds
from utilon.repro import alsched as R


def test_a_bound_expression_is_walked_once_however_often_it_is_submitted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    walks = {"n": 0}
    class_names = problem_module.class_names

    def counted(e: object) -> frozenset[str]:
        walks["n"] += 1
        return class_names(e)  # type: ignore[arg-type]

    monkeypatch.setattr(problem_module, "class_names", counted)
    problem_module._checked_names.memo.clear()
    cl = R.cluster(1, 8)
    jobs = workload(("nbody", "pi", "local"), 40, duration=10.0, speedup=2.0, seed=3)
    pol = make_policy("alsched", {"constraints": "soft"})
    res = run(cl, jobs, pol)
    check_run_invariants(res, cl, jobs)
    submitted = sum(rec.requests for rec in pol.solve_log)  # type: ignore[attr-defined]
    bound = {id(b[0]) for b in pol._bound.values() if b is not None}  # type: ignore[attr-defined]
    assert submitted > 3 * len(bound)  # requests are re-submitted many times ...
    assert walks["n"] <= len(bound)  # ... and each bound expression is walked once


def test_jobs_of_a_type_share_one_parsed_request() -> None:
    a, b = workload(("nbody",), 2, duration=10.0, speedup=2.0, seed=0)
    assert a.stages[0].request is b.stages[0].request is request_for("nbody")


def test_equal_expressions_share_a_kind_whatever_their_identity() -> None:
    text = "(max nck(m0, 2, 2) lnck(all, 2, 1))"
    classes = {"m0": (0,), "all": (0, 1)}
    one, two = parse(text), parse(text)
    assert one is not two and one == two
    p = Problem((4, 4), (Request("a", one, classes), Request("b", two, classes),
                         Request("c", one, {"m0": (1,), "all": (0, 1)})))
    assert _kinds(p) == [0, 0, 1]


def test_memoised_class_sets_only_for_read_only_classes() -> None:
    expr = parse("lnck(c, 2, 1)")
    classes = {"c": (0,)}
    first = Request("a", expr, classes)
    classes["c"] = (1,)  # a plain dict may change between two requests: never memoised
    second = Request("b", expr, classes)
    assert first.class_sets["c"] == {0} and second.class_sets["c"] == {1}
    frozen = MappingProxyType({"c": (0,)})
    assert Request("x", expr, frozen).class_sets is Request("y", expr, frozen).class_sets


def test_a_memo_holds_its_argument_and_empties_when_full() -> None:
    memo: problem_module._ByIdentity[Node, float] = problem_module._ByIdentity(
        lambda e: e.upper(), size=2)
    exprs = [parse(f"lnck(all, 1, {u})") for u in (1, 2, 3)]
    assert [memo(e) for e in exprs] == [1.0, 2.0, 3.0]
    assert len(memo.memo) == 1  # emptied once full, then the third entry
    assert all(memo.memo[k][0] is e for e in exprs[2:] for k in [id(e)])


def test_out_of_range_classes_are_refused_whether_memoised_or_not() -> None:
    expr = parse("lnck(c, 1, 1)")
    for classes in ({"c": (0, 5)}, MappingProxyType({"c": (0, 5)})):
        with pytest.raises(UtilonError, match=r"names machine 5, out of range 0\.\.1"):
            Problem((1, 1), (Request("a", expr, classes),))
    sol = solve_greedy(Problem((1, 1), (Request("a", expr, MappingProxyType({"c": (1,)})),)))
    assert sol.alloc == {"a": {1: 1}}
