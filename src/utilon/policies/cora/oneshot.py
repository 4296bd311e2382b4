"""One-shot CORA solves: ``utilon solve cora INSTANCE.json`` (format: docs/solve-cora.md).

An instance gives the capacity per slot (one number, one per resource, or one row of per-slot
values per resource), the number of slots, and the jobs: demand (per resource), an optional
per-slot parallelism cap, and either the utility of finishing in each slot or a utility
function of the completion time measured in slots (finishing in slot ``t`` = at time
``t + 1``).  The answer: each job's completion slot and utility, the sorted utility vector,
the allocation matrix, and the solve time (under ``timing``, the only non-deterministic key).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from utilon.errors import ScenarioError
from utilon.policies.cora.instance import CoraInstance, CoraSolution, InfeasibleInstance
from utilon.scenario.load import read_json_model

SOLVERS = ("cora", "cora-lp", "milp")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


MAX_UNITS = 10**12
"""Largest demand, capacity or cap: far past any cluster, well inside 64-bit sums."""
MAX_CELLS = 2_000_000
"""Most jobs x slots x resources an instance may have (the solver's tables are that big)."""


class SigmoidUtility(_Strict):
    kind: Literal["sigmoid"]
    p: float = Field(1.0, ge=0, description="priority: the utility's height")
    mu: float = Field(ge=0, description="decay factor per slot")
    deadline: float = Field(description="target completion time, in slots")


class LinearUtility(_Strict):
    kind: Literal["linear"]
    value: float = Field(1.0, description="utility when finishing at time 0")
    slope: float = Field(ge=0, description="utility lost per slot")
    deadline: float = Field(description="after this time (slots) the utility is late_value")
    late_value: float = 0.0


Utility = Annotated[SigmoidUtility | LinearUtility, Field(discriminator="kind")]
Count = Annotated[int, Field(ge=0, le=MAX_UNITS)]


class OneShotJob(_Strict):
    id: str = Field(min_length=1)
    demand: Count | list[Count] = Field(description="units of work, or one per resource")
    cap: (Annotated[int, Field(ge=1, le=MAX_UNITS)]
          | list[Annotated[int, Field(ge=1, le=MAX_UNITS)]] | None) = Field(
        None, description="at most this many units per slot (per resource)")
    utility: list[float] | Utility = Field(
        description="utility of finishing in each slot (non-increasing), or a function")


class OneShotInstance(_Strict):
    slots: int = Field(ge=1, le=MAX_CELLS, description="number of time slots |T|")
    capacity: Count | list[Count] | list[list[Count]] = Field(
        description="per slot: one number, one per resource, or per resource a row per slot")
    resources: list[str] | None = Field(None, description="resource names (for the output)")
    jobs: list[OneShotJob] = Field(min_length=1)
    solver: Literal["cora", "cora-lp", "milp"] = "cora"


def _values(u: list[float] | SigmoidUtility | LinearUtility, slots: int) -> np.ndarray:
    t = np.arange(1, slots + 1, dtype=float)
    if isinstance(u, list):
        return np.asarray(u, dtype=float)
    if isinstance(u, SigmoidUtility):
        with np.errstate(over="ignore"):
            return u.p / (1.0 + np.exp(u.mu * (t - u.deadline)))
    return np.where(t <= u.deadline, u.value - u.slope * t, u.late_value)


def _error(where: str, msg: str, fix: str) -> ScenarioError:
    return ScenarioError(msg, where=where, fix=fix)


def build(doc: OneShotInstance, source: str = "") -> CoraInstance:
    """The array instance, with one-line errors naming the field."""
    T, n = doc.slots, len(doc.jobs)
    where = source or "instance"
    nres = 1
    for j in doc.jobs:
        if isinstance(j.demand, list):
            nres = max(nres, len(j.demand))
    if isinstance(doc.capacity, list):
        nres = max(nres, len(doc.capacity))
    if n * T * nres > MAX_CELLS:
        raise _error(f"{where}: slots", f"{n} jobs x {T} slots x {nres} resource(s) is more "
                     f"than {MAX_CELLS:,} cells", fix="use fewer slots (longer ones) or split "
                     "the instance")
    cap_in = doc.capacity
    if isinstance(cap_in, int):
        cap = np.full((nres, T), cap_in, dtype=np.int64)
    elif cap_in and isinstance(cap_in[0], list):
        if any(not isinstance(row, list) or len(row) != T for row in cap_in):
            raise _error(f"{where}: capacity", f"per-slot rows must have {T} values",
                         fix="give one row of `slots` values per resource")
        cap = np.asarray(cap_in, dtype=np.int64)
        if cap.ndim != 2 or cap.shape[1] != T:
            raise _error(f"{where}: capacity", f"per-slot rows must have {T} values",
                         fix="give one row of `slots` values per resource")
    else:
        cap = np.repeat(np.asarray(cap_in, dtype=np.int64)[:, None], T, axis=1)
    nres = cap.shape[0]
    if doc.resources is not None and len(doc.resources) != nres:
        raise _error(f"{where}: resources", f"{len(doc.resources)} names for {nres} "
                     "resource(s)", fix="name every resource of `capacity` once")
    demand = np.zeros((n, nres), dtype=np.int64)
    pcap = np.zeros((n, nres), dtype=np.int64) if any(j.cap is not None for j in doc.jobs) \
        else None
    util = np.zeros((n, T))
    for i, j in enumerate(doc.jobs):
        loc = f"{where}: jobs[{i}]"
        d = j.demand if isinstance(j.demand, list) else [j.demand] * (1 if nres == 1 else 0)
        if len(d) != nres:
            raise _error(f"{loc}.demand", f"{len(d)} value(s) for {nres} resource(s)",
                         fix="give one demand per resource of `capacity`")
        demand[i] = d
        if sum(d) == 0:
            raise _error(f"{loc}.demand", "the job demands nothing",
                         fix="leave it out, or give it at least one unit")
        if pcap is not None:
            c = j.cap if j.cap is not None else max(int(cap.max()), 1)
            c_list = c if isinstance(c, list) else [c] * nres
            if len(c_list) != nres:
                raise _error(f"{loc}.cap", f"{len(c_list)} value(s) for {nres} resource(s)",
                             fix="give one cap per resource, or one number")
            pcap[i] = c_list
        most = np.minimum(cap, pcap[i][:, None]).sum(axis=1) if pcap is not None \
            else cap.sum(axis=1)
        if (demand[i] > most).any():
            r = int(np.argmax(demand[i] > most))
            raise _error(f"{loc}.demand", f"demands {int(demand[i][r])} units but the "
                         f"{T} slots can give it at most {int(most[r])}",
                         fix="give more slots (or more capacity), or a smaller demand")
        u = _values(j.utility, T)
        if u.shape != (T,):
            raise _error(f"{loc}.utility", f"{len(u)} value(s) for {T} slots",
                         fix="give the utility of finishing in each slot")
        if not np.isfinite(u).all():
            raise _error(f"{loc}.utility", "not finite", fix="use finite numbers")
        if (np.diff(u) > 1e-12).any():
            k = int(np.argmax(np.diff(u) > 1e-12))
            raise _error(f"{loc}.utility", f"increases from slot {k} to {k + 1}",
                         fix="utilities must not increase with completion time")
        util[i] = u
    return CoraInstance(capacity=cap, demand=demand, utility=util, cap=pcap)


def solve(inst: CoraInstance, solver: str) -> CoraSolution:
    if solver == "cora":
        from utilon.policies.cora.exact import solve_exact

        return solve_exact(inst)
    if solver == "cora-lp":
        from utilon.policies.cora.lp import solve_final_lp

        return solve_final_lp(inst)
    from utilon.policies.cora.milp import solve_milp_reference

    return solve_milp_reference(inst)


def read(path: Path) -> OneShotInstance:
    return read_json_model(path, OneShotInstance, "see docs/solve-cora.md")


def solve_file(path: Path, solver: str | None = None) -> dict[str, Any]:
    doc = read(path)
    inst = build(doc, str(path))
    name = solver or doc.solver
    t0 = time.perf_counter()
    try:
        sol = solve(inst, name)
    except InfeasibleInstance as e:
        raise _error(f"{path}: slots", str(e),
                     fix="give more slots (or more capacity)") from None
    took = time.perf_counter() - t0
    names = doc.resources or ([f"r{r}" for r in range(inst.resources)]
                              if inst.resources > 1 else ["units"])
    return {
        "solver": name,
        "jobs": [{"id": j.id, "completion_slot": int(sol.completion[i]),
                  "utility": round(float(sol.utility[i]), 12)}
                 for i, j in enumerate(doc.jobs)],
        "sorted_utilities": [round(float(x), 12) for x in sol.sorted_utilities],
        "min_utility": round(float(sol.utility.min()), 12),
        "sum_utility": round(float(sol.utility.sum()), 12),
        "allocation": {j.id: {names[r]: [int(x) for x in sol.allocation[i, r]]
                              for r in range(inst.resources)}
                       for i, j in enumerate(doc.jobs)},
        "timing": {"solve_ms": round(took * 1000, 4)},
    }


def schema() -> dict[str, Any]:
    return OneShotInstance.model_json_schema()

