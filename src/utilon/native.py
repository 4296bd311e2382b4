"""The simulator's compiled hot modules, and when their Python sources are used instead.

``setup.py`` compiles ``HOT_MODULES`` with mypyc when the machine can; the compiled module
sits beside its source, and Python imports it first.  The sources are used instead, all of
them (a compiled module may only subclass compiled classes: it is all or nothing), when

* ``UTILON_PURE_PYTHON`` is set (to anything but ``0``): the same results, slower;
  ``tests/test_compiled.py`` runs scenarios both ways and compares every output;
* a compiled module is older than its source (an editable install whose sources changed
  since the build): a warning says to rebuild (``make`` does, ``pip install -e .`` does),
  so an edit is never shadowed by a stale build.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

# Every process imports this module first (``utilon/__init__``), so it imports nothing that
# ``utilon --help`` does not load anyway: not ``importlib.abc``, which alone pulls in
# ``importlib.resources`` and tempfile (tests/test_startup.py).

HOT_MODULES = (
    "utilon.core.vec_native",
    "utilon.core.make",
    "utilon.core.state",
    "utilon.core.ledger",
    "utilon.core.grants",
    "utilon.core.dispatch",
    "utilon.core.views",
    "utilon.core.transitions",
    "utilon.core.scheduler",
    "utilon.sim.fluid",
    "utilon.sim.loop",
    "utilon.sim.engine",
)
_PACKAGE = Path(__file__).resolve().parent


def _source(name: str) -> Path:
    return _PACKAGE.joinpath(*name.split(".")[1:]).with_suffix(".py")


def _builds(name: str) -> list[Path]:
    src = _source(name)
    builds = (src.with_name(src.stem + suffix)
              for suffix in importlib.machinery.EXTENSION_SUFFIXES)
    return [b for b in builds if b.exists()]


def stale(names: Sequence[str] = HOT_MODULES) -> list[str]:
    """The modules whose compiled build is older than their source."""
    out = []
    for name in names:
        src = _source(name)
        builds = _builds(name)
        if builds and src.exists() and src.stat().st_mtime > min(b.stat().st_mtime
                                                                for b in builds):
            out.append(name)
    return out


class _SourceFinder:
    """Finds the hot modules' ``.py`` sources, ahead of their compiled builds (a meta path
    finder: ``find_spec`` is what ``sys.meta_path`` asks of one)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in HOT_MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, _source(fullname))

    def invalidate_caches(self) -> None:
        pass


def use_sources() -> str:
    """Install the source finder when the sources must be used; the reason, else ''."""
    if os.environ.get("UTILON_PURE_PYTHON", "") not in ("", "0"):
        why = "UTILON_PURE_PYTHON is set"
    else:
        old = stale()
        if not old:
            return ""
        why = (f"the compiled {', '.join(old)} is older than its source; rebuild it "
               "(`make`, or `pip install -e .`) or set UTILON_PURE_PYTHON=1")
        warnings.warn(f"utilon runs its pure-Python simulator: {why}", stacklevel=2)
    if not any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder())
    return why


def compiled() -> bool:
    """Whether the simulator's hot modules run compiled (``setup.py``) in this process."""
    return all(not (importlib.import_module(name).__file__ or "").endswith(".py")
               for name in HOT_MODULES)
