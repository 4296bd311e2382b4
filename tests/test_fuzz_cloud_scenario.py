"""Fuzzing the cloud scenario parser: any file is either a cloud workload or one line naming
the file.  Near-valid files start from a small valid cloud scenario (listed jobs, a model and a
table profile, generated jobs) with one to three values replaced by extreme or ill-typed ones.
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
from test_fuzz_scenario import ODD_VALUES, _set
from utilon.cloud.scenario import CloudWorkload
from utilon.errors import UtilonError
from utilon.scenario import load_scenario

TEMPLATE: dict[str, Any] = {
    "name": "fuzz-cloud",
    "seed": 2,
    "cloud": {"servers": 3, "server_cores": 16,
              "vm_types": [{"name": "s", "cores": 2}, {"name": "l", "cores": 8}],
              "boot_time": 30, "hadoop_start": 5, "load_mbps": 40, "prediction_error": 0.2},
    "profiles": {
        "models": {"sort": {"work": 0.5, "best": "l", "type_loss": 0.1, "scale_loss": 0.01,
                            "max_vms": 16}},
        "tables": {"grep": {"t10": {"s": 300, "l": 120}, "max_vms": 40}},
    },
    "workload": {
        "jobs": [{"id": "a", "kind": "sort", "size_mb": 2000, "arrival": 0, "deadline": 600,
                  "customer": 1},
                 {"id": "b", "kind": "grep", "arrival": 10, "deadline": 400}],
        "generate": {"jobs": 5, "duration": 100, "customers": 3, "mix": {"small": 1, "medium": 1},
                     "deadline": {"kind": "poisson", "mean": 300}},
    },
    "policies": {"cura": {"reconf_window": 100}},
}

PATHS = paths(TEMPLATE)


def _load(tmp_path: Path, payload: bytes, suffix: str = ".yaml") -> None:
    f = tmp_path / f"fuzzed{suffix}"
    f.write_bytes(payload)
    try:
        with fuzz_task_limit():
            wl = load_scenario(f)
    except UtilonError as e:
        assert_clean_error(e, f.name)
        return
    if isinstance(wl, CloudWorkload):
        assert wl.jobs, "a loaded cloud workload has jobs"
        for j in wl.jobs:  # every job can meet its deadline on some configuration
            assert float(wl.store.configs(j).t_run.min()) <= j.deadline - j.arrival + 1e-6


def test_the_template_itself_loads(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(TEMPLATE), encoding="utf-8")
    wl = load_scenario(f)
    assert isinstance(wl, CloudWorkload) and len(wl.jobs) == 7


@fuzz_settings(deadline_s=15.0)
@given(edits=st.lists(st.tuples(st.sampled_from(PATHS), ODD_VALUES), min_size=1, max_size=3))
def test_near_valid_cloud_scenarios(tmp_path_factory: pytest.TempPathFactory,
                                    edits: list[tuple[tuple[Any, ...], Any]]) -> None:
    doc = copy.deepcopy(TEMPLATE)
    for path, value in edits:
        try:
            _set(doc, path, copy.deepcopy(value))
        except (KeyError, IndexError, TypeError):
            continue
    text = yaml.safe_dump(doc, allow_unicode=True)
    _load(tmp_path_factory.mktemp("c"), text.encode("utf-8"))


@fuzz_settings()
@given(doc=st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
                        lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.sampled_from(["name", "cloud", "profiles",
                                                           "workload", "jobs", "models",
                                                           "tables", "generate", "servers",
                                                           "kind", "deadline", "x"]),
                                          inner, max_size=4), max_leaves=30))
def test_json_shaped_garbage_with_a_cloud_section(tmp_path_factory: pytest.TempPathFactory,
                                                  doc: Any) -> None:
    if isinstance(doc, dict):
        doc.setdefault("cloud", {})
    payload = json.dumps(doc, allow_nan=True).encode("utf-8")
    _load(tmp_path_factory.mktemp("j"), payload, ".json")
