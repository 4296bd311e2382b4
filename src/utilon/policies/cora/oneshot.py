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
from typing import Annotated, Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from utilon.errors import ScenarioError, UtilonError
from utilon.policies.cora.instance import CoraInstance, CoraSolution, InfeasibleInstance
from utilon.readers import read_json_model

SOLVERS = ("cora", "cora-lp", "milp")
M = TypeVar("M", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


MAX_UNITS = 10**12
"""Largest demand, capacity or cap: far past any cluster, well inside 64-bit sums."""
MAX_CELLS = 2_000_000
"""Most slots the schema admits (the solver limits below are tighter)."""
MAX_FILE_BYTES = 64 * 2**20
"""Largest instance file read (64 MiB): JSON's objects take ten times that in memory."""
MAX_UTILITY = 1e15
"""Largest utility (in size): sums and comparisons of utilities stay exact and finite."""
MAX_SLOTS = 2_000
"""Most slots any solver is given: the exact solver's feasibility tests are quadratic in the
slots (and it takes rounds in proportion to them)."""
SOLVER_CELLS = {"cora": 200_000, "cora-lp": 20_000, "milp": 1_000}
"""Most jobs x slots x resources per solver, measured to keep a solve within seconds on two
cores: the exact solver takes about 5 s at 2 million cells (and 26 s in a tie-heavy case),
the FINAL LP 25 s at 200,000 and HiGHS's MILP minutes at 2,000."""
GENERAL_SLOTS = 500
"""Most slots when the exact solver needs its general feasibility test: per-job caps with a
per-slot capacity that drops somewhere (2,000 slots took 13 s with two jobs, 1 minute with
100)."""
GENERAL_CELLS = 50_000
NODE_LIMIT = 20_000
"""Feasibility tests the exact solver's branch and bound may spend on tied utilities (the
policy's default); past it the best solution found is returned with ``"optimal": false``."""
LP_SECONDS = 60.0
"""HiGHS's time limit for the FINAL LP (a backstop: the size limit keeps it far below)."""


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
    # the schema says what the loader checks: some work (a job that demands nothing is
    # refused), so a scalar is at least 1 and a list has an entry of at least 1 (issue 47)
    demand: (Annotated[int, Field(ge=1, le=MAX_UNITS)]
             | Annotated[list[Count], Field(min_length=1, json_schema_extra={
                 "contains": {"type": "integer", "minimum": 1}})]) = Field(
        description="units of work (at least 1), or one per resource (at least one of them "
        "at least 1)")
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
    with np.errstate(over="ignore", invalid="ignore"):  # build() refuses what is not finite
        return np.where(t <= u.deadline, u.value - u.slope * t, u.late_value)


def _error(where: str, msg: str, fix: str) -> ScenarioError:
    return ScenarioError(msg, where=where, fix=fix)


def build(doc: OneShotInstance, source: str = "", solver: str = "cora") -> CoraInstance:
    """The array instance, with one-line errors naming the field; the sizes are checked
    against ``solver``'s limits before anything is allocated."""
    T, n = doc.slots, len(doc.jobs)
    where = source or "instance"
    nres = 1
    for j in doc.jobs:
        if isinstance(j.demand, list):
            nres = max(nres, len(j.demand))
    if isinstance(doc.capacity, list):
        nres = max(nres, len(doc.capacity))
    if T > MAX_SLOTS:
        raise _error(f"{where}: slots", f"{T:,} slots is more than {MAX_SLOTS:,}",
                     fix="use fewer, longer slots")
    cells = SOLVER_CELLS.get(solver, SOLVER_CELLS["cora"])
    if n * T * nres > cells:
        raise _error(f"{where}: slots", f"{n} jobs x {T} slots x {nres} resource(s) is more "
                     f"than the {cells:,} cells solver {solver} takes",
                     fix="use fewer slots (longer ones), split the instance"
                         + (", or use solver cora" if solver != "cora" else ""))
    seen: set[str] = set()
    for i, j in enumerate(doc.jobs):
        if j.id in seen:
            raise _error(f"{where}: jobs[{i}].id", f"job id {j.id!r} is used twice",
                         fix="give every job a distinct id")
        seen.add(j.id)
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
    if (solver == "cora" and any(j.cap is not None for j in doc.jobs)
            and bool((np.diff(cap, axis=1) < 0).any())
            and (T > GENERAL_SLOTS or n * T * nres > GENERAL_CELLS)):
        raise _error(f"{where}: capacity", f"per-job caps with a capacity that drops over "
                     f"the slots need the general feasibility test, which takes at most "
                     f"{GENERAL_SLOTS} slots and {GENERAL_CELLS:,} cells ({T} slots, "
                     f"{n * T * nres:,} cells here)",
                     fix="use fewer slots, a capacity that never drops, or no caps")
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
        if bool((np.abs(u) > MAX_UTILITY).any()):
            raise _error(f"{loc}.utility", f"a utility is larger than {MAX_UTILITY:g} in size",
                         fix=f"scale the utilities below {MAX_UTILITY:g}")
        if (np.diff(u) > 1e-12).any():
            k = int(np.argmax(np.diff(u) > 1e-12))
            raise _error(f"{loc}.utility", f"increases from slot {k} to {k + 1}",
                         fix="utilities must not increase with completion time")
        util[i] = u
    return CoraInstance(capacity=cap, demand=demand, utility=util, cap=pcap)


def solve(inst: CoraInstance, solver: str) -> CoraSolution:
    if solver == "cora":
        from utilon.policies.cora.exact import solve_exact

        return solve_exact(inst, node_limit=NODE_LIMIT)
    if solver == "cora-lp":
        from utilon.policies.cora.lp import solve_final_lp

        return solve_final_lp(inst, highs_options={"time_limit": LP_SECONDS})
    from utilon.policies.cora.milp import solve_milp_reference

    return solve_milp_reference(inst)


def read_instance(path: Path, model: type[M], fix: str) -> M:
    """``read_json_model`` with a size limit, and with every failure to read the file (a
    number of 5,000 digits is Python's ValueError) one line naming it."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # missing or unreadable: read_json_model names the problem
    if size > MAX_FILE_BYTES:
        raise ScenarioError(f"{size:,} bytes is more than {MAX_FILE_BYTES:,}",
                            where=str(path), fix="split the instance")
    try:
        return read_json_model(path, model, fix)
    except (ValueError, RecursionError, MemoryError) as e:
        raise ScenarioError(f"cannot read it ({type(e).__name__}: {e})", where=str(path),
                            fix=fix) from None


def read(path: Path) -> OneShotInstance:
    return read_instance(path, OneShotInstance, "see docs/solve-cora.md")


def solve_file(path: Path, solver: str | None = None) -> dict[str, Any]:
    doc = read(path)
    name = solver or doc.solver
    inst = build(doc, str(path), name)
    t0 = time.perf_counter()
    try:
        sol = solve(inst, name)
    except InfeasibleInstance as e:
        raise _error(f"{path}: slots", str(e),
                     fix="give more slots (or more capacity)") from None
    except RuntimeError as e:  # HiGHS stopped (its time limit) short of an optimum
        raise _error(f"{path}: solver", f"solver {name} did not finish: {e}",
                     fix="use solver cora (exact, fastest), or fewer slots") from None
    except UtilonError as e:
        if e.where:
            raise
        raise _error(f"{path}: solver", e.message, fix=e.fix or "see docs/solve-cora.md"
                     ) from None
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
        **({} if sol.info.get("optimal", True) else {"optimal": False}),
        "timing": {"solve_ms": round(took * 1000, 4)},
    }


def schema() -> dict[str, Any]:
    return OneShotInstance.model_json_schema()

