"""Finding a trace importer by its kind: the built-in ones, those registered in this process,
and installed packages' ``utilon.traces`` entry points.

Apart from ``base`` (which holds the registry the importers add themselves to) so that the
lookup can import every built-in importer and no importer imports the lookup.
"""

from __future__ import annotations

from typing import Any

from utilon.errors import UnknownNameError
from utilon.traces import alibaba, coflow, google, hadoop, solar, swim  # noqa: F401  (register)
from utilon.traces.base import _REGISTRY, PLUGIN_GROUP, Importer


def importer(kind: str) -> type[Importer]:
    """The importer of ``kind``: a built-in one, one registered in this process, or an
    installed package's ``utilon.traces`` entry point (looked for only when no other has
    the name; one that does not load is a one-line ``PluginError``)."""
    from utilon.plugins import load

    cls = _REGISTRY.get(kind) or load(PLUGIN_GROUP, kind, _plugin_problem)
    if cls is None:
        raise UnknownNameError("trace kind", kind, list(_REGISTRY), where="command line",
                               fix="see `utilon trace kinds`")
    return cls


def importer_kinds() -> list[str]:
    """The built-in kinds (and those registered in this process), then the installed
    plugins' (a broken plugin is a logged warning, and left out)."""
    return list(_REGISTRY) + sorted(plugin_importers())


def plugin_importers() -> dict[str, tuple[type[Importer], str]]:
    """The installed plugins' importers: kind -> (class, the distribution it comes from)."""
    from utilon.plugins import load_all

    return {k: (cls, p.dist) for k, (cls, p) in load_all(PLUGIN_GROUP, _plugin_problem).items()
            if k not in _REGISTRY}


def _plugin_problem(name: str, obj: Any) -> str | None:
    if not (isinstance(obj, type) and issubclass(obj, Importer)):
        what = getattr(obj, "__qualname__", None) or repr(obj)
        return f"{what} is not a trace importer (a subclass of utilon.traces.Importer)"
    if getattr(obj, "kind", None) != name:
        return (f"the entry point is named {name!r} but the importer's kind is "
                f"{getattr(obj, 'kind', None)!r}")
    if name in _REGISTRY and _REGISTRY[name] is not obj:
        return f"{name!r} is a built-in trace kind's name; the built-in is used"
    missing = [a for a in ("summary", "produces") if not hasattr(obj, a)]
    if missing or obj.produces not in ("workload", "cluster"):
        return "the importer must set summary and produces ('workload' or 'cluster')"
    return None
