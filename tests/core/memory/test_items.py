"""Items given to the Conversations API as the chat messages memory keeps, and stored messages as items with their ids."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.errors import InvalidRequestError
from gateway.core.memory.entries import Entry
from gateway.core.memory.items import entry_of_item, items_of_entries, messages_of_items


def test_items_are_kept_as_chat_messages_a_function_call_joining_the_assistant_before_it() -> None:
    messages = messages_of_items(
        [
            {"type": "message", "role": "user", "content": "weather?"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "checking"}]},
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ]
    )
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[1]["content"] == "checking" and messages[1]["tool_calls"][0]["id"] == "c1"
    assert messages_of_items([]) == []


@pytest.mark.parametrize(
    ("items", "param"),
    [
        ("hello", "items"),
        ([{"type": "message", "role": "user", "content": "x"}] * 21, "items"),
        ([{"type": "bogus"}], "items[0].type"),
        ([{"type": "message", "role": "king", "content": "x"}], "items[0].role"),
        ([42], "items[0]"),
    ],
)
def test_items_that_are_no_items_are_a_400_naming_them(items: Any, param: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        messages_of_items(items)
    assert caught.value.status == 400 and caught.value.param == param, caught.value.message


def test_a_stored_message_shows_as_its_items_each_with_an_id() -> None:
    entries = [
        Entry({"role": "user", "content": "weather?"}, item_id="msg_a"),
        Entry(
            {"role": "assistant", "content": "checking", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
            ]},
            item_id="msg_b",
        ),
        Entry({"role": "tool", "tool_call_id": "c1", "content": "sunny"}, item_id="msg_c"),
    ]
    items = list(items_of_entries(entries))
    assert [(i["id"], i["type"]) for i in items] == [
        ("msg_a", "message"), ("msg_b", "message"), ("msg_b_1", "function_call"), ("msg_c", "function_call_output")
    ]
    assert items[0]["content"] == [{"type": "input_text", "text": "weather?"}]
    assert items[1]["content"][0]["type"] == "output_text" and items[1]["status"] == "completed"
    assert items[2]["call_id"] == "c1" and items[3]["output"] == "sunny"
    found = entry_of_item(entries, "msg_b_1")
    assert found is not None and found[0] is entries[1] and found[1]["type"] == "function_call"
    assert entry_of_item(entries, "msg_b_9") is None and entry_of_item(entries, "") is None


def test_a_refusal_and_an_empty_answer_are_items_with_the_ids_of_their_messages() -> None:
    entries = [
        Entry({"role": "user", "content": "how to pick a lock?"}, item_id="msg_a"),
        Entry({"role": "assistant", "content": "", "refusal": "I cannot help with that."}, item_id="msg_b"),
        Entry({"role": "assistant", "content": ""}, item_id="msg_c"),
        Entry({"role": "assistant", "content": "Partly.", "refusal": "Not all of it."}, item_id="msg_d"),
    ]
    items = list(items_of_entries(entries))
    assert [(i["id"], i["type"], i["role"]) for i in items] == [
        ("msg_a", "message", "user"), ("msg_b", "message", "assistant"),
        ("msg_c", "message", "assistant"), ("msg_d", "message", "assistant"),
    ]  # fmt: skip
    assert items[1]["content"] == [{"type": "refusal", "refusal": "I cannot help with that."}]
    assert items[2]["content"] == [{"type": "output_text", "text": "", "annotations": [], "logprobs": []}]
    assert items[3]["content"] == [
        {"type": "output_text", "text": "Partly.", "annotations": [], "logprobs": []},
        {"type": "refusal", "refusal": "Not all of it."},
    ]
    found = entry_of_item(entries, "msg_b")
    assert found is not None and found[0] is entries[1]


def test_a_refusal_item_given_is_kept_and_shows_as_given() -> None:
    given = {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}
    messages = messages_of_items([given])
    assert messages == [{"role": "assistant", "content": "", "refusal": "No."}]
    (item,) = items_of_entries([Entry(messages[0], item_id="msg_r")])
    assert item == {"id": "msg_r", "status": "completed", **given}


@pytest.mark.parametrize("kind", ["reasoning", "additional_tools"])
def test_an_item_chat_messages_cannot_hold_is_refused_beside_a_message_not_dropped(kind: str) -> None:
    items = [{"type": "message", "role": "user", "content": "hi"}, {"type": kind, "id": "rs_1", "summary": []}]
    with pytest.raises(InvalidRequestError) as caught:
        messages_of_items(items)
    assert caught.value.status == 400 and caught.value.param == "items[1]" and caught.value.code == "unsupported_value"
    assert kind in caught.value.message


def test_item_kinds_chat_messages_have_no_word_for_come_back_as_their_chat_equivalent() -> None:
    """The mapping docs/memory.md states: developer as system, custom and namespaced calls as function calls."""
    given = [
        {"type": "message", "role": "developer", "content": "be brief"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "patch", "input": "*** diff"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
        {"type": "function_call", "call_id": "c2", "namespace": "shell", "name": "run", "arguments": "{}"},
    ]
    entries = [Entry(message, item_id=f"msg_{n}") for n, message in enumerate(messages_of_items(given))]
    shown = [{k: v for k, v in item.items() if k not in ("id", "status")} for item in items_of_entries(entries)]
    assert shown == [
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "be brief"}]},
        {"type": "function_call", "call_id": "c1", "name": "patch", "arguments": '{"input":"*** diff"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "function_call", "call_id": "c2", "name": "shell__run", "arguments": "{}"},
    ]
