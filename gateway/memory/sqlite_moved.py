"""A process's copy of a conversation that other processes only appended to since: brought up to date by the new rows.

A store sharing its file (see sqlite_locks) records with each cached copy the conversation's
version slot and change slot (see sqlite_lockfile) and the number of the copy's newest message
(`Mark`). When another process wrote the conversation since (the version slot moved on) but
made no other change than appends (the change slot did not), the copy is brought up to date by
reading the message rows numbered after its newest message (`read_appended`), and taking them as
a write of them does (the cap's trimming included: `Conversation.append`), rather than by
reading the conversation's window again: a turn that moved to another worker then costs what
one process's does, give or take one row.

The file is checked against the copy as the rows are read: they are numbered one after another
from the copy's next message to the conversation's last, each was written within the TTL of the
write before it (else the conversation expired and started afresh in between, which moves no
change slot), the newest of them is the conversation's last write (the copy's own when there are
none), and the conversation's range starts where the copy's does once they are added. Anything
else, and the conversation is read as before (`None`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final, NamedTuple

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry
from gateway.memory.sqlite_file import State
from gateway.memory.sqlite_rows import read_row
from gateway.memory.store import Key

_AFTER: Final = (
    "SELECT seq, body, encoding, tokens, written_at FROM messages WHERE tenant = ? AND memory_id = ? AND seq > ? ORDER BY seq"
)


class Mark(NamedTuple):
    """What a copy of a conversation was recorded with: its version and change slots' values, the number of its newest message."""

    version: int
    changes: int
    last: int


@dataclass(slots=True)
class Copy:
    """A cached conversation taken out of the cache to be brought up to date (see `read_appended`), and its mark."""

    conversation: Conversation
    mark: Mark

    @property
    def first(self) -> int:
        """The number of the conversation's first message (read or not) as the copy has it."""
        conversation = self.conversation
        return self.mark.last - conversation.older - len(conversation.entries) + 1


class Appended(NamedTuple):
    """The messages written after a copy's newest one, oldest first, and when the last of them was."""

    entries: list[Entry]
    updated_at: float


@dataclass(slots=True)
class HeldRead:
    """A read made under this process's lock, on the store's thread: the conversation, or what was appended to `copy`.

    `mark` is the slots' values when it was read and the number of its newest message.
    """

    conversation: Conversation | None
    mark: Mark
    copy: Copy | None = None
    appended: Appended | None = None

    def settled(self, *, cap: int) -> Conversation | None:
        """On the loop: the conversation read, or the copy with what was appended to it."""
        copy, appended = self.copy, self.appended
        if copy is None or appended is None:
            return self.conversation
        conversation = copy.conversation
        conversation.append(appended.entries, cap=cap, system=None, updated_at=appended.updated_at)
        self.conversation = conversation
        self.appended = None  # appended once, however often asked
        return conversation


def read_appended(
    db: sqlite3.Connection, key: Key, state: State, *, copy: Copy, cap: int, ttl: float, now: float
) -> Appended | None:
    """The messages written after the copy's newest one, if only appends followed it (see the module docstring); else None.

    `state` is the conversation's as the file holds it `now` (see sqlite_file); `cap` and `ttl`
    the store's. An expired conversation is None too: the read that follows deletes it.
    """
    _, updated_at, first, last = state
    after = copy.mark.last
    if now - updated_at > ttl or last < after or first != max(copy.first, last - cap + 1):
        return None
    entries: list[Entry] = []
    expected = after + 1
    written_before = copy.conversation.updated_at
    cursor = db.execute(_AFTER, (*key, after))
    try:
        for seq, body, encoding, tokens, written_at in cursor:
            if seq != expected or written_at is None or written_at - written_before > ttl:
                return None
            row = read_row(body, encoding, tokens, written_at=written_at, seq=seq)
            entries += row
            expected += len(row)
            written_before = written_at
    finally:
        cursor.close()  # an open statement would pin the WAL
    if expected != last + 1 or written_before != updated_at:  # with no rows, no write since the copy's
        return None
    return Appended(entries, updated_at)
