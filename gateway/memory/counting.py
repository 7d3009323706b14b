"""Token counts for memory turns, kept off the event loop when a text is large.

A turn counts its messages on the loop while their texts are small; a text past OFF_LOOP_CHARS
(one, or all of a plan's together) is refused there (`CountOffLoop`) and the work goes to a
thread. Short {role, content} messages (system prompts, questions asked again) are counted once
per process and remembered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.messages import SYSTEM_ROLES
from gateway.core.memory.policies import CommonTurn, TokenCounter
from gateway.core.memory.settings import TOKEN_WINDOWS, MemorySettings
from gateway.tokens import Encoding, count_message, text_size

OFF_LOOP_CHARS: Final = 16_384  # texts to tokenize beyond this many characters are counted on a thread
SHORT_COUNTS: Final = 8192  # short {role, content} messages whose counts a process remembers, per encoding
_SHORT_CHARS: Final = 4096  # a message remembered has at most this many characters of role and content


class CountOffLoop(Exception):
    """Planning met a text too large to count on the event loop: plan again on a thread."""


def counted_on_loop(count: TokenCounter) -> TokenCounter:
    """`count`, refusing (with CountOffLoop) a message too large to count without blocking the loop."""

    def guarded(message: Message) -> int:
        if text_size(message) > OFF_LOOP_CHARS:
            raise CountOffLoop
        return count(message)

    return guarded


def budgeted(count: TokenCounter) -> TokenCounter:
    """`count` for one plan on the loop, refusing (CountOffLoop) once its texts pass OFF_LOOP_CHARS in all.

    A message at a time, each under the limit, a long request or an uncounted history would
    otherwise all be counted on the loop.
    """
    left = OFF_LOOP_CHARS

    def counted(message: Message) -> int:
        nonlocal left
        left -= text_size(message)
        if left < 0:
            raise CountOffLoop
        return count(message)

    return counted


def counted_entries(messages: Sequence[Message], counts: Sequence[int], encoding: str) -> list[Entry]:
    """The entries to store: each message with its count in `encoding`."""
    return [Entry(message, {encoding: tokens}) for message, tokens in zip(messages, counts, strict=True)]


class Counts:
    """Token counts in one encoding: short {role, content} messages (system prompts, common turns) remembered.

    `count` counts any message; `count_on_loop` refuses (CountOffLoop) one too large to count
    without blocking the loop.
    """

    def __init__(self, codec: Encoding, cap: int) -> None:
        self._short: dict[tuple[str, str], int] = {}
        self.count = self._counter(codec, cap, None)
        self.count_on_loop = self._counter(codec, cap, OFF_LOOP_CHARS)

    def common_turn(self, messages: Sequence[Mapping[str, Any]], settings: MemorySettings) -> CommonTurn | None:
        """The request as a CommonTurn under a token (or summary) window, its messages counted; None for any other request.

        Counted on the loop: a text too large for it makes the request another one.
        """
        if len(messages) != 2 or settings.memory_type not in TOKEN_WINDOWS:
            return None
        system, question = messages
        if not (
            type(system) is dict and type(question) is dict and len(system) == 2 and len(question) == 2
            and system.get("role") in SYSTEM_ROLES and question.get("role") == "user"
            and type(system.get("content")) is str and type(question.get("content")) is str  # two keys need not be these
        ):  # fmt: skip
            return None
        short, count = self._short, self.count_on_loop
        try:  # counts remembered (a system prompt, a question asked before) are found without a call
            system_tokens = short.get((system["role"], system["content"])) or count(system)
            question_tokens = short.get(("user", question["content"])) or count(question)
        except CountOffLoop:
            return None
        return system, question, system_tokens, question_tokens

    def _counter(self, codec: Encoding, cap: int, limit: int | None) -> TokenCounter:
        short = self._short

        def count(message: Message) -> int:
            if len(message) == 2:  # {role, content}: a short one is remembered (and needs no size check)
                try:  # a hit is one lookup; only (str, str) keys are stored, and nothing else equals one
                    known = short.get((message["role"], message["content"]))
                except (KeyError, TypeError):  # not {role, content}, or content parts (a list: unhashable)
                    known = None
                if known is not None:
                    return known
                role, content = message.get("role"), message.get("content")
                if type(role) is str and type(content) is str and len(role) + len(content) <= _SHORT_CHARS:
                    if len(short) >= SHORT_COUNTS:
                        short.clear()
                    known = short[(role, content)] = count_message(message, codec, cap)
                    return known
            if limit is not None and text_size(message) > limit:
                raise CountOffLoop
            return count_message(message, codec, cap)

        return count
