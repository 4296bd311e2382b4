"""alsched's utility language: prefix syntax, printer, builder, structured form, classes,
requests and binding; the compliance suite in tests/data/alsched/compliance.json; and
properties (round trips, parser totality, monotonicity, bounds)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utilon.errors import ModelError, UtilonError
from utilon.model.cluster import Machine
from utilon.model.resources import Resources
from utilon.policies.alsched.lang import (
    ALL,
    MAX_DEPTH,
    PAPER_NBODY,
    TASKS,
    Barrier,
    Cap,
    ClassQuery,
    Lit,
    LnCk,
    Max,
    Min,
    NCk,
    Node,
    NumTerm,
    ParseError,
    Request,
    Scale,
    SpecError,
    Sum,
    Tasks,
    barrier,
    bind,
    cap,
    class_names,
    fallback,
    from_obj,
    is_concrete,
    lnck,
    max_,
    min_,
    nck,
    parse,
    parse_number,
    preferred,
    scale,
    sum_,
    to_obj,
    to_text,
)

SUITE = Path(__file__).parent / "data" / "alsched" / "compliance.json"
CASES: list[dict[str, Any]] = json.loads(SUITE.read_text(encoding="utf-8"))


# -- helpers -------------------------------------------------------------------------------------
def machines_from(spec: list[dict[str, Any]]) -> tuple[list[Machine], list[float]]:
    ms = [Machine(m["id"], Resources(cores=m["cores"]), tuple(m.get("attributes", {}).items()))
          for m in spec]
    return ms, [float(m["cores"]) for m in spec]


def cluster() -> tuple[list[Machine], list[float]]:
    """§3.4's setting in small: two 64-core machines and four 8-core ones."""
    spec = [{"id": f"big{i}", "cores": 64, "attributes": {"rack": "r1", "gpu": True}}
            for i in range(2)]
    spec += [{"id": f"s{i}", "cores": 8, "attributes": {"rack": "r2", "disk": 100 * (i + 1)}}
             for i in range(4)]
    return machines_from(spec)


