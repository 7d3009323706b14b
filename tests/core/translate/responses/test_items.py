"""A Responses request's input items as chat messages (responses.items)."""

from __future__ import annotations

import pytest

from gateway.core.translate import TranslationError
from gateway.core.translate.responses.request import to_chat
from tests.support.responses_translation import (
    body,
)


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
