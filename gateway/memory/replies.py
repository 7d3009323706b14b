"""The assistant message to store: taken from a complete answer, or assembled from stream deltas."""

from __future__ import annotations

from typing import Any

from gateway.memory.policies import Message, normalize


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


class ReplyAssembler:
    """Collects choice 0's content and tool-call fragments from stream chunks, up to `max_bytes`."""

    def __init__(self, *, max_bytes: int) -> None:
        self._content: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
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
        if isinstance(content, str):
            self._content.append(content)
            self._size += _utf8_size(content)
        fragments = delta.get("tool_calls")
        for fragment in fragments if isinstance(fragments, list) else ():
            if not isinstance(fragment, dict):
                continue
            index = fragment.get("index")
            call = self._calls.setdefault(
                index if isinstance(index, int) else len(self._calls),
                {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            if isinstance(fragment.get("id"), str):
                call["id"] = fragment["id"]
            if isinstance(fragment.get("type"), str):
                call["type"] = fragment["type"]
            function = fragment.get("function")
            if isinstance(function, dict):
                for part in ("name", "arguments"):
                    if isinstance(function.get(part), str):
                        call["function"][part] += function[part]
                        self._size += _utf8_size(function[part])

    def message(self) -> Message:
        """The assembled reply; ReplyTooLarge past the limit."""
        if self._size > self._max_bytes:
            raise ReplyTooLarge(f"The streamed reply is larger than server.maxResponseBytes ({self._max_bytes} bytes)")
        message: Message = {"role": "assistant", "content": "".join(self._content) or None}
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        return normalize(message)
