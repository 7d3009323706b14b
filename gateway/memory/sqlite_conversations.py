"""Reads, deletes, undos and redos of conversations in the SQLite file, and their listing, on the store's thread.

A turn reads only the newest part of a conversation: its rows newest first, until the reach is
covered (`reach`), so a read costs the same for 20 stored messages or 1,000.

An undo keeps the turn it removed in the conversation row's `redo` column: a JSON list of
{"at": when it was undone, "rows": [[message, counts, written_at, item id], ...]}, the last undone last. A
new turn does not touch that column (most turns write their message row alone: see
sqlite_writes); it empties the stack by being written after it: a turn undone at `at` may be
redone only while no message row of the conversation was written after `at` (a redo writes its
rows back with the times they were first written at, so a redo leaves the turns undone before it
redoable).
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from gateway.core.memory.about import About
from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry
from gateway.core.memory.listing import Listed, Listing, Page, count_turns
from gateway.core.memory.plain import PlainHistory
from gateway.core.memory.reach import Reach, Tally, stored_count
from gateway.memory.sqlite_file import DAY, STATE, State, live_state, transaction
from gateway.memory.sqlite_rows import message_rows, newest_first, read_row, read_system, row_floor
from gateway.memory.sqlite_writes import TurnWriter, insert_rows
from gateway.memory.store import Key

_NEWEST_FIRST: Final = (
    "SELECT seq, body, encoding, tokens, written_at FROM messages WHERE tenant = ? AND memory_id = ? AND seq >= ?"
    " ORDER BY seq DESC"
)
# The row before ?3: it may hold messages numbered ?3 on too (a turn's row).
_HOLDING: Final = (
    "SELECT seq, body, encoding, tokens, written_at FROM messages WHERE tenant = ? AND memory_id = ? AND seq < ?"
    " ORDER BY seq DESC LIMIT 1"
)
_NEWEST_WRITE: Final = "SELECT written_at FROM messages WHERE tenant = ? AND memory_id = ? ORDER BY seq DESC LIMIT 1"
_REDO: Final = "SELECT redo FROM conversations WHERE tenant = ? AND memory_id = ?"
# A page's candidates: ?1 tenant, ?2 after, ?3 prefix, ?4 the first id past the prefix ('' = none), ?5 how many.
_IDS: Final = """
SELECT memory_id FROM conversations WHERE tenant = ?1 AND memory_id > ?2 AND memory_id >= ?3 AND (?4 = '' OR memory_id < ?4)
ORDER BY memory_id LIMIT ?5
"""
_START: Final = """
INSERT INTO conversations (tenant, memory_id, system, updated_at, first_seq, last_seq, touched_day, created_at, metadata)
VALUES (?1, ?2, '[]', ?3, 1, 0, ?4, ?3, ?5)
"""
_ABOUT: Final = "SELECT created_at, metadata FROM conversations WHERE tenant = ? AND memory_id = ?"
_SET_METADATA: Final = "UPDATE conversations SET metadata = ? WHERE tenant = ? AND memory_id = ?"
_OLDEST_WRITE: Final = "SELECT written_at FROM messages WHERE tenant = ? AND memory_id = ? AND seq >= ? ORDER BY seq LIMIT 1"
RedoTurn = dict[str, Any]  # {"at": when undone, "rows": [[message, counts, written_at, item id], ...]}


class Conversations:
    """Whole conversations in the file: an expired one (untouched for `ttl` seconds by `clock`) is deleted when met.

    `turns` is told of rows changed here; `plain`: reads keep a PlainHistory beside their
    entries (for a cache that plans from it).
    """

    def __init__(
        self, turns: TurnWriter, *, ttl: float, cap: int, clock: Callable[[], float] = time.time, plain: bool
    ) -> None:
        self._turns = turns
        self._ttl = ttl
        self._cap = cap
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
            undone: list[Entry] = []
            cursor = db.execute(_NEWEST_FIRST, (*key, row_floor(first)))
            for number, entry in newest_first(cursor, first):
                undone.append(entry)
                if entry.message.get("role") == "user":
                    start = number
                    break
            cursor.close()
            now = self._clock()
            stack = self._redo_stack(db, key)
            stack.append({"at": now, "rows": [[e.message, e.tokens, e.created_at, e.item_id] for e in reversed(undone)]})
            self._turns.forget(key)  # its row changes: the next write reads it
            _cut(db, key, start)
            db.execute(  # the range as read, the newest messages gone: first_seq as it follows from them
                "UPDATE conversations SET updated_at = ?, first_seq = ?, last_seq = ?, redo = ? WHERE tenant = ? AND memory_id = ?",
                (now, first, start - 1, orjson.dumps(stack, default=dict).decode(), *key),
            )
            return True

    def redo(self, db: sqlite3.Connection, *, key: Key) -> bool:
        """Write back the turn the last undo removed, with the times it was first written at; False when there is none."""
        with transaction(db):
            found = self._live(db, key)
            if found is None:
                return False
            stack = self._redo_stack(db, key)
            if not stack:
                return False
            _, _, first, last = found
            # rows undone before item ids have none: they get new ones
            undone = [Entry(row[0], row[1], row[2], item_id=row[3] if len(row) > 3 else None) for row in stack.pop()["rows"]]
            last = _write_back(db, key, undone, start=last + 1) - 1
            self._turns.forget(key)
            db.execute(
                "UPDATE conversations SET updated_at = ?, first_seq = ?, last_seq = ?, redo = ? WHERE tenant = ? AND memory_id = ?",
                (self._clock(), max(first, last - self._cap + 1), last, orjson.dumps(stack).decode() if stack else None, *key),
            )
            return True

    def _redo_stack(self, db: sqlite3.Connection, key: Key) -> list[RedoTurn]:
        """The conversation's redo stack, without the turns a message row written after their undo cleared."""
        (text,) = db.execute(_REDO, key).fetchone()
        if not text:
            return []
        newest = db.execute(_NEWEST_WRITE, key).fetchone()
        written = newest[0] if newest is not None and newest[0] is not None else 0.0
        stack: list[RedoTurn] = orjson.loads(text)
        return [turn for turn in stack if turn["at"] >= written]

    def page(self, db: sqlite3.Connection, *, tenant: str, listing: Listing) -> Page:
        """A page of `tenant`'s live conversations; expired ones met are deleted, as reads do."""
        found: list[Listed] = []
        after = listing.after
        wanted = listing.limit + 1
        while len(found) < wanted:
            ids = [row[0] for row in db.execute(_IDS, (tenant, after, listing.prefix, _past(listing.prefix), wanted))]
            for memory_id in ids:
                conversation = self.read(db, key=(tenant, memory_id), reach=None)
                if conversation is not None and len(found) < wanted:
                    found.append(Listed(memory_id, count_turns(conversation.messages), conversation.updated_at))
            if len(ids) < wanted:
                break
            after = ids[-1]
        return Page.of(found, listing)

    def start(self, db: sqlite3.Connection, *, key: Key, metadata: Mapping[str, str]) -> None:
        """Store an empty conversation created now, with `metadata`, in place of any under `key`."""
        with transaction(db):
            self._delete(db, key)
            now = self._clock()
            db.execute(_START, (*key, now, int(now // DAY), orjson.dumps(metadata).decode()))

    def about(self, db: sqlite3.Connection, *, key: Key) -> About | None:
        """When the conversation was created (its oldest message's time when it was not by `start`) and its metadata."""
        found = self._live(db, key)
        if found is None:
            return None
        created_at, metadata = db.execute(_ABOUT, key).fetchone()
        if created_at is None:
            oldest = db.execute(_OLDEST_WRITE, (*key, row_floor(found[2]))).fetchone()
            created_at = oldest[0] if oldest is not None and oldest[0] is not None else found[1]
        return About(created_at, orjson.loads(metadata) if metadata else {})

    def set_metadata(self, db: sqlite3.Connection, *, key: Key, metadata: Mapping[str, str]) -> bool:
        with transaction(db):
            if self._live(db, key) is None:
                return False
            db.execute(_SET_METADATA, (orjson.dumps(metadata).decode(), *key))
            return True

    def delete_item(self, db: sqlite3.Connection, *, key: Key, item_id: str) -> bool:
        """Forget the message with this item id: the messages after it are written back one number lower, as they were."""
        with transaction(db):
            found = self._live(db, key)
            if found is None:
                return False
            _, _, first, last = found
            after: list[Entry] = []
            target = None
            cursor = db.execute(_NEWEST_FIRST, (*key, row_floor(first)))
            for number, entry in newest_first(cursor, first):
                if entry.item_id == item_id:
                    target = number
                    break
                after.append(entry)
            cursor.close()
            if target is None:
                return False
            self._turns.forget(key)
            _cut(db, key, target)
            after.reverse()
            _write_back(db, key, after, start=target)
            db.execute("UPDATE conversations SET first_seq = ?, last_seq = ? WHERE tenant = ? AND memory_id = ?", (first, last - 1, *key))
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


def _past(prefix: str) -> str:
    """The first id after every id starting with `prefix` ('' for no prefix): ids are ASCII, so the last character moves on by one."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix else ""


def _cut(db: sqlite3.Connection, key: Key, start: int) -> None:
    """Delete messages numbered `start` on; a turn's row that holds older ones too keeps those, and when they were written."""
    held = db.execute(_HOLDING, (*key, start)).fetchone()
    db.execute("DELETE FROM messages WHERE tenant = ? AND memory_id = ? AND seq >= ?", (*key, start))
    if held is None:
        return
    seq, body, encoding, tokens, written_at = held
    row = read_row(body, encoding, tokens, seq=seq)
    if seq + len(row) <= start:  # it ends before `start`
        return
    rows, params = message_rows(row[: start - seq])
    db.execute("DELETE FROM messages WHERE tenant = ? AND memory_id = ? AND seq = ?", (*key, seq))
    db.execute(insert_rows(rows), (*key, seq, written_at, *params))


def _write_back(db: sqlite3.Connection, key: Key, entries: list[Entry], *, start: int) -> int:
    """Insert `entries` numbered from `start` on, each with the time it was first written at; the number after them."""
    for written_at, group in itertools.groupby(entries, key=lambda entry: entry.created_at):
        grouped = list(group)
        rows, params = message_rows(grouped)
        db.execute(insert_rows(rows), (*key, start, written_at, *params))
        start += len(grouped)
    return start
