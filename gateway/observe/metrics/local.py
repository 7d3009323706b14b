"""The back-end of one process: plain Python numbers, turned into samples only when scraped.

Only the event loop changes these values, so a counter increment is an attribute add, without
the lock prometheus-client takes for each; a collector hands them to prometheus-client to format.
A scrape reads them from another thread (the executor's): it copies each family's children
first, since the loop may add one meanwhile.
"""

from __future__ import annotations

import itertools
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

import prometheus_client
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from gateway.observe.metrics.series import CounterSeries, GaugeSeries, HistogramSeries, WorkersView
from gateway.observe.metrics.snapshot import Counts, Labels, Snapshot


class Number:
    """A counter's or gauge's value in this process."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = value


class Stamped(Number):
    """A gauge's value and when it last changed: across workers, the one changed last is shown."""

    __slots__ = ("clock", "stamp")

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__()
        self.clock = clock
        self.stamp = 0.0  # never changed: older than any change

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount
        self.stamp = self.clock()

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount
        self.stamp = self.clock()

    def set(self, value: float) -> None:
        self.value = value
        self.stamp = self.clock()


class Buckets:
    """A histogram's counts in this process: one per bucket (not cumulative) and +Inf, and the sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        """Count `amount` in the first bucket whose bound it does not pass (`le`: amount <= bound)."""
        # Most amounts (a free lock, a cached read, a quick answer) fall in the first bucket:
        # one compare finds it, where bisect_left makes several. Either puts a NaN there.
        bounds = self.bounds
        self.counts[0 if amount <= bounds[0] else bisect_left(bounds, amount)] += 1
        self.sum += amount


Child = TypeVar("Child")
Series = TypeVar("Series", bound=CounterSeries | GaugeSeries | HistogramSeries)


class _Family(Generic[Series, Child]):
    """One series' children in this process, by label values, created on first use."""

    def __init__(self, series: Series, make: Callable[[], Child]) -> None:
        self.series: Series = series
        self.make: Callable[[], Child] = make
        self.children: dict[Labels, Child] = {}

    def labels(self, *values: str) -> Child:
        child = self.children.get(values)
        if child is None:  # kept under plain strings (a StrEnum's value is one): a snapshot holds only those
            child = self.children[tuple(map(str, values))] = self.make()
        return child

    def copied(self) -> list[tuple[Labels, Child]]:
        """The children as they are now, read safely off the event loop: dict.copy() is one step under the GIL."""
        return list(self.children.copy().items())


NumberChild = TypeVar("NumberChild", bound=Number)


class NumberFamily(_Family[CounterSeries | GaugeSeries, NumberChild]):
    """A counter's or gauge's children."""

    def values(self) -> dict[Labels, float]:
        return {labels: float(child.value) for labels, child in self.copied()}  # a gauge may be set to an IntEnum

    def metric(self, values: Mapping[Labels, float]) -> Metric:
        """The samples of `values` (this family's, or several workers' merged)."""
        series = self.series
        kind = CounterMetricFamily if isinstance(series, CounterSeries) else GaugeMetricFamily
        metric = kind(series.name, series.doc, labels=list(series.labels))
        for labels, value in values.items():
            metric.add_metric(list(labels), value)
        return metric

    def collect(self) -> Metric:
        return self.metric(self.values())


class StampedFamily(NumberFamily[Stamped]):
    """A gauge whose workers show the value changed last: its children say when they changed."""

    def stamps(self) -> dict[Labels, float]:
        return {labels: child.stamp for labels, child in self.copied()}


class BucketsFamily(_Family[HistogramSeries, Buckets]):
    """A histogram's children."""

    def __init__(self, series: HistogramSeries) -> None:
        super().__init__(series, lambda: Buckets(series.buckets))
        self.edges = [*map(floatToGoString, series.buckets), "+Inf"]

    def values(self) -> dict[Labels, Counts]:
        # The sum may miss an amount whose count is in (or the other way): the next read has both.
        return {labels: (child.counts.copy(), float(child.sum)) for labels, child in self.copied()}

    def metric(self, values: Mapping[Labels, Counts]) -> Metric:
        """The samples of `values` (this family's, or several workers' merged): cumulative buckets, count and sum."""
        series = self.series
        histogram = HistogramMetricFamily(series.name, series.doc, labels=list(series.labels))
        for labels, (counts, total) in values.items():
            cumulative = list(zip(self.edges, itertools.accumulate(counts), strict=True))
            histogram.add_metric(list(labels), cumulative, total)
        return histogram

    def collect(self) -> Metric:
        return self.metric(self.values())


AnyFamily = TypeVar("AnyFamily", NumberFamily[Number], StampedFamily, BucketsFamily)


class LocalBackend:
    """Every family of this process, in the order made, and the collector that formats them.

    `clock` stamps the changes of gauges whose workers show the latest value (`WorkersView.LATEST`).
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=False)
        self.families: list[NumberFamily[Number] | StampedFamily | BucketsFamily] = []
        self.registry.register(self)  # a Collector is anything with collect()

    def counter(self, series: CounterSeries) -> NumberFamily[Number]:
        return self._add(NumberFamily(series, Number))

    def gauge(self, series: GaugeSeries) -> NumberFamily[Number] | StampedFamily:
        if series.workers is WorkersView.LATEST:
            return self._add(StampedFamily(series, lambda: Stamped(self.clock)))
        return self._add(NumberFamily(series, Number))

    def histogram(self, series: HistogramSeries) -> BucketsFamily:
        return self._add(BucketsFamily(series))

    def _add(self, family: AnyFamily) -> AnyFamily:
        self.families.append(family)
        return family

    def snapshot(self) -> Snapshot:
        """Every family's values as they are now."""
        snapshot = Snapshot()
        for family in self.families:
            name = family.series.name
            if isinstance(family, BucketsFamily):
                snapshot.histograms[name] = family.values()
                continue
            snapshot.numbers[name] = family.values()
            if isinstance(family, StampedFamily):
                snapshot.stamps[name] = family.stamps()
        return snapshot

    def collect(self) -> Iterator[Metric]:
        for family in self.families:
            yield family.collect()

    def exposition(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)
