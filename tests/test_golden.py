"""Golden decision traces: each baseline on one small fixed workload.

Each file under ``tests/golden/`` holds every decision the policy made, as
``[time, decision.to_dict()]``, and each job's ``[start, finish]``.  A change in scheduling
behaviour shows up as a readable diff of the trace.  After an intended change, regenerate with

    UTILON_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py

and review the diff before keeping it.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from builders import check_run_invariants, make_cluster, make_job, run
from utilon.core import ClusterSnapshot, Decision

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UTILON_UPDATE_GOLDEN") == "1"

# (golden file stem, policy, params)
CASES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("fifo", "fifo", {}),
    ("fair", "fair", {}),
    ("edf-n", "edf-n", {}),
    ("edf-p", "edf-p", {}),
    ("fair-slots", "fair-slots", {"k": 2}),
    ("cora", "cora", {"replan": "event"}),  # the paper's mode: a solve at every event
    ("cora-slot", "cora", {}),  # the default: a standing plan between task completions
    ("cora-ct", "cora-ct", {}),
    ("rrh", "rrh", {}),
    ("rds", "rds", {"interval": 30.0, "predictor": "last"}),
    ("ras", "ras", {"interval": 10.0}),
    ("alsched", "alsched", {}),
)


def workload():  # type: ignore[no-untyped-def]
    """3 machines with 3 slots each (9 in all); 5 MapReduce jobs with staggered arrivals, enough
    work that the policies disagree about who gets a freed slot."""
    cluster = make_cluster(3, slots=3, cpu=4, mem=16)
    jobs = [
        make_job("j1", submit=0, maps=20, reduces=2, dur=10, deadline=150),
        make_job("j2", submit=3, maps=4, reduces=1, dur=8, deadline=40),
        make_job("j3", submit=5, maps=6, reduces=2, dur=6, deadline=200, weight=2),
        make_job("j4", submit=12, maps=3, reduces=0, dur=5, deadline=30, priority=1),
        make_job("j5", submit=20, maps=4, reduces=1, dur=12),
    ]
    return cluster, jobs


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 9)
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_round(v) for v in x]
    return x


def trace(policy: str, params: dict[str, Any]) -> dict[str, Any]:
    cluster, jobs = workload()
    decisions: list[list[Any]] = []

    def record(t: float, snap: ClusterSnapshot, d: Decision) -> None:
        decisions.append([t, d.to_dict()])

    res = run(cluster, jobs, policy, on_decision=record, **params)
    assert res.stopped_early == ""
    check_run_invariants(res, cluster, jobs)
    out = {
        "policy": policy,
        "params": params,
        "end_time": res.end_time,
        "jobs": {j.id: [j.start, j.finish] for j in res.core.jobs.values()},
        "decisions": decisions,
    }
    return json.loads(json.dumps(_round(out)))  # normalise tuples, keys, floats


def _dump(data: dict[str, Any]) -> str:
    # one decision per line keeps diffs readable
    lines = ["{"]
    for key in ("policy", "params", "end_time", "jobs"):
        lines.append(f'  "{key}": {json.dumps(data[key], sort_keys=True)},')
    lines.append('  "decisions": [')
    rows = [f"    {json.dumps(d, sort_keys=True)}" for d in data["decisions"]]
    lines.append(",\n".join(rows))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("stem", "policy", "params"), CASES, ids=[c[0] for c in CASES])
def test_golden_trace(stem: str, policy: str, params: dict[str, Any]) -> None:
    path = GOLDEN_DIR / f"{stem}.json"
    got = trace(policy, params)
    if UPDATE:
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_text(_dump(got))
    assert path.exists(), f"{path} is missing; run with UTILON_UPDATE_GOLDEN=1 to create it"
    want = json.loads(path.read_text())
    assert got["jobs"] == want["jobs"], f"{stem}: job (start, finish) changed"
    assert got["end_time"] == want["end_time"]
    assert len(got["decisions"]) == len(want["decisions"]), f"{stem}: number of decisions"
    for i, (g, w) in enumerate(zip(got["decisions"], want["decisions"], strict=True)):
        assert g == w, f"{stem}: decision #{i} differs"
    assert got == want


def test_dump_round_trips() -> None:
    data = trace("fifo", {})
    assert json.loads(_dump(data)) == data


# ------------------------------------------------------------------------------ semantics
def _golden(stem: str) -> dict[str, Any]:
    return json.loads((GOLDEN_DIR / f"{stem}.json").read_text())


def test_golden_edf_n_only_ever_grants_one_job() -> None:
    g = _golden("edf-n")
    assert all(len(d["grants"]) <= 1 for _, d in g["decisions"])
    # one job at a time: job intervals do not overlap
    spans = sorted(tuple(v) for v in g["jobs"].values())
    for (_, f1), (s2, _) in itertools.pairwise(spans):
        assert f1 <= s2


def test_golden_grants_are_unlimited_for_fifo_and_edf() -> None:
    for stem in ("fifo", "edf-p", "edf-n"):
        for _, d in _golden(stem)["decisions"]:
            assert all(gr["slots"] is None for gr in d["grants"])
            assert "backfill" not in d and "slot_limit" not in d


def test_golden_fair_policies_backfill_and_fair_slots_limit() -> None:
    for _, d in _golden("fair")["decisions"]:
        assert d["backfill"] is True and "slot_limit" not in d
    for _, d in _golden("fair-slots")["decisions"]:
        assert d["slot_limit"] == {"per_machine": 2, "reduce_per_machine": None}
        # 3 machines x k=2 = 6 slots shared out
        assert sum(gr["slots"] for gr in d["grants"]) <= 6


def test_golden_edf_p_orders_grants_by_deadline() -> None:
    deadlines = {"j1": 150, "j2": 40, "j3": 200, "j4": 30, "j5": float("inf")}
    for _, d in _golden("edf-p")["decisions"]:
        order = [deadlines[gr["job"]] for gr in d["grants"]]
        assert order == sorted(order)


def test_golden_fifo_orders_grants_by_priority_then_submit() -> None:
    key = {"j1": (0, 0), "j2": (0, 3), "j3": (0, 5), "j4": (-1, 12), "j5": (0, 20)}
    for _, d in _golden("fifo")["decisions"]:
        order = [key[gr["job"]] for gr in d["grants"]]
        assert order == sorted(order)
