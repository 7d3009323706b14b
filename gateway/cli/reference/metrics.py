"""The metrics reference: every series the gateway exposes, with its type, labels and meaning.

Read from the series definitions every metrics back-end registers (gateway.observe.metrics.series).
"""

from __future__ import annotations

from collections.abc import Iterator

from gateway.cli.reference.markdown import GENERATED, cell, code, require_descriptions, table
from gateway.observe.metrics.series import LABELS, SERIES, CounterSeries, GaugeSeries, HistogramSeries

Series = CounterSeries | GaugeSeries | HistogramSeries


def exposed_name(series: Series) -> str:
    """The name a scrape shows: counters end in `_total`, histograms come as `_bucket`, `_sum` and `_count`."""
    match series:
        case CounterSeries():
            return f"{series.name}_total"
        case HistogramSeries():
            return f"{series.name}_bucket / _sum / _count"
        case GaugeSeries():
            return series.name


def kind(series: Series) -> str:
    match series:
        case CounterSeries():
            return "counter"
        case HistogramSeries():
            return "histogram (seconds: " + ", ".join(f"{bound:g}" for bound in series.buckets) + ")"
        case GaugeSeries():
            return "gauge"


def undescribed() -> Iterator[tuple[str, str | None]]:
    """Every series with its help, and every label with its meaning (empty when it has none)."""
    for series in SERIES:
        yield series.name, series.doc
        for label in series.labels:
            yield f"{series.name}{{{label}}}", LABELS.get(label)


def metrics_page() -> str:
    """The Markdown of reference/metrics.md; Undescribed when a series or a label has no description."""
    require_descriptions(undescribed())
    series_rows = (
        [code(exposed_name(series)), cell(kind(series)), ", ".join(map(code, series.labels)), cell(series.doc)]
        for series in SERIES
    )
    used = dict.fromkeys(label for series in SERIES for label in series.labels)
    label_rows = ([code(label), cell(LABELS[label])] for label in used)
    return "\n\n".join([
        GENERATED,
        "# Metrics reference",
        "Every series at `GET /metrics` (`metrics.path`), in Prometheus' text format, as a scrape lists "
        "them. With `gateway serve --workers N` a scrape of any worker reports the sum over all of them.",
        table(("series", "type", "labels", "meaning"), series_rows),
        "## Labels",
        "Label values are bounded by the config (route and target names, providers), by HTTP status "
        "codes and by a few fixed words: never by anything a client sends.",
        table(("label", "values"), label_rows),
    ]) + "\n"  # fmt: skip
