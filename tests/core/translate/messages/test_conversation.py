"""A request's system prompt and messages as chat messages (messages.conversation).

Text, images, documents, tool use and tool results, each payload checked with the `openai` SDK's
request types.
"""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.translate import TranslationError
from gateway.core.translate.messages.request import to_chat
from tests.support.anthropic_translation import (
    TOOLS,
    assistant,
    chat_messages,
    request,
    user,
)


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


def test_an_empty_final_assistant_prefill_is_left_out() -> None:
    assert chat_messages(request(user("hi"), assistant(""))) == [{"role": "user", "content": "hi"}]
