"""gateway.upstream.providers.apis: what the gateway reads out of Responses and Anthropic events: pure, no I/O."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.core.sse import parse_event
from gateway.upstream.providers.apis import (
    MESSAGES,
    MESSAGES_API,
    RESPONSES,
    RESPONSES_API,
    chat_usage,
    event_type,
    failure,
)


def ev(data: Any, name: str | None = None) -> Any:
    head = f"event: {name}\n".encode() if name else b""
    return parse_event(head + b"data: " + orjson.dumps(data))


def test_an_events_type_is_its_name_else_its_datas_type() -> None:
    assert event_type(ev({"type": "response.completed"}, "response.completed")) == b"response.completed"
    assert event_type(ev({"type": "message_stop"})) == b"message_stop"  # no event: line
    assert event_type(ev([1, 2])) is None and event_type(parse_event(b": keep-alive")) is None
    assert event_type(parse_event(b"data: not json")) is None


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}, ("slow down", "rate_limit_exceeded", 429)),
        ({"type": "error", "code": "server_error", "message": "boom"}, ("boom", "server_error", 500)),
        ({"type": "error", "code": "odd", "message": "?", "status": 503}, ("?", "odd", 503)),
        ({"type": "error", "code": "odd", "message": "?", "status": 99}, ("?", "odd", 502)),
        ({"type": "response.failed", "response": {"error": {"code": "invalid_prompt", "message": "no"}}},
         ("no", "invalid_prompt", 400)),
        ({"type": "response.failed", "response": {"error": None}}, ("the upstream reported a failure", "upstream_error", 502)),
    ],
)
def test_a_responses_failure_stands_for_a_status(data: dict[str, Any], expected: tuple[str, str, int]) -> None:
    assert failure(RESPONSES_API, data) == expected


@pytest.mark.parametrize(
    ("kind", "status"),
    [("overloaded_error", 529), ("rate_limit_error", 429), ("api_error", 500), ("invalid_request_error", 400),
     ("something_new", 502), (None, 502)],
)  # fmt: skip
def test_an_anthropic_failure_stands_for_a_status(kind: Any, status: int) -> None:
    message, code, found = failure(MESSAGES_API, {"type": "error", "error": {"type": kind, "message": "m"}})
    assert (message, found) == ("m", status) and code == (kind or "api_error")


def test_usage_becomes_chat_usage() -> None:
    assert chat_usage(RESPONSES, {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}) == {
        "prompt_tokens": 9, "completion_tokens": 4,
    }  # fmt: skip
    counts = {"input_tokens": 3, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 100, "output_tokens": 5}
    assert chat_usage(MESSAGES, counts) == {"prompt_tokens": 113, "completion_tokens": 5}
    assert chat_usage(MESSAGES, {"input_tokens": -1, "output_tokens": True}) == {"prompt_tokens": 0, "completion_tokens": 0}
    assert chat_usage(RESPONSES, None) is None