# -- the compliance suite ------------------------------------------------------------------------
def test_suite_is_large_and_well_formed() -> None:
    assert len(CASES) >= 45
    assert len({c["name"] for c in CASES}) == len(CASES)
    for c in CASES:
        assert ("utility" in c) != ("error" in c), c["name"]
        assert ("column" in c) == ("error" in c), c["name"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_compliance(case: dict[str, Any]) -> None:
    strict = bool(case.get("strict", False))
    if "error" in case:
        with pytest.raises(ParseError) as info:
            parse(case["expr"], strict=strict)
        assert case["error"] in info.value.message
        assert info.value.column == case["column"]
        return
    expr = parse(case["expr"], strict=strict)
    if "bind" in case:
        b = case["bind"]
        ms, units = machines_from(b["machines"])
        req = Request.from_spec({"expr": case["expr"], "classes": b.get("classes", {}),
                                 "each": b.get("each", {})})
        bound = req.bind(ms, units, b.get("tasks", 1))
        if case["utility"] is None:
            assert bound is None
            return
        assert bound is not None
        ids = {m.id: i for i, m in enumerate(ms)}
        value = bound.utility({ids[k]: v for k, v in case["alloc"].items()})
    else:
        value = expr.evaluate(case["alloc"])
    assert value == pytest.approx(case["utility"], abs=1e-9)


# -- parse ---------------------------------------------------------------------------------------
def test_paper_expression_reads_as_fig5() -> None:
    e = parse(PAPER_NBODY)
    left = Scale(1.0, Barrier(Lit(64), Max((NCk("i", Lit(64), Lit(64)),))))
    right = Scale(0.5, Barrier(Lit(64), LnCk("j", Cap("j"), Cap("j"))))
    assert e == Max((left, right))
    assert class_names(e) == {"i", "j"}
    assert not is_concrete(e)


def test_strict_mode_rejects_the_paper_parenthesis_with_a_caret() -> None:
    with pytest.raises(ParseError) as info:
        parse(PAPER_NBODY, strict=True, where="jobs[0].request")
    err = info.value
    assert err.where == "jobs[0].request" and err.column == 41 and err.text == PAPER_NBODY
    assert str(err).startswith("jobs[0].request: col 41: ")
    assert "\n" not in str(err)
    line, mark = err.caret().split("\n")
    assert line == PAPER_NBODY and mark == " " * 40 + "^"
    # wrapping the text in one more max balances it: (max (max A) B), same utility as Fig. 5
    left, right = parse(PAPER_NBODY).children
    assert parse(f"(max {PAPER_NBODY})", strict=True) == Max((Max((left,)), right))


def test_lenient_mode_appends_several_trailing_branches() -> None:
    e = parse("(sum nck(a,1,1)) nck(b,1,1) (max nck(c,1,1))")
    assert e == Sum((nck("a", 1, 1), nck("b", 1, 1), Max((nck("c", 1, 1),))))
    with pytest.raises(ParseError, match="col 29: unexpected ','"):
        parse("(sum nck(a,1,1)) nck(b,1,1) , nck(c,1,1)")


def test_parse_symbols_and_spellings() -> None:
    assert parse("NcK(a, TASKS, Cap(b))") == NCk("a", Tasks(), Cap("b"))
    assert parse("(BARRIER cap(\"x y\") nck(a,1,1))") == barrier(cap("x y"), nck("a", 1, 1))
    assert parse('nck("q\\"uote\\\\d", 1, 1)') == nck('q"uote\\d', 1, 1)
    assert parse("(barrier tasks lnck(a,1,1))") == barrier(TASKS, lnck("a", 1, 1))
    assert parse("\n  (max\tnck(a,1,1)\n  nck(b,2,2))  ") == max_(nck("a", 1, 1), nck("b", 2, 2))
    assert parse("nck(a, .5, 5.)") == nck("a", 0.5, 5)
    assert parse("nck(a,-0,1)") == nck("a", 0, 1)


def test_parse_multiline_error_column_counts_characters() -> None:
    text = "(max\n  nck(a 1, 1))"
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.column == 14
    assert info.value.caret().split("\n")[1].index("^") == 13


def test_parse_rejects_non_text_and_deep_nesting() -> None:
    with pytest.raises(ParseError, match="expected text"):
        parse(42)  # type: ignore[arg-type]
    deep = "(max " * (MAX_DEPTH + 5) + "nck(a,1,1)" + ")" * (MAX_DEPTH + 5)
    with pytest.raises(ParseError, match="nested deeper"):
        parse(deep)
    ok = "(max " * (MAX_DEPTH - 1) + "nck(a,1,1)" + ")" * (MAX_DEPTH - 1)
    assert isinstance(parse(ok), Max)


def test_parse_number() -> None:
    assert parse_number("cap(j)") == Cap("j")
    assert parse_number(" tasks ") == Tasks()
    assert parse_number("1e3") == Lit(1000.0)
    with pytest.raises(ParseError, match="col 3: unexpected"):
        parse_number("1 2")


# -- printer -------------------------------------------------------------------------------------
def test_printer_canonical_form() -> None:
    e = parse(PAPER_NBODY)
    assert to_text(e) == ("(max (scale 1 (barrier 64 (max nck(i, 64, 64)))) "
                          "(scale 0.5 (barrier 64 lnck(j, cap(j), cap(j)))))")
    assert to_text(sum_(nck("a b", 0.1, TASKS), min_(lnck('q"', 1e20, 3)))) == (
        '(sum nck("a b", 0.1, tasks) (min lnck("q\\"", 1e+20, 3)))')
    assert to_text(nck("x", 2.5e-7, 7)) == "nck(x, 2.5e-07, 7)"


# -- builder -------------------------------------------------------------------------------------
def test_builder_matches_the_parser() -> None:
    built = max_(scale(1, barrier(64, max_(nck("i", 64, 64)))),
                 scale(0.5, barrier(64, lnck("j", cap("j"), cap("j")))))
    assert built == parse(PAPER_NBODY)


@pytest.mark.parametrize("make", [
    lambda: nck("", 1, 1), lambda: nck(3, 1, 1), lambda: lnck("a", "1", 1),  # type: ignore
    lambda: scale(math.inf, nck("a", 1, 1)), lambda: scale(cap("a"), nck("a", 1, 1)),  # type: ignore
    lambda: barrier(-1, nck("a", 1, 1)), lambda: max_(), lambda: nck("a", True, 1),
])
def test_builder_rejects_bad_input(make: Any) -> None:
    with pytest.raises(ModelError):
        make()


# -- structured ----------------------------------------------------------------------------------
def test_structured_forms_agree() -> None:
    obj = {"max": [
        {"scale": 1, "of": {"barrier": 64, "of": "(max (nck(i,64,64)))"}},
        {"scale": 0.5, "of": {"barrier": 64, "of": {"lnck": ["j", "cap(j)", "cap(j)"]}}},
    ]}
    assert from_obj(obj) == parse(PAPER_NBODY)
    assert from_obj({"nck": {"class": "a", "k": "tasks", "u": 2}}) == nck("a", TASKS, 2)
    assert to_obj(nck("a", 2, 0.5)) == {"nck": {"class": "a", "k": 2, "u": 0.5}}
    assert from_obj(to_obj(parse(PAPER_NBODY))) == parse(PAPER_NBODY)


@pytest.mark.parametrize(("obj", "where", "message"), [
    ({"max": [{"nck": ["a", 1, 1]}, {"scale": 0.5, "of": {"barrier": 1, "off": 2}}]},
     "request.expr.max[1].of", "unknown key 'off'; expected one of: barrier, of"),
    ({"scale": 0.5}, "request.expr", "'scale' needs 'of'"),
    ({"scale": "0.5", "of": "nck(a,1,1)"}, "request.expr.scale", "plain number"),
    ({"scale": -1, "of": "nck(a,1,1)"}, "request.expr.scale", "finite number >= 0"),
    ({"barrier": -1, "of": "nck(a,1,1)"}, "request.expr.barrier", "must be >= 0"),
    ({"max": []}, "request.expr.max", "non-empty list"),
    ({"max": "nck(a,1,1)"}, "request.expr.max", "non-empty list"),
    ({"max": ["nck(a,1,1)"], "min": ["nck(a,1,1)"]}, "request.expr", "exactly one operator"),
    ({}, "request.expr", "found none"),
    (3, "request.expr", "got int"),
    ({"nck": {"class": "a", "k": 1}}, "request.expr.nck", "missing u"),
    ({"nck": {"class": "a", "k": 1, "u": 1, "w": 2}}, "request.expr.nck", "unknown key 'w'"),
    ({"nck": ["a", 1]}, "request.expr.nck", "[class, k, u]"),
    ({"nck": [5, 1, 1]}, "request.expr.nck[0]", "non-empty string"),
    ({"lnck": ["a", True, 1]}, "request.expr.lnck[1]", "got bool"),
    ({"lnck": ["a", None, 1]}, "request.expr.lnck[1]", "got null"),
    ({"lnck": ["a", 1, -3]}, "request.expr.lnck", "u must be >= 0"),
    ({"lnck": ["a", 1e400, 1]}, "request.expr.lnck[1]", "not finite"),
])
def test_structured_errors_name_the_path(obj: Any, where: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        from_obj(obj, "request.expr")
    assert info.value.where == where
    assert message in info.value.message
    assert "\n" not in str(info.value)


def test_structured_strings_keep_the_column() -> None:
    with pytest.raises(ParseError) as info:
        from_obj({"sum": ["nck(a,1,1)", "nck(b 1, 1)"]}, "request.expr")
    assert info.value.where == "request.expr.sum[1]" and info.value.column == 7
    with pytest.raises(ParseError) as info:
        from_obj({"nck": ["a", "cap(", 1]}, "e")
    assert info.value.where == "e.nck[1]" and info.value.column == 5


# -- classes -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("spec", "ids"), [
    ("all", ["big0", "big1", "s0", "s1", "s2", "s3"]),
    ({"machines": ["s1", "big0"]}, ["big0", "s1"]),
    (["s3", "s2"], ["s2", "s3"]),
    ({"rack": "r2"}, ["s0", "s1", "s2", "s3"]),
    ({"where": {"rack": ["r1", "r9"]}}, ["big0", "big1"]),
    ({"capacity.cores": {">=": 64}}, ["big0", "big1"]),
    ({"capacity.cores": {"<": 64, "!=": 8.0}}, []),
    ({"disk": {">": 100, "<=": 300}}, ["s1", "s2"]),
    ({"disk": {"in": [100, 400]}}, ["s0", "s3"]),
    ({"disk": {"!=": 100}}, ["s1", "s2", "s3"]),  # machines without disk never match
    ({"gpu": True}, ["big0", "big1"]),
    ({"gpu": 1}, []),  # YAML's true is not 1
    ({"id": {"in": ["s0", "big1"]}, "rack": "r2"}, ["s0"]),
    ({"where": {}}, ["big0", "big1", "s0", "s1", "s2", "s3"]),
])
def test_class_queries_resolve(spec: Any, ids: list[str]) -> None:
    ms, _ = cluster()
    q = ClassQuery.from_spec(spec, "classes.x")
    assert [ms[i].id for i in q.resolve(ms, "classes.x")] == ids
    assert ClassQuery.from_spec(q.to_spec()) == q
    assert hash(ClassQuery.from_spec(q.to_spec())) == hash(q)


