"""The back-end of `gateway serve --workers N`: each worker's plain numbers, published for every scrape.

A worker counts as one process does (`LocalBackend`) and writes a snapshot of its values to a
file of its own in the directory named by GATEWAY_METRICS_DIR, which the parent makes before the
workers start: every `PUBLISH_SECONDS` when they changed (from a thread, off the event loop),
and before it answers a scrape. A scrape of any worker merges every worker's file (`merge`), so
another worker's values in it are at most about `PUBLISH_SECONDS` old; those a worker counted
in its last `PUBLISH_SECONDS` before it was killed outright (SIGKILL) are lost. A scrape fails
when the directory cannot be read, rather than show totals without the other workers.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client.core import Metric

from gateway.observe.metrics.local import BucketsFamily, LocalBackend
from gateway.observe.metrics.merge import Published, merged_histograms, merged_numbers
from gateway.observe.metrics.published import live_file, mark_dead, publish, read_published
from gateway.observe.metrics.snapshot import Snapshot

log = logging.getLogger(__name__)

MULTIPROC_ENV = "GATEWAY_METRICS_DIR"
PUBLISH_SECONDS = 0.5


def workers_share_files() -> bool:
    """Whether this process is one of several workers whose metrics a scrape merges."""
    return bool(os.environ.get(MULTIPROC_ENV))


class SharedBackend(LocalBackend):
    """One worker's plain numbers, published to its file in `folder`; a scrape shows every worker's merged.

    `folder` defaults to the directory named in the environment. The publishing thread starts
    here and ends with `close`, which publishes a last time (also at the interpreter's exit).
    """

    def __init__(
        self,
        folder: Path | None = None,
        *,
        period: float = PUBLISH_SECONDS,
        pid: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(clock=clock)
        self.folder = Path(os.environ[MULTIPROC_ENV]) if folder is None else folder
        self.pid = os.getpid() if pid is None else pid
        self._lock = threading.Lock()  # one writer of the temporary file: the thread, a scrape, the exit
        self._published: Snapshot | None = None
        self._failing = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._publish_every, args=(period,), name="metrics-publisher", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def publish(self) -> Snapshot:
        """Write this worker's values to its file unless they are those it wrote last; return them."""
        with self._lock:
            snapshot = self.snapshot()
            if snapshot != self._published:
                try:
                    publish(self.folder, self.pid, snapshot)
                except OSError as exc:
                    self._warn_once(exc)
                else:
                    self._published, self._failing = snapshot, False
            return snapshot

    def _warn_once(self, exc: OSError) -> None:
        """Log a failure to publish once, until publishing works again (the next attempt is due soon)."""
        if not self._failing:
            log.warning("metrics of worker %d not published to %s: %s", self.pid, self.folder, exc)
            self._failing = True

    def _publish_every(self, period: float) -> None:
        while not self._stopped.wait(period):
            self.publish()

    def close(self) -> None:
        """Stop publishing, after a last snapshot."""
        atexit.unregister(self.close)
        self._stopped.set()
        self._thread.join()
        self.publish()

    def collect(self) -> Iterator[Metric]:
        """Every worker's values merged (this one's published first, so that the others' scrapes see them too)."""
        own = self.publish()
        published = [Published(own, live=True), *read_published(self.folder, skip=live_file(self.folder, self.pid).name)]
        for family in self.families:
            if isinstance(family, BucketsFamily):
                yield family.metric(merged_histograms(family.series, published))
            else:
                yield family.metric(merged_numbers(family.series, published))


@contextlib.contextmanager
def multiprocess_dir() -> Iterator[Path]:
    """A fresh private directory for the workers' metric files, named in the environment, removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix="gateway-metrics-"))
    previous = os.environ.get(MULTIPROC_ENV)
    os.environ[MULTIPROC_ENV] = str(folder)
    try:
        yield folder
    finally:
        if previous is None:
            os.environ.pop(MULTIPROC_ENV, None)
        else:
            os.environ[MULTIPROC_ENV] = previous
        shutil.rmtree(folder, ignore_errors=True)


def worker_exited(pid: int) -> None:
    """Set a dead worker's file aside: its counters stay in the totals, its live gauges (in-flight) leave."""
    folder = os.environ.get(MULTIPROC_ENV)
    if folder:
        mark_dead(Path(folder), pid)
