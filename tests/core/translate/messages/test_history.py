"""Stored chat messages as Anthropic messages (messages.history), and back through the request translation."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from gateway.core.memory.messages import normalize
from gateway.core.memory.resent import resent_length
from gateway.core.translate import TranslationError
from gateway.core.translate.messages.answer import from_chat
from gateway.core.translate.messages.history import messages_from_chat
from tests.support.anthropic_translation import (
    MODEL,
    assistant,
    chat_messages,
    completion,
    request,
    user,
    valid_anthropic,
)


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


@pytest.mark.parametrize(
    "refused",
    [
        {"role": "assistant", "content": "", "refusal": "I cannot help with that."},  # a Responses turn's
        {"role": "assistant", "content": None, "refusal": "I cannot help with that."},
        normalize({"role": "assistant", "content": None, "refusal": "I cannot help with that."}),  # a chat turn's
    ],
    ids=["responses-turn", "content-null", "chat-turn"],
)
def test_a_stored_refusal_is_the_assistant_s_text_for_anthropic(refused: dict[str, Any]) -> None:
    """Anthropic has no refusal field, and refuses an assistant turn without text."""
    history = valid_anthropic(messages_from_chat([{"role": "user", "content": "pick a lock"}, refused]))
    assert history[1] == {"role": "assistant", "content": "I cannot help with that."}
