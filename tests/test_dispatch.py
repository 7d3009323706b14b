"""Dispatch pieces that need no socket: body preparation, Retry-After parsing, backoff."""

from __future__ import annotations

import email.utils
import random
from types import MappingProxyType

import orjson
import pytest

from gateway.core.routing import Outcome
from gateway.core.tree import RetryPolicy, Target
from gateway.upstream.dispatch import Dispatcher, Request, Result, _backoff, _judge_reply, retry_after_seconds
from gateway.upstream.providers.base import Call, Reply


def target(**override: object) -> Target:
    return Target(name="t", provider="mock", base_url="", api_key="", override_params=MappingProxyType(dict(override)))


def chat() -> Call:
    return Call(target(), "chat/completions", {})


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


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-4"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "-inf"}, None),
        ({"retry-after": "1e300"}, None),
        ({"retry-after": "100000"}, None),
        ({"retry-after-ms": "nan", "retry-after": "2"}, 2.0),
        ({"retry-after-ms": "inf"}, None),
        ({"retry-after-ms": "-5"}, None),
        ({"retry-after": "Thu, 01 Jan 99999 00:00:00 GMT"}, None),
        ({"retry-after": "Mon, 32 Foo 2024 99:99:99 GMT"}, None),
    ],
)
def test_retry_after_parsing(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers) == expected


def test_retry_after_http_date() -> None:
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=1_000_000) == pytest.approx(30)


def test_backoff_is_full_jitter_under_an_exponential_cap() -> None:
    policy = RetryPolicy(attempts=5, backoff_seconds=0.5, max_backoff_seconds=3)
    rng = random.Random(0)
    failed = Result(target(), [], Outcome(503))
    for attempt, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (5, 3.0)]:
        waits = [_backoff(policy, attempt, failed, rng) for _ in range(200)]
        assert min(waits) >= 0 and max(waits) <= cap
        assert max(waits) > cap * 0.8  # the whole range is used, not a fixed delay


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"error": {"message": "overloaded", "code": 529}}, 529),
        ({"error": {"message": "boom", "status": 503, "code": "e"}}, 503),
        ({"error": "a string"}, 502),
        ({"error": {"message": "x", "code": 200}}, 502),  # not a failure status: a plain 502
    ],
)
def test_an_error_where_a_2xx_answer_should_be_is_a_failure(body: dict[str, object], status: int) -> None:
    tried = _judge_reply(chat(), Reply(200, orjson.dumps(body)), [])
    assert tried.outcome == Outcome(status, transport=True) and tried.kind == "invalid_response"


@pytest.mark.parametrize(
    "body",
    [
        {"id": "c", "object": "chat.completion", "choices": [], "error": None},
        {"id": "resp", "object": "response", "status": "failed", "error": {"message": "a failed response is an answer"}},
        {"data": [], "error": None},
    ],
)
def test_answers_with_an_error_field_are_still_answers(body: dict[str, object]) -> None:
    assert _judge_reply(chat(), Reply(200, orjson.dumps(body)), []).outcome == Outcome(200)
