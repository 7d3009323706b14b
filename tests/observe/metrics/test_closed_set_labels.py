"""Metrics labelled with the closed sets' Enum members show the samples their words show."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from gateway.config.loader import parse_config
from gateway.core.failures import Failure
from gateway.core.memory.settings import MemoryType, StoreKind
from gateway.core.tree import Target
from gateway.observe.metrics import Metrics
from gateway.observe.trace import Trace

CONFIG = parse_config(
    "routes:\n  chat:\n    strategy: {mode: fallback}\n    targets:\n      - {name: a, provider: mock}\n      - {name: b, provider: mock}\n"
)
CLOCKED = ("gateway_request_duration_seconds_sum",)  # the request's time, as the clock measured it


def report(failure: str, skipped: str, memory_type: str, store: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    metrics = Metrics(CONFIG, prices={})
    route = CONFIG.routes["chat"]
    a, b = route.root.children  # type: ignore[union-attr]
    assert isinstance(a, Target) and isinstance(b, Target)
    trace = Trace(metrics, "req", method="POST", path="/v1/chat/completions")
    trace.endpoint = "chat/completions"
    trace.resolved(route, stream=False)
    trace.attempt_ended(a, failure, 0.5)
    trace.retried(a, failure)
    trace.fell_back(a, skipped)
    trace.attempt_ended(b, "200", 0.1)
    trace.memory_type, trace.evicted = memory_type, 1  # type: ignore[assignment]
    metrics.memory_turn(trace, store, waited=0.001, loaded=0.002, appended=0.003, stored=2)
    trace.end(200)
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
        if sample.value and sample.name not in CLOCKED
    }


def test_members_and_words_label_the_same_samples() -> None:
    members = report(Failure.TIMEOUT, Failure.CIRCUIT_OPEN, MemoryType.ROUND_WINDOW, StoreKind.REDIS)
    assert members == report("timeout", "circuit_open", "round_window", "redis")
    labels = {value for _, pairs in members for _, value in pairs}
    assert {"timeout", "circuit_open", "round_window", "redis"} <= labels
