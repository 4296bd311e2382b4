"""utilon: schedule data-processing jobs on shared clusters so they finish when needed.

Public entry points: ``utilon.model`` (the domain), ``utilon.policies`` (registered
policies), ``utilon.sim`` (the simulator), ``utilon.scenario`` (scenario files) and
``utilon.runner`` (run and compare policies).
"""

__version__ = "0.1.0"
