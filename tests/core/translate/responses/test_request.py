"""A Responses request as a chat payload (responses.request).

Options, what is refused or dropped, malformed and hostile bodies.
"""

from __future__ import annotations

import copy
import logging
from typing import Any
from unittest.mock import patch

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import Response

from gateway.core.errors import InvalidRequestError
from gateway.core.translate import TranslationError
from gateway.core.translate.dropped import DropLog
from gateway.core.translate.responses.answer import from_chat
from gateway.core.translate.responses.request import to_chat
from tests.support.responses_translation import (
    CREATED,
    FUZZ,
    JSONISH,
    TEXT,
    TEXT_CHUNKS,
    USAGE,
    WEATHER,
    body,
    completion,
    now_and_then,
    objects,
    one,
    run_stream,
)


def test_tool_settings_without_tools_are_left_out() -> None:
    # Chat completions refuses tool_choice and parallel_tool_calls when no tools are given.
    payload = to_chat(body(tools=[], tool_choice="auto", parallel_tool_calls=True))
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & payload.keys()


def test_sampling_limits_and_reasoning() -> None:
    payload = to_chat(body(max_output_tokens=300, temperature=0.2, top_p=1, user="u-1",
                           reasoning={"effort": "high", "summary": "auto"}, text={"verbosity": "low"}))
    assert payload == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 300,
                       "temperature": 0.2, "top_p": 1, "user": "u-1", "reasoning_effort": "high", "verbosity": "low"}


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


def test_a_web_search_the_request_forces_is_refused() -> None:
    with pytest.raises(TranslationError) as caught:
        to_chat(body(tools=[{"type": "web_search"}], tool_choice={"type": "web_search"}))
    assert (caught.value.param, caught.value.code) == ("tool_choice.type", "unsupported_value")


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
