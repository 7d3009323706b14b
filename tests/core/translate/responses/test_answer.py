"""A chat completion as a Responses `response` object (responses.answer).

Each response is checked with the `openai` SDK's `Response` type.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import Response

from gateway.core.translate import MalformedAnswer
from gateway.core.translate.responses.answer import from_chat
from tests.support.responses_translation import (
    CONTENT,
    CREATED,
    FINISHES,
    FUZZ,
    JSONISH,
    RESPONSE_ID,
    TEXT,
    USAGE,
    USAGES,
    WEATHER,
    WORDY,
    body,
    completion,
    now_and_then,
    objects,
    tool_call,
)


def test_a_text_answer_is_a_completed_response() -> None:
    request = body(instructions="Be brief.", temperature=0.5, top_p=0.9, metadata={"team": "a"},
                   max_output_tokens=64, user="u-1")
    response = from_chat(completion(usage=USAGE), request=request, response_id=RESPONSE_ID, created_at=CREATED)
    parsed = Response.model_validate(response)
    assert parsed.output_text == "Hello there"
    assert (parsed.id, parsed.object, parsed.created_at, parsed.status, parsed.model) == (
        RESPONSE_ID, "response", CREATED, "completed", "up-model")
    assert response["output"] == [{"id": "msg_abc123_0", "type": "message", "role": "assistant",
                                   "status": "completed",
                                   "content": [{"type": "output_text", "text": "Hello there", "annotations": [],
                                                "logprobs": []}]}]
    assert response["usage"] == {
        "input_tokens": 11, "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
        "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 18}
    assert (parsed.instructions, parsed.temperature, parsed.top_p, parsed.metadata, parsed.max_output_tokens,
            parsed.user, parsed.tools, parsed.tool_choice, parsed.parallel_tool_calls, parsed.incomplete_details) == (
        "Be brief.", 0.5, 0.9, {"team": "a"}, 64, "u-1", [], "auto", True, None)


def test_tool_calls_are_function_call_items() -> None:
    answer = completion(None, finish="tool_calls", tool_calls=[
        tool_call("call_1", "weather", '{"city":"Paris"}'), tool_call("call_2", "weather", '{"city":"Rome"}')])
    request = body(tools=[WEATHER], tool_choice={"type": "function", "name": "weather"}, parallel_tool_calls=True)
    response = from_chat(answer, request=request, response_id=RESPONSE_ID, created_at=CREATED)
    parsed = Response.model_validate(response)
    assert [(item.type, item.id, item.call_id, item.name, item.arguments, item.status)
            for item in parsed.output] == [
        ("function_call", "fc_abc123_0", "call_1", "weather", '{"city":"Paris"}', "completed"),
        ("function_call", "fc_abc123_1", "call_2", "weather", '{"city":"Rome"}', "completed"),
    ]
    assert parsed.status == "completed" and parsed.output_text == "" and parsed.usage is None
    assert response["tools"] == [WEATHER]  # echoed as the client sent it
    assert response["tool_choice"] == {"type": "function", "name": "weather"}


def test_text_and_a_tool_call_in_one_answer() -> None:
    answer = completion("Let me check.", finish="tool_calls", tool_calls=[tool_call("c", "weather", "{}")])
    response = from_chat(answer, request=body(tools=[WEATHER]), response_id="r9", created_at=CREATED)
    assert [(item["type"], item["id"]) for item in response["output"]] == [("message", "msg_r9_0"),
                                                                          ("function_call", "fc_r9_1")]


def test_a_refusal_is_a_refusal_part() -> None:
    response = from_chat(completion(None, refusal="I can't help with that."), request=body(),
                         response_id=RESPONSE_ID, created_at=CREATED)
    Response.model_validate(response)
    assert response["output"][0]["content"] == [{"type": "refusal", "refusal": "I can't help with that."}]


@pytest.mark.parametrize("answer", [
    None,
    [],
    {"choices": []},
    {"choices": ["x"]},
    {"choices": [{"message": "hi"}]},
    {"choices": [{"message": {"content": 5}}]},
    {"choices": [{"message": {"content": "x", "tool_calls": {"id": "c"}}}]},
    {"choices": [{"message": {"tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}}]},
    {"choices": [{"message": {"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}]}}]},
    {"choices": [{"message": {"tool_calls": ["call"]}}]},
])
def test_a_malformed_answer_is_reported_as_such(answer: Any) -> None:
    with pytest.raises(MalformedAnswer):
        from_chat(answer, request=body(), response_id=RESPONSE_ID, created_at=CREATED)

ANSWER_CALLS = st.lists(objects({"function": objects({"name": WORDY, "arguments": TEXT})}, id=TEXT,
                                type=st.just("function")), max_size=2)

ANSWERS = now_and_then(objects(
    {"choices": st.lists(objects({"message": objects(content=CONTENT, refusal=st.none() | TEXT,
                                                     tool_calls=ANSWER_CALLS)}, index=st.integers(0, 1),
                                 finish_reason=FINISHES), min_size=1, max_size=2)},
    model=TEXT, usage=USAGES), JSONISH)


@FUZZ
@given(ANSWERS)
def test_hostile_answers_become_responses_or_are_malformed(answer: Any) -> None:
    try:
        response = from_chat(answer, request=body(), response_id=RESPONSE_ID, created_at=CREATED)
    except MalformedAnswer:
        return
    Response.model_validate(response)
