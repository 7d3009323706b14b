"""What Claude Code and the Codex CLI send, translated field by field: the bodies they really sent.

The bodies are tests/clients/fixtures/*.json, captured from the pinned CLI versions by
tests/clients/test_claude_code.py and test_codex.py (which fail when a CLI sends a field a
fixture lacks, and rewrite the fixtures with GATEWAY_REFRESH_CLIENT_FIXTURES=1). Every field
is translated, or left out with a log line; none is refused.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from openai.types.chat import completion_create_params
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from gateway.core.translate import messages as anthropic_api
from gateway.core.translate import responses as responses_api
from gateway.core.translate.dropped import DROPS
from tests.support.agent_clis import fixture

CHAT_STREAM_REQUEST = TypeAdapter(completion_create_params.CompletionCreateParamsStreaming)
STREAM_EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def valid_chat(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload, after the openai SDK's request types accepted it."""
    CHAT_STREAM_REQUEST.validate_python(payload)
    return payload


@pytest.fixture
def drop_log(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The drop log at INFO, having told nothing yet (what earlier tests had told it is restored after)."""
    before = set(DROPS.told)
    DROPS.told.clear()
    with caplog.at_level(logging.INFO, logger="gateway.translate"):
        yield
    DROPS.told |= before


def told_fields(caplog: pytest.LogCaptureFixture) -> set[str]:
    """The fields the drop log named at INFO (its lines read: `<api> request: <field> left out, ...`)."""
    return {
        record.getMessage().split(" request: ", 1)[1].split(" left out", 1)[0]
        for record in caplog.records if record.name == "gateway.translate" and record.levelno == logging.INFO
    }


# Claude Code


def test_claude_code_question_every_top_level_field_is_translated_or_told(
    drop_log: None, caplog: pytest.LogCaptureFixture
) -> None:
    body = fixture("claude_code_question.json")
    payload = valid_chat(anthropic_api.to_chat(copy.deepcopy(body)))
    translated = {"model", "messages", "system", "tools", "metadata", "max_tokens", "stream", "output_config"}
    assert set(body) - translated <= told_fields(caplog)
    assert {"thinking", "context_management", "output_config.effort", "cache_control",
            "tools with defer_loading", "the x-anthropic-billing-header system block"} <= told_fields(caplog)
    assert (payload["model"], payload["max_tokens"], payload["stream"]) == (body["model"], body["max_tokens"], True)
    assert payload["stream_options"] == {"include_usage": True}
    assert len(body["metadata"]["user_id"]) > 64  # OpenAI refuses a `user` that long: left out
    assert "metadata.user_id longer than 64 characters" in told_fields(caplog)
    assert not {"thinking", "context_management", "output_config", "metadata", "user"} & set(payload)


def test_claude_code_system_blocks_are_one_system_message_without_the_billing_header() -> None:
    body = fixture("claude_code_question.json")
    first = anthropic_api.to_chat(body)["messages"][0]
    texts = [block["text"] for block in body["system"] if not block["text"].startswith("x-anthropic-billing-header:")]
    assert len(texts) == len(body["system"]) - 1
    assert first == {"role": "system", "content": "\n".join(texts)}


def test_claude_code_system_message_between_turns_stays_in_its_place() -> None:
    body = fixture("claude_code_question.json")
    roles = [message["role"] for message in body["messages"]]
    assert "system" in roles  # the environment and the deferred tools' names come as a message of its own
    messages = anthropic_api.to_chat(body)["messages"][1:]
    assert [message["role"] for message in messages] == roles
    for sent, chat in zip(body["messages"], messages, strict=True):
        if sent["role"] == "system":
            assert chat["content"] == "\n".join(block["text"] for block in sent["content"])


def test_claude_code_user_text_blocks_are_text_parts() -> None:
    body = fixture("claude_code_question.json")
    user = next(message for message in body["messages"] if message["role"] == "user")
    chat = next(message for message in anthropic_api.to_chat(body)["messages"] if message["role"] == "user")
    assert chat["content"] == [{"type": "text", "text": block["text"]} for block in user["content"]]


def test_claude_code_tools_are_functions_and_the_deferred_placeholder_is_left_out() -> None:
    body = fixture("claude_code_question.json")
    deferred = [tool["name"] for tool in body["tools"] if tool.get("defer_loading")]
    assert deferred  # Claude Code keeps its tool search on with one deferred placeholder
    tools = anthropic_api.to_chat(body)["tools"]
    assert [tool["function"]["name"] for tool in tools] == [
        tool["name"] for tool in body["tools"] if not tool.get("defer_loading")]
    for tool, sent in zip(tools, (tool for tool in body["tools"] if not tool.get("defer_loading")), strict=True):
        assert tool == {"type": "function", "function": {
            "name": sent["name"], "description": sent["description"], "parameters": sent["input_schema"]}}


def test_claude_code_tool_use_and_tool_result_are_a_call_and_a_tool_message() -> None:
    body = fixture("claude_code_tool_result.json")
    payload = valid_chat(anthropic_api.to_chat(body))
    use = body["messages"][-2]["content"][-1]
    result = body["messages"][-1]["content"][-1]
    assert (use["type"], result["type"]) == ("tool_use", "tool_result")
    call, answer = payload["messages"][-2:]
    assert call["tool_calls"][0]["id"] == use["id"]
    assert call["tool_calls"][0]["function"]["name"] == use["name"]
    assert answer == {"role": "tool", "tool_call_id": use["id"], "content": result["content"]}


def test_claude_code_tool_search_result_loads_the_deferred_tool_it_names(
    drop_log: None, caplog: pytest.LogCaptureFixture
) -> None:
    body = fixture("claude_code_tool_search.json")
    (reference,) = body["messages"][-1]["content"][-1]["content"]
    assert reference["type"] == "tool_reference"
    loaded = next(tool for tool in body["tools"] if tool["name"] == reference["tool_name"])
    assert loaded["defer_loading"] is True
    payload = valid_chat(anthropic_api.to_chat(body))
    (function,) = [tool["function"] for tool in payload["tools"] if tool["function"]["name"] == loaded["name"]]
    assert function == {"name": loaded["name"], "parameters": loaded["input_schema"], "description": loaded["description"]}
    assert payload["messages"][-1] == {"role": "tool", "tool_call_id": body["messages"][-1]["content"][-1]["tool_use_id"],
                                       "content": f"<functions><function>{orjson.dumps(function).decode()}</function></functions>"}
    names = {tool["function"]["name"] for tool in payload["tools"]}
    assert names == {tool["name"] for tool in body["tools"] if not tool.get("defer_loading") or tool is loaded}
    assert "tools with defer_loading" in told_fields(caplog)  # the placeholder is still left out


def test_claude_code_web_search_request_is_answered_without_the_server_tool(
    drop_log: None, caplog: pytest.LogCaptureFixture
) -> None:
    body = fixture("claude_code_web_search.json")
    (tool,) = body["tools"]
    assert tool["type"].startswith("web_search_") and body["tool_choice"] == {"type": "auto"}
    payload = valid_chat(anthropic_api.to_chat(body))
    assert not {"tools", "tool_choice"} & set(payload)
    assert payload["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": body["messages"][-1]["content"][0]["text"]}]}
    assert f"the {tool['type']} tool" in told_fields(caplog)


def test_claude_code_answer_streams_back_as_its_events() -> None:
    stream = anthropic_api.StreamTranslator("claude-opus-5-5", "msg_1")
    events = stream.feed({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]})
    events += stream.finish({"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4})
    kinds = [event.split(b"\n", 1)[0] for event in events]
    assert kinds == [b"event: message_start", b"event: content_block_start", b"event: content_block_delta",
                     b"event: content_block_stop", b"event: message_delta", b"event: message_stop"]


# Codex


@pytest.mark.parametrize(("name", "told"), [
    ("codex_question.json", {"include", "client_metadata", "reasoning.summary", "the web_search tool"}),
    ("codex_default_question.json", {"include", "client_metadata", "reasoning.context"}),
])
def test_codex_question_every_top_level_field_is_translated_or_told(
    name: str, told: set[str], drop_log: None, caplog: pytest.LogCaptureFixture
) -> None:
    body = fixture(name)
    payload = valid_chat(responses_api.to_chat(copy.deepcopy(body)))
    translated = {"model", "stream", "input", "tools", "tool_choice", "parallel_tool_calls", "reasoning",
                  "prompt_cache_key", "store", "instructions", "text"}
    assert set(body) - translated <= told_fields(caplog)
    assert told <= told_fields(caplog)
    assert not {"include", "client_metadata", "store", "reasoning", "input", "text"} & set(payload)
    assert (payload["model"], payload["stream"], payload["stream_options"]) == (body["model"], True, {"include_usage": True})
    assert (payload["tool_choice"], payload["parallel_tool_calls"]) == (body["tool_choice"], body["parallel_tool_calls"])
    assert payload["prompt_cache_key"] == body["prompt_cache_key"]
    assert payload.get("reasoning_effort") == body["reasoning"].get("effort")
    assert payload.get("verbosity") == body.get("text", {}).get("verbosity")


def test_codex_developer_messages_are_system_messages_in_their_place() -> None:
    body = fixture("codex_question.json")
    messages = responses_api.to_chat(body)["messages"]
    assert [message["role"] for message in messages] == [
        "system" if item["role"] == "developer" else item["role"] for item in body["input"]]
    for item, message in zip(body["input"], messages, strict=True):
        assert message["content"] == [{"type": "text", "text": part["text"]} for part in item["content"]]


def test_codex_tools_are_functions_namespaces_flattened_and_web_search_left_out() -> None:
    body = fixture("codex_question.json")
    kinds = {tool["type"] for tool in body["tools"]}
    assert kinds == {"function", "namespace", "web_search"}
    expected = []
    for tool in body["tools"]:
        if tool["type"] == "function":
            expected.append((tool["name"], tool))
        elif tool["type"] == "namespace":
            expected += [(f"{tool['name']}__{member['name']}", member) for member in tool["tools"]]
    tools = responses_api.to_chat(body)["tools"]
    assert [tool["function"]["name"] for tool in tools] == [name for name, _ in expected]
    for tool, (name, sent) in zip(tools, expected, strict=True):
        assert tool["function"] == {"name": name, "description": sent["description"],
                                    "parameters": sent["parameters"], "strict": sent["strict"]}


def test_codex_function_call_and_its_output_are_a_call_and_a_tool_message() -> None:
    body = fixture("codex_tool_output.json")
    call, output = body["input"][-2:]
    assert (call["type"], output["type"]) == ("function_call", "function_call_output")
    messages = valid_chat(responses_api.to_chat(body))["messages"]
    assert messages[-2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": call["call_id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]}
    assert messages[-1] == {"role": "tool", "tool_call_id": call["call_id"], "content": output["output"]}


def test_codex_image_a_tool_returned_follows_the_tool_message_in_a_user_message() -> None:
    body = fixture("codex_view_image.json")
    call, output = body["input"][-2:]
    (image,) = output["output"]
    assert (call["name"], image["type"]) == ("view_image", "input_image")
    tool, attachments = valid_chat(responses_api.to_chat(body))["messages"][-2:]
    assert tool == {"role": "tool", "tool_call_id": call["call_id"], "content": ""}
    assert attachments == {"role": "user", "content": [
        {"type": "text", "text": f"Attachments of tool result {call['call_id']}:"},
        {"type": "image_url", "image_url": {"url": image["image_url"], "detail": image["detail"]}}]}


def test_codex_call_of_an_mcp_tool_in_the_history_is_its_flattened_function() -> None:
    body = fixture("codex_mcp_tool_output.json")
    call, output = body["input"][-2:]
    assert (call["type"], call["namespace"]) == ("function_call", "mcp__demo")
    payload = valid_chat(responses_api.to_chat(body))
    assert f"mcp__demo__{call['name']}" in [tool["function"]["name"] for tool in payload["tools"]]
    (sent,) = payload["messages"][-2]["tool_calls"]
    assert sent == {"id": call["call_id"], "type": "function",
                    "function": {"name": f"mcp__demo__{call['name']}", "arguments": call["arguments"]}}
    assert payload["messages"][-1]["tool_call_id"] == output["call_id"]


def namespaced_body() -> tuple[dict[str, Any], str, str]:
    """Codex's question, and one of its namespaced tools: (body, namespace, name)."""
    body = fixture("codex_question.json")
    group = next(tool for tool in body["tools"] if tool["type"] == "namespace")
    return body, group["name"], group["tools"][0]["name"]


def test_a_call_of_a_namespaced_tool_comes_back_with_its_namespace() -> None:
    body, namespace, name = namespaced_body()
    call = {"id": "call_9", "type": "function", "function": {"name": f"{namespace}__{name}", "arguments": "{}"}}
    answer = {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]}, "finish_reason": "tool_calls"}]}
    response = responses_api.from_chat(answer, request=body, response_id="resp_1", created_at=1)
    Response.model_validate(response)
    (item,) = response["output"]
    assert (item["type"], item["namespace"], item["name"], item["call_id"]) == ("function_call", namespace, name, "call_9")


