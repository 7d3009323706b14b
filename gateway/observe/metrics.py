"""Prometheus metrics: the only module that imports prometheus-client.

`Metrics` is an Observer: it turns request events into counter and histogram updates. Labels are
bounded by the config (route and target names, provider), by HTTP status codes and by a few
fixed words; never by anything a client chooses. The children that every request touches are
created when the config loads; the ones labelled with a status code or reason are created on
first use and cached in a dict, so no request pays for prometheus-client's label lookup twice.

With `gateway serve --workers N` every worker writes its values to files in the directory named
by PROMETHEUS_MULTIPROC_DIR (created by the parent before the workers start), and a scrape of
any worker reports the sum over all of them.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import tempfile
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import multiprocess as prometheus_multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from gateway.config.loader import OTHER_ROUTE
from gateway.core.breaker import CLOSED, SKIPPED
from gateway.core.errors import SHORTAGES
from gateway.core.memory.settings import MEMORY_TYPES
from gateway.core.settings import Config
from gateway.core.tree import DEFAULT_TRIGGER_CODES, Fallback, LoadBalance, Node, Route, Target
from gateway.observe.trace import (
    CLIENT_CLOSED,
    CONNECT_ERROR,
    INVALID_RESPONSE,
    STREAM_ERROR,
    TIMEOUT,
    Observer,
    Trace,
)
from gateway.tokens import bundled_tokenizer_dir

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # `_created` series double the output and say little

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
FIRST_TOKEN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0)
STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LOCK_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# Series created before any traffic, so that the first 5xx, retry or fallback after a start shows
# in rate() (a counter first seen at 1 has no increase to show). Others appear on first use.
ANSWER_STATUSES = (200, 400, 401, 404, 408, 409, 413, 422, 429, CLIENT_CLOSED, 500, 502, 503, 504)
TRANSPORT_OUTCOMES = (TIMEOUT, CONNECT_ERROR, STREAM_ERROR, INVALID_RESPONSE)


@dataclass(frozen=True, slots=True)
class Price:
    """USD per token, from litellm's price table."""

    prompt: float
    completion: float


@functools.cache
def load_prices() -> Mapping[str, Price]:
    """litellm's bundled price table, read as a file (litellm is never imported); empty if absent."""
    folder = bundled_tokenizer_dir()
    if folder is None:
        return {}
    path = folder.parent.parent / "model_prices_and_context_window_backup.json"
    try:
        table = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    prices: dict[str, Price] = {}
    for model, entry in table.items():
        if not isinstance(entry, dict):
            continue
        prompt, completion = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
        if isinstance(prompt, int | float) and isinstance(completion, int | float):
            prices[model] = Price(float(prompt), float(completion))
    return prices


