"""A league workload at a seed -> a scenario file (generated once into a cache folder).

A scenario entry is its own file.  A trace recipe is imported by ``utilon trace import``'s code
(``import_trace`` and ``write_scenario``) with the seed as the import's seed, and a ``capacity:``
recipe is then imported ``--with`` that file, as ``examples/traces/regenerate.sh`` builds
``swim-fb2009-1h-solar.yaml``.  A repro recipe calls the reproduction's own workload builder.
Every generated file is named by a digest of its recipe (``<cache>/<name>-<digest>/seed-<k>``),
so a changed recipe is generated again and an unchanged one is read back; importing is
deterministic, so the same recipe and seed give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utilon.errors import ScenarioError
from utilon.league.spec import ReproRecipe, TraceRecipe, Workload


@dataclass(frozen=True)
class Where:
    """Where a league file's relative paths start (``base``), where its trace files are
    (``data``) and where generated workloads are kept (``cache``)."""

    base: Path
    data: Path
    cache: Path

    def scenario(self, path: str) -> Path:
        return (self.base / path).resolve()

    def trace(self, recipe: TraceRecipe) -> Path:
        return (self.data / recipe.file).resolve()


def digest(entry: Workload) -> str:
    """What a generated file depends on: the recipe, not the entry's name or notes."""
    recipe = entry.trace or entry.repro
    assert recipe is not None
    text = json.dumps(recipe.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def problems(entry: Workload, where: Where) -> list[str]:
    """What is missing for ``entry`` to be run here (files that do not exist)."""
    out = []
    if entry.scenario is not None and not where.scenario(entry.scenario).is_file():
        out.append(f"{entry.name}: no scenario file {where.scenario(entry.scenario)}")
    recipe = entry.trace
    while recipe is not None:
        from utilon.traces import importer_kinds

        if recipe.kind not in importer_kinds():
            out.append(f"{entry.name}: unknown trace kind {recipe.kind!r}; valid: "
                       f"{', '.join(importer_kinds())}")
        if not where.trace(recipe).is_file():
            out.append(f"{entry.name}: no trace file {where.trace(recipe)}")
        recipe = recipe.capacity
    if entry.repro is not None and entry.repro.paper == "rds":
        from utilon.repro.rds import SOLAR

        if not SOLAR.is_file():
            out.append(f"{entry.name}: no solar trace {SOLAR} (RDS's cluster)")
    return out


def first_seed(entry: Workload, where: Where) -> int:
    """The first seed of ``entry``: its ``first_seed``, else a scenario file's own seed, else
    0 (a recipe at seed 0 is the import ``utilon trace import`` makes by default)."""
    if entry.first_seed is not None:
        return entry.first_seed
    if entry.scenario is not None:
        from utilon.scenario.load import read_scenario

        return read_scenario(where.scenario(entry.scenario)).seed
    return 0


def target(entry: Workload, seed: int, where: Where) -> Path:
    """The scenario file ``entry`` runs at ``seed`` (a generated one need not exist yet)."""
    if entry.scenario is not None:
        return where.scenario(entry.scenario)
    suffix = ".yaml" if entry.trace is not None else ".json"
    return where.cache / f"{entry.name}-{digest(entry)}" / f"seed-{seed}{suffix}"


def generate(entry: Workload, seed: int, where: Where) -> Path:
    """``target(entry, seed)``, generated first if it is a recipe's and not there yet."""
    path = target(entry, seed, where)
    if entry.scenario is not None or path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")  # a file appears whole or not at all
    if entry.trace is not None:
        _import(entry.trace, entry.name, seed, where, tmp)
    else:
        assert entry.repro is not None
        doc = _repro(entry.repro, entry.name, seed)
        tmp.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _import(recipe: TraceRecipe, name: str, seed: int, where: Where, out: Path) -> None:
    from utilon.readers import parse_seconds  # the CLI's reading of 1h, 30m, ...
    from utilon.traces import ClassRule, Window, import_trace, write_scenario

    def one(r: TraceRecipe, with_scenario: Path | None, dest: Path) -> None:
        window = Window(parse_seconds(r.start, "start") or 0.0,
                        parse_seconds(r.duration, "duration"), r.max_jobs, r.arrival_scale)
        rule: dict[str, Any] = {k: v for k, v in (("slack", r.slack), ("utility", r.utility))
                                if v is not None}
        res = import_trace(r.kind, where.trace(r), window=window, seed=seed,
                           machines=r.machines, load=r.load, classes=ClassRule(**rule),
                           options=dict(r.set), with_scenario=with_scenario, name=name,
                           max_bad=r.max_bad)
        write_scenario(res, dest, command(r, seed, with_scenario, dest, name))

    if recipe.capacity is None:
        one(recipe, None, out)
        return
    jobs = out.with_name(out.name.replace(".yaml.tmp", ".jobs.yaml"))
    one(recipe, None, jobs)
    one(recipe.capacity, jobs, out)


def command(r: TraceRecipe, seed: int, with_scenario: Path | None, out: Path,
            name: str) -> str:
    """The ``utilon trace import`` command that makes the same file (recorded in it)."""
    parts = ["utilon trace import", r.kind, str(r.file)]
    for opt, v in (("--start", r.start), ("--duration", r.duration),
                   ("--max-jobs", r.max_jobs), ("--machines", r.machines), ("--load", r.load),
                   ("--slack", r.slack), ("--utility", r.utility)):
        if v is not None:
            parts += [opt, str(v)]
    if r.arrival_scale != 1.0:
        parts += ["--arrival-scale", f"{r.arrival_scale:g}"]
    parts += [x for k, v in r.set.items() for x in ("--set", f"{k}={v}")]
    if with_scenario is not None:
        parts += ["--with", with_scenario.name]
    parts += ["--seed", str(seed), "--name", name, "--out", out.name.removesuffix(".tmp")]
    return " ".join(parts)


def _repro(recipe: ReproRecipe, name: str, seed: int) -> dict[str, Any]:
    if recipe.paper == "cora":
        from utilon.repro.cora import SIZES, TABLE1_MIX, cora_workload

        wl = cora_workload(recipe.jobs or SIZES["table1"], TABLE1_MIX, seed, name=name)
        return wl.spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    from utilon.repro.rds import day_of_seed, table3_document

    if recipe.jobs is not None:
        raise ScenarioError("the RDS workload is Table 3's nine jobs; jobs: does not apply",
                            where=f"league: {name}: repro.jobs", fix="remove jobs:")
    doc = table3_document(recipe.mode, day_of_seed(seed), seed)
    return {**doc, "name": name}
