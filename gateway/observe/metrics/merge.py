"""Several workers' snapshots made one, as prometheus-client's multiprocess modes did.

Counters and histograms are summed over every worker, the dead included, so a total never goes
back when a worker dies and is replaced. A gauge follows its series' `WorkersView`: LIVE_SUM
sums the live workers, LATEST shows the value a live worker changed last, MAX the largest of
all, the dead included. A child no worker counted in its view is left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gateway.observe.metrics.series import CounterSeries, GaugeSeries, HistogramSeries, WorkersView
from gateway.observe.metrics.snapshot import Counts, Labels, Snapshot


@dataclass(frozen=True, slots=True)
class Published:
    """One worker's values as it last published them, and whether it still runs."""

    values: Snapshot
    live: bool


def merged_numbers(series: CounterSeries | GaugeSeries, published: Sequence[Published]) -> dict[Labels, float]:
    """The values of a counter or gauge over `published`, by label values in the order first seen."""
    name = series.name
    view = series.workers if isinstance(series, GaugeSeries) else None
    seen = [p for p in published if p.live] if view in (WorkersView.LIVE_SUM, WorkersView.LATEST) else published
    if view is WorkersView.LATEST:
        return _latest(name, seen)
    merged: dict[Labels, float] = {}
    for worker in seen:
        for labels, value in worker.values.numbers.get(name, {}).items():
            if labels not in merged:
                merged[labels] = value
            elif view is WorkersView.MAX:
                merged[labels] = max(merged[labels], value)
            else:
                merged[labels] += value
    return merged


def _latest(name: str, published: Iterable[Published]) -> dict[Labels, float]:
    """Per child, the value of the worker that changed it last (the first of equal stamps)."""
    latest: dict[Labels, tuple[float, float]] = {}
    for worker in published:
        stamps = worker.values.stamps.get(name, {})
        for labels, value in worker.values.numbers.get(name, {}).items():
            stamp = stamps.get(labels, 0.0)
            if labels not in latest or stamp > latest[labels][0]:
                latest[labels] = (stamp, value)
    return {labels: value for labels, (_, value) in latest.items()}


def merged_histograms(series: HistogramSeries, published: Sequence[Published]) -> dict[Labels, Counts]:
    """The counts and sums of a histogram over every worker in `published`, the dead included."""
    merged: dict[Labels, Counts] = {}
    for worker in published:
        for labels, (counts, total) in worker.values.histograms.get(series.name, {}).items():
            if labels in merged:
                before, before_total = merged[labels]
                merged[labels] = ([a + b for a, b in zip(before, counts, strict=True)], before_total + total)
            else:
                merged[labels] = (list(counts), total)
    return merged
