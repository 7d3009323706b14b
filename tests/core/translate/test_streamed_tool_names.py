"""A tool call's function name streamed in pieces comes back whole, on Responses and Messages streams.

OpenAI sends a name whole in a call's first delta; some OpenAI-compatible servers split it
over several deltas, as they do the arguments. The translated streams announce a call (a
Responses `output_item.added`, a Messages `content_block_start`) with the name the client keeps,
so they wait until the name is whole. Checked on the translators, and through the gateway with
the official SDKs against a scripted chat upstream.
"""

from __future__ import annotations

from typing import Any

import anthropic
import orjson
import pytest

from gateway.core.translate import messages as anthropic_api
from gateway.core.translate import responses as responses_api
from tests.support.fakes import FakeUpstream, Step, chunk
from tests.support.gateway import GATEWAY_KEY, Gateway

NAMESPACE = {"type": "namespace", "name": "ns", "description": "A namespace",
             "tools": [{"type": "function", "name": "tool", "description": "A tool",
                        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}]}
WEATHER = {"name": "get_weather", "description": "The weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def split_call(name_pieces: list[str], arguments: str) -> list[dict[str, Any]]:
    """The deltas of one call whose name comes in `name_pieces` (the first with the id), then its arguments in two."""
    first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": name_pieces[0], "arguments": ""}}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": [first]}]
    deltas += [{"tool_calls": [{"index": 0, "function": {"name": piece}}]} for piece in name_pieces[1:]]
    deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": part}}]} for part in (arguments[:3], arguments[3:])]
    return deltas


def chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def decoded(events: list[bytes]) -> list[dict[str, Any]]:
    return [orjson.loads(event.split(b"\ndata: ", 1)[1]) for event in events]


# The translators


def test_a_responses_stream_announces_a_call_once_its_split_name_is_whole() -> None:
    request = {"model": "m", "input": "hi", "tools": [NAMESPACE]}
    stream = responses_api.StreamTranslator(request, "resp_1", 1)
    events = [event for delta in split_call(["ns_", "_tool"], '{"a":1}') for event in stream.feed(chat_chunk(delta))]
    events += stream.feed(chat_chunk({}, "tool_calls")) + stream.finish()
    payloads = decoded(events)
    items = [payload["item"] for payload in payloads if payload["type"].startswith("response.output_item.")]
    assert [(item["namespace"], item["name"], item["call_id"]) for item in items] == [("ns", "tool", "call_1")] * 2
    (final,) = payloads[-1]["response"]["output"]
    assert (final["namespace"], final["name"], final["arguments"]) == ("ns", "tool", '{"a":1}')


@pytest.mark.parametrize("then", [
    chat_chunk({}, "tool_calls"),  # the choice finishes
    chat_chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                                "function": {"name": "other", "arguments": "{}"}}]}),  # another call begins
    chat_chunk({"content": "Done."}),  # text comes
])
def test_a_responses_call_without_arguments_is_announced_when_something_else_comes(then: dict[str, Any]) -> None:
    stream = responses_api.StreamTranslator({"model": "m", "input": "hi"}, "resp_1", 1)
    events = stream.feed(chat_chunk(split_call(["look"], "")[0]))
    events += stream.feed(chat_chunk({"tool_calls": [{"index": 0, "function": {"name": "up"}}]}))
    assert "response.output_item.added" not in [payload["type"] for payload in decoded(events)]
    events += stream.feed(then) + stream.finish()
    added = [payload["item"] for payload in decoded(events) if payload["type"] == "response.output_item.added"]
    assert added[0]["name"] == "lookup"


def test_a_messages_stream_starts_a_call_once_its_split_name_is_whole() -> None:
    stream = anthropic_api.StreamTranslator("m", "msg_1")
    events = [event for delta in split_call(["get_", "wea", "ther"], '{"city":"Paris"}')
              for event in stream.feed(chat_chunk(delta))]
    events += stream.feed(chat_chunk({}, "tool_calls")) + stream.finish()
    starts = [payload["content_block"] for payload in decoded(events) if payload["type"] == "content_block_start"]
    assert starts == [{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}}]


@pytest.mark.parametrize("then", [
    chat_chunk({}, "tool_calls"),
    chat_chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                                "function": {"name": "other", "arguments": "{}"}}]}),
    chat_chunk({"content": "Done."}),
])
def test_a_messages_call_without_arguments_starts_when_something_else_comes(then: dict[str, Any]) -> None:
    stream = anthropic_api.StreamTranslator("m", "msg_1")
    events = stream.feed(chat_chunk(split_call(["look"], "")[0]))
    events += stream.feed(chat_chunk({"tool_calls": [{"index": 0, "function": {"name": "up"}}]}))
    assert "content_block_start" not in [payload["type"] for payload in decoded(events)]
    events += stream.feed(then) + stream.finish()
    starts = [payload["content_block"] for payload in decoded(events) if payload["type"] == "content_block_start"]
    assert starts[0]["name"] == "lookup"


# Through the gateway


def config(upstream: FakeUpstream) -> str:
    return f"""
auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: upstream-key, responsesApi: translate}}
"""


def script_split_call(upstream: FakeUpstream, name_pieces: list[str], arguments: str) -> None:
    events: list[Any] = [chunk(delta) for delta in split_call(name_pieces, arguments)]
    upstream.then(Step(events=[*events, chunk({}, "tool_calls"), b"data: [DONE]\n\n"]))


async def test_the_responses_route_streams_the_whole_name_of_a_split_call(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(config(upstream))
    script_split_call(upstream, ["ns_", "_tool"], '{"a":1}')
    stream = await client.responses.create(model="chat", input="Use the tool.", tools=[NAMESPACE], stream=True)  # type: ignore[list-item]
    events = [event async for event in stream]
    (added,) = [event.item for event in events if event.type == "response.output_item.added"]
    assert (added.type, added.name) == ("function_call", "tool")
    final = events[-1]
    assert final.type == "response.completed"
    (call,) = final.response.output
    assert (call.type, call.name, call.arguments) == ("function_call", "tool", '{"a":1}')
    assert orjson.loads(call.model_dump_json())["namespace"] == "ns"
    assert upstream.requests[0].body["tools"][0]["function"]["name"] == "ns__tool"


async def test_the_messages_route_streams_the_whole_name_of_a_split_call(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(config(upstream))
    script_split_call(upstream, ["get_", "weather"], '{"city":"Paris"}')
    root = str(client.base_url).removesuffix("/").removesuffix("/v1")
    claude = anthropic.AsyncAnthropic(base_url=root, api_key=GATEWAY_KEY, max_retries=0, timeout=20)
    async with claude, claude.messages.stream(model="chat", max_tokens=100, tools=[WEATHER],  # type: ignore[list-item]
                                              messages=[{"role": "user", "content": "Weather in Paris?"}]) as stream:
        starts = [event.content_block for event in [event async for event in stream]
                  if event.type == "content_block_start"]
        message = await stream.get_final_message()
    assert [(block.type, getattr(block, "name", None)) for block in starts] == [("tool_use", "get_weather")]
    assert [(block.type, getattr(block, "name", None), getattr(block, "input", None)) for block in message.content] == [
        ("tool_use", "get_weather", {"city": "Paris"})]
    assert message.stop_reason == "tool_use"
