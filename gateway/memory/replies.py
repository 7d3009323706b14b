"""The assistant message to store: taken from a complete answer, or assembled from stream deltas."""

from __future__ import annotations

from typing import Any, Final

from gateway.core.memory.entries import Message
from gateway.core.memory.messages import normalize
from gateway.core.pieces import TextPieces


def reply_message(answer: Any) -> Message | None:
    """Choice 0's message of a chat completion, or None when it has none."""
    if type(answer) is not dict:
        return None
    choices = answer.get("choices")
    if type(choices) is not list or not choices:
        return None
    choice = choices[0]
    message = choice.get("message") if type(choice) is dict else None
    if type(message) is not dict:
        return None
    if len(message) == 2 and message.get("role") == "assistant" and type(message.get("content")) is str:
        return message  # the common reply, in shape: what normalize keeps as it is, found without its call
    return normalize(message if message.get("role") else {**message, "role": "assistant"})


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode(errors="replace"))


class ReplyTooLarge(Exception):
    """A streamed reply grew past what the gateway buffers to store."""


# What a tool call costs before its first character (its objects; in JSON, its skeleton is ~60
# bytes), counted against the reply's limit: an upstream opening call after call with nothing in
# them fills the limit, not the memory.
CALL_BYTES: Final = 512


class _Call:
    """One tool call of the reply, as its fragments assemble it."""

    __slots__ = ("arguments", "id", "name", "type")

    def __init__(self) -> None:
        self.id: str | None = None
        self.type = "function"
        self.name = TextPieces()
        self.arguments = TextPieces()

    def message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name.text(), "arguments": self.arguments.text()},
        }


class ReplyAssembler:
    """Collects choice 0's content, refusal and tool-call fragments from stream chunks, up to `max_bytes`.

    What it holds stays within about twice the reply's size as Python strings: nothing of a
    chunk is kept but the characters it adds (see TextPieces), and a call opened is counted as
    CALL_BYTES against the limit.
    """

    def __init__(self, *, max_bytes: int) -> None:
        self._content = TextPieces()
        self._refusal = TextPieces()
        self._calls: dict[int, _Call] = {}
        self._size = 0
        self._max_bytes = max_bytes
        self.finished = False

    def feed(self, chunk: Any) -> None:
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        for choice in choices or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._feed_delta(delta)
            if choice.get("finish_reason"):
                self.finished = True

    def _feed_delta(self, delta: dict[str, Any]) -> None:
        if self._size > self._max_bytes:  # past the limit: keep nothing more, message() refuses
            return
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._content.add(content)
            self._size += _utf8_size(content)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self._refusal.add(refusal)
            self._size += _utf8_size(refusal)
        fragments = delta.get("tool_calls")
        for fragment in fragments if isinstance(fragments, list) else ():
            if isinstance(fragment, dict):
                self._feed_call(fragment)

    def _feed_call(self, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        if not isinstance(index, int):
            index = len(self._calls)
        call = self._calls.get(index)
        if call is None:
            call = self._calls[index] = _Call()
            self._size += CALL_BYTES
        if isinstance(fragment.get("id"), str):
            call.id = fragment["id"]
        if isinstance(fragment.get("type"), str):
            call.type = fragment["type"]
        function = fragment.get("function")
        if not isinstance(function, dict):
            return
        name, arguments = function.get("name"), function.get("arguments")
        if isinstance(name, str) and name:
            call.name.add(name)
            self._size += _utf8_size(name)
        if isinstance(arguments, str) and arguments:
            call.arguments.add(arguments)
            self._size += _utf8_size(arguments)

    def message(self) -> Message:
        """The assembled reply; ReplyTooLarge past the limit."""
        if self._size > self._max_bytes:
            raise ReplyTooLarge(
                f"The streamed reply is larger than server.maxResponseBytes ({self._max_bytes} bytes)"
            )
        message: Message = {"role": "assistant", "content": self._content.text() or None}
        refusal = self._refusal.text()
        if refusal:
            message["refusal"] = refusal
        if self._calls:
            message["tool_calls"] = [self._calls[i].message() for i in sorted(self._calls)]
        return normalize(message)


def malformed_reply(message: Message) -> str | None:
    """What makes an assistant reply unfit to store (and to resend on later turns), if anything."""
    calls = message.get("tool_calls")
    if calls is None:
        return None
    if not isinstance(calls, list):
        return "tool_calls is not an array"
    for i, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
            return f"tool_calls[{i}].id is not a non-empty string"
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            return f"tool_calls[{i}].function.name is not a non-empty string"
        if not isinstance(function.get("arguments"), str):
            return f"tool_calls[{i}].function.arguments is not a string"
    return None
