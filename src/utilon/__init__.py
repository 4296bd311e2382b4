"""utilon: schedule data-processing jobs on shared clusters so they finish when needed.

Public entry points: ``utilon.model`` (the domain), ``utilon.policies`` (registered
policies), ``utilon.sim`` (the simulator), ``utilon.scenario`` (scenario files) and
``utilon.runner`` (run and compare policies); ``utilon.native.compiled()`` says whether the
simulator runs compiled.
"""

from utilon.native import use_sources

__version__ = "0.1.0"

# The simulator's hot modules may be compiled (setup.py); their sources are used instead when
# UTILON_PURE_PYTHON is set or a build is stale (``native``).  Before anything imports them.
use_sources()
