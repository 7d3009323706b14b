"""Reads, deletes and undos of one conversation in the SQLite file, on the store's thread.

A turn reads only the newest part of a conversation: its rows newest first, until the reach is
covered (`reach`), so a read costs the same for 20 stored messages or 1,000.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Final

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry
from gateway.core.memory.plain import PlainHistory
from gateway.core.memory.reach import Reach, Tally, stored_count
from gateway.memory.sqlite_file import (
    STATE,
    State,
    live_state,
    message_rows,
    newest_first,
    read_row,
    read_system,
    row_floor,
    transaction,
)
from gateway.memory.sqlite_writes import TurnWriter, insert_rows
from gateway.memory.store import Key

_NEWEST_FIRST: Final = (
    "SELECT seq, body, encoding, tokens FROM messages WHERE tenant = ? AND memory_id = ? AND seq >= ? ORDER BY seq DESC"
)
# The row before ?3: it may hold messages numbered ?3 on too (a turn's row).
_HOLDING: Final = (
    "SELECT seq, body, encoding, tokens FROM messages WHERE tenant = ? AND memory_id = ? AND seq < ? ORDER BY seq DESC LIMIT 1"
)


class Conversations:
    """Whole conversations in the file: an expired one (untouched for `ttl` seconds by `clock`) is deleted when met.

    `turns` is told of rows changed here; `plain`: reads keep a PlainHistory beside their
    entries (for a cache that plans from it).
    """

    def __init__(self, turns: TurnWriter, *, ttl: float, clock: Callable[[], float] = time.time, plain: bool) -> None:
        self._turns = turns
        self._ttl = ttl
        self._clock = clock
        self._plain = plain

    def read(self, db: sqlite3.Connection, *, key: Key, reach: Reach | None) -> Conversation | None:
        """The conversation with the newest entries `reach` covers, or all of them when reach is None."""
        found = self._live(db, key)
        if found is None:
            return None
        system, updated_at, first, _ = found
        entries: list[Entry] = []
        older = 0
        cursor = db.execute(_NEWEST_FIRST, (*key, row_floor(first)))
        if reach is None:
            entries.extend(entry for _, entry in newest_first(cursor, first))
        else:
            tally = Tally(reach)
            for number, entry in newest_first(cursor, first):
                entries.append(entry)
                if tally.add(entry.message.get("role"), stored_count(entry.tokens)):
                    older = number - first
                    break
        cursor.close()  # ends the read before its last row: an open statement would pin the WAL
        entries.reverse()
        plain = PlainHistory.of(entries) if self._plain else None
        return Conversation(read_system(system), entries, updated_at, older=older, plain=plain)

    def delete(self, db: sqlite3.Connection, *, key: Key) -> bool:
        """Delete the conversation; False when there was none (or it had expired)."""
        return self._live(db, key) is not None and self._delete(db, key)

    def undo(self, db: sqlite3.Connection, *, key: Key) -> bool:
        """Forget the newest user message and what came after it (the whole conversation when it has none)."""
        with transaction(db):
            found = self._live(db, key)
            if found is None:
                return False
            _, _, first, last = found
            if last < first:
                return False
            start = first
            cursor = db.execute(_NEWEST_FIRST, (*key, row_floor(first)))
            for number, entry in newest_first(cursor, first):
                if entry.message.get("role") == "user":
                    start = number
                    break
            cursor.close()
            now = self._clock()
            self._turns.forget(key)  # its row changes: the next write reads it
            _cut(db, key, start, now=now)
            db.execute(  # the range as read, the newest messages gone: first_seq as it follows from them
                "UPDATE conversations SET updated_at = ?, first_seq = ?, last_seq = ? WHERE tenant = ? AND memory_id = ?",
                (now, first, start - 1, *key),
            )
            return True

    def _live(self, db: sqlite3.Connection, key: Key) -> State | None:
        """The conversation's state (system, updated_at, first_seq, last_seq); an expired one is deleted."""
        row = db.execute(STATE, key).fetchone()
        if row is None:
            return None
        state = live_state(row)
        if self._clock() - state[1] > self._ttl:
            self._delete(db, key)
            return None
        return state

    def _delete(self, db: sqlite3.Connection, key: Key) -> bool:
        self._turns.forget(key)
        with transaction(db):
            db.execute("DELETE FROM messages WHERE tenant = ? AND memory_id = ?", key)
            return db.execute("DELETE FROM conversations WHERE tenant = ? AND memory_id = ?", key).rowcount > 0


def _cut(db: sqlite3.Connection, key: Key, start: int, *, now: float) -> None:
    """Delete messages numbered `start` on; a turn's row that holds older ones too keeps those."""
    held = db.execute(_HOLDING, (*key, start)).fetchone()
    db.execute("DELETE FROM messages WHERE tenant = ? AND memory_id = ? AND seq >= ?", (*key, start))
    if held is None:
        return
    seq, body, encoding, tokens = held
    row = read_row(body, encoding, tokens)
    if seq + len(row) <= start:  # it ends before `start`
        return
    rows, params = message_rows(row[: start - seq])
    db.execute("DELETE FROM messages WHERE tenant = ? AND memory_id = ? AND seq = ?", (*key, seq))
    db.execute(insert_rows(rows), (*key, seq, now, *params))
