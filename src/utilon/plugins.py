"""Plugins: policies, trace importers and job kinds that live in other packages.

Two ways to bring your own, the conventions of the Python ecosystem (pytest plugins, Airflow
providers, uvicorn's ``module:app``):

* **entry points**: a package declares ``utilon.policies``, ``utilon.traces`` or
  ``utilon.jobs`` entry points in its ``pyproject.toml``; once it is installed, the name works
  wherever a built-in one does, in every process (``compare``'s workers, Ray tasks, the service);
* **references**: ``package.module:Class`` names a policy class directly, wherever a policy
  name is accepted; the module is imported from the installed packages or the current
  directory (as uvicorn does with ``main:app``).

Discovery is lazy and cheap: a registry asks here only for a name that is not built in, or
when it lists what there is, and nothing a plugin contains is imported until then.  A plugin
that fails to load (its module does not import, its object is not what the group expects) is
a one-line warning naming it, its distribution and the error when a listing meets it, and a
one-line error when it is asked for by name; it never stops the built-ins from working.

This module knows nothing of policies, traces or jobs: each registry passes the check that
the loaded object is one of its own (``check``), and keeps what it loaded.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from utilon.errors import UtilonError

__all__ = ["GROUPS", "Plugin", "PluginError", "discover", "is_reference", "load",
           "load_all", "refresh", "resolve_reference"]

log = logging.getLogger(__name__)

#: The entry-point groups utilon reads, and what each one's objects are.
GROUPS = {
    "utilon.policies": "a Policy or CloudPolicy subclass (utilon.policies)",
    "utilon.traces": "an Importer subclass (utilon.traces)",
    "utilon.jobs": "a JobKind subclass (utilon.jobs.kinds)",
}

Check = Callable[[str, Any], str | None]
"""``check(name, obj)``: why ``obj`` loaded for entry point ``name`` is not usable, or None."""


class PluginError(UtilonError):
    """A plugin (entry point) or a ``module:Class`` reference could not be loaded."""


@dataclass(frozen=True, slots=True)
class Plugin:
    """One entry point of a utilon group, as installed (nothing of it imported yet)."""

    group: str
    name: str
    value: str
    """what it points at: ``package.module:Object``"""
    dist: str
    """the distribution that declares it, ``name version``"""

    def describe(self) -> str:
        return f"{self.group} entry point {self.name!r} ({self.value}, from {self.dist})"


@functools.cache
def discover(group: str) -> dict[str, Plugin]:
    """The installed entry points of ``group`` by name (the first distribution wins a name
    declared twice).  Reads package metadata only: tens of milliseconds, once per process."""
    found: dict[str, Plugin] = {}
    for ep in importlib.metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        origin = f"{dist.name} {dist.version}" if dist is not None else "unknown distribution"
        plugin = Plugin(group, ep.name, ep.value, origin)
        if ep.name in found:
            log.warning("plugin %s ignored: %s declares the same name", plugin.describe(),
                        found[ep.name].dist)
            continue
        found[ep.name] = plugin
    return found


_loaded: dict[tuple[str, str], Any] = {}
_broken: dict[tuple[str, str], PluginError] = {}


def load(group: str, name: str, check: Check) -> Any | None:
    """The object of ``group``'s entry point ``name``, imported and checked; ``None`` when no
    installed package declares that name.  A plugin that fails raises ``PluginError`` (the
    same one on every later call: a broken import is not retried)."""
    key = (group, name)
    if key in _loaded:
        return _loaded[key]
    if key in _broken:
        raise _broken[key]
    plugin = discover(group).get(name)
    if plugin is None:
        return None
    try:
        obj = _import(plugin.value)
        problem = check(name, obj)
    except Exception as exc:  # anything a third-party import raises makes the plugin broken
        problem = _why(exc)
    if problem is not None:
        error = PluginError(f"plugin {plugin.describe()} is broken: {problem}",
                            fix=f"repair or uninstall {plugin.dist.split()[0]}")
        _broken[key] = error
        raise error
    _loaded[key] = obj
    return obj


def load_all(group: str, check: Check) -> dict[str, tuple[Any, Plugin]]:
    """Every working plugin of ``group``: name -> (object, plugin).  Each broken one is
    logged as one warning line (once per process) and left out."""
    out: dict[str, tuple[Any, Plugin]] = {}
    for name, plugin in discover(group).items():
        warned = (group, name) in _broken
        try:
            obj = load(group, name, check)
        except PluginError as e:
            if not warned:
                log.warning("%s", e.one_line())
            continue
        if obj is not None:
            out[name] = (obj, plugin)
    return out


def refresh() -> None:
    """Forget what was discovered and loaded (after installing a package in this process)."""
    discover.cache_clear()
    _loaded.clear()
    _broken.clear()
    importlib.invalidate_caches()


# ------------------------------------------------------------------------------ references
def is_reference(name: str) -> bool:
    """``package.module:Object`` (a reference) rather than a registered name."""
    return ":" in name


def resolve_reference(ref: str, *, what: str = "object") -> Any:
    """Import ``package.module:Object`` (``Object`` may be dotted: ``Outer.Inner``).  A module
    not found among the installed packages is looked for in the current directory."""
    module, _, attr = ref.partition(":")
    if not module or not attr or not all(p.isidentifier() for p in module.split(".")) \
            or not all(p.isidentifier() for p in attr.split(".")):
        raise PluginError(f"{ref!r} is not a {what} reference",
                          fix="write package.module:Class (e.g. mypolicies:Greedy)")
    try:
        return _import(ref)
    except ModuleNotFoundError as e:
        if e.name is None or not module.startswith(e.name):
            raise PluginError(f"{what} {ref!r}: importing {module} failed: {_why(e)}",
                              fix=f"install what {module} needs") from None
        raise PluginError(f"{what} {ref!r}: no module named {e.name!r}",
                          fix=f"install the package that provides {module}, or run from the "
                              "directory that holds it") from None
    except AttributeError:
        raise PluginError(f"{what} {ref!r}: module {module} has no {attr!r}",
                          fix=f"check the name after the colon in {ref}") from None
    except Exception as e:  # a third-party module may raise anything while importing
        raise PluginError(f"{what} {ref!r}: importing {module} failed: {_why(e)}",
                          fix=f"fix {module}") from None


def _import(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    _search_cwd()
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def _search_cwd() -> None:
    """Let ``mymodule:Class`` find ``./mymodule.py``, as ``python -m`` would: the ``utilon``
    script's own directory is on ``sys.path``, the user's working directory is not.  It goes
    last, so it never shadows an installed package; spawned workers inherit ``sys.path``."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
