"""What the tests of the Anthropic Messages translation share: bodies, SDK types, stream readers.

Requests are checked with the `openai` SDK's request types, answers with `anthropic.types.Message`,
streams by handing the SSE bytes to the `anthropic` SDK's own stream reader and accumulator
(`client.messages.stream()` over an in-memory transport).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import orjson
from anthropic.types import Message, MessageParam, RawMessageStreamEvent
from hypothesis import strategies as st
from openai.types.chat import completion_create_params
from pydantic import TypeAdapter

from gateway.core.translate.messages.request import to_chat
from gateway.core.translate.messages.stream import StreamTranslator

MODEL = "claude-sonnet-4-5"

CHAT_REQUEST = TypeAdapter(completion_create_params.CompletionCreateParamsNonStreaming)

CHAT_STREAM_REQUEST = TypeAdapter(completion_create_params.CompletionCreateParamsStreaming)

ANTHROPIC_MESSAGES = TypeAdapter(list[MessageParam])

STREAM_EVENT: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)


def drain(value: Any) -> Any:
    """`value` with pydantic's lazily validated iterables consumed (validating them), as lists."""
    if isinstance(value, dict):
        return {k: drain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | Iterator):
        return [drain(v) for v in value]
    return value


def valid_chat(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload, after the `openai` SDK's request types accepted it."""
    adapter = CHAT_STREAM_REQUEST if payload.get("stream") else CHAT_REQUEST
    drain(adapter.validate_python(payload))
    return payload


def valid_anthropic(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    drain(ANTHROPIC_MESSAGES.validate_python(messages))
    return messages


def request(*messages: dict[str, Any], **options: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 256, "messages": list(messages), **options}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return valid_chat(to_chat(body))["messages"]  # type: ignore[no-any-return]

TOOLS = [{"name": "get_weather", "description": "Weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]

FUNCTIONS = [{"type": "function", "function": {
    "name": "get_weather", "parameters": TOOLS[0]["input_schema"], "description": "Weather in a city"}}]

KEYS = ["type", "role", "content", "text", "source", "media_type", "data", "url", "id", "name", "input",
        "tool_use_id", "is_error", "title", "input_schema", "description", "user_id", "format", "schema", "x"]

WORDS = ["user", "assistant", "system", "text", "image", "document", "tool_use", "tool_result", "thinking",
         "redacted_thinking", "base64", "url", "content", "file", "auto", "any", "tool", "none", "custom",
         "json_schema", "image/png"]

scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4)
           | st.sampled_from(WORDS))

json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=3), inner, max_size=4),
    max_leaves=20,
)


def completion(message: dict[str, Any], finish_reason: Any = "stop", **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}
    return {"id": "chatcmpl-abc", "object": "chat.completion", "created": 1, "model": "gpt-4o",
            "choices": [choice], **extra}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": [choice]}


def call_piece(index: int, arguments: str, *, call_id: str | None = None, name: str | None = None) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    piece: dict[str, Any] = {"index": index, "function": function}
    if call_id is not None:
        piece.update(id=call_id, type="function")
    return chunk({"tool_calls": [piece]})

USAGE_CHUNK = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": [],
               "usage": {"prompt_tokens": 50, "completion_tokens": 21, "total_tokens": 71}}


def translate(chunks: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
    stream = StreamTranslator(MODEL, "msg_s1")
    events = [event for c in chunks for event in stream.feed(c)] + stream.finish(usage)
    return b"".join(events)


def sdk_read(body: bytes) -> tuple[list[Any], Message]:
    """The events and final message `client.messages.stream()` makes of `body`."""
    client = anthropic.Anthropic(api_key="k", max_retries=0, http_client=httpx.Client(transport=httpx.MockTransport(
        lambda _: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"}))))
    with client.messages.stream(model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]) as stream:
        events = list(stream)
        return events, stream.get_final_message()


def raw_events(body: bytes) -> list[dict[str, Any]]:
    """Each event's data, after checking its `event:` name matches its type and the SDK's event types accept it."""
    out = []
    for block in body.decode().split("\n\n")[:-1]:
        name_line, data_line = block.split("\n")
        data = orjson.loads(data_line.removeprefix("data: "))
        assert name_line == f"event: {data['type']}"
        STREAM_EVENT.validate_python(data)
        out.append(data)
    return out
