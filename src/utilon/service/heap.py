"""The garbage collector tuned for ``utilon serve``, whose heap only grows while it runs.

The scheduler core keeps every job it has seen, so a burst of submissions grows the heap by
millions of objects.  With CPython's default thresholds (700, 10, 10) a full collection then
ran every time the heap had grown by a quarter, each one scanning all of it for a few dozen
objects of garbage: pauses of 0.2-0.45 s with the interpreter held, a dozen of them in a
10,000-submission burst -- every request in flight waited, and they made the burst's p99
latency (0.3 s).  Young collections every 700 allocations cost some 15% of the CPU per
submission besides.

``server_gc`` freezes what the server holds when it starts (modules, the app, the recovered
jobs: never garbage, so never scanned again) and collects the young generations 70 times
less often, full collections far less often still; cyclic garbage is still collected, and
objects freed by reference counting (nearly all) are freed at once as before.  The previous
settings come back when the server stops (a test process goes on as it was).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLDS = (50_000, 20, 20)
"""allocations between young collections; young collections between older ones"""


@contextmanager
def server_gc() -> Iterator[None]:
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
