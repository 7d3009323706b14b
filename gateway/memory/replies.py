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


# Content parts that are the model's reasoning, not its answer (Mistral's Magistral answers
# `{"type": "thinking", "thinking": [...]}` parts before its text): not kept, as OpenAI's own
# reasoning is not, and not resent to an upstream that would refuse them.
REASONING_PARTS: Final = frozenset({"thinking", "reasoning"})


class MalformedReply(Exception):
    """A streamed reply holds what memory cannot keep (its message says what)."""


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
        self._problem: str | None = None  # what makes the reply unfit to store, once a delta showed it
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
        if type(content) is str:
            self._add(self._content, content)
        elif content is not None:
            self._feed_parts(content)
        refusal = delta.get("refusal")
        if type(refusal) is str:
            self._add(self._refusal, refusal)
        elif refusal is not None:
            self._problem = "a delta's refusal is not a string"
        fragments = delta.get("tool_calls")
        for fragment in fragments if isinstance(fragments, list) else ():
            if isinstance(fragment, dict):
                self._feed_call(fragment)

    def _add(self, pieces: TextPieces, text: str) -> None:
        if text:
            pieces.add(text)
            self._size += _utf8_size(text)

    def _feed_parts(self, content: Any) -> None:
        """A delta's content as an array of parts (some upstreams): its text and refusal parts add their text.

        Reasoning parts (REASONING_PARTS) are left out, as a reply's are (`without_reasoning`).
        """
        if type(content) is list:
            content = [part for part in content if not _is_reasoning(part)]
        if type(content) is not list or not all(map(_is_part, content)):
            self._problem = "a delta's content is not a string or an array of text parts"
            return
        for part in content:
            kind = part["type"]
            self._add(self._content if kind == "text" else self._refusal, part[kind])

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
        """The assembled reply; ReplyTooLarge past the limit, MalformedReply when a delta held what memory cannot keep."""
        if self._size > self._max_bytes:
            raise ReplyTooLarge(
                f"The streamed reply is larger than server.maxResponseBytes ({self._max_bytes} bytes)"
            )
        if self._problem is not None:
            raise MalformedReply(self._problem)
        message: Message = {"role": "assistant", "content": self._content.text() or None}
        refusal = self._refusal.text()
        if refusal:
            message["refusal"] = refusal
        if self._calls:
            message["tool_calls"] = [self._calls[i].message() for i in sorted(self._calls)]
        return normalize(message)


def without_reasoning(message: Message) -> Message:
    """`message` without the reasoning parts of its content array, if it has any (a copy then; else `message` itself)."""
    content = message.get("content")
    if type(content) is not list or not any(map(_is_reasoning, content)):
        return message
    answer = [part for part in content if not _is_reasoning(part)]
    return {**message, "content": answer or None}


def _is_reasoning(part: Any) -> bool:
    return type(part) is dict and part.get("type") in REASONING_PARTS


def malformed_reply(message: Message) -> str | None:
    """What makes an assistant reply unfit to store (and to resend on later turns), if anything.

    What OpenAI's chat API takes back of an assistant: role `assistant`; content a string, none,
    or a non-empty array of text and refusal parts (some upstreams answer so); tool calls with an
    id, a function name and string arguments; a string name. Anything else, stored, would be
    resent with every later turn of the conversation, and refused by the upstream each time.
    """
    if len(message) == 2 and type(message.get("content")) is str and message.get("role") == "assistant":
        return None  # the common reply, in shape
    if message.get("role") != "assistant":
        return "role is not assistant"
    problem = _malformed_content(message.get("content"))
    if problem is None and "name" in message and type(message["name"]) is not str:
        problem = "name is not a string"
    return problem if problem is not None else _malformed_calls(message.get("tool_calls"))


# What a part of an assistant's content array may hold, by its type
_PART_KEYS: Final = {"text": frozenset({"type", "text"}), "refusal": frozenset({"type", "refusal"})}


def _malformed_content(content: Any) -> str | None:
    if content is None or type(content) is str:
        return None
    if type(content) is not list or not content:
        return "content is not a string, null or a non-empty array of text parts"
    for i, part in enumerate(content):
        if not _is_part(part):
            return f"content[{i}] is not a text or refusal part"
    return None


def _is_part(part: Any) -> bool:
    """Whether `part` is a text or a refusal part of an assistant's content, and nothing more."""
    kind = part.get("type") if type(part) is dict else None
    keys = _PART_KEYS.get(kind) if type(kind) is str else None
    return keys is not None and part.keys() == keys and type(part[kind]) is str


def _malformed_calls(calls: Any) -> str | None:
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
