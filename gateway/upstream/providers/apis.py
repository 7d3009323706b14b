"""The two client APIs a target may serve as they are: OpenAI's Responses and Anthropic's Messages.

Pure, no I/O. Their endpoints (as the dispatcher's calls name them), and what a stream relay or
a commit point must know of their event streams: an event's type, the events a stream opens with
before any output (its preamble), the events that end an answer, the events that report a
failure and the HTTP status it stands for, and an answer's usage as chat usage (for the trace).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from gateway.core.sse import Event
from gateway.core.translate.messages import status_of

RESPONSES: Final = "responses"
RETRIEVE: Final = "responses.retrieve"  # GET {baseUrl}/responses/{id}
DELETE: Final = "responses.delete"  # DELETE {baseUrl}/responses/{id}
MESSAGES: Final = "messages"
COUNT_TOKENS: Final = "messages/count_tokens"

API_OF: Final[Mapping[str, str]] = {
    RESPONSES: RESPONSES,
    RETRIEVE: RESPONSES,
    DELETE: RESPONSES,
    MESSAGES: MESSAGES,
    COUNT_TOKENS: MESSAGES,
}

# Responses error codes (of `error` events and failed responses) and the status each stands for.
_RESPONSES_STATUS: Final = {
    "invalid_prompt": 400,
    "invalid_request_error": 400,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "server_error": 500,
    "vector_store_timeout": 504,
}


@dataclass(frozen=True, slots=True)
class Api:
    """One API's stream: the event types that open it, end it, or report that it failed."""

    name: str
    preamble: frozenset[bytes]
    ends: frozenset[bytes]  # a complete answer's last event (a failed response is an answer too)
    failures: frozenset[bytes]
    cut_off: str  # what a stream that stops early lacks, for the client's error message


RESPONSES_API: Final = Api(
    RESPONSES,
    preamble=frozenset({b"response.created", b"response.in_progress", b"response.queued"}),
    ends=frozenset({b"response.completed", b"response.incomplete", b"response.failed"}),
    failures=frozenset({b"error", b"response.failed"}),
    cut_off="response.completed",
)
MESSAGES_API: Final = Api(
    MESSAGES,
    preamble=frozenset({b"message_start", b"ping"}),
    ends=frozenset({b"message_stop"}),
    failures=frozenset({b"error"}),
    cut_off="message_stop",
)
STREAMS: Final[Mapping[str, Api]] = {RESPONSES: RESPONSES_API, MESSAGES: MESSAGES_API}


def data_of(event: Event) -> dict[str, Any]:
    """The event's JSON object, or an empty one when its data is not one."""
    try:
        data = orjson.loads(event.data or b"")
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def event_type(event: Event) -> bytes | None:
    """The event's type: its `event:` name, else the `type` its JSON data names."""
    if event.name is not None or event.data is None:
        return event.name
    kind = data_of(event).get("type")
    return kind.encode() if isinstance(kind, str) else None


def failure(api: Api, data: Mapping[str, Any]) -> tuple[str, str, int]:
    """(message, code, HTTP status) that a failure event's data reports."""
    if api.name == MESSAGES:
        error = data.get("error")
        error = error if isinstance(error, Mapping) else {}
        kind = error.get("type")
        return _text(error.get("message")), kind if isinstance(kind, str) else "api_error", status_of(kind)
    response = data.get("response")
    error = response.get("error") if isinstance(response, Mapping) else data
    error = error if isinstance(error, Mapping) else {}
    code = error.get("code")
    code = code if isinstance(code, str) and code else "upstream_error"
    status = error.get("status")
    if not isinstance(status, int) or not 400 <= status <= 599:
        status = _RESPONSES_STATUS.get(code, 502)
    return _text(error.get("message")), code, status


def _text(value: Any) -> str:
    return value[:300] if isinstance(value, str) and value else "the upstream reported a failure"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def chat_usage(api: str, usage: Any) -> dict[str, int] | None:
    """An answer's usage as chat's `prompt_tokens` / `completion_tokens`, or None when there is none.

    Anthropic's input tokens leave out the prompt cache's reads and writes; the prompt is all three.
    """
    if not isinstance(usage, Mapping):
        return None
    prompt = _count(usage.get("input_tokens"))
    if api == MESSAGES:
        prompt += _count(usage.get("cache_creation_input_tokens")) + _count(usage.get("cache_read_input_tokens"))
    return {"prompt_tokens": prompt, "completion_tokens": _count(usage.get("output_tokens"))}