def test_class_query_canonical_specs() -> None:
    assert ClassQuery.from_spec({"where": {}}) == ALL and ALL.to_spec() == "all"
    q = ClassQuery.from_spec({"b": {"==": 2}, "a": [1, 2], "c": {">": 1, "<": 5}})
    assert q.to_spec() == {"where": {"a": [1, 2], "b": 2, "c": {"<": 5, ">": 1}}}
    assert q == ClassQuery.from_spec({"where": {"c": {"<": 5, ">": 1}, "b": 2, "a": [1, 2]}})


@pytest.mark.parametrize(("spec", "message"), [
    ({"rack": {"=>": 3}}, "bad operator '=>'; expected one of: ==, !=, <, <=, >, >=, in"),
    ({"rack": {">": "r1"}}, "compares numbers"),
    ({"rack": {"in": "r1"}}, "non-empty list"),
    ({"rack": {}}, "must not be empty"),
    ({"rack": None}, "got None"),
    ({"rack": math.nan}, "got nan"),
    ({"machines": []}, "at least one machine id"),
    ({"machines": ["a", "a"]}, "listed twice"),
    ({"machines": "a"}, "list of machine ids"),
    ({"machines": ["a"], "where": {}}, "either 'machines' or 'where'"),
    ({"where": ["a"]}, "mapping attribute -> condition"),
    ("rack1", "expected a class query"),
    (7, "expected a class query"),
])
def test_class_query_spec_errors(spec: Any, message: str) -> None:
    with pytest.raises(SpecError) as info:
        ClassQuery.from_spec(spec, "classes.x")
    assert message in info.value.message and info.value.where.startswith("classes.x")


