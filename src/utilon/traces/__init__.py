"""Trace importers: real workload and capacity traces -> utilon scenarios.

``import_trace(kind, file, ...)`` is the Python API; ``utilon trace import KIND FILE`` the
command.  Each importer lives in its own module and registers itself under its kind.
"""

from utilon.traces import alibaba, coflow, google, hadoop, solar, swim  # noqa: F401  (register)
from utilon.traces.api import ImportResult, import_trace, write_scenario
from utilon.traces.base import (
    ClassRule,
    Common,
    Importer,
    ImporterOptions,
    Provenance,
    SkipLog,
    TraceError,
    TracePart,
    Window,
    register,
)
from utilon.traces.kinds import importer, importer_kinds

__all__ = [
    "ClassRule", "Common", "ImportResult", "Importer", "ImporterOptions", "Provenance",
    "SkipLog", "TraceError", "TracePart", "Window", "import_trace", "importer",
    "importer_kinds", "register", "write_scenario",
]
