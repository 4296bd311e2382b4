"""Fuzzing the scenario parser: any file is either a workload or one line naming the file.

Two generators: arbitrary bytes and text, and near-valid scenarios -- a small valid file with
one field (or a few) replaced by an extreme or ill-typed value (1e308, 9.2e18, 10**9, NaN,
negative, strings, lists, nested garbage) -- which reach the deeper layers: sampling, task
expansion, utilities, the capacity timeline.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import assert_clean_error, fuzz_settings, fuzz_task_limit, paths
from utilon.errors import UtilonError
from utilon.scenario import load_workload

TEMPLATE: dict[str, Any] = {
    "name": "fuzz",
    "seed": 3,
    "cluster": {
        "machines": [{"id": "small", "count": 2, "capacity": {"cpu": 4, "mem": 8}},
                     {"id": "big", "count": 1, "capacity": {"cpu": 16, "mem": 64}}],
        "capacity": [{"at": 50, "action": "scale", "machines": "small-*", "factor": 0.5}],
    },
    "workload": {
        "jobs": [{
            "id": "j1", "submit": 0, "weight": 2,
            "utility": {"kind": "sigmoid", "deadline": "2x", "p": 3, "mu": 0.1},
            "stages": [{"name": "map", "tasks": 4, "duration": {"dist": "lognormal",
                                                               "median": 10, "sigma": 0.5},
                        "demand": {"cpu": 1, "mem": 2}},
                       {"name": "reduce", "durations": [5, 6], "demand": {"cpu": 2}}],
        }],
        "generate": [{
            "count": 3, "arrival": {"process": "poisson", "mean_interarrival": 20},
            "templates": [{"name": "t", "utility": {"kind": "deadline", "deadline": 300},
                           "stages": [{"name": "map", "tasks": {"dist": "uniform", "low": 1,
                                                               "high": 5},
                                       "duration": 8, "demand": {"cpu": 1}}]}],
        }],
    },
}

ODD_VALUES = st.one_of(
    st.sampled_from([1e308, -1e308, 9.2e18, 10**9, 10**19, 2**63, -1, 0, 0.0, -0.0, 1e-308,
                     float("nan"), float("inf"), "", "x", "2x", "1e300x", "-1x", "nanx",
                     None, True, [], {}, [1, 2], {"dist": "uniform", "low": 1, "high": 1e308},
                     {"dist": "lognormal", "median": 1e300, "sigma": 50},
                     {"dist": "normal", "mean": 0, "std": 1e308}, {"dist": "nope"}]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=20),
)


PATHS = paths(TEMPLATE)


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        doc = doc[part]
    doc[path[-1]] = value


def _load(tmp_path: Path, payload: bytes, suffix: str = ".yaml") -> None:
    f = tmp_path / f"fuzzed{suffix}"
    f.write_bytes(payload)
    try:
        with fuzz_task_limit():
            wl = load_workload(f)
    except UtilonError as e:
        assert_clean_error(e, f.name)
        return
    assert wl.jobs, "a loaded workload has jobs"


def test_the_template_itself_loads(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(TEMPLATE), encoding="utf-8")
    assert len(load_workload(f).jobs) == 4


@fuzz_settings(deadline_s=15.0)  # a valid 100,000-machine cluster takes seconds to build
@given(edits=st.lists(st.tuples(st.sampled_from(PATHS), ODD_VALUES), min_size=1, max_size=3))
def test_near_valid_scenarios(tmp_path_factory: pytest.TempPathFactory,
                              edits: list[tuple[tuple[Any, ...], Any]]) -> None:
    doc = copy.deepcopy(TEMPLATE)
    for path, value in edits:
        try:
            _set(doc, path, copy.deepcopy(value))  # never share a drawn value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit replaced a parent of this path
    text = yaml.safe_dump(doc, allow_unicode=True)
    _load(tmp_path_factory.mktemp("s"), text.encode("utf-8"))


@fuzz_settings()
@given(payload=st.binary(max_size=2000))
def test_arbitrary_bytes(tmp_path_factory: pytest.TempPathFactory, payload: bytes) -> None:
    _load(tmp_path_factory.mktemp("b"), payload)


@fuzz_settings()
@given(text=st.text(max_size=2000), suffix=st.sampled_from([".yaml", ".json"]))
def test_arbitrary_text(tmp_path_factory: pytest.TempPathFactory, text: str,
                        suffix: str) -> None:
    _load(tmp_path_factory.mktemp("t"), text.encode("utf-8", "surrogatepass"), suffix)


@fuzz_settings()
@given(doc=st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
                        lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.sampled_from(["name", "cluster", "workload",
                                                           "jobs", "machines", "stages",
                                                           "id", "tasks", "duration",
                                                           "capacity", "submit", "x"]),
                                          inner, max_size=4), max_leaves=30))
def test_json_shaped_garbage(tmp_path_factory: pytest.TempPathFactory, doc: Any) -> None:
    payload = json.dumps(doc, allow_nan=True).encode("utf-8")
    _load(tmp_path_factory.mktemp("j"), payload, ".json")


# -- the failures reported against utilon, pinned ---------------------------------------------
def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(TEMPLATE)
    _set(doc, path, value)
    return doc


TASKS = ("workload", "jobs", 0, "stages", 0, "tasks")
DURATION = ("workload", "jobs", 0, "stages", 0, "duration")


@pytest.mark.parametrize(("path", "value", "mention"), [
    (TASKS, 1e308, "tasks"), (TASKS, 9.2e18, "tasks"), (TASKS, 10**9, "tasks"),
    (DURATION, 1e308, "duration"), (DURATION, 9.2e18, "duration"),
    (DURATION, {"dist": "lognormal", "median": 1e300, "sigma": 5}, "duration"),
    (("workload", "jobs", 0, "utility", "deadline"), "1e300x", "utility"),
    (("workload", "jobs", 0, "submit"), 1e308, "submit"),
    (("workload", "generate", 0, "count"), 10**9, "count"),
])
def test_huge_values_are_one_line_errors(tmp_path: Path, path: tuple[Any, ...], value: Any,
                                         mention: str) -> None:
    f = tmp_path / "huge.yaml"
    f.write_text(yaml.safe_dump(_with(path, value)), encoding="utf-8")
    with pytest.raises(UtilonError) as ei:
        load_workload(f)
    assert_clean_error(ei.value, "huge.yaml", mention)


def test_task_expansion_is_bounded_before_allocating(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UTILON_MAX_TASKS", "10")
    f = tmp_path / "many.yaml"
    f.write_text(yaml.safe_dump(TEMPLATE), encoding="utf-8")
    with pytest.raises(UtilonError) as ei:
        load_workload(f)
    assert_clean_error(ei.value, "many.yaml", "more than 10 tasks", "UTILON_MAX_TASKS")


def test_a_yaml_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    f = tmp_path / "bomb.yaml"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(UtilonError) as ei:
        load_workload(f)
    assert_clean_error(ei.value, "bomb.yaml", "aliases")


@pytest.mark.parametrize("payload", [b"name: \xff\xfe\n", b"[" * 50_000 + b"]" * 50_000,
                                     b"", b"- 1\n- 2\n"])
def test_unreadable_files(tmp_path: Path, payload: bytes) -> None:
    f = tmp_path / "odd.yaml"
    f.write_bytes(payload)
    with pytest.raises(UtilonError) as ei:
        load_workload(f)
    assert_clean_error(ei.value, "odd.yaml")