def test_class_query_resolve_errors_list_known_names() -> None:
    ms, _ = cluster()
    with pytest.raises(SpecError, match=r"unknown machine 'zz'; known machines: big0, big1, s0"):
        ClassQuery.from_spec({"machines": ["s0", "zz"]}).resolve(ms, "classes.x")
    with pytest.raises(SpecError) as info:
        ClassQuery.from_spec({"racks": "r1"}).resolve(ms, "classes.x")
    assert info.value.where == "classes.x.racks"
    assert "no machine has attribute 'racks'; known attributes: capacity.cores, disk, gpu" in (
        info.value.message)
    with pytest.raises(SpecError, match=r"capacity\.gpu"):
        ClassQuery.from_spec({"capacity.gpu": 1}).resolve(ms)


# -- requests and binding ------------------------------------------------------------------------
NBODY_SPEC = {"expr": PAPER_NBODY, "each": {"i": {"capacity.cores": {">=": 64}}, "j": "all"}}


def test_paper_request_binds_to_fig5_on_a_small_cluster() -> None:
    ms, units = cluster()
    bound = Request.from_spec(NBODY_SPEC).bind(ms, units, 64)
    assert bound is not None and is_concrete(bound.expr)
    assert to_text(bound.expr) == (
        "(max (scale 1 (barrier 64 (max nck(big0, 64, 64) nck(big1, 64, 64)))) "
        "(scale 0.5 (barrier 64 (sum lnck(big0, 64, 64) lnck(big1, 64, 64) lnck(s0, 8, 8) "
        "lnck(s1, 8, 8) lnck(s2, 8, 8) lnck(s3, 8, 8)))))")
    assert bound.classes == {m.id: (i,) for i, m in enumerate(ms)}
    assert set(bound.classes) == class_names(bound.expr)
    assert bound.utility({1: 64}) == 64
    assert bound.utility([32, 0, 8, 8, 8, 8]) == 32
    assert bound.utility([0, 0, 8, 8, 8, 8]) == 0
    assert bound.expr.upper() == 64
    # deterministic: the same request on the same cluster binds to the same expression
    assert Request.from_spec(NBODY_SPEC).bind(ms, units, 64) == bound


