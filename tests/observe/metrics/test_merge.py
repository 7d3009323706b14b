"""gateway.observe.metrics.merge: several workers' snapshots made one, without processes."""

from __future__ import annotations

from gateway.observe.metrics.merge import Published, merged_histograms, merged_numbers
from gateway.observe.metrics.series import CounterSeries, GaugeSeries, HistogramSeries, WorkersView
from gateway.observe.metrics.snapshot import Counts, Labels, Snapshot

COUNTER = CounterSeries("c", "A counter.", ("route",))
HISTOGRAM = HistogramSeries("h", "A histogram.", ("route",), (0.5, 1.0))


def gauge(view: WorkersView) -> GaugeSeries:
    return GaugeSeries("g", "A gauge.", ("route",), view)


def worker(
    *,
    live: bool = True,
    c: dict[Labels, float] | None = None,
    g: dict[Labels, float] | None = None,
    stamps: dict[Labels, float] | None = None,
    h: dict[Labels, Counts] | None = None,
) -> Published:
    numbers = {"c": c or {}, "g": g or {}}
    return Published(Snapshot(numbers, {"g": stamps or {}}, {"h": h or {}}), live=live)


def test_counters_are_summed_over_every_worker_the_dead_included() -> None:
    workers = [worker(c={("a",): 1, ("b",): 2}), worker(c={("a",): 10}, live=False), worker(c={("c",): 5})]
    assert merged_numbers(COUNTER, workers) == {("a",): 11, ("b",): 2, ("c",): 5}  # in the order first seen


def test_a_counter_only_a_dead_worker_counted_stays() -> None:
    assert merged_numbers(COUNTER, [worker(), worker(c={("gone",): 3}, live=False)]) == {("gone",): 3}


def test_histograms_add_bucket_by_bucket_and_their_sums_the_dead_included() -> None:
    workers = [worker(h={("a",): ([1, 0, 2], 7.5)}), worker(h={("a",): ([0, 3, 1], 4.0), ("b",): ([1, 0, 0], 0.1)}, live=False)]
    merged = merged_histograms(HISTOGRAM, workers)
    assert merged == {("a",): ([1, 3, 3], 11.5), ("b",): ([1, 0, 0], 0.1)}
    assert workers[0].values.histograms["h"]["a",] == ([1, 0, 2], 7.5)  # the snapshots are left as they were


def test_live_sum_gauges_sum_the_live_workers_only() -> None:
    workers = [worker(g={("a",): 2}), worker(g={("a",): 3, ("b",): 1}), worker(g={("a",): 4, ("dead",): 1}, live=False)]
    assert merged_numbers(gauge(WorkersView.LIVE_SUM), workers) == {("a",): 5, ("b",): 1}


def test_max_gauges_take_the_largest_the_dead_included() -> None:
    workers = [worker(g={("a",): 2, ("b",): 7}), worker(g={("a",): 9}, live=False), worker(g={("a",): 3})]
    assert merged_numbers(gauge(WorkersView.MAX), workers) == {("a",): 9, ("b",): 7}


def test_latest_gauges_show_what_a_live_worker_changed_last() -> None:
    workers = [
        worker(g={("a",): 2, ("b",): 0}, stamps={("a",): 20.0, ("b",): 5.0}),
        worker(g={("a",): 1, ("b",): 1}, stamps={("a",): 10.0, ("b",): 6.0}),
        worker(g={("a",): 0, ("b",): 2, ("dead",): 1}, stamps={("a",): 99.0, ("b",): 99.0, ("dead",): 1.0}, live=False),
    ]
    assert merged_numbers(gauge(WorkersView.LATEST), workers) == {("a",): 2, ("b",): 1}


def test_latest_of_equal_stamps_is_the_first_workers() -> None:
    """The reader's own snapshot comes first: of children never changed (stamp 0) it shows its own."""
    workers = [worker(g={("a",): 0}, stamps={("a",): 0.0}), worker(g={("a",): 3}, stamps={("a",): 0.0})]
    assert merged_numbers(gauge(WorkersView.LATEST), workers) == {("a",): 0}


def test_a_series_no_worker_published_is_empty() -> None:
    assert merged_numbers(CounterSeries("x", "Unknown.", ()), [worker(c={("a",): 1})]) == {}
    assert merged_histograms(HistogramSeries("y", "Unknown.", (), (1.0,)), [worker()]) == {}
