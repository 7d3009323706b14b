"""Chat chunks as Anthropic SSE events (messages.stream).

The events are read by the `anthropic` SDK's own stream reader and accumulator.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from anthropic.types import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.translate.messages.stream import StreamTranslator, error_event
from tests.support.anthropic_translation import (
    MODEL,
    USAGE_CHUNK,
    call_piece,
    chunk,
    json_values,
    raw_events,
    sdk_read,
    translate,
)


def test_a_text_stream_reads_as_the_anthropic_sdk_expects() -> None:
    body = translate([chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}), chunk({"content": "lo."}),
                      chunk(finish="stop"), USAGE_CHUNK])
    assert [e["type"] for e in raw_events(body)] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop"]
    events, message = sdk_read(body)
    assert [e.text for e in events if e.type == "text"] == ["Hel", "lo."]
    assert (message.id, message.model, message.stop_reason) == ("msg_s1", MODEL, "end_turn")
    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [("text", "Hello.")]
    assert (message.usage.input_tokens, message.usage.output_tokens) == (50, 21)


def test_tool_call_argument_pieces_stream_as_input_json_deltas_one_block_per_call() -> None:
    body = translate([
        chunk({"role": "assistant", "content": "Checking."}),
        call_piece(0, "", call_id="call_a", name="get_weather"),
        call_piece(0, '{"ci'),
        call_piece(0, 'ty": "Pa'),
        call_piece(0, 'ris"}'),
        call_piece(1, '{"city":', call_id="call_b", name="get_weather"),
        call_piece(1, ' "Oslo"}'),
        chunk(finish="tool_calls"),
        USAGE_CHUNK,
    ])
    events = raw_events(body)
    starts = [(e["index"], e["content_block"]) for e in events if e["type"] == "content_block_start"]
    assert starts == [(0, {"type": "text", "text": ""}),
                      (1, {"type": "tool_use", "id": "call_a", "name": "get_weather", "input": {}}),
                      (2, {"type": "tool_use", "id": "call_b", "name": "get_weather", "input": {}})]
    pieces = [(e["index"], e["delta"]["partial_json"]) for e in events if e["type"] == "content_block_delta"
              and e["delta"]["type"] == "input_json_delta"]
    assert pieces == [(1, '{"ci'), (1, 'ty": "Pa'), (1, 'ris"}'), (2, '{"city":'), (2, ' "Oslo"}')]
    assert [e["index"] for e in events if e["type"] == "content_block_stop"] == [0, 1, 2]
    _, message = sdk_read(body)
    assert message.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "id", None), getattr(b, "input", None)) for b in message.content] == [
        ("text", None, None), ("tool_use", "call_a", {"city": "Paris"}), ("tool_use", "call_b", {"city": "Oslo"})]
    Message.model_validate(message.to_dict())


def test_a_tool_call_starts_once_its_name_arrives_keeping_earlier_arguments() -> None:
    body = translate([call_piece(0, '{"q":', call_id="call_x"), call_piece(0, ' 1}', name="lookup"),
                      chunk(finish="tool_calls")])
    _, message = sdk_read(body)
    assert [(b.type, getattr(b, "name", None), getattr(b, "input", None)) for b in message.content] == [
        ("tool_use", "lookup", {"q": 1})]


def test_finish_usage_overrides_and_cached_tokens_are_cache_reads() -> None:
    usage = {"prompt_tokens": 80, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 64}}
    body = translate([chunk({"content": "x"}), chunk(finish="length"), USAGE_CHUNK], usage)
    _, message = sdk_read(body)
    assert message.stop_reason == "max_tokens"
    assert (message.usage.input_tokens, message.usage.output_tokens, message.usage.cache_read_input_tokens) == (16, 5, 64)


def test_an_empty_stream_is_still_a_whole_message() -> None:
    _, message = sdk_read(translate([]))
    assert message.content == []
    assert message.stop_reason == "end_turn"


def test_nothing_is_sent_after_finish() -> None:
    stream = StreamTranslator(MODEL, "msg_s1")
    stream.feed(chunk({"content": "a"}))
    assert stream.finish()
    assert stream.feed(chunk({"content": "b"})) == []
    assert stream.finish() == []


def test_an_error_event_after_the_commit_is_what_the_sdk_raises() -> None:
    stream = StreamTranslator(MODEL, "msg_s1")
    body = b"".join([*stream.feed(chunk({"content": "partial"})), error_event("upstream went away", "api_error")])
    assert body.endswith(b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"upstream went away"}}\n\n')
    with pytest.raises(anthropic.APIStatusError, match="upstream went away"):
        sdk_read(body)


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values | st.builds(chunk, st.dictionaries(
    st.sampled_from(["content", "tool_calls", "refusal", "function_call", "role"]),
    json_values | st.lists(st.fixed_dictionaries({}, optional={
        "index": st.integers(0, 2) | json_values, "id": json_values,
        "function": st.fixed_dictionaries({}, optional={"name": st.text(max_size=3) | json_values,
                                                        "arguments": st.text(max_size=3) | json_values})}), max_size=2),
    max_size=3)), max_size=6))
def test_hostile_chunks_still_make_events_the_sdk_accepts(chunks: list[Any]) -> None:
    stream = StreamTranslator(MODEL, "msg_h")
    body = b"".join([e for c in chunks for e in stream.feed(c)] + stream.finish())
    events = raw_events(body)
    assert events[0]["type"] == "message_start"
    assert events[-1]["type"] == "message_stop"
