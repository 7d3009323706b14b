"""The Responses API over chat completions: every mapping, each object and event checked by the
openai SDK's own types, the SDK's stream accumulation (and LangChain's) against a loopback server
speaking the translation, and hostile requests, answers and chunks."""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import patch

import openai
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import BaseModel, TypeAdapter

from gateway.core.errors import InvalidRequestError
from gateway.core.translate.dropped import DropLog
from gateway.core.translate.responses import (
    MalformedAnswer,
    StreamTranslator,
    ToolName,
    TranslationError,
    from_chat,
    to_chat,
    tool_names,
)

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


# -- to_chat -----------------------------------------------------------------------------------


def test_string_input_is_one_user_message_after_the_instructions() -> None:
    assert to_chat(body(instructions="Be brief.", input="What is 2+2?")) == {
        "model": "m",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}],
    }


def test_a_conversation_of_items_becomes_chat_messages() -> None:
    items = [
        {"role": "developer", "content": "Answer in French."},
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "Be brief."}]},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "two cities"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Je regarde.", "annotations": []}]},
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call", "call_id": "call_2", "name": "weather", "arguments": '{"city":"Rome"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "21C"}]},
        {"type": "function_call", "call_id": "call_3", "name": "weather", "arguments": '{"city":"Oslo"}'},
        {"type": "function_call_output", "call_id": "call_3", "output": "2C"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Paris 18, "}, {"type": "output_text", "text": "Rome 21."},
                     {"type": "refusal", "refusal": "No Oslo."}]},
    ]
    assert to_chat(body(input=items))["messages"] == [
        {"role": "system", "content": "Answer in French."},
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "Je regarde.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Rome"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "21C"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_3", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_3", "content": "2C"},
        {"role": "assistant", "content": "Paris 18, Rome 21.", "refusal": "No Oslo."},
    ]


def test_user_parts_text_image_and_inline_file() -> None:
    parts = [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "low"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBOR", "file_id": None},
        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBER", "filename": "a.pdf"},
    ]
    assert to_chat(body(input=[{"role": "user", "content": parts}]))["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBER", "filename": "a.pdf"}},
    ]}]


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


def test_tool_settings_without_tools_are_left_out() -> None:
    # Chat completions refuses tool_choice and parallel_tool_calls when no tools are given.
    payload = to_chat(body(tools=[], tool_choice="auto", parallel_tool_calls=True))
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & payload.keys()


def test_sampling_limits_and_reasoning() -> None:
    payload = to_chat(body(max_output_tokens=300, temperature=0.2, top_p=1, user="u-1",
                           reasoning={"effort": "high", "summary": "auto"}, text={"verbosity": "low"}))
    assert payload == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 300,
                       "temperature": 0.2, "top_p": 1, "user": "u-1", "reasoning_effort": "high", "verbosity": "low"}


@pytest.mark.parametrize(("fmt", "response_format"), [
    ({"type": "text"}, None),
    ({"type": "json_object"}, {"type": "json_object"}),
    ({"type": "json_schema", "name": "city", "schema": {"type": "object"}, "strict": True, "description": "d"},
     {"type": "json_schema",
      "json_schema": {"name": "city", "schema": {"type": "object"}, "strict": True, "description": "d"}}),
])
def test_text_format_is_the_response_format(fmt: dict[str, Any], response_format: Any) -> None:
    assert to_chat(body(text={"format": fmt})).get("response_format") == response_format


def test_a_stream_asks_for_its_usage() -> None:
    assert to_chat(body(stream=True, stream_options={"include_obfuscation": False}))["stream_options"] == {
        "include_usage": True}
    assert "stream_options" not in to_chat(body(stream=False))


def test_service_only_keys_are_dropped_and_unknown_keys_pass() -> None:
    payload = to_chat(body(metadata={"team": "a"}, store=True, include=["reasoning.encrypted_content"],
                           truncation="auto", max_tool_calls=3, top_logprobs=2, background=False,
                           previous_response_id=None, seed=7, stop=["\n"], client_metadata={"session_id": "s"}))
    assert payload == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": 7, "stop": ["\n"]}


