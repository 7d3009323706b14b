"""How far back into a conversation a turn reads: pure functions, no I/O.

A window needs only the newest part of a conversation, so stores read its history newest first
and stop once the first guess made here is covered: enough messages for a message window,
enough stored tokens for a token window, enough user messages for a round window. A guess that
falls short (tool results whose call lies further back, counts of another encoding) is caught
by the planner, which then asks for a wider read (`Plan.wants_older`).

Stores that hold a conversation in memory need no reach: they give the planner the whole list
(their own, not a copy), and the planner walks only as far as the window goes. Stores that pay for
every message read count them as they read (`Tally`), row by row or chunk by chunk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway.core.memory.entries import Entry
from gateway.core.memory.settings import ROUND_WINDOW, TOKEN_WINDOWS, MemorySettings, MemoryType

WIDER_AT_LEAST: Final = 64  # a second read fetches at least this many messages, and 4x the first
FIRST_CHUNK: Final = 32  # a first chunk for a token or round window, where a store reads in chunks


@dataclass(frozen=True, slots=True)  # frozen: a first reach is made once and shared (first_reach)
class Reach:
    """Read newest first until every bound is met (or the history ends).

    `messages`: at least this many; `tokens`: until the stored counts read add up to more than
    this; `users`: until this many user messages were read. A read never stops on a tool
    result: the assistant message that called it comes too.
    """

    messages: int = 0
    tokens: int = 0
    users: int = 0

    @property
    def first_chunk(self) -> int:
        """How many messages to fetch first where a store reads in chunks (at least one)."""
        if self.tokens or self.users:
            return max(self.messages, FIRST_CHUNK)
        return max(self.messages, 1)

    def covered_by(self, entries: Sequence[Entry]) -> bool:
        """Whether `entries`, the newest of a history, cover this reach."""
        tally = Tally(self)
        return any(tally.add(entry.message.get("role"), stored_count(entry.tokens)) for entry in reversed(entries))


class Tally:
    """Rows counted newest first against a Reach; `add` says when the reach is covered."""

    __slots__ = ("_reach", "messages", "tokens", "users")

    def __init__(self, reach: Reach) -> None:
        self._reach = reach
        self.messages = 0
        self.tokens = 0
        self.users = 0

    def add(self, role: Any, tokens: int | None) -> bool:
        """Count one row (its role and stored token count); True once the rows so far cover the reach."""
        self.messages += 1
        self.tokens += tokens or 0
        if role == "user":
            self.users += 1
        reach = self._reach
        return (
            self.messages >= reach.messages
            and (not reach.tokens or self.tokens > reach.tokens)
            and self.users >= reach.users
            and role != "tool"
        )


def stored_count(tokens: Mapping[str, int]) -> int:
    """The count a message was stored with, in whichever encoding: a size estimate for reading."""
    for count in tokens.values():
        return count
    return 0


def first_reach(settings: MemorySettings, messages: Sequence[Mapping[str, Any]]) -> Reach:
    """The first read for a window: what it keeps, one message more to see where it stops, and a resent copy.

    A client that resends its history (whole, or its tail) sends at most `len(messages)` of it,
    and telling that copy from a new turn needs as many stored messages.
    """
    key = (settings.memory_type, settings.max_tokens, settings.max_rounds, settings.max_messages, len(messages))
    reach = _FIRST_REACHES.get(key)
    if reach is not None:  # the common case: a window asked for before, of as many messages
        return reach
    if settings.memory_type in TOKEN_WINDOWS:
        reach = Reach(messages=len(messages), tokens=settings.max_tokens)
    elif settings.memory_type == ROUND_WINDOW:
        reach = Reach(messages=len(messages), users=settings.max_rounds)
    else:
        reach = Reach(messages=max(settings.max_messages + 1, len(messages)))
    if len(_FIRST_REACHES) >= _REMEMBERED_REACHES:
        _FIRST_REACHES.clear()
    _FIRST_REACHES[key] = reach
    return reach


# First reaches made before, by their window and request size: a Reach is never changed once
# made, so every turn with the same window and request size shares one rather than building it.
_FIRST_REACHES: dict[tuple[MemoryType, int, int, int, int], Reach] = {}
_REMEMBERED_REACHES: Final = 4096


def wider_reach(read: int) -> Reach:
    """The next read when `read` messages were not enough: four times as many (bounds the rereads)."""
    return Reach(messages=max(4 * read, WIDER_AT_LEAST))