def test_a_streamed_call_of_a_namespaced_tool_comes_back_with_its_namespace() -> None:
    body, namespace, name = namespaced_body()
    stream = responses_api.StreamTranslator(body, "resp_1", 1)
    fragment = {"index": 0, "id": "call_9", "type": "function", "function": {"name": f"{namespace}__{name}", "arguments": "{}"}}
    events = stream.feed({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": "tool_calls"}]})
    events += stream.finish()
    payloads = [orjson.loads(event.split(b"\ndata: ", 1)[1]) for event in events]
    items = [payload["item"] for payload in payloads if payload["type"].startswith("response.output_item.")]
    assert [(item["namespace"], item["name"]) for item in items] == [(namespace, name)] * 2  # added, done
    (final,) = payloads[-1]["response"]["output"]
    assert (final["namespace"], final["name"]) == (namespace, name)


def test_a_namespaced_call_in_the_history_is_its_flattened_function() -> None:
    body, namespace, name = namespaced_body()
    body["input"] += [{"type": "function_call", "namespace": namespace, "name": name, "call_id": "call_9", "arguments": "{}"},
                      {"type": "function_call_output", "call_id": "call_9", "output": "done"}]
    messages = responses_api.to_chat(body)["messages"]
    assert messages[-2]["tool_calls"][0]["function"]["name"] == f"{namespace}__{name}"


# Codex with its own default model: tools in an additional_tools item, a free-form exec tool


def test_codex_additional_tools_are_the_requests_tools_the_root_namespace_unprefixed() -> None:
    body = fixture("codex_default_question.json")
    (added,) = [item for item in body["input"] if item["type"] == "additional_tools"]
    assert "tools" not in body  # every tool comes in the item
    expected = []
    for group in added["tools"]:
        assert group["type"] == "namespace"
        prefix = "" if group["name"] == "functions" else f"{group['name']}__"
        expected += [f"{prefix}{tool['name']}" for tool in group["tools"]]
    payload = responses_api.to_chat(body)
    assert [tool["function"]["name"] for tool in payload["tools"]] == expected
    assert "exec" in expected and any("__" in name for name in expected)
    # the item is no message: the chat messages are the other items, developer ones as system messages
    assert [message["role"] for message in payload["messages"]] == [
        "system" if item["role"] == "developer" else item["role"] for item in body["input"] if item["type"] == "message"]


def test_codex_free_form_exec_tool_is_a_function_of_one_string_described_by_its_grammar() -> None:
    body = fixture("codex_default_question.json")
    (added,) = [item for item in body["input"] if item["type"] == "additional_tools"]
    custom = next(tool for group in added["tools"] for tool in group["tools"] if tool["type"] == "custom")
    assert custom["format"]["type"] == "grammar"
    function = next(tool["function"] for tool in responses_api.to_chat(body)["tools"]
                    if tool["function"]["name"] == custom["name"])
    assert function["description"] == custom["description"]
    assert function["parameters"]["required"] == ["input"] and function["parameters"]["additionalProperties"] is False
    described = function["parameters"]["properties"]["input"]
    assert described["type"] == "string" and custom["format"]["definition"] in described["description"]
    assert custom["format"]["syntax"] in described["description"]


def test_codex_custom_tool_call_and_its_output_are_a_call_and_a_tool_message() -> None:
    body = fixture("codex_default_tool_output.json")
    call, output = body["input"][-2:]
    assert (call["type"], output["type"]) == ("custom_tool_call", "custom_tool_call_output")
    messages = valid_chat(responses_api.to_chat(body))["messages"]
    (sent,) = messages[-2]["tool_calls"]
    assert (sent["id"], sent["function"]["name"]) == (call["call_id"], call["name"])
    assert orjson.loads(sent["function"]["arguments"]) == {"input": call["input"]}
    assert messages[-1] == {"role": "tool", "tool_call_id": call["call_id"],
                            "content": [{"type": "text", "text": part["text"]} for part in output["output"]]}


def exec_answer(body: dict[str, Any], script: str) -> dict[str, Any]:
    arguments = orjson.dumps({"input": script}).decode()
    call = {"id": "call_js", "type": "function", "function": {"name": "exec", "arguments": arguments}}
    return {"id": "c", "object": "chat.completion", "created": 1, "model": body["model"], "choices": [
        {"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]}, "finish_reason": "tool_calls"}]}


def test_a_call_of_the_free_form_tool_comes_back_as_a_custom_tool_call() -> None:
    body = fixture("codex_default_question.json")
    script = 'text(await tools.exec_command({cmd: "ls"}));'
    response = responses_api.from_chat(exec_answer(body, script), request=body, response_id="resp_1", created_at=1)
    Response.model_validate(response)
    (item,) = response["output"]
    assert (item["type"], item["name"], item["call_id"], item["input"]) == ("custom_tool_call", "exec", "call_js", script)
    assert "namespace" not in item and item["id"].startswith("ctc_")


def test_a_streamed_call_of_the_free_form_tool_sends_its_input_whole_when_complete() -> None:
    body = fixture("codex_default_question.json")
    script = 'text("a \\"quoted\\" line");'
    arguments = orjson.dumps({"input": script}).decode()
    stream = responses_api.StreamTranslator(body, "resp_1", 1)
    events = stream.feed({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_js", "type": "function", "function": {"name": "exec", "arguments": arguments[:9]}}]}}]})
    events += stream.feed({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": arguments[9:]}}]}, "finish_reason": "tool_calls"}]})
    events += stream.finish()
    payloads = [orjson.loads(event.split(b"\ndata: ", 1)[1]) for event in events]
    for payload in payloads:
        STREAM_EVENT.validate_python(payload)
    kinds = [payload["type"] for payload in payloads]
    assert "response.function_call_arguments.delta" not in kinds
    assert kinds[2:] == ["response.output_item.added", "response.custom_tool_call_input.delta",
                         "response.custom_tool_call_input.done", "response.output_item.done", "response.completed"]
    assert payloads[3]["delta"] == payloads[4]["input"] == script
    assert payloads[5]["item"]["type"] == "custom_tool_call" and payloads[5]["item"]["input"] == script
    assert payloads[6]["response"]["output"] == [payloads[5]["item"]]
