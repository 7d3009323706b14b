"""Responses tools, tool choice and text format as chat takes them (responses.tools)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.translate.responses.answer import from_chat
from gateway.core.translate.responses.names import ToolName, tool_names
from gateway.core.translate.responses.request import to_chat
from tests.support.responses_translation import (
    CREATED,
    RESPONSE_ID,
    WEATHER,
    body,
    completion,
    tool_call,
)


@pytest.mark.parametrize(("choice", "chat"), [
    ("auto", "auto"),
    ("required", "required"),
    ("none", "none"),
    ({"type": "function", "name": "weather"}, {"type": "function", "function": {"name": "weather"}}),
    ({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "weather"}]},
     {"type": "allowed_tools",
      "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "weather"}}]}}),
])
def test_function_tools_and_tool_choice(choice: Any, chat: Any) -> None:
    payload = to_chat(body(tools=[WEATHER, {"type": "function", "name": "now", "parameters": None, "strict": None}],
                           tool_choice=choice, parallel_tool_calls=False))
    assert payload["tools"] == [
        {"type": "function", "function": {"name": "weather", "description": "Weather in a city",
                                          "parameters": WEATHER["parameters"], "strict": True}},
        {"type": "function", "function": {"name": "now"}},
    ]
    assert payload["tool_choice"] == chat
    assert payload["parallel_tool_calls"] is False


@pytest.mark.parametrize(("fmt", "response_format"), [
    ({"type": "text"}, None),
    ({"type": "json_object"}, {"type": "json_object"}),
    ({"type": "json_schema", "name": "city", "schema": {"type": "object"}, "strict": True, "description": "d"},
     {"type": "json_schema",
      "json_schema": {"name": "city", "schema": {"type": "object"}, "strict": True, "description": "d"}}),
])
def test_text_format_is_the_response_format(fmt: dict[str, Any], response_format: Any) -> None:
    assert to_chat(body(text={"format": fmt})).get("response_format") == response_format


@pytest.mark.parametrize("kind", ["web_search", "web_search_preview"])
def test_an_offered_web_search_is_dropped_and_the_model_answers_without_it(kind: str) -> None:
    payload = to_chat(body(tools=[WEATHER, {"type": kind, "external_web_access": False}], tool_choice="auto"))
    assert [tool["function"]["name"] for tool in payload["tools"]] == ["weather"]
    alone = to_chat(body(tools=[{"type": kind}], tool_choice="auto", parallel_tool_calls=True))
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & alone.keys()


def test_a_custom_tool_is_a_function_of_one_string_and_its_calls_custom_tool_calls() -> None:
    patch_tool = {"type": "custom", "name": "apply_patch", "description": "Edit files", "format": {"type": "text"}}
    payload = to_chat(body(tools=[patch_tool], tool_choice={"type": "custom", "name": "apply_patch"},
                           input=[{"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin"},
                                  {"type": "custom_tool_call_output", "call_id": "c1", "output": "done"}]))
    assert payload["tools"] == [{"type": "function", "function": {"name": "apply_patch", "description": "Edit files", "parameters": {
        "type": "object", "properties": {"input": {"type": "string", "description": "The tool's input, as free-form text."}},
        "required": ["input"], "additionalProperties": False}}}]
    assert payload["tool_choice"] == {"type": "function", "function": {"name": "apply_patch"}}
    assert payload["messages"] == [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "apply_patch", "arguments": '{"input":"*** Begin"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"}]
    assert tool_names(body(tools=[patch_tool])) == {"apply_patch": ToolName(None, "apply_patch", custom=True)}
    # an upstream that answers with arguments that are no {"input": ...} object: the input is them as they are
    answer = completion(None, finish="tool_calls", tool_calls=[tool_call("c2", "apply_patch", "*** raw")])
    (item,) = from_chat(answer, request=body(tools=[patch_tool]), response_id=RESPONSE_ID, created_at=CREATED)["output"]
    assert (item["type"], item["input"]) == ("custom_tool_call", "*** raw")


def test_namespaced_tools_are_functions_named_after_their_namespace() -> None:
    group = {"type": "namespace", "name": "agents", "description": "Sub-agents",
             "tools": [{**WEATHER, "name": "spawn"}, {"type": "function", "name": "close"}]}
    payload = to_chat(body(tools=[WEATHER, group], tool_choice={"type": "function", "namespace": "agents", "name": "close"}))
    assert [tool["function"]["name"] for tool in payload["tools"]] == ["weather", "agents__spawn", "agents__close"]
    assert payload["tools"][1]["function"]["parameters"] == WEATHER["parameters"]
    assert payload["tool_choice"] == {"type": "function", "function": {"name": "agents__close"}}
    assert tool_names(body(tools=[WEATHER, group])) == {
        "agents__spawn": ToolName("agents", "spawn", custom=False), "agents__close": ToolName("agents", "close", custom=False)}
