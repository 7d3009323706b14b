"""Chat chunks as Responses SSE events (responses.stream).

The event sequence, its numbering, malformed chunks, and memory held by tiny deltas.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import Response

from gateway.core.translate import MalformedAnswer
from gateway.core.translate.responses.answer import from_chat
from gateway.core.translate.responses.stream import StreamTranslator
from tests.support.responses_translation import (
    CONTENT,
    CREATED,
    FINISHES,
    FUZZ,
    JSONISH,
    RESPONSE_ID,
    TEXT,
    TEXT_CHUNKS,
    USAGE,
    USAGES,
    WEATHER,
    WORDY,
    body,
    call_delta,
    chunk,
    completion,
    decode,
    now_and_then,
    objects,
    plausible,
    run_stream,
    tool_call,
    types,
    usage_chunk,
)


def test_a_text_stream_is_the_responses_event_sequence() -> None:
    events = run_stream(body(), TEXT_CHUNKS)
    assert types(events) == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed",
    ]
    assert events[0]["response"]["status"] == "in_progress" and events[0]["response"]["output"] == []
    assert events[2]["item"] == {"id": "msg_abc123_0", "type": "message", "role": "assistant",
                                 "status": "in_progress", "content": []}
    assert [e["delta"] for e in events if e["type"] == "response.output_text.delta"] == ["Hello", " there"]
    assert events[6]["text"] == "Hello there"
    final = from_chat(completion(usage=USAGE), request=body(), response_id=RESPONSE_ID, created_at=CREATED)
    assert events[-1]["response"] == final
    assert events[8]["item"] == final["output"][0]


def test_tool_calls_stream_as_function_call_items() -> None:
    chunks = [
        chunk({"role": "assistant", "content": "Checking."}),
        chunk(call_delta(0, call_id="call_1", name="weather", arguments="")),
        chunk(call_delta(0, arguments='{"city":')),
        chunk(call_delta(1, call_id="call_2", name="weather", arguments='{"city":"Rome"}')),
        chunk(call_delta(0, arguments='"Paris"}')),  # interleaved: the first call is still open
        chunk({}, "tool_calls"),
        usage_chunk(),
    ]
    events = run_stream(body(tools=[WEATHER]), chunks)
    assert types(events)[2:] == [
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed",
    ]
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [(e["output_index"], e["item"]["type"], e["item"].get("call_id")) for e in added] == [
        (0, "message", None), (1, "function_call", "call_1"), (2, "function_call", "call_2")]
    deltas = [(e["output_index"], e["item_id"], e["delta"]) for e in events
              if e["type"] == "response.function_call_arguments.delta"]
    assert deltas == [(1, "fc_abc123_1", '{"city":'), (2, "fc_abc123_2", '{"city":"Rome"}'),
                      (1, "fc_abc123_1", '"Paris"}')]
    done = [(e["name"], e["arguments"]) for e in events if e["type"] == "response.function_call_arguments.done"]
    assert done == [("weather", '{"city":"Paris"}'), ("weather", '{"city":"Rome"}')]
    answer = completion("Checking.", finish="tool_calls", usage=USAGE, tool_calls=[
        tool_call("call_1", "weather", '{"city":"Paris"}'), tool_call("call_2", "weather", '{"city":"Rome"}')])
    assert events[-1]["response"] == from_chat(answer, request=body(tools=[WEATHER]), response_id=RESPONSE_ID,
                                               created_at=CREATED)


def test_a_tool_call_is_announced_once_named() -> None:
    # Arguments that come before the function's name wait for it; an upstream without ids gets made-up ones.
    chunks = [chunk(call_delta(0, arguments='{"a":')), chunk(call_delta(0, name="f", arguments="1}")),
              chunk({}, "tool_calls")]
    events = run_stream(body(), chunks)
    assert types(events)[2:4] == ["response.output_item.added", "response.function_call_arguments.delta"]
    assert events[2]["item"]["call_id"] == f"call_{RESPONSE_ID}_0"
    assert events[3]["delta"] == '{"a":1}'
    assert events[-1]["response"]["output"][0]["arguments"] == '{"a":1}'


def test_a_stream_cut_at_the_token_limit_is_incomplete() -> None:
    events = run_stream(body(max_output_tokens=2), [chunk({"content": "Once upon"}), chunk({}, "length")])
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert events[-2]["item"]["status"] == "incomplete"


def test_usage_comes_from_the_usage_chunk_or_from_finish() -> None:
    assert run_stream(body(), TEXT_CHUNKS)[-1]["response"]["usage"]["input_tokens"] == 11
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    assert run_stream(body(), TEXT_CHUNKS, usage)[-1]["response"]["usage"]["total_tokens"] == 3
    assert run_stream(body(), TEXT_CHUNKS[:-1])[-1]["response"]["usage"] is None


def test_a_streamed_refusal_is_a_refusal_part() -> None:
    events = run_stream(body(), [chunk({"refusal": "I can't"}), chunk({"refusal": " help."}), chunk({}, "stop")])
    assert "response.refusal.delta" in types(events)
    assert [e["refusal"] for e in events if e["type"] == "response.refusal.done"] == ["I can't help."]
    assert events[-1]["response"]["output"][0]["content"] == [{"type": "refusal", "refusal": "I can't help."}]


def test_other_choices_are_ignored() -> None:
    other = chunk({"content": "second choice"})
    other["choices"][0]["index"] = 1
    events = run_stream(body(), [chunk({"content": "first"}), other, chunk({}, "stop")])
    assert Response.model_validate(events[-1]["response"]).output_text == "first"


def test_the_error_event_takes_the_next_number() -> None:
    translator = StreamTranslator(body(), RESPONSE_ID, CREATED)
    events = translator.feed(chunk({"content": "Hel"}))
    [error] = decode([translator.error_event("upstream went away", "upstream_error")])
    assert error == {"type": "error", "sequence_number": len(events), "code": "upstream_error",
                     "message": "upstream went away", "param": None}


@pytest.mark.parametrize("bad", [
    "not a chunk",
    {"choices": "x"},
    {"choices": [3]},
    {"choices": [{"index": 0, "delta": "hi"}]},
    {"choices": [{"index": 0, "delta": {"content": 7}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": {"index": 0}}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "0", "function": {"name": "f"}}]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": 1}}]}}]},
    {"choices": [{"index": 0, "delta": {"content": "\ud800"}}]},  # not UTF-8: cannot be sent
])
def test_a_malformed_chunk_is_reported_and_numbers_nothing(bad: Any) -> None:
    translator = StreamTranslator(body(), RESPONSE_ID, CREATED)
    with pytest.raises(MalformedAnswer):
        translator.feed(bad)
    [error] = decode([translator.error_event("malformed upstream stream", "upstream_error")])
    assert error["sequence_number"] == 0


def test_a_tool_call_never_named_is_malformed() -> None:
    translator = StreamTranslator(body(), RESPONSE_ID, CREATED)
    translator.feed(chunk(call_delta(0, call_id="c", arguments="{}")))
    with pytest.raises(MalformedAnswer):
        translator.finish()


def chunk_lists(build: Callable[..., st.SearchStrategy[dict[str, Any]]]) -> st.SearchStrategy[list[Any]]:
    """Streams of chat chunks whose objects `build` makes: text, refusals, tool calls, usage, finishes."""
    calls = st.lists(build({"index": st.integers(0, 1)}, id=TEXT, type=st.just("function"),
                           function=build(name=now_and_then(WORDY, st.none()), arguments=TEXT)), max_size=2)
    choices = st.lists(build({"delta": build(content=CONTENT, refusal=st.none() | TEXT, tool_calls=calls)},
                             index=st.integers(0, 1), finish_reason=FINISHES), max_size=2)
    return st.lists(now_and_then(build({"choices": choices}, model=TEXT, usage=USAGES), JSONISH), max_size=6)

CHUNKS = chunk_lists(objects) | chunk_lists(plausible)


@FUZZ
@given(CHUNKS)
def test_hostile_chunks_become_valid_events_or_are_malformed(chunks: list[Any]) -> None:
    translator = StreamTranslator(body(tools=[WEATHER]), RESPONSE_ID, CREATED)
    events: list[bytes] = []
    try:
        for piece in chunks:
            events += translator.feed(piece)
        events += translator.finish()
    except MalformedAnswer:
        events.append(translator.error_event("malformed", "upstream_error"))
    decoded = decode(events)
    assert [event["sequence_number"] for event in decoded] == list(range(len(decoded)))


def test_a_streamed_answer_of_tiny_deltas_is_held_in_memory_proportional_to_its_size() -> None:
    """The translator keeps the whole answer for response.completed: ~50 bytes a delta kept apart would be ~30x."""
    import tracemalloc

    deltas = 200_000  # of two characters each, text and a call's arguments: 800 kB in all
    text = orjson.dumps({"choices": [{"index": 0, "delta": {"content": "ab"}}]})
    opening = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    opened = orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [opening]}}]})
    argument = orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "cd"}}]}}]})
    tracemalloc.start()
    try:
        translator = StreamTranslator(body(), RESPONSE_ID, CREATED)
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(deltas):
            translator.feed(orjson.loads(text))
        translator.feed(orjson.loads(opened))
        for _ in range(deltas):
            translator.feed(orjson.loads(argument))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= 3 * 4 * deltas, held
