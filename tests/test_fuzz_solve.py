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

from fuzzing import assert_clean_error, fuzz_settings, paths
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
    places = paths(doc)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(places))
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


# -- limits: every instance a solver would spend minutes or gigabytes on is refused up front --
def _write(tmp: Path, doc: Any, name: str = "big.json") -> Path:
    f = tmp / name
    f.write_text(json.dumps(doc), encoding="utf-8")
    return f


def _refused(f: Path, problem: str, *mention: str, solver: str | None = None) -> str:
    """The API refuses ``f`` with one line naming it, and so does the CLI (status 2)."""
    with pytest.raises(UtilonError) as ei:
        if problem == "cora":
            cora_oneshot.solve_file(f, solver)
        else:
            alsched_oneshot.solve_file(f, solver)
    line = assert_clean_error(ei.value, f.name, *mention)
    code, output = _cli(["solve", problem, str(f)] + (["--solver", solver] if solver else []))
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), output
    return line


def _lin(n: int) -> dict[str, Any]:
    return {"kind": "linear", "value": 1e6, "slope": 1, "deadline": 1e6}


@pytest.mark.parametrize(("doc", "solver", "mention"), [
    # a million slots: the exact solver's quadratic tables (74 GiB) or an hour of rounds
    ({"slots": 10**6, "capacity": 1, "jobs": [{"id": "a", "demand": 10**5, "cap": 3,
                                               "utility": _lin(0)}]}, None, "slots"),
    ({"slots": 3000, "capacity": 10, "jobs": [{"id": "a", "demand": 5, "utility": _lin(0)}]},
     None, "slots"),
    # 2,000 slots x 1,000 jobs is within the old cell limit and took 26 s
    ({"slots": 2000, "capacity": 1, "jobs": [
        {"id": f"j{i}", "demand": 1, "utility": _lin(0)} for i in range(101)]}, None,
     "200,000 cells"),
    # caps with a capacity that drops: the general test, 13 s at 2,000 slots and two jobs
    ({"slots": 1000, "capacity": [[1 + t % 3 for t in range(1000)]], "jobs": [
        {"id": "a", "demand": 10, "cap": 1, "utility": _lin(0)},
        {"id": "b", "demand": 10, "cap": 1, "utility": _lin(0)}]}, None, "capacity"),
    ({"slots": 100, "capacity": 5, "jobs": [
        {"id": f"j{i}", "demand": 1, "utility": _lin(0)} for i in range(201)]}, "cora-lp",
     "20,000 cells"),
    ({"slots": 50, "capacity": 5, "jobs": [
        {"id": f"j{i}", "demand": 1, "utility": _lin(0)} for i in range(21)]}, "milp",
     "1,000 cells"),
    # utilities past 1e15 would make sums infinite (printed as Infinity, not JSON)
    ({"slots": 2, "capacity": 2, "jobs": [
        {"id": f"j{i}", "demand": 1, "utility": {"kind": "sigmoid", "p": 1e308, "mu": 1,
                                                "deadline": 1}} for i in range(3)]}, None,
     "jobs[0].utility"),
    ({"slots": 2, "capacity": 2, "jobs": [{"id": "a", "demand": 1, "utility": [1e300, 0]}]},
     None, "jobs[0].utility"),
    ({"slots": 2, "capacity": 2, "jobs": [{"id": "a", "demand": 1, "utility": [1, 0]},
                                          {"id": "a", "demand": 1, "utility": [1, 0]}]},
     None, "jobs[1].id"),
])
def test_cora_solver_limits(tmp_path: Path, doc: dict[str, Any], solver: str | None,
                            mention: str) -> None:
    _refused(_write(tmp_path, doc), "cora", mention, solver=solver)


