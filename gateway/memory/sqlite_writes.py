"""How the SQLite store's thread writes turns: group commit, and the rows it remembers writing.

Most turns are written by one statement, the insert of their message row (see sqlite_file),
which SQLite commits by itself: the thread remembers each conversation as it last wrote it
(`KnownRange`), so it knows where the messages go, and the conversation row is written only when
its newest message row cannot stand for it (`TurnWriter._append_alone`); appends queued together
are then one insert of all their rows. Otherwise the writes are a transaction: a guarded UPDATE
of the row when the thread remembers it, else a read of the row and its newest messages, which
say where the messages go. Appends queued together share that one transaction.

Processes sharing the file (see sqlite_locks) write alike: what the thread remembers of a
conversation carries the version its write put in the conversation's slot, and serves the next
write only while the slot still held it just before that write (`Write.seen`): no other process
wrote the conversation in between. Otherwise that write reads the row.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

import orjson

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message
from gateway.memory.sqlite_file import DAY, STATE, State, live_state, transaction
from gateway.memory.sqlite_rows import MOST_IN_A_ROW, message_rows, row_floor
from gateway.memory.store import Key

log = logging.getLogger("gateway.memory")

# A conversation's row written by a write that finds it missing or cannot vouch for it (see
# `_write_row_from_file`): ?1 tenant, ?2 memory_id, ?3 system JSON ('': keep), ?4 now, ?5 first_seq,
# ?6 last_seq, ?7 today (see DAY), ?8 cap. "Keep" is '' rather than NULL: the sqlite3 module binds
# str, int and float directly, but looks up an adapter (costly) for None and bytes, which is also
# why bodies are bound as text.
_NEW_ROW: Final = """
INSERT INTO conversations (tenant, memory_id, system, updated_at, first_seq, last_seq, touched_day, cap)
VALUES (?1, ?2, COALESCE(NULLIF(?3, ''), '[]'), ?4, ?5, ?6, ?7, ?8)
"""
_SET_ROW: Final = """
UPDATE conversations SET system = COALESCE(NULLIF(?3, ''), system), updated_at = ?4, first_seq = ?5, last_seq = ?6,
    touched_day = ?7, cap = ?8
WHERE tenant = ?1 AND memory_id = ?2
"""
# The row of a conversation this thread knows (`KnownRange`), written when it must be (see
# `_append_alone`): the new range is worked out here, and the row is updated only if it still
# holds what this thread last wrote there (?8..?11, the range's `row`). ?1 tenant, ?2 memory_id,
# ?3 first_seq, ?4 last_seq, ?5 now, ?6 today, ?7 system JSON ('': keep).
_UPDATE_KNOWN: Final = """
UPDATE conversations SET first_seq = ?3, last_seq = ?4, updated_at = ?5, touched_day = ?6, system = COALESCE(NULLIF(?7, ''), system)
WHERE tenant = ?1 AND memory_id = ?2 AND first_seq = ?8 AND last_seq = ?9 AND updated_at = ?10 AND touched_day = ?11
"""
# Rows the thread remembers (`KnownRange`), the oldest remembered forgotten first beyond: ~330 bytes
# each (its key's strings), ~1.4 MB in all. A forgotten row costs its next turn a read of the row.
KNOWN_RANGES: Final = 4_096
# The row's touched_day, then the conversation's STATE (see sqlite_file): what `TurnWriter.learn` reads.
_ROW_STATE: Final = """
SELECT c.touched_day, c.system, c.updated_at, c.first_seq, c.last_seq, c.cap, m.seq, m.encoding, m.tokens, m.written_at
FROM conversations AS c LEFT JOIN messages AS m
    ON m.tenant = ?1 AND m.memory_id = ?2 AND m.seq = (SELECT MAX(seq) FROM messages WHERE tenant = ?1 AND memory_id = ?2)