def test_request_spec_round_trip_and_forms() -> None:
    req = Request.from_spec(NBODY_SPEC, "jobs[0].request")
    assert Request.from_spec(req.to_spec()) == req
    assert Request.from_spec("nck(all, tasks, 1)").to_spec() == "nck(all, tasks, 1)"
    structured = Request.from_spec({"expr": {"nck": ["r", 1, 1]},
                                    "classes": {"r": {"machines": ["s0"]}}})
    assert structured.to_spec() == {"expr": "nck(r, 1, 1)",
                                    "classes": {"r": {"machines": ["s0"]}}}
    assert Request.of("nck(r,1,1)", classes={"r": ALL}) == Request(
        nck("r", 1, 1), (("r", ALL),))


@pytest.mark.parametrize(("spec", "where", "message"), [
    ({"expr": "nck(a,1,1)", "loops": {}}, "request", "unknown key 'loops'"),
    ({"classes": {}}, "request", "needs 'expr'"),
    ({"expr": "nck(a,1,1)", "classes": {"all": "all"}}, "request.classes", "reserved"),
    ({"expr": "nck(a,1,1)", "classes": {"a": "all"}, "each": {"a": "all"}}, "request.each",
     "declared twice"),
    ({"expr": "nck(a,1,1)", "classes": ["a"]}, "request.classes", "mapping name"),
    ({"expr": "nck(a,1,1)", "classes": {"a": {"rack": {"~": 1}}}}, "request.classes.a.rack",
     "bad operator"),
    (5, "request", "expected an expression or a mapping"),
])
def test_request_spec_errors(spec: Any, where: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        Request.from_spec(spec)
    assert info.value.where == where and message in info.value.message


def test_request_spec_parse_errors_carry_the_path() -> None:
    with pytest.raises(ParseError) as info:
        Request.from_spec({"expr": "(max nck(a,1,1)"}, "jobs[2].request")
    assert info.value.where == "jobs[2].request.expr" and info.value.column == 16


def test_loop_copies_go_into_the_parent_or_an_implicit_sum() -> None:
    ms, units = cluster()
    r2 = {"i": ClassQuery.from_spec({"rack": "r2"})}
    cases = {
        "(min nck(i,1,1) nck(big0,1,1))":
            "(min nck(s0, 1, 1) nck(s1, 1, 1) nck(s2, 1, 1) nck(s3, 1, 1) nck(big0, 1, 1))",
        "nck(i,1,1)": "(sum nck(s0, 1, 1) nck(s1, 1, 1) nck(s2, 1, 1) nck(s3, 1, 1))",
        "(scale 2 nck(i,1,1))":
            "(scale 2 (sum nck(s0, 1, 1) nck(s1, 1, 1) nck(s2, 1, 1) nck(s3, 1, 1)))",
        # the level uses i: the barrier is replicated, and its operand uses the same machine
        "(max (bar cap(i) (sum lnck(i,8,8) nck(all,1,1))))":
            "(max (barrier 8 (sum lnck(s0, 8, 8) nck(all, 1, 1))) (barrier 8 (sum lnck(s1, 8, 8)"
            " nck(all, 1, 1))) (barrier 8 (sum lnck(s2, 8, 8) nck(all, 1, 1))) (barrier 8 (sum "
            "lnck(s3, 8, 8) nck(all, 1, 1))))",
    }
    for text, want in cases.items():
        bound = bind(text, ms, units, 3, each=r2)
        assert bound is not None and to_text(bound.expr) == want, text


def test_several_variables_give_the_cartesian_product() -> None:
    ms, units = cluster()
    each = {"i": ClassQuery.from_spec({"rack": "r1"}), "j": ClassQuery.from_spec(["s0", "s1"])}
    bound = bind("(max lnck(i, cap(j), 1))", ms, units, 1, each=each)
    assert bound is not None
    assert to_text(bound.expr) == ("(max lnck(big0, 8, 1) lnck(big0, 8, 1) lnck(big1, 8, 1) "
                                   "lnck(big1, 8, 1))")
    bound = bind("(max lnck(j, cap(i), tasks))", ms, units, 5, each=each)
    assert bound is not None
    assert to_text(bound.expr) == ("(max lnck(s0, 64, 5) lnck(s1, 64, 5) lnck(s0, 64, 5) "
                                   "lnck(s1, 64, 5))")


def test_empty_ranges_drop_what_depends_on_them() -> None:
    ms, units = cluster()
    none = {"i": ClassQuery.from_spec({"rack": "r9"})}
    assert bind("(scale 2 (bar 1 (max nck(i,1,1))))", ms, units, 1, each=none) is None
    assert bind("nck(i,1,1)", ms, units, 1, each=none) is None
    kept = bind("(sum (min nck(i,1,1)) (scale 2 nck(i,1,1)) nck(all, 1, 1))", ms, units, 1,
                each=none)
    assert kept is not None and kept.expr == Sum((nck("all", 1, 1),))
    assert kept.classes == {"all": (0, 1, 2, 3, 4, 5)}


def test_name_precedence_and_cap() -> None:
    ms, units = cluster()
    classes = {"s0": ClassQuery.from_spec({"rack": "r1"}), "fast": ClassQuery.from_spec(["s1"])}
    bound = bind("(sum lnck(s0, cap(s0), 1) lnck(all, cap(all), 1) lnck(s3, cap(fast), 1))",
                 ms, units, 1, classes=classes)
    assert bound is not None
    assert to_text(bound.expr) == "(sum lnck(s0, 128, 1) lnck(all, 160, 1) lnck(s3, 8, 1))"
    assert bound.classes == {"all": (0, 1, 2, 3, 4, 5), "s0": (0, 1), "s3": (5,)}
    assert bound.allocation([1, 2, 3, 4, 5, 6]) == {"all": 21, "s0": 3, "s3": 6}


def test_bind_errors() -> None:
    ms, units = cluster()
    with pytest.raises(SpecError) as info:
        Request.from_spec("nck(rack9, 1, 1)").bind(ms, units, 1, "jobs[1].request")
    err = info.value
    assert err.where == "jobs[1].request.expr" and "unknown class 'rack9'" in err.message
    assert "big0, big1, s0" in err.fix
    clash = Request.of("(sum nck(i,1,1) nck(s0,1,1))", classes={"s0": ALL},
                       each={"i": ClassQuery.from_spec(["s0"])})
    with pytest.raises(SpecError, match="two different machine sets"):
        clash.bind(ms, units, 1)
    with pytest.raises(SpecError, match="unknown machine 'zz'"):
        bind("nck(all,1,1)", ms, units, 1, classes={"c": ClassQuery.from_spec(["zz"])})
    with pytest.raises(ModelError, match="capacity units"):
        bind("nck(all,1,1)", ms, units[:2], 1)
    with pytest.raises(ModelError, match="tasks"):
        bind("nck(all,1,1)", ms, units, -1)


# -- properties ----------------------------------------------------------------------------------
CLASS_NAMES = st.sampled_from(["a", "b", "rack-1", "m:1/x@y.z", "max", "a b", 'q"', "\\", "é",
                               "1x", "_"])
PLAIN = st.one_of(st.integers(0, 10**6).map(float),
                  st.floats(0, 1e12, allow_nan=False, allow_infinity=False))
TERMS: st.SearchStrategy[NumTerm] = st.one_of(
    PLAIN.map(Lit), CLASS_NAMES.map(Cap), st.just(Tasks()))


def trees(leaf: st.SearchStrategy[Node], numbers: st.SearchStrategy[NumTerm],
          factors: st.SearchStrategy[float]) -> st.SearchStrategy[Node]:
    def extend(kids: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
        many = st.lists(kids, min_size=1, max_size=4).map(tuple)
        return st.one_of(many.map(Max), many.map(Min), many.map(Sum),
                         st.builds(Scale, factors, kids), st.builds(Barrier, numbers, kids))
    return st.recursive(leaf, extend, max_leaves=12)


TEMPLATES = trees(st.one_of(st.builds(NCk, CLASS_NAMES, TERMS, TERMS),
                            st.builds(LnCk, CLASS_NAMES, TERMS, TERMS)), TERMS, PLAIN)
SMALL = st.floats(0, 20, allow_nan=False).map(lambda v: round(v, 1))
CONCRETE_CLASSES = ("a", "b", "c")
CONCRETE = trees(st.one_of(st.builds(NCk, st.sampled_from(CONCRETE_CLASSES), SMALL.map(Lit),
                                     SMALL.map(Lit)),
                           st.builds(LnCk, st.sampled_from(CONCRETE_CLASSES), SMALL.map(Lit),
                                     SMALL.map(Lit))),
                 SMALL.map(Lit), st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]))