def test_what_is_dropped_is_told_once_at_info_then_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    drops = DropLog()
    request = body(include=["reasoning.encrypted_content"], client_metadata={"a": "b"},
                   reasoning={"summary": "auto", "context": "all_turns"}, tools=[WEATHER, {"type": "web_search"}])
    with caplog.at_level(logging.DEBUG, logger="gateway.translate"), patch("gateway.core.translate.responses.request.DROPS", drops):
        to_chat(request)
        to_chat(request)
    lines = [(record.levelno, record.getMessage()) for record in caplog.records if record.name == "gateway.translate"]
    named = ["client_metadata", "include", "reasoning.context", "reasoning.summary", "the web_search tool"]
    assert [level for level, _ in lines] == [logging.INFO] * 5 + [logging.DEBUG] * 5
    assert [line.split(" request: ")[1].split(" left out")[0] for _, line in lines] == named * 2
    assert all(line.startswith("responses request: ") for _, line in lines)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="gateway.translate"), patch("gateway.core.translate.responses.request.DROPS", drops):
        to_chat(body(store=False, metadata={"team": "a"}))  # never forwarded, and nothing lost: not told
    assert not caplog.records


@pytest.mark.parametrize("kind", ["web_search", "web_search_preview"])
def test_an_offered_web_search_is_dropped_and_the_model_answers_without_it(kind: str) -> None:
    payload = to_chat(body(tools=[WEATHER, {"type": kind, "external_web_access": False}], tool_choice="auto"))
    assert [tool["function"]["name"] for tool in payload["tools"]] == ["weather"]
    alone = to_chat(body(tools=[{"type": kind}], tool_choice="auto", parallel_tool_calls=True))
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & alone.keys()


def test_a_web_search_the_request_forces_is_refused() -> None:
    with pytest.raises(TranslationError) as caught:
        to_chat(body(tools=[{"type": "web_search"}], tool_choice={"type": "web_search"}))
    assert (caught.value.param, caught.value.code) == ("tool_choice.type", "unsupported_value")


def test_images_and_files_of_tool_outputs_follow_the_tool_messages_in_a_user_message() -> None:
    image = {"type": "input_image", "image_url": "data:image/png;base64,iVBO", "detail": "high"}
    pdf = {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"}
    payload = to_chat(body(input=[
        {"role": "user", "content": "Look at both."},
        {"type": "function_call", "call_id": "c1", "name": "view_image", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "read_pdf", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [image]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "a report"}, pdf]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Seen."}]},
    ]))
    assert payload["messages"][2:] == [
        {"role": "tool", "tool_call_id": "c1", "content": ""},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "a report"}]},
        {"role": "user", "content": [
            {"type": "text", "text": "Attachments of tool result c1:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO", "detail": "high"}},
            {"type": "text", "text": "Attachments of tool result c2:"},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}}]},
        {"role": "assistant", "content": "Seen."},
    ]
    last = to_chat(body(input=[{"type": "function_call", "call_id": "c1", "name": "view_image", "arguments": "{}"},
                               {"type": "function_call_output", "call_id": "c1", "output": [image]}]))["messages"]
    assert [message["role"] for message in last] == ["assistant", "tool", "user"]
    with pytest.raises(TranslationError) as caught:  # a file the upstream would have to fetch
        to_chat(body(input=[{"type": "function_call_output", "call_id": "c1",
                             "output": [{"type": "input_image", "file_id": "file-1"}]}]))
    assert caught.value.param == "input[0].output[0].file_id"


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


def test_a_namespaced_name_too_long_for_chat_is_cut_and_still_found() -> None:
    group = {"type": "namespace", "name": "mcp__" + "s" * 40, "tools": [{"type": "function", "name": "t" * 30},
                                                                       {"type": "function", "name": "t" * 29 + "u"}]}
    names = [tool["function"]["name"] for tool in to_chat(body(tools=[group]))["tools"]]
    assert [len(name) for name in names] == [64, 64] and names[0] != names[1]
    assert all(name.startswith("mcp__" + "s" * 40 + "__") for name in names)
    assert tool_names(body(tools=[group]))[names[1]] == ToolName(group["name"], "t" * 29 + "u", custom=False)


