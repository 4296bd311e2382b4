"""The server's threads named for the operating system, as they are for Python.

Python 3.11 names a thread only for itself; ``top -H``, ``ps -L`` and /proc see every thread of
``utilon serve`` as ``python``.  Named, the CPU each one takes (the API's event loop, the
scheduler's loop, the store's writer) can be read from outside the process:
``benchmarks/bench_service.py`` reports the burst's CPU per thread that way.
"""

from __future__ import annotations

import threading

COMM_CHARS = 15
"""the longest name Linux keeps for a thread (its ``comm``)"""


def name_this_thread(name: str) -> None:
    """Give the calling thread ``name`` (its first 15 characters) in /proc; nothing where
    there is no /proc."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
            f.write(name[:COMM_CHARS])
    except OSError:
        pass
