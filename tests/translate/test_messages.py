"""Anthropic Messages <-> OpenAI Chat Completions translation, checked against both official SDKs' types.

Requests are checked with the `openai` SDK's request types, answers with `anthropic.types.Message`,
streams by handing the SSE bytes to the `anthropic` SDK's own stream reader and accumulator
(`client.messages.stream()` over an in-memory transport).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any
from unittest.mock import patch

import anthropic
import httpx
import orjson
import pytest
from anthropic.types import Message, MessageParam, RawMessageStreamEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import completion_create_params
from pydantic import TypeAdapter

from gateway.core.memory.messages import normalize
from gateway.core.memory.resent import resent_length
from gateway.core.translate.dropped import DropLog
from gateway.core.translate.messages import (
    MalformedAnswer,
    StreamTranslator,
    TranslationError,
    error_body,
    error_event,
    from_chat,
    messages_from_chat,
    to_chat,
)

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


def test_the_translation_imports_no_provider_library_and_no_io() -> None:
    """An all-OpenAI gateway must never import litellm; the translation is ours for that reason."""
    code = ("import sys, gateway.core.translate.messages; "
            "print(sorted({'litellm', 'aiohttp', 'anthropic', 'openai', 'httpx'} & set(sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


# Requests


def test_a_minimal_request_keeps_model_and_max_tokens_and_adds_nothing() -> None:
    assert valid_chat(to_chat(request(user("hi")))) == {
        "model": MODEL, "max_tokens": 256, "messages": [{"role": "user", "content": "hi"}],
    }


def test_system_string_or_text_blocks_become_one_system_message() -> None:
    blocks = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
              {"type": "text", "text": "Answer in French."}]
    assert chat_messages(request(user("hi"), system="Be kind."))[0] == {"role": "system", "content": "Be kind."}
    assert chat_messages(request(user("hi"), system=blocks))[0] == {
        "role": "system", "content": "You are terse.\nAnswer in French."}
    assert chat_messages(request(user("hi"), system=""))[0]["role"] == "user"


def test_a_system_message_among_the_messages_is_a_system_message_in_its_place() -> None:
    # Claude Code sends its environment so, between the first question and the answer
    environment = {"role": "system", "content": [{"type": "text", "text": "cwd: /w", "cache_control": {"type": "ephemeral"}},
                                                 {"type": "text", "text": "Shell: bash"}]}
    messages = chat_messages(request(user("hi"), environment, assistant("Hello."), {"role": "system", "content": "Be brief."},
                                     user("And?"), system="Be kind."))
    assert messages == [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"},
                        {"role": "system", "content": "cwd: /w\nShell: bash"}, {"role": "assistant", "content": "Hello."},
                        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "And?"}]
    assert chat_messages(request(user("hi"), {"role": "system", "content": []})) == [{"role": "user", "content": "hi"}]


def test_claude_codes_billing_header_block_is_left_out_of_the_system_message() -> None:
    blocks = [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332.1c9; cc_entrypoint=sdk-cli;"},
              {"type": "text", "text": "You are an agent."}]
    assert chat_messages(request(user("hi"), system=blocks))[0] == {"role": "system", "content": "You are an agent."}
    quoted = [{"type": "text", "text": "Quote: x-anthropic-billing-header: is a header."}]
    assert chat_messages(request(user("hi"), system=quoted))[0]["content"] == quoted[0]["text"]


def test_a_user_id_longer_than_openai_takes_is_left_out() -> None:
    claude_code = '{"device_id":"' + "c" * 64 + '","account_uuid":"","session_id":"7f375be1-f588-4661-97df-3790b3bd0caa"}'
    assert "user" not in to_chat(request(user("hi"), metadata={"user_id": claude_code}))
    assert to_chat(request(user("hi"), metadata={"user_id": "u" * 64}))["user"] == "u" * 64
    assert "user" not in to_chat(request(user("hi"), metadata={"user_id": "u" * 65}))


def test_a_tool_whose_loading_is_deferred_is_left_out() -> None:
    placeholder = {"name": "DeferredToolPlaceholder", "description": "never call this tool",
                   "input_schema": {"type": "object", "properties": {}}, "defer_loading": True}
    payload = valid_chat(to_chat(request(user("hi"), tools=[*TOOLS, placeholder, {**TOOLS[0], "defer_loading": False}],
                                         tool_choice={"type": "auto"})))
    assert payload["tools"] == FUNCTIONS * 2
    alone = to_chat(request(user("hi"), tools=[placeholder], tool_choice={"type": "auto"}))
    assert not {"tools", "tool_choice"} & alone.keys()


@pytest.mark.parametrize("server_tool", [
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 8, "allowed_domains": ["example.com"]},
    {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 2},
    {"type": "code_execution_20250825", "name": "code_execution"},
])
def test_an_offered_server_tool_is_left_out_and_told_and_the_model_answers_without_it(
    server_tool: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Claude Code's WebSearch asks so in a request of its own; the Responses translation drops web_search alike.
    drops = DropLog()
    with caplog.at_level(logging.INFO, logger="gateway.translate"), patch("gateway.core.translate.messages.request.DROPS", drops):
        payload = valid_chat(to_chat(request(user("hi"), tools=[*TOOLS, server_tool], tool_choice={"type": "auto"})))
        alone = to_chat(request(user("hi"), tools=[server_tool], tool_choice={"type": "any"}))
    assert payload["tools"] == FUNCTIONS
    assert not {"tools", "tool_choice"} & alone.keys()
    assert [record.getMessage() for record in caplog.records] == [
        f"messages request: the {server_tool['type']} tool left out for a chat completions target"
        " (told once; from now on at debug level)"]


def test_a_server_tool_the_request_forces_is_refused() -> None:
    forced = request(user("hi"), tools=[*TOOLS, {"type": "web_search_20250305", "name": "web_search"}],
                     tool_choice={"type": "tool", "name": "web_search"})
    with pytest.raises(TranslationError) as caught:
        to_chat(forced)
    assert caught.value.param == "tool_choice.name"
    assert "web_search" in str(caught.value) and "Anthropic target" in str(caught.value)
    assert to_chat({**forced, "tool_choice": {"type": "tool", "name": TOOLS[0]["name"]}})["tool_choice"] == {
        "type": "function", "function": {"name": TOOLS[0]["name"]}}


def test_a_tool_reference_loads_its_deferred_tool_and_reads_as_its_definition() -> None:
    deferred = {**TOOLS[0], "defer_loading": True}
    later = {**TOOLS[0], "name": "later", "defer_loading": True}
    body = request(
        user("Weather?"),
        assistant([{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "weather"}}]),
        user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "tool_reference", "tool_name": "get_weather"}, {"type": "tool_reference", "tool_name": "gone"}]}]),
        tools=[{"name": "search", "input_schema": {"type": "object"}}, deferred, later],
    )
    payload = valid_chat(to_chat(body))
    assert [tool["function"]["name"] for tool in payload["tools"]] == ["search", "get_weather"]
    weather = orjson.dumps(FUNCTIONS[0]["function"]).decode()
    assert payload["messages"][-1] == {"role": "tool", "tool_call_id": "toolu_1", "content": (
        f"<functions><function>{weather}</function></functions>\n"
        '<functions><function>{"name":"gone"}</function></functions>')}


@pytest.mark.parametrize(("reference", "param"), [
    ({"type": "tool_reference"}, "messages[2].content[0].content[0].tool_name"),
    ({"type": "tool_reference", "tool_name": ["x"]}, "messages[2].content[0].content[0].tool_name"),
])
def test_a_malformed_tool_reference_is_a_400_naming_it(reference: dict[str, Any], param: str) -> None:
    body = request(user("hi"), assistant([{"type": "tool_use", "id": "t", "name": "search", "input": {}}]),
                   user([{"type": "tool_result", "tool_use_id": "t", "content": [reference]}]),
                   tools=[{"name": "search", "input_schema": {"type": "object"}},
                          {"name": ["not", "a", "name"], "input_schema": {}, "defer_loading": True}])
    with pytest.raises(TranslationError) as caught:
        to_chat(body)
    assert caught.value.param == param


def test_what_is_left_out_is_told_once_at_info_then_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    drops = DropLog()
    body = request(
        user([{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]),
        assistant([{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "Hello."}]),
        user("Go on."),
        system=[{"type": "text", "text": "x-anthropic-billing-header: cc_version=1;"}, {"type": "text", "text": "Be kind."}],
        tools=[*TOOLS, {**TOOLS[0], "name": "later", "defer_loading": True}],
        thinking={"type": "adaptive"}, context_management={"edits": []}, output_config={"effort": "medium"},
        metadata={"user_id": "u" * 65},
    )
    sent = copy.deepcopy(body)
    with caplog.at_level(logging.DEBUG, logger="gateway.translate"), patch("gateway.core.translate.messages.request.DROPS", drops):
        to_chat(body)
        to_chat(body)
    assert body == sent  # looking for what is left out changes nothing
    lines = [(record.levelno, record.getMessage()) for record in caplog.records if record.name == "gateway.translate"]
    named = ["cache_control", "context_management", "metadata.user_id longer than 64 characters", "output_config.effort",
             "the x-anthropic-billing-header system block", "thinking", "thinking blocks", "tools with defer_loading"]
    assert [line.split(" request: ")[1].split(" left out")[0] for _, line in lines] == named * 2
    assert [level for level, _ in lines] == [logging.INFO] * len(named) + [logging.DEBUG] * len(named)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="gateway.translate"), patch("gateway.core.translate.messages.request.DROPS", drops):
        to_chat(request(user("hi"), system="Be kind.", tools=TOOLS, metadata={"user_id": "u"}))
    assert not caplog.records


def test_sampling_options_stop_sequences_user_and_stream_map_to_their_openai_names() -> None:
    payload = valid_chat(to_chat(request(
        user("hi"), stop_sequences=["END", "\n\nHuman:"], temperature=0.3, top_p=0.9, top_k=40,
        metadata={"user_id": "u-42"}, stream=True,
        thinking={"type": "enabled", "budget_tokens": 2048}, service_tier="auto",
    )))
    assert payload == {
        "model": MODEL, "max_tokens": 256, "messages": [{"role": "user", "content": "hi"}],
        "stop": ["END", "\n\nHuman:"], "temperature": 0.3, "top_p": 0.9, "top_k": 40, "user": "u-42",
        "stream": True, "stream_options": {"include_usage": True},
    }


def test_images_become_image_url_parts_base64_as_data_urls() -> None:
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "text", "text": "What are these?"},
    ]
    assert chat_messages(request(user(content))) == [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "text", "text": "What are these?"},
    ]}]


def test_documents_become_file_parts_or_text() -> None:
    content = [
        {"type": "document", "title": "report.pdf",
         "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
        {"type": "document", "title": "Notes", "source": {"type": "text", "media_type": "text/plain", "data": "a\nb"}},
        {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "chunk"}]}},
        {"type": "text", "text": "Summarise."},
    ]
    assert chat_messages(request(user(content)))[0]["content"] == [
        {"type": "file", "file": {"filename": "report.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}},
        {"type": "text", "text": "Notes\n\na\nb"},
        {"type": "text", "text": "chunk"},
        {"type": "text", "text": "Summarise."},
    ]


TOOLS = [{"name": "get_weather", "description": "Weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
FUNCTIONS = [{"type": "function", "function": {
    "name": "get_weather", "parameters": TOOLS[0]["input_schema"], "description": "Weather in a city"}}]


def test_tool_use_becomes_tool_calls_and_tool_results_become_tool_messages() -> None:
    body = request(
        user("Weather in Paris and Oslo?"),
        assistant([
            {"type": "thinking", "thinking": "Two cities, two calls.", "signature": "c2ln"},
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Oslo"}},
        ]),
        user([
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
             "content": [{"type": "text", "text": "station offline"}, {"type": "text", "text": "retry later"}]},
            {"type": "text", "text": "And tomorrow?"},
        ]),
        tools=TOOLS,
    )
    assert chat_messages(body) == [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": "Checking both.", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "toolu_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
        ]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: station offline\nretry later"},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]},
    ]


def test_an_assistant_turn_of_tool_calls_only_has_no_content() -> None:
    turn = assistant([{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}])
    assert "content" not in chat_messages(request(user("hi"), turn, user([
        {"type": "tool_result", "tool_use_id": "toolu_1"}]), tools=TOOLS))[1]


def test_images_in_a_tool_result_follow_the_tool_messages_in_a_user_message() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    body = request(
        user("Screenshot please"),
        assistant([{"type": "tool_use", "id": "toolu_9", "name": "screenshot", "input": {}}]),
        user([{"type": "tool_result", "tool_use_id": "toolu_9", "content": [{"type": "text", "text": "done"}, image]}]),
        tools=[{"name": "screenshot", "input_schema": {"type": "object"}}],
    )
    assert chat_messages(body)[2:] == [
        {"role": "tool", "tool_call_id": "toolu_9", "content": "done"},
        {"role": "user", "content": [
            {"type": "text", "text": "Attachments of tool result toolu_9:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ]},
    ]


@pytest.mark.parametrize(("choice", "expected"), [
    ({"type": "auto"}, {"tool_choice": "auto"}),
    ({"type": "any"}, {"tool_choice": "required"}),
    ({"type": "none"}, {"tool_choice": "none"}),
    ({"type": "tool", "name": "get_weather"}, {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    ({"type": "auto", "disable_parallel_tool_use": True}, {"tool_choice": "auto", "parallel_tool_calls": False}),
    ({"type": "any", "disable_parallel_tool_use": False}, {"tool_choice": "required"}),
])
def test_tools_and_tool_choice(choice: dict[str, Any], expected: dict[str, Any]) -> None:
    payload = valid_chat(to_chat(request(user("hi"), tools=TOOLS, tool_choice=choice)))
    assert {k: v for k, v in payload.items() if k in ("tools", "tool_choice", "parallel_tool_calls")} == {
        "tools": FUNCTIONS, **expected}


def test_tool_choice_without_tools_is_left_out() -> None:
    # OpenAI refuses tool_choice without tools, and an empty tools list.
    payload = valid_chat(to_chat(request(user("hi"), tools=[], tool_choice={"type": "auto"})))
    assert not {"tools", "tool_choice"} & payload.keys()


def test_a_json_schema_output_format_becomes_response_format() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    payload = valid_chat(to_chat(request(user("hi"), output_config={"format": {"type": "json_schema", "schema": schema}})))
    assert payload["response_format"] == {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}


def test_an_empty_final_assistant_prefill_is_left_out() -> None:
    assert chat_messages(request(user("hi"), assistant(""))) == [{"role": "user", "content": "hi"}]


def test_the_body_the_anthropic_sdk_sends_translates_and_the_sdk_reads_the_answer() -> None:
    """Round trip through the real client: its request body in, our message object out."""
    sent: list[dict[str, Any]] = []
    answer = {"id": "chatcmpl-7", "object": "chat.completion", "created": 1, "model": "gpt-4o", "choices": [{
        "index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]}}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}}

    def handle(http_request: httpx.Request) -> httpx.Response:
        sent.append(orjson.loads(http_request.content))
        return httpx.Response(200, json=from_chat(answer, model=MODEL))

    client = anthropic.Anthropic(api_key="k", http_client=httpx.Client(transport=httpx.MockTransport(handle)))
    reply = client.messages.create(
        model=MODEL, max_tokens=100, system=[{"type": "text", "text": "Be brief."}], tools=TOOLS,  # type: ignore[list-item]
        tool_choice={"type": "any"}, metadata={"user_id": "u1"}, stop_sequences=["STOP"],
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
    )
    payload = valid_chat(to_chat(sent[0]))
    assert payload["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Oslo?"}]
    assert (payload["tools"], payload["tool_choice"], payload["user"], payload["stop"]) == (FUNCTIONS, "required", "u1", ["STOP"])
    assert reply.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "input", None)) for b in reply.content] == [("tool_use", {"city": "Oslo"})]
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (30, 12)


BAD_REQUESTS: dict[str, tuple[Callable[[dict[str, Any]], Any], str | None]] = {
    "body not an object": (lambda b: [b], None),
    "no max_tokens": (lambda b: b.pop("max_tokens"), "max_tokens"),
    "max_tokens zero": (lambda b: b.update(max_tokens=0), "max_tokens"),
    "max_tokens boolean": (lambda b: b.update(max_tokens=True), "max_tokens"),
    "no model": (lambda b: b.pop("model"), "model"),
    "no messages": (lambda b: b.update(messages=[]), "messages"),
    "messages not a list": (lambda b: b.update(messages={"role": "user"}), "messages"),
    "tool role": (lambda b: b["messages"].insert(0, {"role": "tool", "content": "x"}), "messages[0].role"),
    "system message block not text": (lambda b: b["messages"].insert(1, {"role": "system", "content": [{"type": "image"}]}),
                                      "messages[1].content[0].type"),
    "system message without content": (lambda b: b["messages"].insert(1, {"role": "system"}), "messages[1].content"),
    "empty user content": (lambda b: b["messages"][0].update(content=""), "messages[0].content"),
    "empty assistant turn mid-conversation": (lambda b: b["messages"][1].update(content=[]), "messages[1].content"),
    "unknown block type": (lambda b: b["messages"][2]["content"].insert(0, {"type": "audio"}), "messages[2].content[0].type"),
    "tool_use in a user turn": (lambda b: b["messages"][2]["content"].insert(
        0, {"type": "tool_use", "id": "t", "name": "n", "input": {}}), "messages[2].content[0].type"),
    "image in an assistant turn": (lambda b: b["messages"][1].update(content=[{"type": "image"}]), "messages[1].content[0].type"),
    "text not a string": (lambda b: b["messages"][2]["content"].append({"type": "text", "text": 7}), "messages[2].content[1].text"),
    "image file source": (lambda b: b["messages"][2]["content"].append(
        {"type": "image", "source": {"type": "file", "file_id": "f"}}), "messages[2].content[1].source.type"),
    "tool input not an object": (lambda b: b["messages"][1]["content"][0].update(input="{}"), "messages[1].content[0].input"),
    "tool input too large for JSON": (lambda b: b["messages"][1]["content"][0].update(input={"n": 2**70}),
                                      "messages[1].content[0].input"),
    "tool_result without id": (lambda b: b["messages"][2]["content"][0].pop("tool_use_id"), "messages[2].content[0].tool_use_id"),
    "is_error not a boolean": (lambda b: b["messages"][2]["content"][0].update(is_error="yes"), "messages[2].content[0].is_error"),
    "client tool of Anthropic's": (lambda b: b.update(tools=[{"type": "bash_20250124", "name": "bash"}]), "tools[0].type"),
    "server tool forced": (lambda b: b.update(tools=[{"type": "web_search_20250305", "name": "web_search"}],
                                              tool_choice={"type": "tool", "name": "web_search"}), "tool_choice.name"),
    "tool without schema": (lambda b: b.update(tools=[{"name": "f"}]), "tools[0].input_schema"),
    "unknown tool_choice": (lambda b: b.update(tool_choice={"type": "some"}), "tool_choice.type"),
    "temperature a string": (lambda b: b.update(temperature="0.5"), "temperature"),
    "temperature not finite": (lambda b: b.update(temperature=float("nan")), "temperature"),
    "stop sequence not a string": (lambda b: b.update(stop_sequences=["a", 1]), "stop_sequences[1]"),
    "system block not text": (lambda b: b.update(system=[{"type": "image"}]), "system[0].type"),
    "user_id not a string": (lambda b: b.update(metadata={"user_id": 5}), "metadata.user_id"),
    "stream not a boolean": (lambda b: b.update(stream="yes"), "stream"),
}


@pytest.mark.parametrize(("mutate", "param"), BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
def test_malformed_requests_name_the_culprit(mutate: Callable[[dict[str, Any]], Any], param: str | None) -> None:
    body = request(
        user("hi"),
        assistant([{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]),
        user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"}]),
        tools=TOOLS,
    )
    valid_chat(to_chat(copy.deepcopy(body)))  # the unmutated body translates
    replaced = mutate(body)
    with pytest.raises(TranslationError) as caught:
        to_chat(replaced if isinstance(replaced, list) else body)
    assert (caught.value.status, caught.value.type, caught.value.param) == (400, "invalid_request_error", param)
    assert caught.value.message.startswith(param or "the body")


# Hostile input: only a dict or a TranslationError, and every dict a valid OpenAI request.

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


texts = st.text(max_size=5)
text_block = st.fixed_dictionaries({"type": st.just("text"), "text": texts})
image_block = st.fixed_dictionaries({"type": st.just("image"), "source": st.fixed_dictionaries(
    {"type": st.just("base64"), "media_type": st.just("image/png"), "data": texts})
    | st.fixed_dictionaries({"type": st.just("url"), "url": texts})})
document_block = st.fixed_dictionaries({"type": st.just("document"), "source": st.fixed_dictionaries(
    {"type": st.sampled_from(["base64", "text", "content"]), "media_type": texts, "data": texts, "content": texts})},
    optional={"title": texts})
tool_result_block = st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": texts}, optional={
    "content": texts | st.lists(text_block | image_block | document_block, max_size=2), "is_error": st.booleans()})
tool_use_block = st.fixed_dictionaries({"type": st.just("tool_use"), "id": texts, "name": texts,
                                        "input": st.dictionaries(texts, scalars.filter(lambda v: not isinstance(v, int)
                                                                                       or -(2**63) <= v < 2**64), max_size=2)})
thinking_block = st.fixed_dictionaries({"type": st.just("thinking"), "thinking": texts, "signature": texts})
user_turn = st.fixed_dictionaries({"role": st.just("user"), "content": st.text(min_size=1, max_size=5)
                                   | st.lists(text_block | image_block | document_block | tool_result_block, min_size=1, max_size=3)})
assistant_turn = st.fixed_dictionaries({"role": st.just("assistant"), "content": st.text(min_size=1, max_size=5)
                                        | st.lists(text_block | tool_use_block | thinking_block, min_size=1, max_size=3)})
tool = st.fixed_dictionaries({"name": texts, "input_schema": st.just({"type": "object"})},
                             optional={"description": texts, "type": st.just("custom"), "strict": st.booleans()})
tool_choice = st.fixed_dictionaries({"type": st.sampled_from(["auto", "any", "none", "tool"]), "name": texts},
                                    optional={"disable_parallel_tool_use": st.booleans()})
anthropic_requests = st.fixed_dictionaries(
    {"model": texts, "max_tokens": st.integers(1, 5), "messages": st.lists(user_turn | assistant_turn, min_size=1, max_size=4)},
    optional={
        "system": texts | st.lists(text_block, max_size=2), "tools": st.lists(tool, max_size=2),
        "tool_choice": tool_choice, "stop_sequences": st.lists(texts, max_size=2),
        "temperature": st.floats(0, 1), "top_p": st.floats(0, 1), "top_k": st.integers(0, 5),
        "metadata": st.fixed_dictionaries({"user_id": texts}), "stream": st.booleans(),
        "output_config": st.fixed_dictionaries({"format": st.fixed_dictionaries(
            {"type": st.just("json_schema"), "schema": st.just({"type": "object"})})}),
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anthropic_requests)
def test_well_formed_requests_give_valid_openai_requests(body: dict[str, Any]) -> None:
    valid_chat(to_chat(body))


def places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every node in a JSON value, the root's included."""
    yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        yield from places(inner, (*path, key))


