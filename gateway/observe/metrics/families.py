"""The one interface `Metrics` counts through, whichever back-end keeps the values.

A back-end makes a family for each series definition; a family gives the child for a set of
label values (the same child however often asked); a child is counted, set or observed. The
back-end also writes what a scrape reads.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from gateway.observe.metrics.series import CounterSeries, GaugeSeries, HistogramSeries


class Count(Protocol):
    """A counter's child: it only goes up."""

    def inc(self, amount: float = 1.0) -> None: ...


class Level(Count, Protocol):
    """A gauge's child."""

    def dec(self, amount: float = 1.0) -> None: ...

    def set(self, value: float) -> None: ...


class Observed(Protocol):
    """A histogram's child: each amount falls in a bucket and adds to the sum."""

    def observe(self, amount: float) -> None: ...


Child_co = TypeVar("Child_co", covariant=True)


class Family(Protocol[Child_co]):
    """One series' children, by label values (none for a series without labels)."""

    def labels(self, *values: str) -> Child_co: ...


class Backend(Protocol):
    """Where values are kept: made for each series, read when scraped."""

    def counter(self, series: CounterSeries) -> Family[Count]: ...

    def gauge(self, series: GaugeSeries) -> Family[Level]: ...

    def histogram(self, series: HistogramSeries) -> Family[Observed]: ...

    def exposition(self) -> bytes:
        """The text a scrape reads (Prometheus' text format)."""
        ...
