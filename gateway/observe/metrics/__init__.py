"""Prometheus metrics: the only package that imports prometheus-client.

`Metrics` (observer) turns a request's events into updates of the series defined in `series`,
through the interface in `families`, kept in plain numbers (`local`); the workers of `gateway
serve --workers N` also publish theirs to files that any worker's scrape merges (`shared`,
`published`, `merge`). `prices` reads litellm's price table for the cost series.
"""

import prometheus_client

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # `_created` series double the output and say little

# After the setting above: the names every user of metrics imports.
from gateway.observe.metrics.observer import ANSWER_STATUSES, Metrics, version  # noqa: E402
from gateway.observe.metrics.prices import Price, load_prices, price_of  # noqa: E402
from gateway.observe.metrics.series import (  # noqa: E402
    FIRST_TOKEN_BUCKETS,
    LATENCY_BUCKETS,
    LOCK_BUCKETS,
    STORE_BUCKETS,
)
from gateway.observe.metrics.shared import MULTIPROC_ENV, multiprocess_dir, worker_exited  # noqa: E402
from gateway.observe.metrics.triggers import TRANSPORT_OUTCOMES  # noqa: E402

CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST  # what `Metrics.exposition` writes

__all__ = [
    "ANSWER_STATUSES",
    "CONTENT_TYPE",
    "FIRST_TOKEN_BUCKETS",
    "LATENCY_BUCKETS",
    "LOCK_BUCKETS",
    "MULTIPROC_ENV",
    "STORE_BUCKETS",
    "TRANSPORT_OUTCOMES",
    "Metrics",
    "Price",
    "load_prices",
    "multiprocess_dir",
    "price_of",
    "version",
    "worker_exited",
]