WHERE c.tenant = ?1 AND c.memory_id = ?2
"""
INSERT: Final = "INSERT INTO messages (tenant, memory_id, seq, written_at, role, body, encoding, tokens) VALUES "
TRIM_EVERY: Final = 32  # messages below first_seq are deleted in bunches of about this many (see trim_due)
_TRIM: Final = "DELETE FROM messages WHERE tenant = ? AND memory_id = ? AND seq < ?"
_MOST_TOGETHER: Final = 256  # turns one statement inserts at most (8 parameters each, of SQLite's 32,766)

# A conversation as the thread last wrote it: (first_seq, last_seq, that write's time, the row as
# written there: (first_seq, last_seq, updated_at, touched_day), the guard of _UPDATE_KNOWN,
# the version that write put in its slot: 0 for the file's only writer).
KnownRange = tuple[int, int, float, tuple[int, int, float, int], int]


class Write:
    """One turn to append, queued for the thread; `cached` is its conversation as cached before, out of the cache until written."""

    __slots__ = (
        "cached", "changes", "done", "entries", "error", "insert", "key", "new_system", "rows", "seen", "slot", "updated_at", "version"
    )

    def __init__(self, key: Key, entries: Sequence[Entry], system: Sequence[Message] | None) -> None:
        """The turn `entries` to append to `key`, with `system` the system messages to store (None: keep the stored ones).

        Made on the loop, whose future `done` says when it is written. The store sets `slot` and
        `cached` after: by keywords, a class is slower to call on every turn.
        """
        self.key = key
        self.entries = entries
        self.rows, params = message_rows(entries)  # how many message rows: one for most turns (see sqlite_rows)
        # insert_rows' parameters: the key, the first seq and time (set by the thread), then the rows'
        self.insert: list[Any] = [*key, 0, 0.0, *params]
        self.new_system = system
        # Shared mode (see sqlite_lockfile): the conversation's version slot, the version the thread
        # found there before this write and the one it put there, and its change slot's value once
        # written; 0 all four for the file's only writer.
        self.slot = self.seen = self.version = self.changes = 0
        self.cached: Conversation | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.updated_at = 0.0  # set by the thread once written
        self.error: BaseException | None = None

    def numbered_last(self) -> int:
        """The number of the turn's last message in its conversation, once written (the one before it for no messages)."""
        return int(self.insert[2]) + len(self.entries) - 1

    def system_json(self) -> str:
        """The write's system messages as bound (on the thread, off the loop): '' keeps the stored ones."""
        return "" if self.new_system is None else orjson.dumps(list(self.new_system)).decode()


@functools.cache
def insert_rows(count: int) -> str:
    """An insert of `count` rows numbered from ?3 on, written at ?4: (tenant, memory_id, first seq, time, then role, body, encoding, tokens each).

    Rows of a message each are numbered one apart; a turn's row is one row (`count` 1).
    """
    rows = (f"(?1, ?2, ?3 + {i}, ?4, ?{5 + 4 * i}, ?{6 + 4 * i}, ?{7 + 4 * i}, ?{8 + 4 * i})" for i in range(count))
    return INSERT + ", ".join(rows)


@functools.cache
def _insert_turns(count: int) -> str:
    """An insert of `count` turns' rows of conversations apart: (tenant, memory_id, seq, time, role, body, encoding, tokens) each."""
    return INSERT + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?)"] * count)


def trim_due(first: int, start: int, added: int) -> bool:
    """Whether a write of `added` messages from `start` on, the range then starting at `first`, deletes rows below it.

    Messages below first_seq are never read: their rows are deleted when the conversation started
    afresh, else once every TRIM_EVERY messages (a statement and a page write saved on most turns).
    """
    return first > 1 and (first == start or first % TRIM_EVERY < added)


