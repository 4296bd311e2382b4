"""Group commit: one thread writes what concurrent callers hand it, many items per transaction.

Under a burst of submissions, one transaction (and one fsync) each would make every
submission queue behind the others' disk flushes.  A ``GroupWriter`` takes every item waiting
when it is free and writes them together with one call of ``write`` (one transaction), so a
flush is paid once per group, and the next group gathers while this one is on disk.  Each
caller's future resolves only after that call returned, that is once the transaction holding
its item has committed (or fails with what the call raised): a caller that answers "accepted"
after its future still answers only for what is durable.  A group whose call raised wrote
nothing (its transaction rolled back): its items are written again one at a time, so that one
bad item fails its own caller only.

Callers need no thread of their own: a blocking caller waits on the future
(``Future.result``), the API's event loop awaits it (``asyncio.wrap_future``), so request
handling goes on while the disk flushes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from utilon.service.osthread import name_this_thread

T = TypeVar("T")

MAX_GROUP = 500
"""items per transaction at most (a group's statements bind a parameter per item)"""


class GroupWriter(Generic[T]):
    """``put(item)`` returns a future of the item's result; ``write(batch)`` returns one
    result per item, in order, and runs on the writer's own thread, one call at a time."""

    def __init__(self, write: Callable[[list[T]], Sequence[Any]], name: str = "utilon-writer",
                 max_group: int = MAX_GROUP) -> None:
        self.write = write
        self.name = name
        self.max_group = max_group
        self._cond = threading.Condition()
        self._waiting: list[tuple[T, Future[Any]]] = []
        self._thread: threading.Thread | None = None
        self._closing = False
        self.groups = 0  # transactions written (how well submissions are grouped)
        self.items = 0

    def put(self, item: T) -> Future[Any]:
        fut: Future[Any] = Future()
        with self._cond:
            self._waiting.append((item, fut))
            if self._thread is None or not self._thread.is_alive():
                # started on the first item (and again after close): a store that takes no
                # submissions has no thread
                self._closing = False
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return fut

    def close(self, timeout: float = 30.0) -> None:
        """Write what is waiting, then stop the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify()
            t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)

    def _run(self) -> None:
        name_this_thread(self.name)
        while True:
            with self._cond:
                while not self._waiting and not self._closing:
                    self._cond.wait()
                if not self._waiting:
                    self._thread = None
                    return
                group = self._waiting[:self.max_group]
                del self._waiting[:self.max_group]
            self._write(group)

    def _write(self, group: list[tuple[T, Future[Any]]]) -> None:
        try:
            results = self.write([item for item, _ in group])
        except BaseException as e:
            if len(group) > 1:
                # nothing of the group was written: each item again on its own, so that
                # one bad item fails only its own caller
                for one in group:
                    self._write([one])
            else:
                group[0][1].set_exception(e)
            return
        self.groups += 1
        self.items += len(group)
        for (_, fut), res in zip(group, results, strict=True):
            fut.set_result(res)
