"""gateway.observe.metrics.local: one process's plain numbers, formatted as prometheus-client would."""

from __future__ import annotations

from bisect import bisect_left

import prometheus_client
from hypothesis import given
from hypothesis import strategies as st

from gateway.observe.metrics.families import Backend
from gateway.observe.metrics.local import Buckets, LocalBackend
from gateway.observe.metrics.series import (
    LATENCY_BUCKETS,
    STORE_BUCKETS,
    CounterSeries,
    GaugeSeries,
    HistogramSeries,
    WorkersView,
)
from gateway.observe.metrics.shared import SharedBackend


def feed(backend: Backend) -> None:
    """The same values, through the interface every back-end gives."""
    counter = backend.counter(CounterSeries("c", "A counter.", ("route", "code")))
    gauge = backend.gauge(GaugeSeries("g", "A gauge.", ("route",), WorkersView.LIVE_SUM))
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
    for seconds in (0.05, 0.07, 3.0, 700.0, 0.0):  # on a bound (le is inclusive), inside, past the last, none
        histogram.labels("a").observe(seconds)
    solo.observe(0.5)


def test_plain_numbers_expose_exactly_what_prometheus_client_would() -> None:
    """The plain-number families (the hot path's) and prometheus-client's own metrics, fed the same values."""
    local, library = LocalBackend(), SharedBackend()  # no PROMETHEUS_MULTIPROC_DIR: library values in memory
    feed(local)
    feed(library)
    assert local.exposition().decode() == prometheus_client.generate_latest(library.registry).decode()


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
