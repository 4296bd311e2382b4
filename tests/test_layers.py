"""Issue 48, item 5: no import cycles between utilon's modules, and no import from a lower room
to a higher one (the layer table in docs/architecture.md, "Rooms").

The graph is read from the sources' syntax trees, so it holds every import: at module level,
inside functions (the lazy imports that keep start-up fast, tests/test_startup.py) and under
``if TYPE_CHECKING:``.  Type-only imports count like the others: a lower room that names a
higher room's type still changes when that type does, and a cycle of annotations is a cycle
of meaning.  A package's ``__init__`` is a module of its own; importing ``a.b.c`` is an edge
to ``a.b.c`` only, not to the packages ``a.b`` and ``a`` that Python runs first (every
package's registry would otherwise be a cycle with its members).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

#: The rooms, lowest first: a module may import modules of its own room and of lower rooms.
#: A module's room is that of the longest prefix listed; Cura's world (``utilon.cloud``) has
#: the slot world's layers on a smaller scale, so its modules sit in the matching rooms, and
#: ``live.calibrate`` (a step before a live run that rewrites the workload's priors, called by
#: the runner and the CLI, never by the live loop) sits with the runner.
ROOMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("utilon", "utilon.errors", "utilon.limits", "utilon.native", "utilon.highs",
              "utilon.plugins", "utilon.readers", "utilon.parallel")),
    ("model", ("utilon.model", "utilon.jobs", "utilon.cloud.model")),
    ("core", ("utilon.core", "utilon.cloud.packing", "utilon.cloud.profile",
              "utilon.cloud.policy")),
    ("worlds", ("utilon.sim", "utilon.live", "utilon.cloud.sim", "utilon.cloud.provider",
                "utilon.cloud.live", "utilon.cloud.ray_provider")),
    ("policies", ("utilon.policies",)),
    ("scenarios", ("utilon.scenario", "utilon.traces", "utilon.cloud.scenario",
                   "utilon.cloud.workload")),
    ("outputs", ("utilon.metrics", "utilon.report", "utilon.cloud.metrics",
                 "utilon.cloud.outputs")),
    ("runs", ("utilon.runner", "utilon.plan", "utilon.checks", "utilon.repro",
              "utilon.league", "utilon.live.calibrate")),
    ("front", ("utilon.cli", "utilon.service")),
)

#: Imports the checks let pass for now (none since the core refactor, issue 48; an entry here
#: must name an import that still exists, test_exemptions_are_still_needed).
EXEMPT: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    file: str  # relative to src/
    line: int

    def where(self) -> str:
        return f"{self.file}:{self.line}: {self.source} -> {self.target}"


def modules(src: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> its file, for every module of ``package`` under ``src``."""
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _owner(name: str, mods: dict[str, Path]) -> str | None:
    """The module ``name`` is, or is defined in (``a.b.f`` -> ``a.b``)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(src: Path, package: str = "utilon") -> dict[str, list[Edge]]:
    """Every import of one of ``package``'s modules by another, wherever it is written."""
    mods = modules(src, package)
    graph: dict[str, list[Edge]] = {m: [] for m in mods}
    for mod, path in mods.items():
        here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                # `from a import b` imports the module a.b when there is one, else a
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                         for a in node.names]
            for name in names:
                target = _owner(name, mods) if name.split(".")[0] == package else None
                edge = Edge(mod, target or "", path.relative_to(src).as_posix(), node.lineno)
                if target is not None and target != mod and edge not in graph[mod]:
                    graph[mod].append(edge)
    return graph


def room_of(mod: str) -> int | None:
    best, index = -1, None
    for i, (_, prefixes) in enumerate(ROOMS):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best:
                best, index = len(p), i
    return index


def upward(graph: dict[str, list[Edge]], exempt: frozenset[tuple[str, str]] = EXEMPT
           ) -> list[str]:
    out = []
    for edges in graph.values():
        for e in edges:
            a, b = room_of(e.source), room_of(e.target)
            if (e.source, e.target) not in exempt and a is not None and b is not None and b > a:
                out.append(f"{e.where()} (room {ROOMS[a][0]!r} imports room {ROOMS[b][0]!r})")
    return out