class TurnWriter:
    """Writes queued turns on the store's thread, remembering each conversation's row as it last wrote it.

    What it remembers serves a write only at the version the write found (see the module docstring).
    """

    def __init__(self, *, cap: int) -> None:
        self._cap = cap
        self.ranges: dict[Key, KnownRange] = {}  # see _UPDATE_KNOWN

    def forget(self, key: Key) -> None:
        """The conversation's row changed by another way (an undo, a delete, a failed write): its next write reads it."""
        self.ranges.pop(key, None)

    def write(self, cursor: sqlite3.Cursor, writes: Sequence[Write], *, now: float, cutoff: float) -> None:
        """Group commit: the writes in one statement or one transaction.

        A conversation untouched since `cutoff` has expired. What the file raises is raised, the
        transaction rolled back.
        """
        today = int(now // DAY)
        if self._append_alone(cursor, writes, now=now, cutoff=cutoff, today=today):  # the common batch: one statement
            return
        with transaction(cursor.connection, cursor):
            for write in writes:
                if not self._append_alone(cursor, (write,), now=now, cutoff=cutoff, today=today):
                    self._write_row(cursor, write, now=now, cutoff=cutoff, today=today)

    def _append_alone(self, cursor: sqlite3.Cursor, writes: Sequence[Write], *, now: float, cutoff: float, today: int) -> bool:
        """The common batch: its turns' message rows alone, in one statement; the conversation rows left as they are.

        Only for conversations this thread knows (`KnownRange`, at the version the write found),
        each once in the batch, whose rows still say all the file does not: the
        conversation is live, today is its `touched_day` and the system prompt stays (its range
        follows from its newest message row and the row's cap: see sqlite_file, so a due trim
        needs no row either: it follows the insert). False when a write does not qualify, or the
        file refuses a row (another writer took its number): nothing was written, and each write
        goes its own way in a transaction.
        """
        if len(writes) > _MOST_TOGETHER:
            return False
        ranges = self.ranges
        moved: dict[Key, KnownRange] = {}
        params: list[Any] = []
        trims: list[tuple[Key, int, int]] = []
        for write in writes:
            key = write.key
            if key in moved:
                return False
            known = self._moved_alone(write, now=now, cutoff=cutoff, today=today)
            if known is None:
                return False
            first, start = known[0], write.insert[2]
            if trim_due(first, start, len(write.entries)):
                trims.append((key, first, start))
            params += write.insert
            moved[key] = known
        try:
            cursor.execute(_insert_turns(len(writes)), params)
        except sqlite3.IntegrityError:  # not the only writer after all: the file says where each turn goes
            for key in moved:
                del ranges[key]
            return False
        ranges.update(moved)
        for write in writes:
            write.updated_at = now
        for key, first, start in trims:
            _trim(cursor, key, first=first, start=start)
        return True

    def _moved_alone(self, write: Write, *, now: float, cutoff: float, today: int) -> KnownRange | None:
        """The conversation's range once `write` is written by its message row alone, its insert numbered; None: it cannot be.

        It can be for a conversation this thread knows at the version the write found, live,
        touched today, whose system prompt stays, and a turn of one row.
        """
        known = self.ranges.get(write.key)
        if known is None or known[4] != write.seen or write.new_system is not None or write.rows != 1:
            return None
        first, last, written_at, row, _ = known
        if written_at < cutoff or row[3] != today:
            return None
        start = last + 1
        last += len(write.entries)
        if last - first >= self._cap:
            first = last - self._cap + 1
        insert = write.insert
        insert[2] = start
        insert[3] = now
        return first, last, now, row, write.version

    def learn(self, db: sqlite3.Connection, key: Key, *, version: int) -> State | None:
        """Remember the conversation's row as the file holds it, at `version` (read while no other process can write it).

        Its state (see sqlite_file), None when there is no row.
        """
        found = db.execute(_ROW_STATE, key).fetchone()
        if found is None:
            self.ranges.pop(key, None)
            return None
        touched_day, _, row_updated_at, row_first, row_last, cap = found[:6]
        state = live_state(found[1:])
        _, updated_at, first, last = state
        if cap == self._cap:  # else its next write rewrites the row, which says where the range is
            self._remember(key, (first, last, float(updated_at), (row_first, row_last, row_updated_at, touched_day), version))
        else:
            self.ranges.pop(key, None)
        return state

    def _remember(self, key: Key, known: KnownRange) -> None:
        ranges = self.ranges
        if len(ranges) >= KNOWN_RANGES and key not in ranges:
            del ranges[next(iter(ranges))]  # the longest remembered
        ranges[key] = known

    def _write_row(self, cursor: sqlite3.Cursor, write: Write, *, now: float, cutoff: float, today: int) -> None:
        """A write with its conversation row, in a transaction."""
        key = write.key
        added = len(write.entries)
        ranges = self.ranges
        known = ranges.get(key)
        first = last = 0
        # The row is as this thread last wrote it (`known`), unless another process, an undo or a
        # delete changed it since: it moves on by `added` without reading it first.
        if known is not None and known[4] == write.seen and known[2] >= cutoff and added:
            known_first, known_last, _, row, _ = known
            last = known_last + added
            first = max(known_first, last - self._cap + 1)
            cursor.execute(_UPDATE_KNOWN, (*key, first, last, now, today, write.system_json(), *row))
            if cursor.rowcount != 1:
                known = None
        else:
            known = None
        if known is None:
            first, last = self._write_row_from_file(cursor, write, now=now, cutoff=cutoff, today=today)
        self._remember(key, (first, last, now, (first, last, now, today), write.version))
        start = last - added + 1
        rows = write.rows
        insert = write.insert
        insert[2] = start  # where the turn went, whatever its rows (see `numbered_last`)
        insert[3] = now
        if 0 < rows <= MOST_IN_A_ROW:  # the common case: the turn's rows in one statement
            cursor.execute(insert_rows(rows), insert)
        elif rows:
            params = write.insert[4:]
            cursor.executemany(insert_rows(1), [(*key, start + i, now, *params[4 * i : 4 * i + 4]) for i in range(rows)])
        if trim_due(first, start, added):  # a row that holds a message from first_seq on stays
            _trim(cursor, key, first=first, start=start)
        write.updated_at = now

    def _write_row_from_file(
        self, cursor: sqlite3.Cursor, write: Write, *, now: float, cutoff: float, today: int
    ) -> tuple[int, int]:
        """Write the conversation row as the file says it is, moved on by `write`: the range its messages go in.

        An expired conversation starts afresh: its messages fall below first_seq, its system goes.
        """
        key = write.key
        added = len(write.entries)
        found = cursor.execute(STATE, key).fetchone()
        system = write.system_json()
        if found is None:
            first, last = max(added - self._cap + 1, 1), added
            cursor.execute(_NEW_ROW, (*key, system, now, first, last, today, self._cap))
            return first, last
        _, updated_at, first, last = live_state(found)
        if updated_at < cutoff:
            first = last + 1
            system = system or "[]"
        last += added
        first = max(first, last - self._cap + 1)
        cursor.execute(_SET_ROW, (*key, system, now, first, last, today, self._cap))
        return first, last


def _trim(cursor: sqlite3.Cursor, key: Key, *, first: int, start: int) -> None:
    """Delete the rows that hold only messages below `first` (a turn numbered from `start` on moved it there).

    After turns written by themselves, a trim that fails is logged and left to the next one: the
    turns are written, and rows below first_seq are never read. In a transaction it fails the
    transaction, as any of its statements does.
    """
    trim = (*key, first if first == start else row_floor(first))
    if cursor.connection.in_transaction:
        cursor.execute(_TRIM, trim)
        return
    try:
        cursor.execute(_TRIM, trim)
    except sqlite3.Error as exc:
        log.warning("memory %s: deleting rows past the cap failed (%s); the next trim takes them", key[1], exc)