def test_namespaced_tools_are_functions_named_after_their_namespace() -> None:
    group = {"type": "namespace", "name": "agents", "description": "Sub-agents",
             "tools": [{**WEATHER, "name": "spawn"}, {"type": "function", "name": "close"}]}
    payload = to_chat(body(tools=[WEATHER, group], tool_choice={"type": "function", "namespace": "agents", "name": "close"}))
    assert [tool["function"]["name"] for tool in payload["tools"]] == ["weather", "agents__spawn", "agents__close"]
    assert payload["tools"][1]["function"]["parameters"] == WEATHER["parameters"]
    assert payload["tool_choice"] == {"type": "function", "function": {"name": "agents__close"}}
    assert tool_names(body(tools=[WEATHER, group])) == {
        "agents__spawn": ToolName("agents", "spawn", custom=False), "agents__close": ToolName("agents", "close", custom=False)}


@pytest.mark.parametrize(("fields", "param", "code"), [
    ({"previous_response_id": "resp_1"}, "previous_response_id", "unsupported_parameter"),
    ({"conversation": "conv_1"}, "conversation", "unsupported_parameter"),
    ({"prompt": {"id": "pmpt_1"}}, "prompt", "unsupported_parameter"),
    ({"background": True}, "background", "unsupported_parameter"),
    ({"tools": [WEATHER, {"type": "image_generation"}]}, "tools[1].type", "unsupported_value"),
    ({"tools": [{"type": "namespace", "name": "ns", "tools": [{"type": "web_search"}]}]}, "tools[0].tools[0].type",
     "invalid_value"),
    ({"tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}, "tools[0].type", "unsupported_value"),
    ({"tools": [{"type": "mcp", "server_label": "x"}]}, "tools[0].type", "unsupported_value"),
    ({"tools": [{"type": "code_interpreter", "container": "auto"}]}, "tools[0].type", "unsupported_value"),
    ({"tools": [{"type": "computer_use_preview"}]}, "tools[0].type", "unsupported_value"),
    ({"tools": [WEATHER], "tool_choice": {"type": "web_search_preview"}}, "tool_choice.type", "unsupported_value"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]},
     "input[0].content[0].file_id", "unsupported_value"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_url": "https://x/a.pdf"}]}]},
     "input[0].content[0].file_url", "unsupported_value"),
    ({"input": [{"role": "system", "content": [{"type": "input_image", "image_url": "https://x"}]}]},
     "input[0].content[0].type", "unsupported_value"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type", "unsupported_value"),
    ({"input": [{"type": "web_search_call", "id": "ws_1", "status": "completed"}]}, "input[0].type",
     "unsupported_value"),
])
def test_what_chat_completions_cannot_do_is_refused(fields: dict[str, Any], param: str, code: str) -> None:
    with pytest.raises(TranslationError) as caught:
        to_chat(body(**fields))
    assert (caught.value.param, caught.value.code) == (param, code)


@pytest.mark.parametrize(("request_body", "param"), [
    (["not", "an", "object"], None),
    ({"input": "hi"}, "model"),
    (body(input=None), "input"),
    (body(input=5), "input"),
    (body(input=[]), "input"),
    (body(input=["hi"]), "input[0]"),
    (body(input=[{"content": "no role or type"}]), "input[0].type"),
    (body(input=[{"type": "message", "role": "tool", "content": "x"}]), "input[0].role"),
    (body(input=[{"role": "user", "content": 3}]), "input[0].content"),
    (body(input=[{"role": "user", "content": [{"type": "input_text", "text": 1}]}]), "input[0].content[0].text"),
    (body(input=[{"role": "user", "content": [{"type": "audio"}]}]), "input[0].content[0].type"),
    (body(input=[{"role": "user", "content": [{"type": "input_image"}]}]), "input[0].content[0].image_url"),
    (body(input=[{"role": "assistant", "content": [{"type": "refusal", "refusal": None}]}]),
     "input[0].content[0].refusal"),
    (body(input=[{"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}}]),
     "input[0].arguments"),
    (body(input=[{"type": "function_call_output", "call_id": "c", "output": {"ok": True}}]), "input[0].output"),
    (body(tools={"type": "function"}), "tools"),
    (body(tools=[{"type": "function"}]), "tools[0].name"),
    (body(tools=[{"type": "function", "name": "f", "parameters": "{}"}]), "tools[0].parameters"),
    (body(tools=[WEATHER], tool_choice="sometimes"), "tool_choice"),
    (body(tools=[WEATHER], tool_choice={"type": "allowed_tools", "mode": "auto", "tools": ["weather"]}),
     "tool_choice.tools[0]"),
    (body(max_output_tokens=True), "max_output_tokens"),
    (body(max_output_tokens=0), "max_output_tokens"),
    (body(max_output_tokens="100"), "max_output_tokens"),
    (body(temperature="hot"), "temperature"),
    (body(metadata={"n": 1}), "metadata.n"),
    (body(text={"format": {"type": "yaml"}}), "text.format.type"),
    (body(text={"format": {"type": "json_schema", "schema": {}}}), "text.format.name"),
    (body(text={"verbosity": "loud"}), "text.verbosity"),
    (body(reasoning={"effort": "extreme"}), "reasoning.effort"),
    (body(stream="yes"), "stream"),
])
def test_malformed_requests_name_the_dotted_param(request_body: Any, param: str | None) -> None:
    with pytest.raises(TranslationError) as caught:
        to_chat(request_body)
    assert caught.value.param == param


def test_a_translation_error_is_an_openai_shaped_400() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        to_chat(body(tools=[{"type": "file_search", "vector_store_ids": ["vs_1"]}]))
    assert caught.value.status == 400
    error = orjson.loads(caught.value.to_json())["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "tools[0].type"
    assert "'file_search'" in error["message"] and "Responses API" in error["message"]


# -- from_chat ---------------------------------------------------------------------------------


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


@pytest.mark.parametrize(("finish", "reason"), [("length", "max_output_tokens"), ("content_filter", "content_filter")])
def test_a_cut_answer_is_incomplete(finish: str, reason: str) -> None:
    response = from_chat(completion("Once upon", finish=finish), request=body(), response_id=RESPONSE_ID,
                         created_at=CREATED)
    parsed = Response.model_validate(response)
    assert parsed.status == "incomplete"
    assert parsed.incomplete_details is not None and parsed.incomplete_details.reason == reason
    assert response["output"][0]["status"] == "incomplete"


def test_a_refusal_is_a_refusal_part() -> None:
    response = from_chat(completion(None, refusal="I can't help with that."), request=body(),
                         response_id=RESPONSE_ID, created_at=CREATED)
    Response.model_validate(response)
    assert response["output"][0]["content"] == [{"type": "refusal", "refusal": "I can't help with that."}]


def test_item_ids_follow_the_response_id() -> None:
    answer = completion("hi", finish="tool_calls", tool_calls=[tool_call("c", "f", "{}")])

    def ids(response_id: str) -> list[str]:
        response = from_chat(answer, request=body(), response_id=response_id, created_at=CREATED)
        return [item["id"] for item in response["output"]]

    assert ids("resp_1") == ids("resp_1") == ["msg_1_0", "fc_1_1"]
    assert ids("resp_2") == ["msg_2_0", "fc_2_1"]


def test_the_echo_repeats_what_was_translated() -> None:
    schema = {"type": "json_schema", "name": "city", "schema": {"type": "object"}, "strict": True}
    request = body(tools=[{"type": "function", "name": "now", "parameters": None, "strict": None, "extra": 1}],
                   tool_choice="required", parallel_tool_calls=False, text={"format": schema, "verbosity": "low"},
                   reasoning={"effort": "low", "summary": "auto"})
    response = from_chat(completion('{"city":"Paris"}'), request=request, response_id=RESPONSE_ID,
                         created_at=CREATED)
    Response.model_validate(response)
    assert response["tools"] == [{"type": "function", "name": "now"}]
    assert (response["tool_choice"], response["parallel_tool_calls"]) == ("required", False)
    assert response["text"] == {"format": schema, "verbosity": "low"}
    assert response["reasoning"] == {"effort": "low"}
    assert from_chat(completion(), request=body(), response_id="r", created_at=0)["text"] == {
        "format": {"type": "text"}, "verbosity": None}


def test_from_chat_never_refuses_the_request_it_echoes() -> None:
    # Only MalformedAnswer comes out of from_chat; what to_chat would refuse is echoed as its default.
    request = {"model": 5, "metadata": {"n": 1}, "tools": [{"type": "web_search"}], "tool_choice": "sometimes",
               "temperature": "hot", "text": {"format": {"type": "yaml"}}, "parallel_tool_calls": "yes"}
    response = from_chat(completion(), request=request, response_id=RESPONSE_ID, created_at=CREATED)
    parsed = Response.model_validate(response)
    assert (parsed.model, parsed.metadata, parsed.tools, parsed.tool_choice, parsed.temperature,
            parsed.parallel_tool_calls) == ("up-model", None, [], "auto", None, True)
    assert response["text"]["format"] == {"type": "text"}


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


# -- StreamTranslator --------------------------------------------------------------------------


TEXT_CHUNKS = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Hello"}), chunk({"content": " there"}),
               chunk({}, "stop"), usage_chunk()]


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


# -- the openai SDK and LangChain against a loopback server speaking the translation ----------


@dataclass
class Script:
    """What the loopback server's "upstream" says: a chat answer, or chunks and then maybe a failure."""

    answer: dict[str, Any] = field(default_factory=completion)
    chunks: list[dict[str, Any]] = field(default_factory=lambda: list(TEXT_CHUNKS))
    fail: bool = False
    chat: list[dict[str, Any]] = field(default_factory=list)  # the chat payloads to_chat made


Serve = Callable[[Script], Awaitable[openai.AsyncOpenAI]]


@pytest.fixture
async def serve(aiohttp_server: Any) -> Any:
    clients: list[openai.AsyncOpenAI] = []

    async def start(script: Script) -> openai.AsyncOpenAI:
        async def responses(request: web.Request) -> web.StreamResponse:
            payload = await request.json()
            try:
                script.chat.append(to_chat(payload))
            except TranslationError as exc:
                return web.Response(status=exc.status, body=exc.to_json(), content_type="application/json")
            if not payload.get("stream"):
                return web.json_response(from_chat(script.answer, request=payload, response_id=RESPONSE_ID,
                                                   created_at=CREATED))
            stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await stream.prepare(request)
            translator = StreamTranslator(payload, RESPONSE_ID, CREATED)
            for piece in script.chunks:
                await stream.write(b"".join(translator.feed(piece)))
            if script.fail:
                await stream.write(translator.error_event("upstream went away", "upstream_error"))
            else:
                await stream.write(b"".join(translator.finish()))
            await stream.write_eof()
            return stream

        app = web.Application()
        app.router.add_post("/v1/responses", responses)
        server: TestServer = await aiohttp_server(app)
        client = openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="k", max_retries=0)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()


TOOL_CHUNKS = [
    chunk({"role": "assistant", "content": None}),
    chunk(call_delta(0, call_id="call_1", name="weather", arguments="")),
    chunk(call_delta(0, arguments='{"city":')),
    chunk(call_delta(0, arguments='"Paris"}')),
    chunk({}, "tool_calls"),
    usage_chunk(),
]


async def test_sdk_create_reads_the_translated_answer(serve: Serve) -> None:
    script = Script(answer=completion("Bonjour", usage=USAGE))
    client = await serve(script)
    response = await client.responses.create(model="m", instructions="French.", input="Hello",
                                             max_output_tokens=20)
    assert response.output_text == "Bonjour"
    assert response.usage is not None and response.usage.input_tokens_details.cached_tokens == 4
    assert script.chat[0]["messages"] == [{"role": "system", "content": "French."},
                                          {"role": "user", "content": "Hello"}]
    assert script.chat[0]["max_completion_tokens"] == 20


async def test_sdk_create_stream_yields_the_text(serve: Serve) -> None:
    client = await serve(Script())
    stream = await client.responses.create(model="m", input="hi", stream=True)
    events = [event async for event in stream]
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Hello there"
    assert events[-1].type == "response.completed" and events[-1].response.output_text == "Hello there"


async def test_sdk_stream_accumulates_a_function_call(serve: Serve) -> None:
    script = Script(chunks=TOOL_CHUNKS)
    client = await serve(script)
    async with client.responses.stream(model="m", input="Weather in Paris?", tools=[WEATHER]) as stream:
        arguments = [event.snapshot async for event in stream if event.type == "response.function_call_arguments.delta"]
        final = await stream.get_final_response()
    assert arguments == ['{"city":', '{"city":"Paris"}']
    [call] = final.output
    assert call.type == "function_call" and (call.call_id, call.name) == ("call_1", "weather")
    assert call.parsed_arguments == {"city": "Paris"}  # strict tools are parsed
    assert script.chat[0]["tools"][0]["function"]["name"] == "weather"


class City(BaseModel):
    city: str
    celsius: int


async def test_sdk_stream_parses_structured_output(serve: Serve) -> None:
    script = Script(chunks=[chunk({"content": '{"city":"Paris",'}), chunk({"content": '"celsius":18}'}),
                            chunk({}, "stop")])
    client = await serve(script)
    async with client.responses.stream(model="m", input="Paris?", text_format=City) as stream:
        final = await stream.get_final_response()
    assert final.output_parsed == City(city="Paris", celsius=18)
    assert script.chat[0]["response_format"]["type"] == "json_schema"


async def test_sdk_stream_that_fails_midway_has_no_final_response(serve: Serve) -> None:
    client = await serve(Script(chunks=TEXT_CHUNKS[:2], fail=True))
    async with client.responses.stream(model="m", input="hi") as stream:
        events = [event async for event in stream]
        assert events[-1].type == "error" and events[-1].message == "upstream went away"
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            await stream.get_final_response()


async def test_sdk_sees_a_refused_request_as_a_400(serve: Serve) -> None:
    client = await serve(Script())
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="m", input="hi", tools=[{"type": "file_search", "vector_store_ids": ["vs_1"]}])
    assert caught.value.param == "tools[0].type"


async def test_langchain_responses_api_invoke_and_stream(serve: Serve) -> None:
    from langchain_openai import ChatOpenAI

    script = Script(answer=completion(None, finish="tool_calls",
                                      tool_calls=[tool_call("call_1", "weather", '{"city":"Paris"}')]),
                    chunks=TOOL_CHUNKS)
    client = await serve(script)
    model = ChatOpenAI(model="m", base_url=str(client.base_url), api_key="k",
                       use_responses_api=True, max_retries=0)
    bound = model.bind_tools([{"type": "function", "name": "weather", "description": "Weather in a city",
                               "parameters": WEATHER["parameters"]}])
    message = await bound.ainvoke("Weather in Paris?")
    assert [(c["name"], c["args"], c["id"]) for c in message.tool_calls] == [("weather", {"city": "Paris"}, "call_1")]
    streamed: Any = None
    async for piece in bound.astream("Weather in Paris?"):
        streamed = piece if streamed is None else streamed + piece
    assert [(c["name"], c["args"]) for c in streamed.tool_calls] == [("weather", {"city": "Paris"})]
    script.answer = completion("Hello there")
    text = await model.ainvoke("hi")
    assert text.text == "Hello there"
    assert script.chat[-1]["messages"] == [{"role": "user", "content": "hi"}]


# -- hostile input -----------------------------------------------------------------------------


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


PARTS = st.lists(
    objects({"type": one("input_text", "output_text"), "text": TEXT})
    | objects({"type": one("input_image"), "image_url": TEXT}, detail=one("low", "high", "auto"), file_id=st.none())
    | objects({"type": one("input_file"), "file_data": TEXT}, filename=TEXT, file_url=st.none())
    | objects({"type": one("refusal"), "refusal": TEXT}),
    max_size=3)
ITEMS = st.lists(
    objects({"role": one("user", "assistant", "system", "developer"), "content": TEXT | PARTS},
            type=st.just("message"))
    | objects({"type": one("function_call"), "call_id": TEXT, "name": TEXT, "arguments": TEXT})
    | objects({"type": one("function_call_output"), "call_id": TEXT, "output": TEXT | PARTS})
    | objects({"type": one("reasoning")}, summary=st.just([])),
    min_size=1, max_size=4)
FUNCTIONS = st.lists(objects({"type": one("function"), "name": TEXT}, description=st.none() | TEXT,
                             strict=st.none() | st.booleans(),
                             parameters=st.none() | st.dictionaries(TEXT, JSONISH, max_size=2)), max_size=2)
CHOICES = one("auto", "none", "required") | objects({"type": one("function"), "name": TEXT}) | objects(
    {"type": one("allowed_tools"), "mode": one("auto", "required"),
     "tools": st.lists(objects({"type": one("function"), "name": TEXT}), max_size=2)})
FORMATS = objects({"type": one("text", "json_object")}) | objects(
    {"type": one("json_schema"), "name": TEXT, "schema": st.dictionaries(TEXT, JSONISH, max_size=2)},
    strict=st.booleans(), description=TEXT)
REQUESTS = objects(
    {"model": st.just("m"), "input": TEXT | ITEMS}, instructions=st.none() | TEXT, tools=FUNCTIONS,
    tool_choice=CHOICES, parallel_tool_calls=st.booleans(), max_output_tokens=st.integers(1, 2**40),
    temperature=st.floats(0, 2), top_p=st.floats(0, 1), user=TEXT, metadata=st.dictionaries(TEXT, TEXT, max_size=2),
    stream=st.booleans(), text=objects(format=FORMATS, verbosity=one("low", "medium", "high")),
    reasoning=objects(effort=one("minimal", "low", "high"), summary=TEXT), store=st.booleans(), seed=st.integers(),
)
BODIES = now_and_then(REQUESTS, JSONISH)
WORDY = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=6)
ANSWER_CALLS = st.lists(objects({"function": objects({"name": WORDY, "arguments": TEXT})}, id=TEXT,
                                type=st.just("function")), max_size=2)
USAGES = objects(prompt_tokens=st.integers(0, 2**40), completion_tokens=st.integers(0, 9),
                 total_tokens=st.integers(0, 9),
                 prompt_tokens_details=objects(cached_tokens=st.integers(0, 9)),
                 completion_tokens_details=objects(reasoning_tokens=st.integers(0, 9)))
FINISHES = now_and_then(st.sampled_from(["stop", "length", "tool_calls", "content_filter"]), st.none() | WORDS)
CONTENT = now_and_then(WORDY, st.none())
ANSWERS = now_and_then(objects(
    {"choices": st.lists(objects({"message": objects(content=CONTENT, refusal=st.none() | TEXT,
                                                     tool_calls=ANSWER_CALLS)}, index=st.integers(0, 1),
                                 finish_reason=FINISHES), min_size=1, max_size=2)},
    model=TEXT, usage=USAGES), JSONISH)


def chunk_lists(build: Callable[..., st.SearchStrategy[dict[str, Any]]]) -> st.SearchStrategy[list[Any]]:
    """Streams of chat chunks whose objects `build` makes: text, refusals, tool calls, usage, finishes."""
    calls = st.lists(build({"index": st.integers(0, 1)}, id=TEXT, type=st.just("function"),
                           function=build(name=now_and_then(WORDY, st.none()), arguments=TEXT)), max_size=2)
    choices = st.lists(build({"delta": build(content=CONTENT, refusal=st.none() | TEXT, tool_calls=calls)},
                             index=st.integers(0, 1), finish_reason=FINISHES), max_size=2)
    return st.lists(now_and_then(build({"choices": choices}, model=TEXT, usage=USAGES), JSONISH), max_size=6)


CHUNKS = chunk_lists(objects) | chunk_lists(plausible)


@FUZZ
@given(BODIES)
def test_hostile_requests_translate_or_are_refused_cleanly(request_body: Any) -> None:
    original = copy.deepcopy(request_body)
    try:
        payload = to_chat(request_body)
    except TranslationError as exc:
        assert isinstance(exc.message, str) and (exc.param is None or isinstance(exc.param, str))
        return
    finally:
        assert request_body == original  # never changed in place
    assert isinstance(payload, dict) and payload["messages"]
    assert all(m["role"] in ("system", "user", "assistant", "tool") for m in payload["messages"])
    # Whatever was accepted echoes into objects the SDK accepts.
    Response.model_validate(from_chat(completion(usage=USAGE), request=request_body, response_id="r",
                                      created_at=CREATED))
    run_stream(request_body, TEXT_CHUNKS)


@FUZZ
@given(ANSWERS)
def test_hostile_answers_become_responses_or_are_malformed(answer: Any) -> None:
    try:
        response = from_chat(answer, request=body(), response_id=RESPONSE_ID, created_at=CREATED)
    except MalformedAnswer:
        return
    Response.model_validate(response)


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