REMOVED = object()


def damaged(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """`value` with the node at `path` replaced by `new` (or removed, for REMOVED)."""
    if not path:
        return new
    out = copy.copy(value)
    if len(path) == 1 and new is REMOVED:
        del out[path[0]]
    else:
        out[path[0]] = damaged(out[path[0]], path[1:], new)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anthropic_requests, st.data())
def test_hostile_bodies_give_a_valid_openai_request_or_a_translation_error(body: dict[str, Any], data: st.DataObject) -> None:
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(list(places(body))[1:]))  # the root: see the next test
        body = damaged(body, where, data.draw(json_values | st.just(REMOVED)))
    try:
        payload = to_chat(body)
    except TranslationError as exc:
        assert isinstance(exc.message, str)
        assert exc.param is None or isinstance(exc.param, str)
        return
    if payload["messages"]:  # an empty prefill alone leaves none: the upstream's 400 to give
        valid_chat(payload)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json_value_gives_a_request_or_a_translation_error(body: Any) -> None:
    with contextlib.suppress(TranslationError):
        assert isinstance(to_chat(body), dict)


# Answers


def completion(message: dict[str, Any], finish_reason: Any = "stop", **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}
    return {"id": "chatcmpl-abc", "object": "chat.completion", "created": 1, "model": "gpt-4o",
            "choices": [choice], **extra}


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


