"""A chat completion as an Anthropic message (messages.answer), checked with `anthropic.types.Message`."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.nesting import MAX_JSON_DEPTH
from gateway.core.translate import MalformedAnswer
from gateway.core.translate.messages.answer import from_chat, tool_input
from tests.support.anthropic_translation import (
    MODEL,
    completion,
    json_values,
)
from tests.support.nesting import nested


def test_a_text_answer_becomes_a_message_the_sdk_accepts() -> None:
    usage = {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129,
             "prompt_tokens_details": {"cached_tokens": 100}}
    message = from_chat(completion({"content": "Bonjour."}, usage=usage), model=MODEL)
    parsed = Message.model_validate(message)
    assert parsed.id == "msg_chatcmpl-abc"
    assert (parsed.type, parsed.role, parsed.model) == ("message", "assistant", MODEL)
    assert [(b.type, getattr(b, "text", None)) for b in parsed.content] == [("text", "Bonjour.")]
    assert (parsed.stop_reason, parsed.stop_sequence) == ("end_turn", None)
    # Anthropic counts cache reads apart from input tokens; OpenAI's prompt_tokens includes them.
    assert message["usage"] == {"input_tokens": 20, "output_tokens": 9, "cache_read_input_tokens": 100}


def test_tool_calls_become_tool_use_blocks_with_parsed_input() -> None:
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": ""}},
        {"id": "call_3", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Par'}},
        {"id": "call_4", "type": "function", "function": {"name": "echo", "arguments": "[1, 2]"}},
    ]
    message = from_chat(completion({"content": "Looking.", "tool_calls": calls}, "tool_calls"), model=MODEL)
    parsed = Message.model_validate(message)
    assert parsed.stop_reason == "tool_use"
    assert message["content"] == [
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "call_2", "name": "now", "input": {}},
        # Not a JSON object (truncated, or another type): kept, under a key no schema expects.
        {"type": "tool_use", "id": "call_3", "name": "get_weather", "input": {"_raw": '{"city": "Par'}},
        {"type": "tool_use", "id": "call_4", "name": "echo", "input": {"_raw": "[1, 2]"}},
    ]


@pytest.mark.parametrize(("finish", "extra", "expected"), [
    ("stop", {}, ("end_turn", None)),
    ("length", {}, ("max_tokens", None)),
    ("tool_calls", {}, ("tool_use", None)),
    ("function_call", {}, ("tool_use", None)),
    ("content_filter", {}, ("refusal", None)),
    ("stop", {"stop_reason": "END"}, ("stop_sequence", "END")),  # vLLM names the matched stop
    ("stop", {"stop_reason": 50256}, ("end_turn", None)),  # ...or a stop token id
    (None, {}, ("end_turn", None)),
])
def test_finish_reasons_map_to_stop_reasons(finish: Any, extra: dict[str, Any], expected: tuple[str, Any]) -> None:
    answer = completion({"content": "ok"}, finish)
    answer["choices"][0].update(extra)
    parsed = Message.model_validate(from_chat(answer, model=MODEL))
    assert (parsed.stop_reason, parsed.stop_sequence) == expected


def test_tool_calls_that_end_with_stop_still_say_tool_use() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assert from_chat(completion({"content": None, "tool_calls": [call]}, "stop"), model=MODEL)["stop_reason"] == "tool_use"


def test_a_refusal_is_text_with_stop_reason_refusal() -> None:
    message = from_chat(completion({"content": None, "refusal": "I can't help with that."}), model=MODEL)
    assert Message.model_validate(message).stop_reason == "refusal"
    assert message["content"] == [{"type": "text", "text": "I can't help with that."}]


@pytest.mark.parametrize(("answer", "culprit"), [
    ([], "the body must be a JSON object"),
    ({"id": "x"}, "choices: required"),
    ({"choices": []}, "choices: the answer has no choices"),
    ({"choices": [{"message": "hi"}]}, "choices[0].message: must be an object, got 'hi'"),
    ({"choices": [{"message": {"tool_calls": [{"id": "c"}]}}]}, "choices[0].message.tool_calls[0].function: required"),
])
def test_malformed_answers_are_the_upstreams_fault_and_say_where(answer: Any, culprit: str) -> None:
    with pytest.raises(MalformedAnswer) as caught:
        from_chat(answer, model=MODEL)
    assert str(caught.value).startswith(f"the upstream's answer: {culprit}")


@settings(max_examples=200, deadline=None)
@given(json_values | st.fixed_dictionaries({"choices": st.lists(st.fixed_dictionaries(
    {"message": json_values | st.fixed_dictionaries({}, optional={
        "content": json_values, "tool_calls": json_values, "refusal": json_values, "function_call": json_values})},
    optional={"finish_reason": json_values, "stop_reason": json_values}), max_size=2)}, optional={
    "id": json_values, "usage": json_values}))
def test_hostile_answers_give_a_valid_message_or_a_translation_error(answer: Any) -> None:
    try:
        message = from_chat(answer, model=MODEL)
    except MalformedAnswer:
        return
    Message.model_validate(message)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 211, 252])
def test_deep_tool_arguments_stay_text_in_a_tool_use_input(depth: int) -> None:
    """A client's JSON inside a string, nested past MAX_JSON_DEPTH, is never parsed to be written again by orjson."""
    arguments = nested(depth)
    assert tool_input(arguments) == {"_raw": arguments}


def test_shallow_tool_arguments_are_parsed_into_a_tool_use_input() -> None:
    assert tool_input('{"b": [1, {"c": 2}], "a": true}') == {"b": [1, {"c": 2}], "a": True}
