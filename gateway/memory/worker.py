"""One thread that runs blocking jobs in order for the event loop: the SQLite store's only thread.

The hand-off is a queue; the owner's `serve` hands a batch's results back to the loop in one
`call_soon_threadsafe`: no executor work items, no concurrent futures chained to asyncio ones.
The thread takes every job queued while it was busy at once, so its owner can serve several
(appends) in one statement or one transaction. `busy_for` says how long the batch in flight has
been served: read from the loop, so a batch stalled on its file shows there (/readyz) without
waiting on the thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger("gateway.memory")
J = TypeVar("J")


class Worker(Generic[J]):
    """Runs `serve(jobs)` on one daemon thread for every batch of jobs queued; started at the first job.

    `closed` makes the error `submit` raises once the worker is stopped.
    """

    def __init__(self, serve: Callable[[list[J]], None], *, name: str, closed: Callable[[], Exception]) -> None:
        self._serve = serve
        self._name = name
        self._closed = closed
        self._jobs: queue.SimpleQueue[J | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._serving_since: float | None = None  # time.monotonic() when the batch in flight began
        self.stopped = False

    @property
    def started(self) -> bool:
        return self._thread is not None

    def busy_for(self) -> float:
        """Seconds the batch in flight has been served so far; 0.0 while the thread waits for jobs."""
        since = self._serving_since  # one read: the thread may clear it meanwhile
        return 0.0 if since is None else time.monotonic() - since

    def submit(self, job: J) -> None:
        if self._thread is None or self.stopped:
            self._start()
        self._jobs.put(job)

    def _start(self) -> None:
        if self.stopped:
            raise self._closed()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """End the thread once the jobs queued so far are served; waits for it."""
        self.stopped = True
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()

    def _run(self) -> None:
        queued = self._jobs
        while True:
            batch = [queued.get()]
            # Everything queued meanwhile goes in one batch. This thread is the queue's only
            # reader, so a queue not empty has a job to take: no queue.Empty raised per batch.
            while not queued.empty():
                batch.append(queued.get_nowait())
            # `stop` queues None last: nothing is submitted once the worker is stopped.
            stopping = batch[-1] is None
            jobs: list[J] = batch[:-1] if stopping else batch  # type: ignore[assignment]  # no None but the last
            if jobs:
                self._serving_since = time.monotonic()
                try:
                    self._serve(jobs)
                except BaseException:  # serve settles its own jobs; this is a bug, and must not end the thread
                    log.exception("%s: serving a batch of jobs failed", self._name)
                self._serving_since = None
            if stopping:
                return
