"""Every series the gateway exposes: name, help text, label names, and how a back-end keeps it.

A definition is data: each back-end makes its own family from it. They are listed here in the
order a scrape shows them (a back-end registers them in the order `Metrics` asks for them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
FIRST_TOKEN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0)
STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LOCK_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class WorkersView(StrEnum):
    """How a gauge's values from several workers become one (prometheus-client's multiprocess modes)."""

    LATEST = "livemostrecent"  # the value last set by a live worker
    LIVE_SUM = "livesum"  # the sum over live workers
    MAX = "max"  # the largest, dead workers' included


@dataclass(frozen=True, slots=True)
class CounterSeries:
    """A counter: it only goes up."""

    name: str
    doc: str
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GaugeSeries:
    """A gauge: a level that goes up and down, or is set."""

    name: str
    doc: str
    labels: tuple[str, ...]
    workers: WorkersView


@dataclass(frozen=True, slots=True)
class HistogramSeries:
    """A histogram: a count per `le` bucket (an amount at most the bound), the count and the sum."""

    name: str
    doc: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...]


REQUESTS = CounterSeries(
    "gateway_requests", "Requests answered, by route, status code and streaming.",
    ("route", "status_code", "stream"),
)  # fmt: skip
REQUEST_DURATION = HistogramSeries(
    "gateway_request_duration_seconds", "Time from request to the answer's last byte.",
    ("route", "stream"), buckets=LATENCY_BUCKETS,
)  # fmt: skip
TIME_TO_FIRST_TOKEN = HistogramSeries(
    "gateway_time_to_first_token_seconds", "Time from request to a stream's first event.",
    ("route", "target"), buckets=FIRST_TOKEN_BUCKETS,
)  # fmt: skip
UPSTREAM_REQUESTS = CounterSeries(
    "gateway_upstream_requests", "Upstream attempts by outcome (status code, timeout, connect_error, stream_error, invalid_response).",
    ("route", "target", "provider", "outcome"),
)  # fmt: skip
UPSTREAM_DURATION = HistogramSeries(
    "gateway_upstream_duration_seconds", "Duration of one upstream attempt (a stream: until it ended).",
    ("route", "target", "provider"), buckets=LATENCY_BUCKETS,
)  # fmt: skip
FALLBACKS = CounterSeries(
    "gateway_fallbacks", "Times a route moved on from a target, by the reason.",
    ("route", "from_target", "reason"),
)  # fmt: skip
RETRIES = CounterSeries(
    "gateway_retries", "Retries of a target, by the reason.",
    ("route", "target", "reason"),
)  # fmt: skip
TOKENS = CounterSeries(
    "gateway_tokens", "Tokens the upstreams reported in usage, by kind (prompt, completion).",
    ("route", "target", "provider", "kind"),
)  # fmt: skip
COST = CounterSeries(
    "gateway_cost_usd", "Cost in USD of the reported usage, at litellm's list prices.",
    ("route", "target"),
)  # fmt: skip
OVERLOADED = CounterSeries(
    "gateway_overloaded", "Requests refused (503) for the gateway's own shortage, by reason (emfile, enfile, enobufs, enomem, max_connections).",
    ("reason",),
)  # fmt: skip
BREAKER_STATE = GaugeSeries(
    "gateway_breaker_state", "Circuit breaker state by target: 0 closed, 1 half-open, 2 open.",
    ("route", "target"), workers=WorkersView.LATEST,
)  # fmt: skip
INFLIGHT = GaugeSeries(
    "gateway_inflight_requests", "Requests being answered now.",
    ("route",), workers=WorkersView.LIVE_SUM,
)  # fmt: skip
MEMORY_REQUESTS = CounterSeries(
    "gateway_memory_requests", "Requests served with memory, by memory type.",
    ("memory_type",),
)  # fmt: skip
MEMORY_EVICTED = CounterSeries(
    "gateway_memory_evicted_messages", "Stored messages left out of the forwarded window.",
    ("memory_type",),
)  # fmt: skip
MEMORY_SUMMARIES = CounterSeries(
    "gateway_memory_summaries", "Summary windows' summaries made in the background, by outcome (ok, failed, stale); "
    "the calls' tokens and cost count under the summary route.",
    ("outcome",),
)  # fmt: skip
STORE_DURATION = HistogramSeries(
    "gateway_memory_store_duration_seconds", "Memory store operations (load, append, lock).",
    ("store", "operation"), buckets=STORE_BUCKETS,
)  # fmt: skip
LOCK_WAIT = HistogramSeries(
    "gateway_memory_lock_wait_seconds", "Time waited for a conversation's lock.",
    (), buckets=LOCK_BUCKETS,
)  # fmt: skip
BUILD_INFO = GaugeSeries(
    "gateway_build_info", "The running gateway's version.",
    ("version",), workers=WorkersView.MAX,
)  # fmt: skip
CONFIG_ROUTES = GaugeSeries(
    "gateway_config_routes", "Routes in the loaded config.",
    (), workers=WorkersView.MAX,
)  # fmt: skip
RATE_LIMITED = CounterSeries(
    "gateway_rate_limited", "Requests refused (429) at a limit, by key, route and the limit reached "
    "(requests, tokens, concurrency, budget); the key's limit or the route's.",
    ("key", "route", "limit"),
)  # fmt: skip
BUDGET_SPENT = GaugeSeries(
    "gateway_budget_spent_usd", "USD a key with a budget has spent in its budget's current period, "
    "as its last request's settlement saw it (with workers: the value a live worker set last).",
    ("key",), workers=WorkersView.LATEST,
)  # fmt: skip
BUDGET_REMAINING = GaugeSeries(
    "gateway_budget_remaining_usd", "USD left of a key's budget in its current period (0 once spent; "
    "requests in flight may overshoot it by their cost).",
    ("key",), workers=WorkersView.LATEST,
)  # fmt: skip

# Every series above, in the order a scrape shows them: the metrics reference lists these.
SERIES: Final = (
    REQUESTS, REQUEST_DURATION, TIME_TO_FIRST_TOKEN, UPSTREAM_REQUESTS, UPSTREAM_DURATION, FALLBACKS, RETRIES,
    TOKENS, COST, OVERLOADED, BREAKER_STATE, INFLIGHT, MEMORY_REQUESTS, MEMORY_EVICTED, MEMORY_SUMMARIES, STORE_DURATION,
    LOCK_WAIT, BUILD_INFO, CONFIG_ROUTES, RATE_LIMITED, BUDGET_SPENT, BUDGET_REMAINING,
)  # fmt: skip

# What each label's values are: bounded by the config and fixed words, never by a client.
LABELS: Final[Mapping[str, str]] = {
    "route": "the route's name (its model name); `other` for requests that reach no route",
    "status_code": "the HTTP status answered; 499 when the client left first",
    "stream": "`true` for a streamed answer, else `false`",
    "target": "the target's name (its `name`, else its place in the tree)",
    "provider": "the target's provider (openai, mock, anthropic, ...)",
    "outcome": "the attempt's HTTP status, or timeout, connect_error, stream_error, invalid_response; for "
    "gateway_memory_summaries `ok` (stored), `failed` (tried again by a later turn) or `stale` (a newer one was stored first)",
    "from_target": "the target the route moved on from",
    "reason": "what caused it: an HTTP status or an attempt outcome (fallbacks, retries; circuit_open for a "
    "target skipped); for gateway_overloaded the shortage",
    "kind": "`prompt` or `completion`",
    "memory_type": "the window that trimmed the history: message_window, token_window, round_window or summary_window",
    "store": "the memory store: sqlite, redis or memory",
    "operation": "`load`, `append` or `lock`",
    "version": "the installed gateway's version",
    "key": "the gateway key's name (the tenant): a name in auth.keys or auth.adminKeys, or one issued through "
    "/v1/gateway/keys",
    "limit": "the limit reached: `requests`, `tokens` (per minute), `concurrency` or `budget`",
}
