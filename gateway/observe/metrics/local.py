"""The back-end of one process: plain Python numbers, turned into samples only when scraped.

Only the event loop touches these values, so a counter increment is an attribute add, without
the lock prometheus-client takes for each; a collector hands them to prometheus-client to format.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import prometheus_client
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from gateway.observe.metrics.series import CounterSeries, GaugeSeries, HistogramSeries


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


Child = TypeVar("Child", Number, Buckets)


class _Family(Generic[Child]):
    """One series' children in this process, by label values, created on first use."""

    def __init__(self, series: CounterSeries | GaugeSeries | HistogramSeries, make: Callable[[], Child]) -> None:
        self.name, self.doc, self.labelnames = series.name, series.doc, series.labels
        self.make: Callable[[], Child] = make
        self.children: dict[tuple[str, ...], Child] = {}

    def labels(self, *values: str) -> Child:
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = self.make()
        return child


class _NumberFamily(_Family[Number]):
    def __init__(self, series: CounterSeries | GaugeSeries) -> None:
        super().__init__(series, Number)
        self.kind = CounterMetricFamily if isinstance(series, CounterSeries) else GaugeMetricFamily

    def collect(self) -> Metric:
        metric = self.kind(self.name, self.doc, labels=list(self.labelnames))
        for values, child in self.children.items():
            metric.add_metric(list(values), child.value)
        return metric


class _BucketsFamily(_Family[Buckets]):
    def __init__(self, series: HistogramSeries) -> None:
        super().__init__(series, lambda: Buckets(series.buckets))
        self.edges = [*map(floatToGoString, series.buckets), "+Inf"]

    def collect(self) -> Metric:
        histogram = HistogramMetricFamily(self.name, self.doc, labels=list(self.labelnames))
        for values, child in self.children.items():
            cumulative = list(zip(self.edges, itertools.accumulate(child.counts), strict=True))
            histogram.add_metric(list(values), cumulative, child.sum)
        return histogram


AnyFamily = TypeVar("AnyFamily", _NumberFamily, _BucketsFamily)


class LocalBackend:
    """Every family of this process, in the order made, and the collector that formats them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._families: list[_NumberFamily | _BucketsFamily] = []
        self.registry.register(self)  # a Collector is anything with collect()

    def counter(self, series: CounterSeries) -> _NumberFamily:
        return self._add(_NumberFamily(series))

    def gauge(self, series: GaugeSeries) -> _NumberFamily:
        return self._add(_NumberFamily(series))

    def histogram(self, series: HistogramSeries) -> _BucketsFamily:
        return self._add(_BucketsFamily(series))

    def _add(self, family: AnyFamily) -> AnyFamily:
        self._families.append(family)
        return family

    def collect(self) -> Iterator[Metric]:
        for family in self._families:
            yield family.collect()

    def exposition(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)