ALLOCS = st.fixed_dictionaries({c: st.floats(0, 30, allow_nan=False) for c in CONCRETE_CLASSES})
TOKENS = st.sampled_from(["(", ")", ",", " ", "max", "MIN", "sum", "+", "*", "*0.5", "scale",
                          "bar", "barrier", "nck", "LnCk", "cap", "tasks", "i", "j", "64", "0",
                          "-1", "1e999", "1.5e3", ".", '"x y"', '"', "\\", "é", "\n", "1e",
                          "nck(i,64,64)", "(max", "))"])


@settings(max_examples=200, deadline=None)
@given(TEMPLATES)
def test_print_then_parse_is_identity(e: Node) -> None:
    assert parse(to_text(e), strict=True) == e


@settings(max_examples=200, deadline=None)
@given(TEMPLATES)
def test_structured_round_trip(e: Node) -> None:
    obj = to_obj(e)
    assert from_obj(json.loads(json.dumps(obj))) == e


def _parse_or_parse_error(text: str) -> None:
    for strict in (False, True):
        try:
            e = parse(text, strict=strict)
        except ParseError as err:
            assert 1 <= err.column <= len(text) + 1
            assert "\n" not in str(err)
            assert err.caret().count("\n") == 1
        else:
            assert parse(to_text(e), strict=True) == e