def price_of(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of `model`, also found without a provider prefix (`openai/gpt-4o` → `gpt-4o`)."""
    return prices.get(model) or prices.get(model.rpartition("/")[2])


def version() -> str:
    try:
        return metadata.version("gateway")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


Child = Any  # a labelled metric (prometheus-client leaves its children untyped)


def _child(cache: dict[Any, Child], key: Any, make: Callable[[], Child]) -> Child:
    """The cached child for `key`, created on first use."""
    child = cache.get(key)
    if child is None:
        child = cache[key] = make()
    return child


class _Count:
    """A counter's or gauge's value in this process: a float only the event loop touches."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = value


class _Buckets:
    """A histogram's counts in this process: one per bucket (not cumulative) and +Inf, and the sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        self.counts[bisect_left(self.bounds, amount)] += 1  # `le` buckets: amount <= bound
        self.sum += amount


class _LocalFamily:
    """One metric's children in this process, turned into Prometheus samples only when scraped."""

    def __init__(self, kind: str, name: str, doc: str, labelnames: tuple[str, ...], bounds: tuple[float, ...]) -> None:
        self.kind, self.name, self.doc, self.labelnames, self.bounds = kind, name, doc, labelnames, bounds
        self.children: dict[tuple[str, ...], Any] = {}

    def labels(self, *values: str) -> Child:
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = _Buckets(self.bounds) if self.kind == "histogram" else _Count()
        return child

    def collect(self) -> Metric:
        labels = list(self.labelnames)
        if self.kind == "histogram":
            histogram = HistogramMetricFamily(self.name, self.doc, labels=labels)
            edges = [*map(floatToGoString, self.bounds), "+Inf"]
            for values, child in self.children.items():
                histogram.add_metric(list(values), list(zip(edges, itertools.accumulate(child.counts), strict=True)), child.sum)
            return histogram
        family = CounterMetricFamily if self.kind == "counter" else GaugeMetricFamily
        metric = family(self.name, self.doc, labels=labels)
        for values, child in self.children.items():
            metric.add_metric(list(values), child.value)
        return metric


class _Solo:
    """A prometheus-client metric without labels, reached like a family: `.labels()` is itself."""

    def __init__(self, metric: Child) -> None:
        self.metric = metric

    def labels(self) -> Child:
        return self.metric


class _Families:
    """Where metrics are kept: plain numbers in one process, prometheus-client's files with workers.

    Alone, a process counts in plain Python numbers (a counter increment is an attribute add,
    a fifth of prometheus-client's locked one) and a collector turns them into samples when
    scraped. With workers (`shared`), values must reach the files every worker's scrape sums,
    so prometheus-client's own metrics keep them.
    """

    def __init__(self, registry: CollectorRegistry, *, shared: bool) -> None:
        self._registry, self._shared = registry, shared
        self._local: list[_LocalFamily] = []
        if not shared:
            registry.register(self)  # a Collector is anything with collect()

    def collect(self) -> Iterator[Metric]:
        for family in self._local:
            yield family.collect()

    def counter(self, name: str, doc: str, labelnames: tuple[str, ...]) -> Any:
        if self._shared:
            return self._shared_metric(Counter(name, doc, labelnames, registry=self._registry), labelnames)
        return self._add(_LocalFamily("counter", name, doc, labelnames, ()))

    def gauge(self, name: str, doc: str, labelnames: tuple[str, ...], mode: str) -> Any:
        if self._shared:
            gauge = Gauge(name, doc, labelnames, registry=self._registry, multiprocess_mode=mode)  # type: ignore[arg-type]
            return self._shared_metric(gauge, labelnames)
        return self._add(_LocalFamily("gauge", name, doc, labelnames, ()))

    def histogram(self, name: str, doc: str, labelnames: tuple[str, ...], bounds: tuple[float, ...]) -> Any:
        if self._shared:
            return self._shared_metric(Histogram(name, doc, labelnames, registry=self._registry, buckets=bounds), labelnames)
        return self._add(_LocalFamily("histogram", name, doc, labelnames, bounds))

    def _add(self, family: _LocalFamily) -> _LocalFamily:
        self._local.append(family)
        return family

    @staticmethod
    def _shared_metric(metric: Child, labelnames: tuple[str, ...]) -> Any:
        return metric if labelnames else _Solo(metric)


@dataclass(slots=True)
class _Attempt:
    """The series an upstream attempt with one (target, outcome) adds to: its count, the target's durations."""

    count: Child
    duration: Child

    def add(self, seconds: float) -> None:
        """Count it through prometheus-client's children (with workers); `Metrics` adds to `_Count`s in place."""
        self.count.inc()
        self.duration.observe(seconds)


@dataclass(slots=True)
class _Tokens:
    """The series a target's reported usage adds to: prompt and completion tokens, and their cost if priced."""

    prompt: Child
    completion: Child
    cost: Child  # None when `price` is
    price: Price | None

    def add(self, prompt: int, completion: int) -> None:
        """Count it through prometheus-client's children (with workers); `Metrics` adds to `_Count`s in place."""
        self.prompt.inc(prompt)
        self.completion.inc(completion)
        if self.price is not None:
            self.cost.inc(prompt * self.price.prompt + completion * self.price.completion)


@dataclass(slots=True)
class _Ending:
    """The series a request that ends with one (route, status, stream) adds to."""

    requests: Child
    duration: Child
    inflight: Child  # the route's: counted up when the request resolved to it

    def add(self, seconds: float, resolved: bool) -> None:
        """Count it through prometheus-client's children (with workers); `Metrics` adds to `_Count`s in place."""
        self.requests.inc()
        self.duration.observe(seconds)
        if resolved:
            self.inflight.dec()


@dataclass(slots=True)
class _RouteChildren:
    name: str
    duration: tuple[Child, Child]  # (non-stream, stream)
    inflight: Child


@dataclass(slots=True)
class _TargetChildren:
    route: str
    name: str
    provider: str
    duration: Child
    first_token: Child
    tokens: _Tokens
    breaker: Child | None  # the circuit's state: 0 closed, 1 half-open, 2 open
    retries: dict[str, Child] = field(default_factory=dict)
    fallbacks: dict[str, Child] = field(default_factory=dict)


@dataclass(slots=True)
class _StoreChildren:
    """A store's series a memory turn adds to: its lock, load and append durations."""

    lock: Child
    load: Child
    append: Child


def _leaves_with_triggers(node: Node, triggers: frozenset[str] = frozenset()) -> Iterator[tuple[Target, frozenset[str]]]:
    """Every target with the outcomes that would move the walk on from it (fallback reasons).

    A fallback moves on from every child but its last; a loadbalance with onStatusCodes from
    any of its children (to a sibling).
    """
    if isinstance(node, Target):
        yield node, triggers
        return
    moves_on: frozenset[str] = frozenset()
    if isinstance(node, Fallback) or (isinstance(node, LoadBalance) and node.on_status_codes is not None):
        codes = DEFAULT_TRIGGER_CODES if node.on_status_codes is None else node.on_status_codes
        moves_on = frozenset({str(code) for code in codes} | set(TRANSPORT_OUTCOMES))
    last = len(node.children) - 1
    for index, child in enumerate(node.children):
        has_next = (isinstance(node, LoadBalance) and last > 0) or index < last
        yield from _leaves_with_triggers(child, triggers | moves_on if has_next else triggers)


class Metrics(Observer):
    """Every gateway metric, defined once, with the children the config implies."""

    def __init__(self, config: Config, *, prices: Mapping[str, Price] | None = None) -> None:
        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        # Values go to this registry in one process; with workers, to the shared files instead.
        self.registry = CollectorRegistry(auto_describe=False)
        families = _Families(self.registry, shared=self.multiprocess)
        self.requests = families.counter(
            "gateway_requests", "Requests answered, by route, status code and streaming.",
            ("route", "status_code", "stream"),
        )  # fmt: skip
        self.request_duration = families.histogram(
            "gateway_request_duration_seconds", "Time from request to the answer's last byte.",
            ("route", "stream"), LATENCY_BUCKETS,
        )  # fmt: skip
        self.ttft = families.histogram(
            "gateway_time_to_first_token_seconds", "Time from request to a stream's first event.",
            ("route", "target"), FIRST_TOKEN_BUCKETS,
        )  # fmt: skip
        self.upstream_requests = families.counter(
            "gateway_upstream_requests", "Upstream attempts by outcome (status code, timeout, connect_error, stream_error).",
            ("route", "target", "provider", "outcome"),
        )  # fmt: skip
        self.upstream_duration = families.histogram(
            "gateway_upstream_duration_seconds", "Duration of one upstream attempt (a stream: until it ended).",
            ("route", "target", "provider"), LATENCY_BUCKETS,
        )  # fmt: skip
        self.fallbacks = families.counter(
            "gateway_fallbacks", "Times a route moved on from a target, by the reason.",
            ("route", "from_target", "reason"),
        )  # fmt: skip
        self.retries = families.counter(
            "gateway_retries", "Retries of a target, by the reason.",
            ("route", "target", "reason"),
        )  # fmt: skip
        self.tokens = families.counter(
            "gateway_tokens", "Tokens the upstreams reported in usage, by kind (prompt, completion).",
            ("route", "target", "provider", "kind"),
        )  # fmt: skip
        self.cost = families.counter(
            "gateway_cost_usd", "Cost in USD of the reported usage, at litellm's list prices.",
            ("route", "target"),
        )  # fmt: skip
        self.overloaded_requests = families.counter(
            "gateway_overloaded", "Requests refused (503) for the gateway's own shortage, by reason (emfile, enfile, enobufs, enomem, max_connections).",
            ("reason",),
        )  # fmt: skip
        self.breaker_state = families.gauge(
            "gateway_breaker_state", "Circuit breaker state by target: 0 closed, 1 half-open, 2 open.",
            ("route", "target"), "livemostrecent",
        )  # fmt: skip
        self.inflight = families.gauge(
            "gateway_inflight_requests", "Requests being answered now.",
            ("route",), "livesum",
        )  # fmt: skip
        self.memory_requests = families.counter(
            "gateway_memory_requests", "Requests served with memory, by memory type.",
            ("memory_type",),
        )  # fmt: skip
        self.memory_evicted = families.counter(
            "gateway_memory_evicted_messages", "Stored messages left out of the forwarded window.",
            ("memory_type",),
        )  # fmt: skip
        self.store_duration = families.histogram(
            "gateway_memory_store_duration_seconds", "Memory store operations (load, append, lock).",
            ("store", "operation"), STORE_BUCKETS,
        )  # fmt: skip
        self.lock_wait = families.histogram(
            "gateway_memory_lock_wait_seconds", "Time waited for a conversation's lock.",
            (), LOCK_BUCKETS,
        ).labels()  # fmt: skip
        build_info = families.gauge(
            "gateway_build_info", "The running gateway's version.",
            ("version",), "max",
        )  # fmt: skip
        config_routes = families.gauge(
            "gateway_config_routes", "Routes in the loaded config.",
            (), "max",
        ).labels()  # fmt: skip
        build_info.labels(version()).set(1)
        config_routes.set(len(config.routes))
        self._config_routes = config_routes

        prices = self._prices = load_prices() if prices is None else prices
        # What a request adds to, found with one lookup per event; the bundles a request may need
        # are made here (their series show from the start), the rest on first use.
        self._endings: dict[tuple[str, int, bool], _Ending] = {}
        self._attempts: dict[tuple[Target, str], _Attempt] = {}
        self._routes = {name: self._route_children(name) for name in (*config.routes, OTHER_ROUTE)}
        self._targets = {
            target: self._target_children(route, target, triggers, prices)
            for route in config.routes.values()
            for target, triggers in _leaves_with_triggers(route.root)
        }
        self._memory = {kind: self._memory_children(kind) for kind in MEMORY_TYPES}
        self._overloaded = {reason: self.overloaded_requests.labels(reason) for reason in SHORTAGES.values()}
        self._store: dict[tuple[str, str], Child] = {}
        self._stores: dict[str, _StoreChildren] = {}

    def adopt(self, config: Config) -> None:
        """Count the routes and targets of `config` too (a reload): every series keeps its value.

        A route or target of the same name is counted in the same series as before; requests
        still under way on the configuration replaced go on counting where they were.
        """
        for name in config.routes:
            if name not in self._routes:
                self._routes[name] = self._route_children(name)
        for route in config.routes.values():
            for target, triggers in _leaves_with_triggers(route.root):
                if target not in self._targets:
                    self._targets[target] = self._target_children(route, target, triggers, self._prices)
        self._config_routes.set(len(config.routes))

    def _route_children(self, name: str) -> _RouteChildren:
        children = _RouteChildren(
            name,
            (self.request_duration.labels(name, "false"), self.request_duration.labels(name, "true")),
            self.inflight.labels(name),
        )
        for status in ANSWER_STATUSES:
            for stream in (False, True):
                self._endings[name, status, stream] = self._ending(children, status, stream)
        return children

    def _ending(self, route: _RouteChildren, status: int, stream: bool) -> _Ending:
        requests = self.requests.labels(route.name, str(status), _flag(stream))
        return _Ending(requests, route.duration[stream], route.inflight)

    def _new_ending(self, name: str, status: int, stream: bool) -> _Ending:
        ending = self._endings[name, status, stream] = self._ending(self._routes[name], status, stream)
        return ending

    def _new_attempt(self, target: Target, outcome: str) -> _Attempt | None:
        """The bundle for `outcome` of `target`, made on its first use; None for a target outside the config."""
        t = self._targets.get(target)
        if t is None:
            return None
        count = self.upstream_requests.labels(t.route, t.name, t.provider, outcome)
        attempt = self._attempts[target, outcome] = _Attempt(count, t.duration)
        return attempt

    def _target_children(
        self, route: Route, target: Target, triggers: frozenset[str], prices: Mapping[str, Price]
    ) -> _TargetChildren:
        labels = (route.name, target.name, target.provider)
        price = price_of(target.model or route.name, prices)
        tokens = _Tokens(
            self.tokens.labels(*labels, "prompt"),
            self.tokens.labels(*labels, "completion"),
            self.cost.labels(route.name, target.name) if price is not None else None,
            price,
        )
        children = _TargetChildren(
            route.name,
            target.name,
            target.provider,
            duration=self.upstream_duration.labels(*labels),
            first_token=self.ttft.labels(route.name, target.name),
            tokens=tokens,
            breaker=self.breaker_state.labels(route.name, target.name) if target.breaker.enabled else None,
        )
        if children.breaker is not None:
            children.breaker.set(CLOSED)
        retry_reasons = {str(code) for code in target.retry.on_status_codes} | set(TRANSPORT_OUTCOMES)
        for outcome in {"200", *retry_reasons, *triggers}:
            count = self.upstream_requests.labels(*labels, outcome)
            self._attempts[target, outcome] = _Attempt(count, children.duration)
        if target.retry.attempts:
            for reason in retry_reasons:
                children.retries[reason] = self.retries.labels(route.name, target.name, reason)
        if triggers and target.breaker.enabled:  # the route moves on from it, also when its circuit is open
            triggers = triggers | {SKIPPED}
        for reason in triggers:
            children.fallbacks[reason] = self.fallbacks.labels(route.name, target.name, reason)
        return children

    def _memory_children(self, memory_type: str) -> tuple[Child, Child]:
        return self.memory_requests.labels(memory_type), self.memory_evicted.labels(memory_type)

    # The events. Alone, a process adds to its `_Count`s and `_Buckets` in place, not through a
    # bundle's add() and each child's method: a call less per event and none per series. With
    # workers, the bundles' add() updates prometheus-client's children.

    def route_resolved(self, trace: Trace) -> None:
        assert trace.route is not None
        inflight = self._routes[trace.route.name].inflight
        if self.multiprocess:
            inflight.inc()
        else:
            inflight.value += 1

    def attempt_ended(self, trace: Trace, target: Target, outcome: str, seconds: float) -> None:
        attempt = self._attempts.get((target, outcome)) or self._new_attempt(target, outcome)
        if attempt is None:
            return
        if self.multiprocess:
            attempt.add(seconds)
            return
        attempt.count.value += 1
        duration = attempt.duration
        duration.counts[bisect_left(duration.bounds, seconds)] += 1  # _Buckets.observe, inline
        duration.sum += seconds

    def retried(self, trace: Trace, target: Target, reason: str) -> None:
        t = self._targets.get(target)
        if t is not None:
            _child(t.retries, reason, functools.partial(self.retries.labels, t.route, t.name, reason)).inc()

    def fell_back(self, trace: Trace, source: Target, reason: str) -> None:
        t = self._targets.get(source)
        if t is not None:
            _child(t.fallbacks, reason, functools.partial(self.fallbacks.labels, t.route, t.name, reason)).inc()

    def overloaded(self, trace: Trace, target: Target, reason: str) -> None:
        """Counted apart from the upstream's series: the target was never called."""
        _child(self._overloaded, reason, functools.partial(self.overloaded_requests.labels, reason)).inc()

    def breaker_changed(self, target: Target, state: int) -> None:
        children = self._targets.get(target)
        if children is not None and children.breaker is not None:
            children.breaker.set(state)

    def first_token(self, trace: Trace, target: Target, seconds: float) -> None:
        children = self._targets.get(target)
        if children is None:
            return
        if self.multiprocess:
            children.first_token.observe(seconds)
            return
        first_token = children.first_token
        first_token.counts[bisect_left(first_token.bounds, seconds)] += 1  # _Buckets.observe, inline
        first_token.sum += seconds

    def usage(self, trace: Trace, target: Target, prompt: int, completion: int) -> None:
        children = self._targets.get(target)
        if children is None:
            return
        tokens = children.tokens
        if self.multiprocess:
            tokens.add(prompt, completion)
            return
        tokens.prompt.value += prompt
        tokens.completion.value += completion
        if tokens.price is not None:
            tokens.cost.value += prompt * tokens.price.prompt + completion * tokens.price.completion

    def memory_planned(self, trace: Trace, memory_type: str, evicted: int) -> None:
        children = self._memory.get(memory_type)
        if children is None:
            children = self._memory[memory_type] = self._memory_children(memory_type)
        requests, evictions = children
        if self.multiprocess:
            requests.inc()
            if evicted:
                evictions.inc(evicted)
            return
        requests.value += 1
        evictions.value += evicted

    def store_timed(self, store: str, operation: str, seconds: float) -> None:
        histogram = self._store.get((store, operation))
        if histogram is None:
            histogram = self._store[store, operation] = self.store_duration.labels(store, operation)
        if self.multiprocess:
            histogram.observe(seconds)
            return
        histogram.counts[bisect_left(histogram.bounds, seconds)] += 1  # _Buckets.observe, inline
        histogram.sum += seconds

    def lock_waited(self, store: str, seconds: float) -> None:
        self.store_timed(store, "lock", seconds)
        histogram = self.lock_wait
        if self.multiprocess:
            histogram.observe(seconds)
            return
        histogram.counts[bisect_left(histogram.bounds, seconds)] += 1  # _Buckets.observe, inline
        histogram.sum += seconds

    def memory_turn(
        self, trace: Trace, store: str, waited: float, loaded: float, appended: float | None, stored: int
    ) -> None:
        """The series of lock_waited, store_timed (load, append) and memory_planned, in one call."""
        children = self._stores.get(store) or self._store_children(store)
        memory_type, evicted = trace.memory_type or "", trace.evicted or 0
        memory = self._memory.get(memory_type)
        if memory is None:
            memory = self._memory[memory_type] = self._memory_children(memory_type)
        if self.multiprocess:
            children.lock.observe(waited)
            self.lock_wait.observe(waited)
            children.load.observe(loaded)
            memory[0].inc()
            if evicted:
                memory[1].inc(evicted)
            if appended is not None:
                children.append.observe(appended)
            return
        # _Buckets.observe and _Count.inc, inline. A time within the first bound (most: a free lock, a
        # cached read, often a write) is counted without bisect_left, its ~500 instructions of compares
        lock, wait, load = children.lock, self.lock_wait, children.load
        lock.counts[0 if waited <= lock.bounds[0] else bisect_left(lock.bounds, waited)] += 1
        lock.sum += waited
        wait.counts[0 if waited <= wait.bounds[0] else bisect_left(wait.bounds, waited)] += 1
        wait.sum += waited
        load.counts[0 if loaded <= load.bounds[0] else bisect_left(load.bounds, loaded)] += 1
        load.sum += loaded
        memory[0].value += 1
        memory[1].value += evicted
        if appended is not None:
            append = children.append
            append.counts[0 if appended <= append.bounds[0] else bisect_left(append.bounds, appended)] += 1
            append.sum += appended

    def _store_children(self, store: str) -> _StoreChildren:
        # labels() gives a series' one child however often asked: store_timed adds to these same ones
        children = self._stores[store] = _StoreChildren(*(self.store_duration.labels(store, op) for op in ("lock", "load", "append")))
        return children

    def request_ended(self, trace: Trace) -> None:
        if trace.endpoint is None:  # not a model request (/v1/models, /v1/memory, ...)
            return
        route = trace.route
        key = (route.name if route is not None else OTHER_ROUTE, trace.status, trace.stream)
        ending = self._endings.get(key) or self._new_ending(*key)
        if self.multiprocess:
            ending.add(trace.elapsed, route is not None)
            return
        ending.requests.value += 1
        duration, seconds = ending.duration, trace.elapsed
        duration.counts[bisect_left(duration.bounds, seconds)] += 1  # _Buckets.observe, inline
        duration.sum += seconds
        if route is not None:
            ending.inflight.value -= 1

    def exposition(self) -> bytes:
        """The text a scrape reads: this process's values, or every worker's summed."""
        if not self.multiprocess:
            return prometheus_client.generate_latest(self.registry)
        registry = CollectorRegistry(auto_describe=False)
        prometheus_multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return prometheus_client.generate_latest(registry)


def _flag(value: bool) -> str:
    return "true" if value else "false"


@contextlib.contextmanager
def multiprocess_dir() -> Iterator[Path]:
    """A fresh directory for the workers' metric files, named in the environment, removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix="gateway-metrics-"))
    previous = os.environ.get(MULTIPROC_ENV)
    os.environ[MULTIPROC_ENV] = str(folder)
    try:
        yield folder
    finally:
        if previous is None:
            os.environ.pop(MULTIPROC_ENV, None)
        else:
            os.environ[MULTIPROC_ENV] = previous
        shutil.rmtree(folder, ignore_errors=True)


def worker_exited(pid: int) -> None:
    """Drop a dead worker's live gauges (its in-flight count) from the shared files."""
    if os.environ.get(MULTIPROC_ENV):
        prometheus_multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
