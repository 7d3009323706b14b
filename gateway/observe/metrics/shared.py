"""The back-end of `gateway serve --workers N`: prometheus-client's metrics, in files the workers share.

Every worker writes its values to files in the directory named by PROMETHEUS_MULTIPROC_DIR,
which the parent makes before the workers start (prometheus-client reads it at import), and a
scrape of any worker reports the sum over all of them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Generic, TypeVar

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import multiprocess as prometheus_multiprocess

from gateway.observe.metrics.families import Count, Family, Level, Observed
from gateway.observe.metrics.series import CounterSeries, GaugeSeries, HistogramSeries

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def workers_share_files() -> bool:
    """Whether this process is one of several workers whose metrics a scrape sums."""
    return bool(os.environ.get(MULTIPROC_ENV))


Metric = TypeVar("Metric", Counter, Gauge, Histogram)


class _Solo(Generic[Metric]):
    """A metric without labels, reached like a family: `.labels()` is the metric itself."""

    def __init__(self, metric: Metric) -> None:
        self.metric: Metric = metric

    def labels(self, *values: str) -> Metric:
        return self.metric


def _family(metric: Metric, labelnames: tuple[str, ...]) -> Metric | _Solo[Metric]:
    return metric if labelnames else _Solo(metric)


class SharedBackend:
    """prometheus-client's own metrics: their values go to the shared files, a scrape reads them all."""

    def __init__(self) -> None:
        # The metrics register here (never in prometheus-client's global registry, which a second
        # Metrics would collide in); a scrape reads the files instead.
        self.registry = CollectorRegistry(auto_describe=False)

    def counter(self, series: CounterSeries) -> Family[Count]:
        return _family(Counter(series.name, series.doc, series.labels, registry=self.registry), series.labels)

    def gauge(self, series: GaugeSeries) -> Family[Level]:
        mode = series.workers.value
        gauge = Gauge(series.name, series.doc, series.labels, registry=self.registry, multiprocess_mode=mode)  # type: ignore[arg-type]  # a WorkersView is one of its modes
        return _family(gauge, series.labels)

    def histogram(self, series: HistogramSeries) -> Family[Observed]:
        histogram = Histogram(series.name, series.doc, series.labels, registry=self.registry, buckets=series.buckets)
        return _family(histogram, series.labels)

    def exposition(self) -> bytes:
        """Every worker's values, summed as each series' kind says."""
        registry = CollectorRegistry(auto_describe=False)
        prometheus_multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return prometheus_client.generate_latest(registry)


@contextlib.contextmanager
def multiprocess_dir() -> Iterator[Path]:
    """A fresh directory for the workers' metric files, named in the environment, removed at exit."""
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
    """Drop a dead worker's live gauges (its in-flight count) from the shared files."""
    if workers_share_files():
        prometheus_multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
