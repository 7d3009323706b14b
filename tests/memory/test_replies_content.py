"""What memory keeps of a reply's content: what OpenAI's chat API takes back of an assistant, nothing else."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.memory.replies import MalformedReply, ReplyAssembler, malformed_reply, reply_message

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

STORABLE = {
    "text": {"role": "assistant", "content": "hi"},
    "empty": {"role": "assistant"},
    "calls-without-content": {"role": "assistant", "tool_calls": [CALL]},
    "refusal": {"role": "assistant", "content": "no", "refusal": "no"},
    "text-parts": {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    "refusal-part": {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
}

UNSTORABLE = {
    "number": ({"role": "assistant", "content": 5}, "content is not a string"),
    "object": ({"role": "assistant", "content": {"text": "hi"}}, "content is not a string"),
    "true": ({"role": "assistant", "content": True}, "content is not a string"),
    "empty-array": ({"role": "assistant", "content": []}, "content is not a string"),
    "image-part": ({"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}, "content[0]"),
    "text-part-of-a-number": ({"role": "assistant", "content": [{"type": "text", "text": 5}]}, "content[0]"),
    "text-part-with-extras": ({"role": "assistant", "content": [{"type": "text", "text": "a", "x": 1}]}, "content[0]"),
    "part-not-an-object": ({"role": "assistant", "content": ["a"]}, "content[0]"),
    "part-of-a-list-type": ({"role": "assistant", "content": [{"type": ["text"], "text": "a"}]}, "content[0]"),
    "user-role": ({"role": "user", "content": "hi"}, "role is not assistant"),
    "number-name": ({"role": "assistant", "content": "hi", "name": 5}, "name is not a string"),
    "bad-call-with-good-content": ({"role": "assistant", "content": "hi", "tool_calls": [{"id": 5}]}, "tool_calls[0].id"),
}


@pytest.mark.parametrize("message", STORABLE.values(), ids=STORABLE.keys())
def test_replies_openai_takes_back_are_storable(message: dict[str, Any]) -> None:
    assert malformed_reply(message) is None


@pytest.mark.parametrize(("message", "problem"), UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_replies_openai_would_refuse_on_every_later_turn_are_not(message: dict[str, Any], problem: str) -> None:
    assert problem in (malformed_reply(message) or "")


def test_a_number_as_an_answers_content_is_kept_as_it_came_and_then_refused() -> None:
    """normalize keeps what it does not know the meaning of: the check, not the taking, refuses it."""
    message = reply_message({"choices": [{"message": {"role": "assistant", "content": 5}}]})
    assert message == {"role": "assistant", "content": 5}
    assert malformed_reply(message) is not None


def assembled(*deltas: dict[str, Any]) -> ReplyAssembler:
    assembler = ReplyAssembler(max_bytes=1 << 20)
    for delta in deltas:
        raw = orjson.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        assembler.feed(orjson.loads(raw))
    assembler.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return assembler


def test_a_streamed_content_of_text_parts_is_kept_as_its_text() -> None:
    parts = [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]
    message = assembled({"role": "assistant", "content": parts}, {"content": [{"type": "refusal", "refusal": "no"}]}).message()
    assert message == {"role": "assistant", "content": "Hello", "refusal": "no"}


@pytest.mark.parametrize(
    "delta",
    [{"content": 5}, {"content": [{"type": "image_url", "image_url": {"url": "x"}}]}, {"content": {"text": "x"}}, {"refusal": 5}],
    ids=["number", "image-part", "object", "number-refusal"],
)
def test_a_streamed_delta_memory_cannot_keep_makes_the_reply_malformed(delta: dict[str, Any]) -> None:
    """Never dropped in silence: the turn would be stored without what the client was shown."""
    assembler = assembled({"role": "assistant", "content": "fine"}, delta)
    with pytest.raises(MalformedReply):
        assembler.message()
