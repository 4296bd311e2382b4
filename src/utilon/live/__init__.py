"""Live execution: the scheduler core drives real tasks through a backend.

``LiveRun`` (runner.py) is the wall-clock counterpart of the simulator's event loop: it feeds
the same ``SchedulerCore`` the same stimuli (submissions, completions, failures, capacity
changes, ticks) and hands its commands to a backend:

* ``FakeBackend`` (fake.py): in memory, virtual clock; tasks take their declared duration.
  Used by tests and by the simulator/live parity test.
* ``LocalBackend`` (local.py): worker processes on this machine, presented as the scenario's
  logical machines.  The embedded default.
* ``RayBackend`` (ray_backend.py): tasks pinned to the nodes of a Ray cluster.
"""

from utilon.live.backend import Backend, BackendError
from utilon.live.catalog import TaskCatalog, TaskSpec
from utilon.live.fake import FakeBackend
from utilon.live.local import LocalBackend
from utilon.live.runner import LiveProgress, LiveResult, LiveRun

__all__ = ["Backend", "BackendError", "FakeBackend", "LiveProgress", "LiveResult", "LiveRun",
           "LocalBackend", "TaskCatalog", "TaskSpec"]
