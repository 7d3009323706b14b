"""The tokens a request asks for: its text's characters / 4, rounded up, plus the answer's limit."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.core.estimate import prompt_tokens, requested_tokens
from gateway.core.nesting import MAX_JSON_DEPTH, nests_deeper


def test_chat_messages_of_text_and_parts() -> None:
    payload = {"model": "m", "messages": [
        {"role": "system", "content": "abcd"},  # 4
        {"role": "user", "content": [{"type": "text", "text": "abcdefgh"},  # 8
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "x"},  # 1
    ]}
    assert requested_tokens(payload) == 4  # ceil(13 / 4)


def test_the_answer_limit_is_added() -> None:
    assert requested_tokens({"messages": [{"role": "user", "content": "abcde"}], "max_tokens": 100}) == 102
    assert requested_tokens({"messages": [], "max_completion_tokens": 7}) == 7
    assert requested_tokens({"input": "hi", "max_output_tokens": 50}) == 51


def test_the_largest_answer_limit_counts_once() -> None:
    assert requested_tokens({"max_tokens": 10, "max_completion_tokens": 30}) == 30


@pytest.mark.parametrize("limit", ["100", 1.5, True, None, -4, [3], {"n": 3}])
def test_an_answer_limit_that_is_not_a_positive_int_counts_nothing(limit: Any) -> None:
    assert requested_tokens({"prompt": "abcd", "max_tokens": limit}) == 1


def test_responses_input_items_and_instructions() -> None:
    payload = {"instructions": "i" * 12, "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "a" * 10}]},
        {"type": "function_call_output", "call_id": "c", "output": "b" * 6},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "c" * 4}]},
    ]}
    assert requested_tokens(payload) == 8  # ceil((12 + 20) / 4)
    items = {"instructions": [{"role": "developer", "content": "d" * 8}]}  # instructions as input items
    assert requested_tokens(items) == 2


def test_messages_api_system_and_blocks() -> None:
    payload = {"system": [{"type": "text", "text": "s" * 8}], "max_tokens": 16, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "u" * 4},
                                     {"type": "tool_result", "tool_use_id": "t", "content": "r" * 4}]},
    ]}
    assert requested_tokens(payload) == 4 + 16


@pytest.mark.parametrize(("field", "value", "tokens"), [
    ("input", "abcdefghi", 3),
    ("input", ["abcd", "efgh"], 2),
    ("input", [1, 2, 3], 3),  # token ids count one each
    ("input", [[1, 2], [3]], 3),
    ("prompt", "ab", 1),
    ("prompt", ["abcd", "abcd", "a"], 3),
    ("prompt", [5, 6], 2),
])
def test_embeddings_and_completions_inputs(field: str, value: Any, tokens: int) -> None:
    assert requested_tokens({field: value}) == tokens


@pytest.mark.parametrize("payload", [
    {}, {"messages": None}, {"messages": "text?"}, {"messages": [None, 3.5, True, {"content": {"x": 1}}]},
    {"input": {"weird": ["shape"]}}, {"system": 12.0}, {"messages": [[[[[]]]]]},
])
def test_odd_shapes_never_fail(payload: dict[str, Any]) -> None:
    assert requested_tokens(payload) >= 0


def test_a_deeply_nested_body_is_read_without_recursion() -> None:
    deep: Any = "abcd"
    for _ in range(100_000):
        deep = [deep]
    assert requested_tokens({"input": deep}) == 0  # past any real shape's depth: not read


def test_empty_text_is_no_tokens() -> None:
    assert requested_tokens({"messages": [{"role": "user", "content": ""}]}) == 0


@pytest.mark.parametrize(("messages", "tokens"), [
    ([{"role": "user", "content": "abcd"}, {"role": "user", "content": "efgh"}], 2),  # the common shape
    ([{"role": "user", "content": "abcd"}, {"role": "assistant"}], 1),  # one without content
    ([{"role": "user", "content": "abcd"}, "efghi"], 3),  # one that is not a message
    ([{"role": "user", "content": "abcd"}, {"role": "user", "content": [{"type": "text", "text": "efgh"}]}], 2),
])
def test_messages_of_any_shape_beside_string_contents(messages: list[Any], tokens: int) -> None:
    assert requested_tokens({"messages": messages}) == tokens


WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "description": "The city's name"}},
                  "required": ["city"], "additionalProperties": False}  # fmt: skip
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather now, in a city.",
                                                "parameters": WEATHER_SCHEMA, "strict": True}}]  # fmt: skip
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "description": "The weather now, in a city.",
                    "parameters": WEATHER_SCHEMA}, {"type": "web_search"}]  # fmt: skip
MESSAGES_TOOLS = [{"name": "get_weather", "description": "The weather now, in a city.", "input_schema": WEATHER_SCHEMA}]
QUESTION = [{"role": "user", "content": "abcd"}]


def tokens_of(characters: int) -> int:
    return -(-characters // 4)


@pytest.mark.parametrize(
    ("payload", "tools"),
    [
        ({"messages": QUESTION, "tools": CHAT_TOOLS}, CHAT_TOOLS),
        ({"messages": QUESTION, "functions": [CHAT_TOOLS[0]["function"]]}, [CHAT_TOOLS[0]["function"]]),  # Chat's older form
        ({"input": "abcd", "tools": RESPONSES_TOOLS}, RESPONSES_TOOLS),
        ({"messages": QUESTION, "tools": MESSAGES_TOOLS}, MESSAGES_TOOLS),
    ],
    ids=["chat", "chat-functions", "responses", "messages"],
)
def test_tools_count_as_the_characters_of_their_json(payload: dict[str, Any], tools: list[Any]) -> None:
    """Names, descriptions and parameter schemas are in the prompt the model reads."""
    assert prompt_tokens(payload) == tokens_of(4 + len(orjson.dumps(tools)))


def test_a_messages_request_counts_its_system_its_messages_and_its_tools() -> None:
    payload = {"system": "s" * 8, "messages": QUESTION, "tools": MESSAGES_TOOLS, "max_tokens": 10}
    assert requested_tokens(payload) == tokens_of(8 + 4 + len(orjson.dumps(MESSAGES_TOOLS))) + 10


def test_tools_as_deep_as_a_body_may_nest_are_written_whole() -> None:
    """A body nests at most MAX_JSON_DEPTH levels (the server refuses deeper ones): its tools are written as JSON."""
    schema: Any = {"type": "string"}
    for _ in range(MAX_JSON_DEPTH - 4):  # with the innermost schema, the body, its tools array and the tool
        schema = {"type": "array", "items": schema}
    tools = [{"name": "f", "parameters": schema}]
    assert nests_deeper({"tools": tools}, MAX_JSON_DEPTH) is False
    assert prompt_tokens({"tools": tools}) == tokens_of(len(orjson.dumps(tools)))


@pytest.mark.parametrize("tools", [None, "text", 12, [{1, 2}], [{"name": 2**70}], {"weird": ["shape"]}, [[[]]]])
def test_odd_tools_never_fail(tools: Any) -> None:
    assert prompt_tokens({"messages": QUESTION, "tools": tools}) >= 1
