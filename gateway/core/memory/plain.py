"""A history of plain messages, kept beside its entries: its windows are a slice, not a walk.

Most conversations hold user and assistant messages only, no tool calls and no tool results.
Over such a history a message window keeps the newest n messages, and a token window the
newest messages whose stored counts fit the budget: running sums of those counts find where
that starts by bisection. Planning then costs the same whatever the length of the history, with
no Python loop over its entries. Stores that keep conversations in memory keep one of these
with each (built once when read, extended by each write); a history that holds a tool call or
result has none, and is planned by the general walk in `policies`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from gateway.core.memory.entries import Entry, Message


class PlainHistory:
    """The messages of a history without tool calls or results, and the running sums of their counts.

    `running[i]` is the tokens of the messages before `messages[i]` (plus a constant: only
    differences count) in `encoding`, the encoding of the oldest entry's count. `running` is
    None once an entry has no (non-zero) count in that encoding: message windows still work.
    """

    __slots__ = ("encoding", "messages", "running")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.encoding = ""  # none yet, or the oldest message was stored uncounted
        self.running: list[int] | None = [0]

    @classmethod
    def of(cls, entries: Sequence[Entry]) -> PlainHistory | None:
        """The plain history of `entries`, oldest first; None when one of them is a tool call or result."""
        plain = cls()
        return plain if plain.extend(entries) else None

    def extend(self, entries: Sequence[Entry], drop: int = 0) -> bool:
        """Add newer entries, then forget the `drop` oldest messages (a store's cap dropped them).

        False when an entry is a tool call or result (this history is then of no use).
        """
        messages, running = self.messages, self.running
        if running is not None and not self.encoding and entries:  # the oldest entry's count names the encoding
            self.encoding = next(iter(entries[0].tokens), "")
        encoding = self.encoding
        for entry in entries:
            message = entry.message
            if message.get("role") == "tool" or "tool_calls" in message:
                return False
            messages.append(message)
            if running is not None:
                count = entry.tokens.get(encoding)
                if count:
                    running.append(running[-1] + count)
                else:  # a message stored uncounted, or counted in another encoding: no token sums
                    running = self.running = None
        if drop > 0:  # in the same call: a store at its cap drops on every write
            del messages[:drop]
            if running is not None:
                del running[:drop]
        return True

    def newest(self, count: int) -> tuple[list[Message], bool]:
        """The newest `count` messages (none when count <= 0), and whether that is all of them."""
        size = len(self.messages)
        if count >= size or not size:
            return self.messages[:], True
        return self.messages[size - count :] if count > 0 else [], False

    def newest_within(self, encoding: str, budget: int) -> tuple[list[Message], bool] | None:
        """The newest messages whose counts in `encoding` add up to at most `budget`, and whether that is all of them.

        None when a message has no count in `encoding` (the window must count them).
        """
        sums = self.running
        if sums is None or self.encoding != encoding:
            return None
        size = len(self.messages)
        start = min(bisect_left(sums, sums[-1] - budget), size)  # the oldest message that still fits
        return self.messages[start:], start == 0
