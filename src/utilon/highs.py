"""HiGHS, quietly: every solver of utilon gets its ``highspy.Highs`` here.

HiGHS prints a copyright banner on standard output when a process constructs its first
``Highs`` object, before any option can switch output off.  In the middle of a command's
table (or from a worker process of a parallel run) that line is noise, so the first
construction runs with the process's standard output pointed at ``/dev/null``.
"""

from __future__ import annotations

import os
import sys
import threading

import highspy

_lock = threading.Lock()
_quiet_done = False


def new_highs() -> highspy.Highs:
    """A ``Highs`` with ``output_flag`` off."""
    global _quiet_done
    if _quiet_done:
        h = highspy.Highs()
    else:
        with _lock:
            sys.stdout.flush()
            saved = os.dup(1)
            try:
                with open(os.devnull, "w") as null:
                    os.dup2(null.fileno(), 1)
                    h = highspy.Highs()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
            _quiet_done = True
    h.setOptionValue("output_flag", False)
    return h
