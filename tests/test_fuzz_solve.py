"""Fuzzing ``utilon solve`` instances (CORA and alsched): any file is either a solution or one
line naming the file -- through the same path the CLI takes, and through the CLI itself for the
failures reported against utilon (exit status 2, one ``error:`` line)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fuzzing import assert_clean_error, fuzz_settings
from utilon.cli.app import app
from utilon.errors import UtilonError
from utilon.policies.alsched import oneshot as alsched_oneshot
from utilon.policies.cora import oneshot as cora_oneshot

ROOT = Path(__file__).resolve().parents[1]
CORA: dict[str, Any] = {
    "slots": 4, "capacity": 4,
    "jobs": [{"id": "a", "demand": 6, "cap": 3,
              "utility": {"kind": "sigmoid", "p": 2, "mu": 1.5, "deadline": 2}},
             {"id": "b", "demand": 4, "utility": [3, 3, 1, 0]},
             {"id": "c", "demand": 2,
              "utility": {"kind": "linear", "value": 5, "slope": 1, "deadline": 3}}],
}
ALSCHED: dict[str, Any] = {
    "machines": [{"prefix": "L", "count": 2, "units": 8, "attributes": {"kind": "large"}},
                 {"id": "s", "units": 4, "attributes": {"kind": "small"}}],
    "jobs": [{"id": "nb", "tasks": 6, "request": {
        "expr": "(max (*1 (bar tasks (max (nck(i,tasks,tasks))))))"
                "(*0.5 (bar tasks (LnCk(all,tasks,tasks))))",
        "each": {"i": {"kind": "large"}}}},
        {"id": "pi", "tasks": 5, "weight": 0.5, "request": "lnck(all, tasks, tasks)"}],
    "time_limit": 2,
}
SOLVE: dict[str, Callable[[Path], Any]] = {
    "cora": lambda p: cora_oneshot.solve_file(p),
    "alsched": lambda p: alsched_oneshot.solve_file(p),
}
TEMPLATES = {"cora": CORA, "alsched": ALSCHED}
ODD_VALUES = st.one_of(
    st.sampled_from([1e308, -1e308, 9.2e18, 10**9, 10**19, 2**63, 2**64, -1, 0, 0.5, -0.0,
                     "", "x", "(max", "nck(all, 1e999, 1)", "tasks", None, True, [], {},
                     [1, 2], [[1, 2], [3]], {"kind": "sigmoid"}, {"kind": "nope"}]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=30),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _solve(problem: str, tmp: Path, payload: bytes) -> None:
    f = tmp / f"{problem}-instance.json"
    f.write_bytes(payload)
    try:
        out = SOLVE[problem](f)
    except UtilonError as e:
        assert_clean_error(e, f.name)
        return
    assert out["jobs"], "a solution lists the jobs"


@pytest.mark.parametrize("problem", sorted(TEMPLATES))
def test_the_templates_solve(tmp_path: Path, problem: str) -> None:
    f = tmp_path / "i.json"
    f.write_text(json.dumps(TEMPLATES[problem]), encoding="utf-8")
    assert len(SOLVE[problem](f)["jobs"]) == 2 + (problem == "cora")


@pytest.mark.parametrize("problem", sorted(TEMPLATES))
@fuzz_settings(deadline_s=10.0)
@given(data=st.data())
def test_near_valid_instances(tmp_path_factory: pytest.TempPathFactory, problem: str,
                              data: st.DataObject) -> None:
    doc = copy.deepcopy(TEMPLATES[problem])
    paths = _paths(doc)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        node = doc
        try:
            for part in path[:-1]:
                node = node[part]
            node[path[-1]] = copy.deepcopy(data.draw(ODD_VALUES))  # never share a value
        except (KeyError, IndexError, TypeError):
            continue
    _solve(problem, tmp_path_factory.mktemp(problem),
           json.dumps(doc, allow_nan=True).encode("utf-8"))


@pytest.mark.parametrize("problem", sorted(TEMPLATES))
@fuzz_settings()
@given(payload=st.binary(max_size=1000))
def test_arbitrary_bytes(tmp_path_factory: pytest.TempPathFactory, problem: str,
                         payload: bytes) -> None:
    _solve(problem, tmp_path_factory.mktemp(problem), payload)


# -- the failures reported against utilon, pinned, through the CLI ----------------------------
def _cli(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(app, args)
    return res.exit_code, res.output


@pytest.mark.parametrize(("path", "value"), [
    (("jobs", 0, "demand"), 1e308), (("jobs", 0, "demand"), 9.2e18),
    (("jobs", 0, "demand"), 10**19), (("slots",), 10**9), (("capacity",), 2**64),
    (("jobs", 0, "utility", "mu"), 1e308), (("jobs", 0, "utility", "deadline"), 1e308),
])
def test_huge_cora_values(tmp_path: Path, path: tuple[Any, ...], value: Any) -> None:
    doc = copy.deepcopy(CORA)
    node: Any = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    f = tmp_path / "huge.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    code, output = _cli(["solve", "cora", str(f)])
    if code == 0:  # a huge but harmless value (a far deadline) is a valid instance
        assert json.loads(output)["jobs"]
        return
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), output
    assert "huge.json" in lines[0]


@pytest.mark.parametrize("problem", sorted(TEMPLATES))
@pytest.mark.parametrize("payload", [b'{"slots": 2, \xff\xfe}', b"[" * 100_000,
                                     b"\x00\x01binary", b""])
def test_unreadable_instances_through_the_cli(tmp_path: Path, problem: str,
                                              payload: bytes) -> None:
    f = tmp_path / "bad.json"
    f.write_bytes(payload)
    code, output = _cli(["solve", problem, str(f)])
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), output
    assert "bad.json" in lines[0] and "Traceback" not in output
