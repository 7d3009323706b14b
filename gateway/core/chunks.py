"""OpenAI stream chunks: reading one out of an SSE event, and replaying a complete answer as chunks.

A stream's guarantees rest on every event being what it claims: JSON, or an error, or `[DONE]`.
Upstreams that answer a stream request with one JSON body are replayed as a well-formed stream, so
the client never sees an empty "success".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.core.nesting import MAX_JSON_DEPTH, too_deep
from gateway.core.sse import DONE, DONE_EVENT, Event, encode, parse_event


class MalformedEvent(Exception):
    """An upstream stream event that is neither JSON, nor an error, nor `[DONE]`."""


def read_chunk(event: Event) -> tuple[Any, dict[str, Any] | None]:
    """(the event's JSON payload, its in-band error or None); MalformedEvent when it is not JSON.

    `[DONE]` and events without data are (None, None).
    """
    data = event.data
    if data is None or data == DONE:
        return None, None
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        if event.name == b"error":
            return None, {"message": data[:300].decode(errors="replace")}
        raise MalformedEvent(f"upstream sent a stream event that is not JSON: {data[:80]!r}") from None
    if too_deep(data, payload):  # translated or stored, it would be written again by orjson
        raise MalformedEvent(f"upstream sent a stream event nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(payload, dict) and "error" not in payload and event.name is None:  # the common chunk
        return payload, None
    if event.name == b"error":
        return payload, payload.get("error", payload) if isinstance(payload, dict) else {"message": str(payload)}
    if isinstance(payload, dict) and (error := payload.get("error")):
        return payload, error if isinstance(error, dict) else {"message": str(error)}
    return payload, None


def replay(answer: Any, *, endpoint: str, include_usage: bool) -> list[Event] | None:
    """The events of a stream equivalent to a complete chat or text completion; None if it is neither."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        return None
    chat = endpoint == "chat/completions"
    base = {
        "id": answer.get("id") or "replayed",
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": answer.get("created") or 0,
        "model": answer.get("model") or "",
    }
    events: list[bytes] = []
    for choice in choices:
        index = choice.get("index", 0)
        if chat:
            message = choice.get("message")
            if not isinstance(message, Mapping):
                return None
            delta = {key: value for key, value in message.items() if value is not None}
            delta["tool_calls"] = [
                {**call, "index": i} for i, call in enumerate(delta.get("tool_calls") or []) if isinstance(call, dict)
            ] or None
            part = {"index": index, "delta": {k: v for k, v in delta.items() if v is not None}, "logprobs": None}
        else:
            if not isinstance(choice.get("text"), str):
                return None
            part = {"index": index, "text": choice["text"], "logprobs": choice.get("logprobs")}
        events.append(encode({**base, "choices": [{**part, "finish_reason": None}]}))
        finish = {"index": index, "finish_reason": choice.get("finish_reason") or "stop"}
        events.append(encode({**base, "choices": [{**finish, "delta": {}} if chat else {**finish, "text": ""}]}))
    if include_usage and isinstance(answer.get("usage"), dict):
        events.append(encode({**base, "choices": [], "usage": answer["usage"]}))
    events.append(DONE_EVENT)
    return [parse_event(raw[:-2]) for raw in events]

