"""One-shot alsched solves: ``utilon solve alsched INSTANCE.json`` (docs/solve-alsched.md).

An instance lists the machines (each with its free units and attributes, or groups of equal
machines), the pending jobs (each a request -- prefix syntax, a structured expression, or
``{expr, classes, each}`` -- with its ready tasks, weight) and the solver.  The answer gives,
per job, the paper's allocation row ``D[job, class]``, the units per machine, the utility, and
the totals; ``--compare`` solves with every solver and reports greedy's optimality gap.  Solve
times are under ``timing``, the only non-deterministic key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from utilon.errors import ScenarioError, UtilonError
from utilon.model.cluster import AttrValue, Machine
from utilon.model.resources import Resources
from utilon.policies.alsched.lang import Request, fallback, preferred, walk
from utilon.policies.alsched.lang.ast import Lit
from utilon.policies.alsched.solvers import SOLVERS, Problem, Solution, class_alloc, solve
from utilon.policies.alsched.solvers import Request as Ask
from utilon.policies.cora.oneshot import read_instance

DOC = "see docs/solve-alsched.md"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


MAX_MACHINES = 100_000
MAX_UNITS = 100_000
"""Most units one machine may offer, and most tasks one job may ask for: the solvers hand
out units one at a time."""
MAX_JOB_MACHINES = 1_000_000
"""Most jobs x machines: every job's classes are resolved over every machine and the solvers
keep per-job arrays over the machines."""
MAX_NODES = 50_000
"""Most nodes of all the bound requests together (loops replicate a node per machine)."""
MAX_UTILITY = 1e15
"""Largest weighted utility a job can reach (``weight`` x the expression's best): totals and
the MILP's coefficients stay finite and exact."""


class MachineSpec(_Strict):
    id: str | None = Field(None, min_length=1, description="machine id (one machine)")
    count: int = Field(1, ge=1, le=MAX_MACHINES,
                       description="this many equal machines (ids: prefix + number)")
    prefix: str | None = Field(None, min_length=1, description="id prefix when count > 1")
    units: Annotated[int, Field(ge=0, le=MAX_UNITS)] = Field(
        description="free schedulable units (cores)")
    capacity: Annotated[int, Field(ge=0, le=MAX_UNITS)] | None = Field(
        None, description="total units, for cap(x); default: units")
    attributes: dict[str, AttrValue] = Field(default_factory=dict)


class JobSpec(_Strict):
    id: str = Field(min_length=1)
    request: str | dict[str, Any] = Field(
        description="prefix expression, structured expression, or {expr, classes, each}")
    tasks: int = Field(1, ge=1, le=MAX_UNITS, description="ready tasks: binds `tasks`; at "
                       "most this many units are given")
    weight: float = Field(1.0, gt=0, description="priority weight of the job's utility")


class Instance(_Strict):
    machines: list[MachineSpec] = Field(min_length=1, max_length=MAX_MACHINES)
    jobs: list[JobSpec] = Field(min_length=1, max_length=10_000)
    solver: Literal["greedy", "bnb", "milp"] = "greedy"
    constraints: Literal["soft", "hard", "none"] = Field(
        "soft", description="§5.2: full function, preferred branches only, fallback only")
    time_limit: float = Field(10.0, gt=0, le=3600, description="seconds per exact solve")


def read(path: Path) -> Instance:
    return read_instance(path, Instance, DOC)


def machines_of(doc: Instance, where: str) -> tuple[list[Machine], list[int], list[float]]:
    """Machines, their free units and their total units (for ``cap(x)``)."""
    machines: list[Machine] = []
    free: list[int] = []
    total: list[float] = []
    if sum(m.count for m in doc.machines) > MAX_MACHINES:
        raise ScenarioError(f"more than {MAX_MACHINES:,} machines", where=f"{where}: machines",
                            fix="group equal machines into classes of the request instead")
    for i, m in enumerate(doc.machines):
        loc = f"{where}: machines[{i}]"
        if m.count == 1 and m.id is not None:
            ids = [m.id]
        elif m.prefix is not None or m.id is not None:
            base = m.prefix or m.id or ""
            ids = [f"{base}{n}" for n in range(m.count)]
        else:
            raise ScenarioError("a machine needs an `id` (or a `prefix` with `count`)",
                                where=loc, fix=DOC)
        cap = m.capacity if m.capacity is not None else m.units
        if m.units > cap:
            raise ScenarioError(f"units {m.units} exceed capacity {cap}", where=f"{loc}.units",
                                fix="free units cannot exceed the machine's capacity")
        for mid in ids:
            machines.append(Machine(mid, Resources(units=float(max(cap, 1))),
                                    tuple(m.attributes.items())))
            free.append(m.units)
            total.append(float(cap))
    seen: set[str] = set()
    for mm in machines:
        if mm.id in seen:
            raise ScenarioError(f"machine id {mm.id!r} is used twice", where=f"{where}: machines",
                                fix="give every machine a distinct id")
        seen.add(mm.id)
    return machines, free, total


def problem_of(doc: Instance, where: str) -> tuple[Problem, list[str]]:
    """The solver's problem and the machine ids (index order)."""
    n_machines = sum(m.count for m in doc.machines)
    if n_machines * len(doc.jobs) > MAX_JOB_MACHINES:
        raise ScenarioError(f"{len(doc.jobs):,} jobs x {n_machines:,} machines is more than "
                            f"{MAX_JOB_MACHINES:,}", where=f"{where}: jobs",
                            fix="solve fewer jobs at a time, or group equal machines")
    machines, free, total = machines_of(doc, where)
    asks: list[Ask] = []
    ids: set[str] = set()
    nodes = 0
    for i, j in enumerate(doc.jobs):
        loc = f"{where}: jobs[{i}]"
        if j.id in ids:
            raise ScenarioError(f"job id {j.id!r} is used twice", where=loc,
                                fix="give every job a distinct id")
        ids.add(j.id)
        req = Request.from_spec(j.request, where=f"{loc}.request")
        bound = req.bind(machines, total, j.tasks, where=f"{loc}.request",
                         max_nodes=MAX_NODES - nodes)
        if bound is None:
            continue  # no machine matches the request: it gets nothing ("pending" below)
        expr = bound.expr
        nodes += sum(1 for _ in walk(expr))
        best = j.weight * expr.upper()
        big = max((abs(t.value) for n in walk(expr) for t in n.numbers()
                   if isinstance(t, Lit)), default=0.0)
        if not best <= MAX_UTILITY or big > MAX_UTILITY:
            raise ScenarioError(f"the job can reach a utility of {best:g} (weight x best "
                                f"value), more than {MAX_UTILITY:g}", where=f"{loc}.weight",
                                fix="scale the weight or the expression's utilities down")
        if doc.constraints == "hard":
            expr = preferred(expr)
        elif doc.constraints == "none":
            expr = fallback(expr)
        asks.append(Ask(j.id, expr, dict(bound.classes), j.weight, j.tasks))
    return Problem(tuple(free), tuple(asks)), [m.id for m in machines]


def answer(doc: Instance, problem: Problem, sol: Solution,
           machine_ids: list[str]) -> dict[str, Any]:
    d = class_alloc(problem, sol)
    jobs = []
    for j in doc.jobs:
        alloc = sol.alloc.get(j.id, {})
        jobs.append({
            "id": j.id,
            "utility": round(sol.utility.get(j.id, 0.0), 12),
            "classes": {c: int(n) for c, n in sorted(d.get(j.id, {}).items()) if n},
            "machines": {machine_ids[m]: int(n) for m, n in sorted(alloc.items()) if n},
            "units": int(sum(alloc.values())),
            "pending": not alloc,
        })
    return {"solver": sol.solver, "status": sol.status, "constraints": doc.constraints,
            "total_utility": round(sol.total, 12), "bound": round(sol.bound, 12),
            "jobs": jobs, "nodes": sol.nodes}


def solve_file(path: Path, solver: str | None = None, compare: bool = False) -> dict[str, Any]:
    doc = read(path)
    where = str(path)
    problem, machine_ids = problem_of(doc, where)
    name = solver or doc.solver
    sol = _solve(problem, name, doc.time_limit, where)
    out = answer(doc, problem, sol, machine_ids)
    timing: dict[str, Any] = {"solve_ms": round(sol.seconds * 1000, 4)}
    if compare:
        rows: dict[str, dict[str, Any]] = {}
        for other in SOLVERS:
            s = sol if other == name else _solve(problem, other, doc.time_limit, where)
            rows[other] = {"total_utility": round(s.total, 12), "status": s.status,
                           "bound": round(s.bound, 12)}
            timing[f"{other}_ms"] = round(s.seconds * 1000, 4)
        best: float | None = max((float(r["total_utility"]) for r in rows.values()
                                  if r["status"] == "optimal"), default=None)
        greedy = float(rows["greedy"]["total_utility"])
        out["compare"] = rows
        out["greedy_gap"] = (None if best is None else
                             round(0.0 if best <= 0 else (best - greedy) / best, 12))
    out["timing"] = timing
    return out


def _solve(problem: Problem, name: str, time_limit: float, where: str) -> Solution:
    """One solve; a solver's own refusal (an expression too large for branch-and-bound)
    names the file."""
    try:
        return solve(problem, name, time_limit=time_limit)
    except UtilonError as e:
        if e.where:
            raise
        raise ScenarioError(e.message, where=f"{where}: solver",
                            fix=e.fix or "use solver greedy or milp") from None


def schema() -> dict[str, Any]:
    return Instance.model_json_schema()
