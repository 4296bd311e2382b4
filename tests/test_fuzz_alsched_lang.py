"""Fuzzing alsched's policy language (prefix text and the structured face): any input is a
``Request`` or one line naming where it came from (``Request.from_spec``'s ``where``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import assert_clean_error, fuzz_settings
from utilon.errors import UtilonError
from utilon.model import Machine, Resources
from utilon.policies.alsched.lang import Request

ROOT = Path(__file__).resolve().parents[1]
EXPRESSIONS = sorted({c["expr"] for c in json.loads(
    (ROOT / "tests" / "data" / "alsched" / "compliance.json").read_text(encoding="utf-8"))
    if isinstance(c.get("expr"), str) and "error" not in c})
TOKENS = ["(", ")", "max", "min", "sum", "scale", "bar", "nck", "lnck", "LnCk", "*1", "*0.5",
          ",", "all", "a", "i", "tasks", "cap(a)", "0", "1", "64", "-1", "1e999", "1e308",
          "9.2e18", "nan", "inf", "'x'", '"y"', " ", "\n", "\x00", "é", "(("]
MACHINES = [Machine(f"m{i}", Resources(units=8.0), (("kind", "large" if i < 2 else "small"),))
            for i in range(4)]
WHERE = "fuzz.yaml: jobs[0].request"


def _check(spec: Any) -> None:
    try:
        req = Request.from_spec(spec, where=WHERE)
        req.bind(MACHINES, [8.0] * len(MACHINES), 4, where=WHERE)
    except UtilonError as e:
        assert_clean_error(e, "fuzz.yaml")


def test_the_compliance_expressions_parse() -> None:
    assert len(EXPRESSIONS) > 20
    for text in EXPRESSIONS:
        Request.from_spec(text, where=WHERE)


@fuzz_settings()
@given(tokens=st.lists(st.sampled_from(TOKENS), max_size=40))
def test_token_soup(tokens: list[str]) -> None:
    _check("".join(tokens))
    _check(" ".join(tokens))


@fuzz_settings()
@given(base=st.sampled_from(EXPRESSIONS), data=st.data())
def test_mutated_expressions(base: str, data: st.DataObject) -> None:
    text = base
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = data.draw(st.sampled_from(TOKENS) | st.text(max_size=3))
        if op == "insert":
            text = text[:i] + piece + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + 1:]
        else:
            text = text[:i] + piece + text[i + len(piece):]
    _check(text)


@fuzz_settings()
@given(text=st.text(max_size=300))
def test_arbitrary_text(text: str) -> None:
    _check(text)


@fuzz_settings()
@given(spec=st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.sampled_from(TOKENS),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["expr", "classes", "each", "max", "min", "sum", "scale", "nck",
                         "lnck", "bar", "class", "k", "u", "kind", "x"]), inner, max_size=4),
    max_leaves=25))
def test_structured_garbage(spec: Any) -> None:
    _check(spec)


@pytest.mark.parametrize("text", ["(max " * 100_000, "(" * 100_000 + ")" * 100_000,
                                  "nck(all, 1, 1) " * 20_000])
def test_deep_or_huge_expressions_are_one_line_errors(text: str) -> None:
    with pytest.raises(UtilonError) as ei:
        Request.from_spec(text, where=WHERE)
    assert_clean_error(ei.value, "fuzz.yaml")


def test_deeply_nested_structured_expression() -> None:
    spec: Any = {"nck": ["all", 1, 1]}
    for _ in range(50_000):
        spec = {"max": [spec]}
    with pytest.raises(UtilonError) as ei:
        Request.from_spec({"expr": spec}, where=WHERE)
    assert_clean_error(ei.value, "fuzz.yaml")
