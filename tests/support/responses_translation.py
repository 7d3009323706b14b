"""What the tests of the Responses translation share: requests, chat answers and chunks, strategies.

Every event is checked with the `openai` SDK's `ResponseStreamEvent` type as it is decoded.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from gateway.core.translate.responses.stream import StreamTranslator

EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)

RESPONSE_ID = "resp_abc123"

CREATED = 1_700_000_000

USAGE = {
    "prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
    "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 2},
}

WEATHER = {"type": "function", "name": "weather", "description": "Weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
           "strict": True}


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "input": "hi", **fields}


def completion(content: str | None = "Hello there", *, tool_calls: list[dict[str, Any]] | None = None,
               finish: str = "stop", usage: dict[str, Any] | None = None, **message: Any) -> dict[str, Any]:
    reply: dict[str, Any] = {"role": "assistant", "content": content, **message}
    if tool_calls is not None:
        reply["tool_calls"] = tool_calls
    answer = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up-model",
              "choices": [{"index": 0, "message": reply, "finish_reason": finish}]}
    return {**answer, "usage": usage} if usage is not None else answer


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def usage_chunk(usage: dict[str, Any] = USAGE) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
            "choices": [], "usage": usage}


def call_delta(index: int, *, call_id: str | None = None, name: str | None = None,
               arguments: str | None = None) -> dict[str, Any]:
    function = {k: v for k, v in (("name", name), ("arguments", arguments)) if v is not None}
    delta: dict[str, Any] = {"index": index, "function": function}
    if call_id is not None:
        delta.update(id=call_id, type="function")
    return {"tool_calls": [delta]}


def decode(events: list[bytes]) -> list[dict[str, Any]]:
    """Each SSE event's JSON, checked: `event:` names its type and the SDK's event union accepts it."""
    decoded = []
    for raw in events:
        assert raw.endswith(b"\n\n") and raw.count(b"\n\n") == 1
        name, data = raw[:-2].split(b"\n")
        assert name.startswith(b"event: ") and data.startswith(b"data: ")
        payload = orjson.loads(data[6:])
        assert payload["type"] == name[7:].decode()
        EVENT.validate_python(payload)
        decoded.append(payload)
    return decoded


def run_stream(request: dict[str, Any], chunks: list[dict[str, Any]],
               usage: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    translator = StreamTranslator(request, RESPONSE_ID, CREATED)
    events = [event for piece in chunks for event in translator.feed(piece)]
    decoded = decode(events + translator.finish(usage))
    assert [event["sequence_number"] for event in decoded] == list(range(len(decoded)))
    return decoded


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]

TEXT_CHUNKS = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Hello"}), chunk({"content": " there"}),
               chunk({}, "stop"), usage_chunk()]

FUZZ = settings(max_examples=300, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)

WORDS = st.sampled_from([
    "message", "function_call", "function_call_output", "reasoning", "item_reference", "input_text",
    "output_text", "input_image", "input_file", "refusal", "user", "assistant", "system", "developer", "tool",
    "function", "web_search", "allowed_tools", "json_schema", "json_object", "text", "auto", "none", "required",
    "low", "high", "stop", "length", "tool_calls", "content_filter",
])

SCALARS = (st.none() | st.booleans() | st.integers(-2, 2**63) | st.floats(allow_nan=False, allow_infinity=False)
           | TEXT | WORDS)

JSONISH = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT | WORDS, inner, max_size=3),
    max_leaves=12)


def now_and_then(usual: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`usual` seven times in eight, `odd` the eighth (one_of would pick the odd branch half the time)."""
    return st.integers(0, 7).flatmap(lambda n: odd if n == 7 else usual)


def mostly(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The plausible value, or now and then any JSON at all."""
    return now_and_then(strategy, JSONISH)


def one(*words: str) -> st.SearchStrategy[str]:
    """One of these words, now and then another word of the vocabulary."""
    return now_and_then(st.sampled_from(words), WORDS)


def objects(required: dict[str, st.SearchStrategy[Any]] | None = None,
            **optional: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with the required fields and any subset of the optional ones, each mostly plausible."""
    return st.fixed_dictionaries({key: mostly(value) for key, value in (required or {}).items()},
                                 optional={key: mostly(value) for key, value in optional.items()})


def plausible(required: dict[str, st.SearchStrategy[Any]] | None = None,
              **optional: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects like `objects` makes, without the stray values."""
    return st.fixed_dictionaries(required or {}, optional=optional)

WORDY = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=6)

USAGES = objects(prompt_tokens=st.integers(0, 2**40), completion_tokens=st.integers(0, 9),
                 total_tokens=st.integers(0, 9),
                 prompt_tokens_details=objects(cached_tokens=st.integers(0, 9)),
                 completion_tokens_details=objects(reasoning_tokens=st.integers(0, 9)))

FINISHES = now_and_then(st.sampled_from(["stop", "length", "tool_calls", "content_filter"]), st.none() | WORDS)

CONTENT = now_and_then(WORDY, st.none())