def cycles(graph: dict[str, list[Edge]], exempt: frozenset[tuple[str, str]] = EXEMPT
           ) -> list[list[Edge]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    succ = {m: [e for e in es if (e.source, e.target) not in exempt] for m, es in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for e in succ[v]:
            if e.target not in index:
                visit(e.target)
                low[v] = min(low[v], low[e.target])
            elif e.target in on_stack:
                low[v] = min(low[v], index[e.target])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for m in sorted(succ):
        if m not in index:
            visit(m)
    return [_loop(comp, succ) for comp in comps]


def _loop(comp: list[str], succ: dict[str, list[Edge]]) -> list[Edge]:
    """A shortest cycle through the component's first module, as the edges that make it."""
    inside, start = set(comp), comp[0]
    paths: dict[str, list[Edge]] = {start: []}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for e in succ[v]:
                if e.target == start:
                    return [*paths[v], e]
                if e.target in inside and e.target not in paths:
                    paths[e.target] = [*paths[v], e]
                    nxt.append(e.target)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in {comp}")


def _fail_if(lines: list[str], title: str) -> None:
    if lines:
        pytest.fail(title + ":\n  " + "\n  ".join(lines), pytrace=False)


# -- the checks on utilon ----------------------------------------------------------------------

GRAPH = import_graph(SRC)


def test_every_module_has_a_room() -> None:
    _fail_if([m for m in GRAPH if room_of(m) is None],
             "modules in no room of ROOMS (add them here and to docs/architecture.md's table)")


def test_no_import_cycles() -> None:
    _fail_if(["\n  ".join(e.where() for e in c) + "\n" for c in cycles(GRAPH)],
             "import cycles (break them by moving the shared piece down)")


def test_no_upward_imports() -> None:
    _fail_if(upward(GRAPH), "imports from a lower room to a higher one")


def test_exemptions_are_still_needed() -> None:
    present = {(e.source, e.target) for es in GRAPH.values() for e in es}
    _fail_if(sorted(f"{a} -> {b}" for a, b in EXEMPT - present),
             "EXEMPT lists imports that are gone: remove them")


def test_the_rooms_are_the_documented_ones() -> None:
    """docs/architecture.md's room table lists the rooms in this order, each with its modules."""
    doc = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [line for line in doc.splitlines()
            if line.startswith("| ") and line.split(" | ")[0][2:] in dict(ROOMS)]
    assert [r.split(" | ")[0][2:] for r in rows] == [name for name, _ in ROOMS]
    for row, (name, prefixes) in zip(rows, ROOMS, strict=True):
        missing = [p for p in prefixes if p != "utilon" and f"`{p[len('utilon.'):]}`" not in row]
        assert not missing, f"docs/architecture.md's room {name!r} lacks {missing}"


# -- the checker itself catches what it should -------------------------------------------------

def _package(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp / "utilon" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return tmp


def test_checker_finds_cycles_hidden_in_functions_and_type_checking(tmp_path: Path) -> None:
    src = _package(tmp_path, {
        "__init__.py": "",
        "model/__init__.py": "",
        "model/a.py": "def f():\n    from utilon.model import b\n",
        "model/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from .a import f\n",
        "model/c.py": "from utilon.model.b import x\n",
    })
    found = cycles(import_graph(src), frozenset())
    assert [[(e.source, e.target, e.line) for e in c] for c in found] == [
        [("utilon.model.a", "utilon.model.b", 2), ("utilon.model.b", "utilon.model.a", 3)]]
    assert found[0][0].where() == "utilon/model/a.py:2: utilon.model.a -> utilon.model.b"
    exempt = frozenset({("utilon.model.a", "utilon.model.b")})
    assert cycles(import_graph(src), exempt) == []


def test_checker_finds_upward_imports(tmp_path: Path) -> None:
    src = _package(tmp_path, {
        "__init__.py": "",
        "model/__init__.py": "def g():\n    import utilon.cli.app\n",
        "cli/__init__.py": "",
        "cli/app.py": "from utilon.model import g\n",
    })
    graph = import_graph(src)
    assert upward(graph, frozenset()) == [
        "utilon/model/__init__.py:2: utilon.model -> utilon.cli.app "
        "(room 'model' imports room 'front')"]
