"""gateway.observe.metrics.local: one process's plain numbers, formatted as prometheus-client would."""

from __future__ import annotations

from bisect import bisect_left
from enum import IntEnum, StrEnum
from typing import Generic, TypeVar

import prometheus_client
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gateway.observe.metrics.families import Backend, Count, Family, Level, Observed
from gateway.observe.metrics.local import Buckets, LocalBackend
from gateway.observe.metrics.series import (
    LATENCY_BUCKETS,
    STORE_BUCKETS,
    CounterSeries,
    GaugeSeries,
    HistogramSeries,
    WorkersView,
)
from gateway.observe.metrics.snapshot import Snapshot

Metric = TypeVar("Metric", Counter, Gauge, Histogram)


class Solo(Generic[Metric]):
    """A prometheus-client metric without labels, reached like a family."""

    def __init__(self, metric: Metric) -> None:
        self.metric: Metric = metric

    def labels(self, *values: str) -> Metric:
        return self.metric


class Library:
    """prometheus-client's own metrics (one process's values, in memory): what LocalBackend must format alike."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)

    def counter(self, series: CounterSeries) -> Family[Count]:
        counter = Counter(series.name, series.doc, series.labels, registry=self.registry)
        return counter if series.labels else Solo(counter)

    def gauge(self, series: GaugeSeries) -> Family[Level]:
        gauge = Gauge(series.name, series.doc, series.labels, registry=self.registry)
        return gauge if series.labels else Solo(gauge)

    def histogram(self, series: HistogramSeries) -> Family[Observed]:
        histogram = Histogram(series.name, series.doc, series.labels, registry=self.registry, buckets=series.buckets)
        return histogram if series.labels else Solo(histogram)

    def exposition(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)


def feed(backend: Backend) -> None:
    """The same values, through the interface every back-end gives."""
    counter = backend.counter(CounterSeries("c", "A counter.", ("route", "code")))
    gauge = backend.gauge(GaugeSeries("g", "A gauge.", ("route",), WorkersView.LIVE_SUM))
    latest = backend.gauge(GaugeSeries("l", "The latest.", ("route",), WorkersView.LATEST))
    solo_gauge = backend.gauge(GaugeSeries("n", "No labels.", (), WorkersView.MAX)).labels()
    histogram = backend.histogram(HistogramSeries("h_seconds", "A histogram.", ("route",), LATENCY_BUCKETS))
    solo = backend.histogram(HistogramSeries("s_seconds", "No labels.", (), (0.5, 1.0))).labels()
    counter.labels("a", "200").inc()
    counter.labels("a", "200").inc(2.5)
    counter.labels("b", "503").inc()
    gauge.labels("a").inc()
    gauge.labels("a").inc()
    gauge.labels("a").dec()
    gauge.labels("b").set(7)
    solo_gauge.set(3)
    latest.labels("a").set(2)
    latest.labels("b").inc()
    for seconds in (0.05, 0.07, 3.0, 700.0, 0.0):  # on a bound (le is inclusive), inside, past the last, none
        histogram.labels("a").observe(seconds)
    solo.observe(0.5)


def test_plain_numbers_expose_exactly_what_prometheus_client_would() -> None:
    """The plain-number families (the hot path's) and prometheus-client's own metrics, fed the same values."""
    local, library = LocalBackend(), Library()
    feed(local)
    feed(library)
    assert local.exposition().decode() == library.exposition().decode()


def test_a_family_gives_one_child_per_label_values() -> None:
    family = LocalBackend().counter(CounterSeries("c", "A counter.", ("route",)))
    assert family.labels("a") is family.labels("a")
    assert family.labels("a") is not family.labels("b")


@given(st.lists(st.one_of(st.sampled_from(STORE_BUCKETS), st.floats(allow_nan=True), st.floats(0, 10)), max_size=20))
def test_buckets_count_as_bisect_left_does(amounts: list[float]) -> None:
    """The first bucket's shortcut puts every amount (a bound, a NaN, an infinity) where bisect_left would."""
    buckets = Buckets(STORE_BUCKETS)
    expected = [0] * (len(STORE_BUCKETS) + 1)
    for amount in amounts:
        buckets.observe(amount)
        expected[bisect_left(STORE_BUCKETS, amount)] += 1
    assert buckets.counts == expected


class Kind(StrEnum):
    TOKEN = "token_window"


class State(IntEnum):
    OPEN = 2


def test_a_snapshot_holds_plain_values_and_when_latest_gauges_changed() -> None:
    """What a worker publishes: plain strings and floats (a StrEnum label, an IntEnum state), and stamps."""
    ticks = iter([10.0, 11.0])
    backend = LocalBackend(clock=lambda: next(ticks))
    counter = backend.counter(CounterSeries("c", "A counter.", ("kind",)))
    latest = backend.gauge(GaugeSeries("l", "The latest.", ("route",), WorkersView.LATEST))
    live = backend.gauge(GaugeSeries("g", "A gauge.", ("route",), WorkersView.LIVE_SUM))
    histogram = backend.histogram(HistogramSeries("h", "A histogram.", (), (0.5, 1.0))).labels()
    counter.labels(Kind.TOKEN).inc(2)
    latest.labels("a").set(State.OPEN)
    latest.labels("b")  # never changed
    latest.labels("c").inc()
    live.labels("a").inc()
    histogram.observe(0.7)
    histogram.observe(9)
    snapshot = backend.snapshot()
    assert snapshot.numbers == {"c": {("token_window",): 2.0}, "l": {("a",): 2.0, ("b",): 0.0, ("c",): 1.0}, "g": {("a",): 1.0}}
    ((kind,),) = snapshot.numbers["c"]
    assert type(kind) is str
    assert type(snapshot.numbers["l"]["a",]) is float
    assert snapshot.stamps == {"l": {("a",): 10.0, ("b",): 0.0, ("c",): 11.0}}
    assert snapshot.histograms == {"h": {(): ([0, 1, 1], 9.7)}}
    assert Snapshot.decode(snapshot.encode()) == snapshot
