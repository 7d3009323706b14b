"""`Metrics`: the Observer that turns a request's events into series updates.

Labels are bounded by the config (route and target names, provider), by HTTP status codes and
by a few fixed words; never by anything a client chooses. The children that every request
touches are made when the config loads, gathered in a bundle per (route, status, stream), per
(target, outcome) and per target, so an event finds what it adds to with one lookup. Those
labelled with a status code or reason the config did not foresee are made on first use and
cached, so no request pays for a family's label lookup twice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import TypeVar

from gateway.config.loader import OTHER_ROUTE
from gateway.core.breaker import SKIPPED
from gateway.core.errors import SHORTAGES
from gateway.core.governance import LimitKind
from gateway.core.memory.settings import MEMORY_TYPES
from gateway.core.memory.summary import OUTCOMES
from gateway.core.settings import Config
from gateway.core.tree import Route, Target
from gateway.observe.metrics import series
from gateway.observe.metrics.families import Backend, Count, Level, Observed
from gateway.observe.metrics.local import LocalBackend
from gateway.observe.metrics.prices import Price, load_prices, price_of
from gateway.observe.metrics.shared import SharedBackend, workers_share_files
from gateway.observe.metrics.triggers import TRANSPORT_OUTCOMES, leaves_with_triggers
from gateway.observe.trace import CLIENT_CLOSED, Observer, Trace

# Statuses whose series exist before any traffic, so that the first 5xx after a start shows in
# rate() (a counter first seen at 1 has no increase to show). Others appear on first use.
ANSWER_STATUSES = (200, 400, 401, 404, 408, 409, 413, 422, 429, CLIENT_CLOSED, 500, 502, 503, 504)


def version() -> str:
    try:
        return metadata.version("gateway")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


Child = TypeVar("Child")


def _child(cache: dict[str, Child], key: str, make: Callable[[], Child]) -> Child:
    """The cached child for `key`, created on first use."""
    child = cache.get(key)
    if child is None:
        child = cache[key] = make()
    return child


@dataclass(slots=True)
class _Attempt:
    """The series an upstream attempt with one (target, outcome) adds to: its count, the target's durations."""

    count: Count
    duration: Observed


@dataclass(slots=True)
class _Tokens:
    """The series a target's reported usage adds to: prompt and completion tokens, and their cost if priced.

    `price` is that of `model`: the target's own, or for a target that names none the model its
    last request named (the route's name until one does), looked up again when a request names another.
    """

    prompt: Count
    completion: Count
    cost: Count | None  # made when first priced
    price: Price | None
    model: str
    own_model: bool  # the target names its model: every answer has its price


@dataclass(slots=True)
class _Ending:
    """The series a request that ends with one (route, status, stream) adds to."""

    requests: Count
    duration: Observed
    inflight: Level  # the route's: counted up when the request resolved to it


@dataclass(slots=True)
class _RouteChildren:
    name: str
    duration: tuple[Observed, Observed]  # (non-stream, stream)
    inflight: Level


@dataclass(slots=True)
class _TargetChildren:
    route: str
    name: str
    provider: str
    duration: Observed
    first_token: Observed
    tokens: _Tokens
    breaker: Level | None  # the circuit's state: 0 closed, 1 half-open, 2 open
    retries: dict[str, Count] = field(default_factory=dict)
    fallbacks: dict[str, Count] = field(default_factory=dict)


@dataclass(slots=True)
class _StoreChildren:
    """A store's series a memory turn adds to: its lock, load and append durations."""

    lock: Observed
    load: Observed
    append: Observed


