"""An upstream's whole answer judged: Retry-After read, a 2xx that is an error in disguise, redirects, malformed JSON."""

from __future__ import annotations

import email.utils
from types import MappingProxyType

import orjson
import pytest

from gateway.core.routing import Outcome
from gateway.core.tree import Target
from gateway.upstream.providers.base import Call, Reply
from gateway.upstream.results import Failed, Replied
from gateway.upstream.verdict import judge_reply, retry_after_seconds


def chat() -> Call:
    return Call(Target(name="t", provider="mock", base_url="", api_key="", override_params=MappingProxyType({})), "chat/completions", {})


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
    tried = judge_reply(chat(), Reply(200, orjson.dumps(body)), [], started=0.0)
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
    assert judge_reply(chat(), Reply(200, orjson.dumps(body)), [], started=0.0).outcome == Outcome(200)


def test_each_answer_is_judged_into_its_variant() -> None:
    """A usable answer and the upstream's error answer are Replied (the error with its Retry-After); the rest Failed."""
    usable = judge_reply(chat(), Reply(200, b'{"object": "chat.completion", "choices": []}'), [], started=5.0)
    assert isinstance(usable, Replied) and usable.detail == "ok" and usable.started == 5.0
    assert usable.reply.data == {"object": "chat.completion", "choices": []}
    refused = judge_reply(chat(), Reply(429, b'{"error": {"message": "slow down"}}', headers={"retry-after": "2"}), [], started=0.0)
    assert isinstance(refused, Replied) and refused.outcome == Outcome(429)
    assert refused.detail == "slow down" and refused.retry_after == 2.0 and refused.label == "429"
    for status, body in ((302, b""), (101, b""), (200, b"not json")):
        failed = judge_reply(chat(), Reply(status, body), [], started=0.0)
        assert isinstance(failed, Failed) and failed.outcome == Outcome(502, transport=True)
        assert failed.kind == failed.label == "invalid_response" and failed.reply is None and failed.retry_after is None
