"""The parts of a message memory keeps, and the length of its text."""

from __future__ import annotations

from gateway.core.memory.messages import normalize, text_length


def call(call_id: str, name: str, arguments: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_message_in_shape_is_kept_as_it_is() -> None:
    message = {"role": "user", "content": "hi", "name": "ann"}
    assert normalize(message) is message  # not copied: nothing changes it in place


def test_normalize_drops_empty_tool_calls() -> None:
    assert normalize({"role": "assistant", "content": "hi", "tool_calls": []}) == {"role": "assistant", "content": "hi"}


def test_normalize_drops_extras_and_keeps_tool_fields() -> None:
    message = {"role": "assistant", "content": None, "refusal": None, "annotations": [],
               "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}, "index": 0}]}
    assert normalize(message) == {"role": "assistant", "tool_calls": [call("c", "f", "{}")]}


def test_a_call_missing_its_parts_gets_them_empty_and_a_call_that_is_no_object_stays() -> None:
    message = {"role": "assistant", "tool_calls": [{"id": "c"}, "odd"]}
    assert normalize(message)["tool_calls"] == [{"id": "c", "type": "function", "function": {"name": None, "arguments": ""}}, "odd"]


def test_text_length_counts_a_string_or_the_text_parts() -> None:
    assert text_length({"role": "user", "content": "hello"}) == 5
    parts = [{"type": "text", "text": "ab"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "cde"}]
    assert text_length({"role": "user", "content": parts}) == 5
    assert text_length({"role": "assistant", "content": None}) == 0
