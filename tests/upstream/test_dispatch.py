"""Dispatch pieces that need no socket: body preparation, backoff."""

from __future__ import annotations

import random
from types import MappingProxyType

from gateway.core.routing import Outcome
from gateway.core.tree import RetryPolicy, Target
from gateway.upstream.dispatch import Dispatcher, Request, _backoff
from gateway.upstream.results import Failed


def target(**override: object) -> Target:
    return Target(name="t", provider="mock", base_url="", api_key="", override_params=MappingProxyType(dict(override)))


def test_unchanged_body_passes_the_clients_bytes_through() -> None:
    raw = b'{"model": "m", "messages": []}'
    call = Dispatcher._call_for(target(), Request("chat/completions", {"model": "m", "messages": []}, raw))
    assert call.body is raw


def test_override_params_win_over_the_body_and_reserialize() -> None:
    request = Request("chat/completions", {"model": "m", "temperature": 1, "top_p": 0.5}, b"{}")
    call = Dispatcher._call_for(target(model="real", temperature=0.1), request)
    assert call.payload == {"model": "real", "temperature": 0.1, "top_p": 0.5}
    assert call.body == b'{"model":"real","temperature":0.1,"top_p":0.5}'
    assert request.payload["model"] == "m"  # the client's payload is left alone for the next target


def test_backoff_is_full_jitter_under_an_exponential_cap() -> None:
    policy = RetryPolicy(attempts=5, backoff_seconds=0.5, max_backoff_seconds=3)
    rng = random.Random(0)
    failed = Failed(target=target(), attempts=[], outcome=Outcome(503, transport=True), detail="", kind="connect_error", started=0.0)
    for attempt, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (5, 3.0)]:
        waits = [_backoff(policy, attempt, failed, rng=rng) for _ in range(200)]
        assert min(waits) >= 0 and max(waits) <= cap
        assert max(waits) > cap * 0.8  # the whole range is used, not a fixed delay
