"""A memory conversation for a Responses upstream: chat messages as input items, a response's output as the kept message."""

from __future__ import annotations

from gateway.core.translate.responses.history import items_of, output_message
from gateway.core.translate.responses.names import tool_names

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


def test_messages_become_input_items() -> None:
    messages = [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sunny"}]},
        {"role": "assistant", "content": "Sunny."},
    ]  # fmt: skip
    assert items_of(messages, {}) == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": [{"type": "input_text", "text": "What is this?"},
                                     {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "auto"}]},
        {"role": "assistant", "content": "Let me look."},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"role": "assistant", "content": "Sunny."},
    ]  # fmt: skip


def test_calls_of_namespaced_and_custom_tools_go_back_as_they_were() -> None:
    request = {"tools": [{"type": "namespace", "name": "shell", "tools": [{"type": "function", "name": "run"}]},
                         {"type": "custom", "name": "patch"}]}  # fmt: skip
    calls = [{"id": "c1", "type": "function", "function": {"name": "shell__run", "arguments": "{}"}},
             {"id": "c2", "type": "function", "function": {"name": "patch", "arguments": '{"input":"*** diff"}'}}]  # fmt: skip
    messages = [{"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"}, {"role": "tool", "tool_call_id": "c2", "content": "done"}]  # fmt: skip
    assert items_of(messages, tool_names(request)) == [
        {"type": "function_call", "call_id": "c1", "name": "run", "namespace": "shell", "arguments": "{}"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "patch", "input": "*** diff"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "done"},
    ]


def test_a_responses_output_is_kept_as_one_chat_message() -> None:
    response = {"output": [
        {"type": "reasoning", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hel"},
                                                             {"type": "output_text", "text": "lo"}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "custom_tool_call", "call_id": "call_2", "name": "run", "namespace": "shell", "input": "ls"},
        {"type": "web_search_call", "status": "completed"},
    ]}  # fmt: skip
    assert output_message(response) == {
        "role": "assistant",
        "content": "Hello",
        "tool_calls": [CALL, {"id": "call_2", "type": "function", "function": {"name": "shell__run", "arguments": '{"input":"ls"}'}}],
    }


def test_an_output_of_calls_alone_has_no_content_and_a_refusal_is_kept() -> None:
    calls_only = output_message({"output": [{"type": "function_call", "call_id": "call_1", "name": "get_weather",
                                             "arguments": '{"city":"Paris"}'}]})  # fmt: skip
    assert calls_only == {"role": "assistant", "content": None, "tool_calls": [CALL]}
    refused = output_message({"output": [{"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}]})
    assert refused == {"role": "assistant", "content": "No.", "refusal": "No."}  # its text for upstreams reading content
    assert output_message({"status": "failed"}) is None and output_message(None) is None


def test_a_refusal_and_an_empty_answer_go_back_as_assistant_messages() -> None:
    messages = [
        {"role": "user", "content": "how to pick a lock?"},
        {"role": "assistant", "content": "", "refusal": "I cannot help with that."},
        {"role": "user", "content": "say nothing"},
        {"role": "assistant", "content": None},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
    ]
    assert items_of(messages, {}) == [
        {"role": "user", "content": "how to pick a lock?"},
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot help with that."}]},
        {"role": "user", "content": "say nothing"},
        {"role": "assistant", "content": ""},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
    ]


def test_a_refusal_memory_keeps_as_its_content_too_goes_back_as_the_refusal_alone() -> None:
    """A chat turn's refusal is stored with its text as content (gateway.core.memory.messages): one refusal part."""
    stored = {"role": "assistant", "content": "I cannot help with that.", "refusal": "I cannot help with that."}
    partly = {"role": "assistant", "content": "Partly.", "refusal": "Not all of it."}
    assert items_of([stored, partly], {}) == [
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot help with that."}]},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Partly.", "annotations": []}, {"type": "refusal", "refusal": "Not all of it."},
        ]},
    ]  # fmt: skip