@settings(max_examples=200, deadline=None)
@given(st.lists(TOKENS, max_size=30).map("".join))
def test_token_soup_parses_or_raises_parse_error(text: str) -> None:
    _parse_or_parse_error(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_arbitrary_text_parses_or_raises_parse_error(text: str) -> None:
    _parse_or_parse_error(text)


def _bigger(a: dict[str, float], extra: dict[str, float]) -> dict[str, float]:
    return {c: a[c] + extra[c] for c in a}


@settings(max_examples=200, deadline=None)
@given(CONCRETE, ALLOCS, ALLOCS)
def test_utility_is_monotone_and_bounded(e: Node, a: dict[str, float],
                                         extra: dict[str, float]) -> None:
    b = _bigger(a, extra)
    assert e.evaluate(a) <= e.evaluate(b) + 1e-9
    assert e.lower() <= e.evaluate(a) + 1e-9
    assert e.evaluate(b) <= e.upper() + 1e-9
    for reading in (preferred(e), fallback(e)):
        assert reading.evaluate(a) <= reading.evaluate(b) + 1e-9
        assert reading.evaluate(b) <= reading.upper() + 1e-9


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["s0", "s1", "big0", "all", "i", "j"]), min_size=1, max_size=4),
       st.integers(0, 8))
def test_binding_is_concrete_and_names_resolved_classes(names: list[str], tasks: int) -> None:
    ms, units = cluster()
    leaves = [lnck(n, cap(n), TASKS) if k % 2 else nck(n, 1, 1) for k, n in enumerate(names)]
    template = max_(scale(0.5, barrier(1, sum_(*leaves))), *leaves)
    each = {"i": ClassQuery.from_spec({"rack": "r2"}), "j": ClassQuery.from_spec({"gpu": True})}
    bound = bind(template, ms, units, tasks, each=each)
    assert bound is not None and is_concrete(bound.expr)
    assert class_names(bound.expr) == set(bound.classes)
    assert all(idx == tuple(sorted(idx)) and idx for idx in bound.classes.values())
    assert bound.utility(units) <= bound.expr.upper() + 1e-9


def test_every_user_error_is_a_utilon_error() -> None:
    for exc in (ParseError, SpecError):
        assert issubclass(exc, UtilonError)