class Metrics(Observer):
    """Every gateway metric, with the children the config implies, kept by one back-end.

    The back-end is plain numbers; when this process is one of several workers (`gateway serve
    --workers N`), they are also published for the other workers' scrapes (`shared`).
    """

    def __init__(self, config: Config, *, prices: Mapping[str, Price] | None = None, backend: Backend | None = None) -> None:
        if backend is None:
            backend = SharedBackend() if workers_share_files() else LocalBackend()
        self.backend = backend
        # Made in the order a scrape lists them.
        self.requests = backend.counter(series.REQUESTS)
        self.request_duration = backend.histogram(series.REQUEST_DURATION)
        self.ttft = backend.histogram(series.TIME_TO_FIRST_TOKEN)
        self.upstream_requests = backend.counter(series.UPSTREAM_REQUESTS)
        self.upstream_duration = backend.histogram(series.UPSTREAM_DURATION)
        self.fallbacks = backend.counter(series.FALLBACKS)
        self.retries = backend.counter(series.RETRIES)
        self.tokens = backend.counter(series.TOKENS)
        self.cost = backend.counter(series.COST)
        self.overloaded_requests = backend.counter(series.OVERLOADED)
        self.breaker_state = backend.gauge(series.BREAKER_STATE)
        self.inflight = backend.gauge(series.INFLIGHT)
        self.memory_requests = backend.counter(series.MEMORY_REQUESTS)
        self.memory_evicted = backend.counter(series.MEMORY_EVICTED)
        memory_summaries = backend.counter(series.MEMORY_SUMMARIES)
        self.store_duration = backend.histogram(series.STORE_DURATION)
        self.lock_wait = backend.histogram(series.LOCK_WAIT).labels()
        build_info = backend.gauge(series.BUILD_INFO)
        self._config_routes = backend.gauge(series.CONFIG_ROUTES).labels()
        self.rate_limited_requests = backend.counter(series.RATE_LIMITED)
        self.budget_spent_usd = backend.gauge(series.BUDGET_SPENT)
        self.budget_remaining_usd = backend.gauge(series.BUDGET_REMAINING)
        build_info.labels(version()).set(1)
        self._config_routes.set(len(config.routes))

        self._prices = load_prices() if prices is None else prices
        # What a request adds to, found with one lookup per event; the bundles a request may need
        # are made here (their series show from the start), the rest on first use.
        self._endings: dict[tuple[str, int, bool], _Ending] = {}
        self._budgets: dict[str, tuple[Level, Level]] = {}  # a key's budget gauges (spent, remaining), by key name
        self._attempts: dict[tuple[Target, str], _Attempt] = {}
        self._routes = {name: self._route_children(name) for name in (*config.routes, OTHER_ROUTE)}
        self._targets = {
            target: self._target_children(route, target, triggers)
            for route in config.routes.values()
            for target, triggers in leaves_with_triggers(route.root)
        }
        self._memory: dict[str, tuple[Count, Count]] = {kind: self._memory_children(kind) for kind in MEMORY_TYPES}
        self._summaries: dict[str, Count] = {outcome: memory_summaries.labels(outcome) for outcome in OUTCOMES}
        self._overloaded = {reason: self.overloaded_requests.labels(reason) for reason in SHORTAGES.values()}
        self._store: dict[tuple[str, str], Observed] = {}
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
            for target, triggers in leaves_with_triggers(route.root):
                if target not in self._targets:
                    self._targets[target] = self._target_children(route, target, triggers)
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
        requests = self.requests.labels(route.name, str(status), "true" if stream else "false")
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

    def _target_children(self, route: Route, target: Target, triggers: frozenset[str]) -> _TargetChildren:
        labels = (route.name, target.name, target.provider)
        model = target.model or route.name
        price = price_of(model, self._prices)
        tokens = _Tokens(
            self.tokens.labels(*labels, "prompt"),
            self.tokens.labels(*labels, "completion"),
            cost=self.cost.labels(route.name, target.name) if price is not None else None,
            price=price,
            model=model,
            own_model=target.model is not None,
        )
        children = _TargetChildren(
            route.name,
            target.name,
            target.provider,
            duration=self.upstream_duration.labels(*labels),
            first_token=self.ttft.labels(route.name, target.name),
            tokens=tokens,
            # Closed (0) until a change says otherwise: set now, a worker that starts would hide another's open circuit
            breaker=self.breaker_state.labels(route.name, target.name) if target.breaker.enabled else None,
        )
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

    def _memory_children(self, memory_type: str) -> tuple[Count, Count]:
        return self.memory_requests.labels(memory_type), self.memory_evicted.labels(memory_type)

    def _store_children(self, store: str) -> _StoreChildren:
        # labels() gives a series' one child however often asked: store_timed adds to these same ones
        lock, load, append = (self.store_duration.labels(store, operation) for operation in ("lock", "load", "append"))
        children = self._stores[store] = _StoreChildren(lock, load, append)
        return children

    # The events

    def route_resolved(self, trace: Trace) -> None:
        assert trace.route is not None
        self._routes[trace.route.name].inflight.inc()

    def attempt_ended(self, trace: Trace, target: Target, *, outcome: str, seconds: float) -> None:
        attempt = self._attempts.get((target, outcome)) or self._new_attempt(target, outcome)
        if attempt is not None:
            attempt.count.inc()
            attempt.duration.observe(seconds)

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
        if children is not None:
            children.first_token.observe(seconds)

    def usage(self, trace: Trace, target: Target, *, prompt: int, completion: int) -> None:
        children = self._targets.get(target)
        if children is None:
            return
        tokens = children.tokens
        tokens.prompt.inc(prompt)
        tokens.completion.inc(completion)
        price, model = tokens.price, trace.model
        if model != tokens.model and model is not None and not tokens.own_model:  # another model sent as it came
            price = self._priced(tokens, model)
        if price is not None:
            cost = tokens.cost
            if cost is None:
                cost = tokens.cost = self.cost.labels(children.route, children.name)
            cost.inc(price.of(prompt, completion))

    def _priced(self, tokens: _Tokens, model: str) -> Price | None:
        """The price of `model`, which a request sent to `tokens`' target, kept as the one its next request likely sends."""
        tokens.model, tokens.price = model, price_of(model, self._prices)
        return tokens.price

    def memory_planned(self, trace: Trace, memory_type: str, evicted: int) -> None:
        requests, evictions = self._memory.get(memory_type) or self._new_memory(memory_type)
        requests.inc()
        if evicted:
            evictions.inc(evicted)

    def memory_summarized(self, outcome: str) -> None:
        """A summary window's background summary came to `outcome` (one of core.memory.summary.OUTCOMES)."""
        self._summaries[outcome].inc()

    def _new_memory(self, memory_type: str) -> tuple[Count, Count]:
        children = self._memory[memory_type] = self._memory_children(memory_type)
        return children

    def store_timed(self, store: str, operation: str, seconds: float) -> None:
        histogram = self._store.get((store, operation))
        if histogram is None:
            histogram = self._store[store, operation] = self.store_duration.labels(store, operation)
        histogram.observe(seconds)

    def lock_waited(self, store: str, seconds: float) -> None:
        self.store_timed(store, "lock", seconds)
        self.lock_wait.observe(seconds)

    def memory_turn(
        self, trace: Trace, store: str, *, waited: float, loaded: float, appended: float | None, stored: int
    ) -> None:
        """The series of lock_waited, store_timed (load, append) and memory_planned, in one call."""
        children = self._stores.get(store) or self._store_children(store)
        children.lock.observe(waited)
        self.lock_wait.observe(waited)
        children.load.observe(loaded)
        self.memory_planned(trace, trace.memory_type or "", trace.evicted or 0)
        if appended is not None:
            children.append.observe(appended)

    # What governance tells (gateway.governance.admission.GovernanceListener, met by shape: that layer is above this one)

    def rate_limited(self, tenant: str, route: str, limit: LimitKind) -> None:
        """A request of key `tenant` on `route` was refused at `limit` (its own or the route's)."""
        self.rate_limited_requests.labels(tenant, route, limit).inc()

    def budget_spent(self, tenant: str, *, spent_usd: float, budget_usd: float) -> None:
        """Key `tenant` has spent `spent_usd` of its `budget_usd` in the budget's current period."""
        gauges = self._budgets.get(tenant)
        if gauges is None:  # each settlement of a budgeted key lands here: its two children are found once
            gauges = self._budgets[tenant] = (self.budget_spent_usd.labels(tenant), self.budget_remaining_usd.labels(tenant))
        spent, remaining = gauges
        spent.set(spent_usd)
        remaining.set(max(budget_usd - spent_usd, 0.0))

    def request_ended(self, trace: Trace) -> None:
        if trace.endpoint is None:  # not a model request (/v1/models, /v1/memory, ...)
            return
        route = trace.route
        key = (route.name if route is not None else OTHER_ROUTE, trace.status, trace.stream)
        ending = self._endings.get(key) or self._new_ending(*key)
        ending.requests.inc()
        ending.duration.observe(trace.elapsed)
        if route is not None:
            ending.inflight.dec()

    def exposition(self) -> bytes:
        """The text a scrape reads: this process's values, or every worker's summed."""
        return self.backend.exposition()