def test_cora_just_inside_the_limits_solves_quickly(tmp_path: Path) -> None:
    import time

    doc = {"slots": cora_oneshot.MAX_SLOTS, "capacity": 2, "jobs": [
        {"id": f"j{i}", "demand": 1 + i % 7, "cap": 2,
         "utility": {"kind": "sigmoid", "p": 1, "mu": 1, "deadline": 20 * i}}
        for i in range(cora_oneshot.SOLVER_CELLS["cora"] // cora_oneshot.MAX_SLOTS)]}
    t0 = time.perf_counter()
    out = cora_oneshot.solve_file(_write(tmp_path, doc))
    assert len(out["jobs"]) == 100 and time.perf_counter() - t0 < 30


@pytest.mark.parametrize("payload", [
    b'{"slots": ' + b"9" * 5000 + b', "capacity": 1, "jobs": []}',  # Python's int limit
    b'{"slots": 2, "capacity": 1e999999, "jobs": []}',
    b'{"slots": 2, "capacity": 2, "jobs": [{"id": "a", "demand": 1, "utility": [1, NaN]}]}',
])
def test_numbers_json_cannot_hold(tmp_path: Path, payload: bytes) -> None:
    f = tmp_path / "num.json"
    f.write_bytes(payload)
    for problem in ("cora", "alsched"):
        _refused(f, problem)


def test_oversized_file_is_refused_before_reading(tmp_path: Path) -> None:
    f = tmp_path / "huge.json"
    with f.open("wb") as fh:  # sparse: no disk is used
        fh.truncate(cora_oneshot.MAX_FILE_BYTES + 1)
    for problem in ("cora", "alsched"):
        assert "bytes is more than" in _refused(f, problem)


def _machines(n: int, units: int = 4) -> list[dict[str, Any]]:
    return [{"prefix": "m", "count": n, "units": units, "attributes": {"kind": "large"}}]


@pytest.mark.parametrize(("doc", "solver", "mention"), [
    # every job resolved over every machine: 10,000 x 100,000
    ({"machines": _machines(100_000), "jobs": [
        {"id": f"j{i}", "request": "nck(all, 1, 1)"} for i in range(10_000)]}, None,
     "jobs x"),
    # two loop variables on one node: machines squared copies
    ({"machines": _machines(2000), "jobs": [{"id": "a", "request": {
        "expr": "(max nck(i, cap(j), 1))", "each": {"i": "all", "j": "all"}}}]}, None,
     "jobs[0].request.expr"),
    # one loop per job over many machines, many jobs: the total is bounded
    ({"machines": _machines(6_000), "jobs": [{"id": f"j{i}", "request": {
        "expr": "(max nck(i, 1, 1))", "each": {"i": "all"}}} for i in range(10)]}, None,
     "nodes"),
    ({"machines": _machines(2), "jobs": [{"id": "a", "weight": 1e300,
                                          "request": "nck(all, 1, 5)"}]}, None, "weight"),
    ({"machines": _machines(2), "jobs": [{"id": "a", "request":
                                          "(sum nck(all, 1, 1e15) nck(all, 1, 1e15))"}]},
     None, "weight"),
    ({"machines": _machines(2), "jobs": [{"id": "a", "request": "nck(all, 1, 1e300)"}]},
     None, "col 13"),
    # lnck over 100,000 units gives branch-and-bound 100,000 candidates per operand
    ({"machines": _machines(1, 100_000), "jobs": [{"id": "a", "tasks": 100_000, "request":
                                                   "(sum lnck(all, tasks, 1) "
                                                   "lnck(all, tasks, 1))"}]}, "bnb",
     "solver"),
])
def test_alsched_solver_limits(tmp_path: Path, doc: dict[str, Any], solver: str | None,
                               mention: str) -> None:
    _refused(_write(tmp_path, doc), "alsched", mention, solver=solver)


@pytest.mark.parametrize("solver", ["greedy", "bnb", "milp"])
def test_alsched_deepest_accepted_expression_solves(tmp_path: Path, solver: str) -> None:
    from utilon.policies.alsched.lang import MAX_DEPTH

    text = "(max " * (MAX_DEPTH - 1) + "nck(all, 2, 3)" + ")" * (MAX_DEPTH - 1)
    spec: Any = text
    for _ in range(3):  # mappings around the text count too: this is one level too deep
        spec = {"max": [spec]}
    doc = {"machines": _machines(3), "jobs": [{"id": "a", "request": text, "tasks": 2},
                                              {"id": "b", "request": {"expr": spec}}]}
    with pytest.raises(UtilonError) as ei:
        alsched_oneshot.solve_file(_write(tmp_path, doc), solver)
    assert_clean_error(ei.value, "big.json", "jobs[1].request")
    del doc["jobs"][1]
    out = alsched_oneshot.solve_file(_write(tmp_path, doc), solver)
    assert out["jobs"][0]["utility"] == 3.0
