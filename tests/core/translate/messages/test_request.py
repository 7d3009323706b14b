"""An Anthropic Messages request as a chat payload (messages.request).

Options, tools, tool choice, what is left out, malformed and hostile bodies; every payload is
checked with the `openai` SDK's request types.
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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.core.translate import TranslationError
from gateway.core.translate.dropped import DropLog
from gateway.core.translate.messages.answer import from_chat
from gateway.core.translate.messages.request import to_chat
from tests.support.anthropic_translation import (
    FUNCTIONS,
    MODEL,
    TOOLS,
    assistant,
    json_values,
    request,
    scalars,
    user,
    valid_chat,
)


def test_the_translation_imports_no_provider_library_and_no_io() -> None:
    """An all-OpenAI gateway must never import litellm; the translation is ours for that reason."""
    code = ("import sys, gateway.core.translate.messages; "
            "print(sorted({'litellm', 'aiohttp', 'anthropic', 'openai', 'httpx'} & set(sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_a_minimal_request_keeps_model_and_max_tokens_and_adds_nothing() -> None:
    assert valid_chat(to_chat(request(user("hi")))) == {
        "model": MODEL, "max_tokens": 256, "messages": [{"role": "user", "content": "hi"}],
    }


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