# Streams


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


# Errors


@pytest.mark.parametrize(("status", "kind"), [
    (400, "invalid_request_error"), (401, "authentication_error"), (402, "billing_error"), (403, "permission_error"),
    (404, "not_found_error"), (405, "invalid_request_error"), (408, "invalid_request_error"), (429, "rate_limit_error"),
    (500, "api_error"), (502, "api_error"), (503, "api_error"), (504, "timeout_error"), (529, "overloaded_error"),
])
def test_error_bodies_carry_anthropics_type_for_the_status(status: int, kind: str) -> None:
    body = error_body(status, "nope")
    assert body == {"type": "error", "error": {"type": kind, "message": "nope"}}
    anthropic.types.ErrorResponse.model_validate(body)


def test_a_too_large_request_is_request_too_large() -> None:
    # Anthropic's documented 413 type; this SDK's ErrorResponse does not list it yet.
    assert error_body(413, "too big") == {"type": "error", "error": {"type": "request_too_large", "message": "too big"}}


# History: chat messages (what memory stores) <-> Anthropic messages


def respelled(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with tool-call arguments in orjson's spelling (the only thing translation changes)."""
    out = copy.deepcopy(messages)
    for message in out:
        for call in message.get("tool_calls", ()):
            call["function"]["arguments"] = orjson.dumps(orjson.loads(call["function"]["arguments"])).decode()
    return out


STORED = [
    {"role": "user", "content": "Weather in Paris and Oslo?"},
    {"role": "assistant", "content": "Checking both.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "9C"},
    {"role": "assistant", "tool_calls": [
        {"id": "call_3", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome", "days": 2}'}}]},
    {"role": "tool", "tool_call_id": "call_3", "content": "24C"},
    {"role": "assistant", "content": "Paris 18C, Oslo 9C, Rome 24C."},
    {"role": "user", "content": [{"type": "text", "text": "Which is this?"},
                                 {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4A=="}}]},
    {"role": "assistant", "content": "Oslo."},
]


def test_chat_history_round_trips_through_anthropic_messages() -> None:
    anthropic_history = valid_anthropic(messages_from_chat(STORED))
    assert anthropic_history[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Oslo"}},
    ]}
    # Consecutive tool messages are one user turn, as Anthropic requires of the results of one turn.
    assert anthropic_history[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "18C"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "9C"},
    ]}
    assert chat_messages(request(*anthropic_history)) == respelled(STORED)


def test_system_messages_are_left_to_the_system_field() -> None:
    history = [{"role": "system", "content": "Be brief."}, {"role": "developer", "content": "No."}, *STORED[:1]]
    assert messages_from_chat(history) == [{"role": "user", "content": "Weather in Paris and Oslo?"}]


def test_a_chat_conversation_continues_through_messages_without_doubling_history() -> None:
    """Stored through /v1/chat/completions; an Anthropic client resends it as the SDK gave it back, plus a turn."""
    answer = completion({"content": None, "tool_calls": STORED[1]["tool_calls"]}, "tool_calls")
    stored = [normalize(m) for m in (STORED[0], answer["choices"][0]["message"], *STORED[2:4])]
    reply = from_chat(answer, model=MODEL)
    resent = [user("Weather in Paris and Oslo?"), assistant(reply["content"]),
              user([{"type": "tool_result", "tool_use_id": "call_1", "content": "18C"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "9C"}]),
              assistant("Paris 18C, Oslo 9C."), user("Thanks")]
    turn = chat_messages(request(*resent))
    assert resent_length(stored, turn) == len(stored)


@pytest.mark.parametrize(("messages", "param"), [
    ({"role": "user"}, "messages"),
    ([{"role": "function", "content": "x", "name": "f"}], "messages[0].role"),
    ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}], "messages[0].content[0].type"),
    ([{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}], "messages[0].content[0].file.file_data"),
    ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id"),
])
def test_chat_history_that_cannot_be_translated_names_the_culprit(messages: Any, param: str) -> None:
    with pytest.raises(TranslationError) as caught:
        messages_from_chat(messages)
    assert caught.value.param == param
