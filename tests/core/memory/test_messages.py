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


REFUSAL = "I can't help with that."


def test_an_assistant_refusal_is_kept_and_is_its_content_when_it_has_none() -> None:
    """OpenAI's structured-outputs refusal: content null. Kept, and readable by upstreams that read content alone."""
    answered = {"role": "assistant", "content": None, "refusal": REFUSAL, "annotations": []}
    assert normalize(answered) == {"role": "assistant", "content": REFUSAL, "refusal": REFUSAL}
    assert normalize({"role": "assistant", "refusal": REFUSAL}) == {"role": "assistant", "content": REFUSAL, "refusal": REFUSAL}
    assert text_length(normalize(answered)) == len(REFUSAL)  # windows count it


def test_a_refusal_beside_text_keeps_both_as_they_are() -> None:
    both = {"role": "assistant", "content": "Partly.", "refusal": "Not all of it."}
    assert normalize(both) == both
    responses_turn = {"role": "assistant", "content": "", "refusal": REFUSAL}  # how a Responses turn keeps one
    assert normalize(responses_turn) == responses_turn


def test_a_stored_refusal_resent_by_the_client_is_the_same_message() -> None:
    """The SDK's message sent back (content null) normalizes to what memory stored: a resent copy, not a new turn."""
    stored = normalize({"role": "assistant", "content": None, "refusal": REFUSAL})
    resent = {"role": "assistant", "content": None, "refusal": REFUSAL, "tool_calls": None, "audio": None}
    assert normalize(resent) == stored
    assert normalize(stored) == stored


def test_a_refusal_is_kept_on_assistant_messages_only_and_only_as_text() -> None:
    assert normalize({"role": "user", "content": "hi", "refusal": "x"}) == {"role": "user", "content": "hi"}
    assert normalize({"role": "assistant", "content": "hi", "refusal": ["x"]}) == {"role": "assistant", "content": "hi"}
    assert normalize({"role": "assistant", "content": "hi", "refusal": ""}) == {"role": "assistant", "content": "hi"}
