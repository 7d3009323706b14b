"""gateway_cost_usd_total prices the model sent upstream: a target's overrideParams model, else the one the request named.

A target without a model of its own (a default route's, a route the client names by a model)
sends the client's model as it came: each request is priced by it, the route's name standing in
only for a request that named none.
"""

from __future__ import annotations

from gateway.config.loader import parse_config
from gateway.core.tree import Target
from gateway.observe.metrics import Metrics
from gateway.observe.metrics.prices import Price
from gateway.observe.trace import Trace
from tests.support.scrape import samples, total

PRICES = {"cheap": Price(1.0, 2.0), "dear": Price(10.0, 20.0), "chat": Price(100.0, 200.0)}
CONFIG = parse_config(
    "routes:\n  chat: {provider: mock}\n  pinned: {provider: mock, overrideParams: {model: cheap}}\n", env={}
)


def answered(metrics: Metrics, route: str, model: str | None) -> None:
    """One request on `route` naming `model`, its upstream reporting 1 prompt and 1 completion token."""
    trace = Trace(metrics)
    trace.resolved(CONFIG.routes[route], stream=False, model=model)
    target = CONFIG.routes[route].root
    assert isinstance(target, Target)
    trace.usage(target, {"prompt_tokens": 1, "completion_tokens": 1})


def cost(metrics: Metrics, route: str) -> float:
    return total(samples(metrics.exposition().decode()), "gateway_cost_usd_total", route=route)


def test_a_target_without_a_model_is_priced_by_each_request_s_model() -> None:
    metrics = Metrics(CONFIG, prices=PRICES)
    for model in ("cheap", "cheap", "dear", "unpriced", "cheap"):
        answered(metrics, "chat", model)
    assert cost(metrics, "chat") == 3 * (1.0 + 2.0) + (10.0 + 20.0)


def test_a_request_that_named_no_model_is_priced_by_the_route_s_name() -> None:
    metrics = Metrics(CONFIG, prices=PRICES)
    answered(metrics, "chat", None)
    assert cost(metrics, "chat") == 100.0 + 200.0


def test_a_target_s_own_model_prices_it_whatever_the_request_named() -> None:
    metrics = Metrics(CONFIG, prices=PRICES)
    answered(metrics, "pinned", "dear")
    assert cost(metrics, "pinned") == 1.0 + 2.0


def test_an_unpriced_model_adds_no_cost_series() -> None:
    metrics = Metrics(CONFIG, prices={"cheap": PRICES["cheap"]})  # "chat" unpriced: no series to start with
    answered(metrics, "chat", "unpriced")
    found = samples(metrics.exposition().decode())
    assert not [labels for (name, labels) in found if name == "gateway_cost_usd_total" and ("route", "chat") in labels]
    answered(metrics, "chat", "cheap")
    assert cost(metrics, "chat") == 1.0 + 2.0
