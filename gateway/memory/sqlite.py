"""The embedded default store: SQLite in WAL mode, on one worker thread so the loop never blocks.

A turn reads only the newest part of a conversation: its rows newest first, until the reach is
covered (`reach`), so a read costs the same for 20 stored messages or 1,000. Most turns are
written by one statement, the insert of their message row (see sqlite_file), which SQLite
commits by itself: the thread remembers each conversation as it last wrote it (`_Range`), so it
knows where the messages go, and the conversation row is written only when its newest message
row cannot stand for it (`_append_alone`); appends queued together are then one insert of all
their rows. Otherwise the writes are a transaction: a guarded UPDATE of the row when the thread
remembers it, else a read of the row and its newest messages, which say where the messages go.
Appends queued together share that one transaction, and always one hop to the thread and back.

A hop to that thread costs more than the query itself, so conversations this process wrote or
read are also kept in a bounded write-through cache (the newest part read, updated by each write)
and served from it. That is only right while this process is the file's only writer. Worker
processes sharing one file (`--workers N`) open it with `shared=True`: no cache, and
conversations are locked through a lease table in the file itself, renewed while held, so turns
stay serialized across the processes. A lease names its holder's pid and boot (see `_boot_id`),
so a holder that died on this machine is taken over at once rather than after the lease runs out.

The store heals by itself. A fault of the file (read-only, an I/O error, gone: `_REOPEN`) closes
the connection, and the next job opens the file afresh: a connection SQLite opened while the
file was read-only would stay read-only after it became writable. Until a write goes through
again, `unwritable` says why writes fail (the gateway's /readyz), trying one itself first. After
each batch of jobs the thread checks that the file is still the one at the path (one stat):
SQLite goes on writing into a file deleted or replaced under it, lost at the next start. The
jobs of a batch served there are refused (a 503 for their turns: nothing they wrote is kept),
the error is logged, and the store goes on with the file then at the path, made afresh when
there is none; what it remembered of the old file (the cache, `_Range`s) is forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import socket
import sqlite3
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeVar

import orjson

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.plain import PlainHistory
from gateway.core.memory.reach import Reach, Tally, stored_count
from gateway.memory.sqlite_file import (
    DAY,
    MOST_IN_A_ROW,
    STATE,
    OpenFile,
    State,
    inode,
    leave_file,
    live_state,
    message_rows,
    newest_first,
    open_file,
    read_row,
    read_system,
    row_floor,
    transaction,
)
from gateway.memory.store import Key, KeyLocks, LockLost, LockTimeout, StoreUnavailable
from gateway.memory.worker import Worker

T = TypeVar("T")
log = logging.getLogger("gateway.memory")

_PURGE_EVERY = 600.0
LEASE_SECONDS = 15.0

# SQLite's primary result codes after which the connection is closed and the next job opens the
# file afresh: a connection opened while the file was read-only stays read-only, and one whose
# file failed under it (an I/O error, a file no longer there or no longer a database) may not
# recover by itself.
_REOPEN: Final = frozenset(
    {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_NOTADB}
)
# Those, and a full disk (which the connection outlives), make writes fail until one goes through.
_UNWRITABLE: Final = _REOPEN | {sqlite3.SQLITE_FULL}
_PROBE_KEY: Final = "gateway:write-probe"  # a "values" key no caller uses (theirs are "response:<id>")

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
# The row of a conversation this thread knows (`_Range`), written when it must be (see
# `_append_alone`): the new range is worked out here, and the row is updated only if it still
# holds what this thread last wrote there (?8..?11, `_Range.row`). ?1 tenant, ?2 memory_id,
# ?3 first_seq, ?4 last_seq, ?5 now, ?6 today, ?7 system JSON ('': keep).
_UPDATE_KNOWN: Final = """
UPDATE conversations SET first_seq = ?3, last_seq = ?4, updated_at = ?5, touched_day = ?6, system = COALESCE(NULLIF(?7, ''), system)
WHERE tenant = ?1 AND memory_id = ?2 AND first_seq = ?8 AND last_seq = ?9 AND updated_at = ?10 AND touched_day = ?11
"""
# Rows the thread remembers (`_Range`), the oldest remembered forgotten first beyond: ~330 bytes
# each (its key's strings), ~1.4 MB in all. A forgotten row costs its next turn a read of the row.
_KNOWN_RANGES: Final = 4_096
_INSERT: Final = "INSERT INTO messages (tenant, memory_id, seq, written_at, role, body, encoding, tokens) VALUES "
_TRIM_EVERY: Final = 32  # messages below first_seq are deleted in bunches of about this many (see _trim_due)
_TRIM: Final = "DELETE FROM messages WHERE tenant = ? AND memory_id = ? AND seq < ?"
# The row before ?3: it may hold messages numbered ?3 on too (a turn's row).
_HOLDING: Final = (
    "SELECT seq, body, encoding, tokens FROM messages WHERE tenant = ? AND memory_id = ? AND seq < ? ORDER BY seq DESC LIMIT 1"
)
# Expired: untouched (its row) since the cutoff's day (?1) or before, its row and its newest message
# row written before the cutoff (?2). The day index finds the candidates; the rest tells apart the
# few of the cutoff's day, whose messages may have been written after their row (see sqlite_file).
_EXPIRED: Final = """
touched_day <= ?1 AND updated_at < ?2 AND COALESCE((
    SELECT written_at FROM messages AS m WHERE m.tenant = c.tenant AND m.memory_id = c.memory_id ORDER BY m.seq DESC LIMIT 1
), 0) < ?2
"""
_PURGE_MESSAGES: Final = f"DELETE FROM messages WHERE (tenant, memory_id) IN (SELECT tenant, memory_id FROM conversations AS c WHERE {_EXPIRED})"
_PURGE_CONVERSATIONS: Final = f"DELETE FROM conversations AS c WHERE {_EXPIRED}"
_NEWEST_FIRST: Final = (
    "SELECT seq, body, encoding, tokens FROM messages WHERE tenant = ? AND memory_id = ? AND seq >= ? ORDER BY seq DESC"
)


@dataclass(slots=True)
class _Call:
    """Work for the thread; `then` runs on the loop with its result before its caller sees it (see `_settle`)."""

    work: Callable[[], Any]
    done: asyncio.Future[Any]
    then: Callable[[Any], None] | None = None
    result: Any = None
    error: BaseException | None = None


class _Write:
    """One turn to append; `cached` is its conversation as cached before, out of the cache until written.

    Made in `append` by object.__new__ and its fields set there: a Python __init__ called by the
    type, a dataclass's included, costs ~1k instructions more on every turn.
    """

    __slots__ = ("cached", "done", "entries", "error", "insert", "key", "new_system", "rows", "token", "updated_at")

    key: Key
    rows: int  # message rows: one for most turns (see sqlite_file)
    insert: list[Any]  # _insert_rows' parameters: the key, the first seq and time (set by the thread), then the rows'
    done: asyncio.Future[Any]
    token: str | None  # the lease this write must still hold (shared mode)
    entries: Sequence[Entry]
    new_system: Sequence[Message] | None  # None: keep the stored one
    cached: Conversation | None
    updated_at: float  # set by the thread once written
    error: BaseException | None


_new_write = object.__new__


def _system_json(write: _Write) -> str:
    """The write's system messages as bound (on the thread, off the loop): '' keeps the stored ones."""
    return "" if write.new_system is None else orjson.dumps(list(write.new_system)).decode()


class _Range(NamedTuple):
    """A conversation as this thread last wrote it: its range and that write's time, and its row as last written there.

    `row` is (first_seq, last_seq, updated_at, touched_day), the guard of _UPDATE_KNOWN. Made by
    `_new_range(_Range, (first, last, written_at, row))`, tuple.__new__: a NamedTuple's own
    constructor is Python code called from C (~1k instructions more).
    """

    first: int
    last: int
    written_at: float
    row: tuple[int, int, float, int]


_new_range = tuple.__new__


@functools.cache
def _insert_rows(count: int) -> str:
    """An insert of `count` rows numbered from ?3 on, written at ?4: (tenant, memory_id, first seq, time, then role, body, encoding, tokens each).

    Rows of a message each are numbered one apart; a turn's row is one row (`count` 1).
    """
    rows = (f"(?1, ?2, ?3 + {i}, ?4, ?{5 + 4 * i}, ?{6 + 4 * i}, ?{7 + 4 * i}, ?{8 + 4 * i})" for i in range(count))
    return _INSERT + ", ".join(rows)


@functools.cache
def _insert_turns(count: int) -> str:
    """An insert of `count` turns' rows of conversations apart: (tenant, memory_id, seq, time, role, body, encoding, tokens) each."""
    return _INSERT + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?)"] * count)


_MOST_TOGETHER: Final = 256  # turns one statement inserts at most (8 parameters each, of SQLite's 32,766)


def _trim_due(first: int, start: int, added: int) -> bool:
    """Whether a write of `added` messages from `start` on, the range then starting at `first`, deletes rows below it.

    Messages below first_seq are never read: their rows are deleted when the conversation started
    afresh, else once every _TRIM_EVERY messages (a statement and a page write saved on most turns).
    """
    return first > 1 and (first == start or first % _TRIM_EVERY < added)


class SQLiteStore:
    """Survives restarts; every statement runs on a single dedicated thread."""

    kind = "sqlite"  # the `store` label of its metrics

    def __init__(
        self,
        path: str,
        *,
        ttl_seconds: float,
        max_messages: int,
        lock_timeout: float,
        cache_entries: int = 50_000,
        shared: bool = False,
        busy_timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
        shown_path: str = "",
    ) -> None:
        self._path = path
        self._shown_path = shown_path or path  # what logs and errors name: no value from the environment
        self._shared = shared
        self._busy_timeout_ms = max(round(busy_timeout * 1000), 0)
        self._owner = f"{os.getpid()}-{os.urandom(4).hex()}"
        self._boot = _boot_id()
        self._tokens = itertools.count(1)
        if shared:
            cache_entries = 0
        # A conversation's newest part as this process last read or wrote it (`older` entries before
        # it were not read), kept up to date by each write: served as it is by load_tail.
        self._cache: OrderedDict[Key, Conversation] = OrderedDict()
        self._cache_limit = cache_entries
        self._cached_entries = 0
        self._ttl = ttl_seconds
        self._cap = max_messages
        self._clock = clock
        self._locks = KeyLocks(lock_timeout)
        self._held: dict[Key, str] = {}  # lease tokens this process holds (shared mode)
        self._worker: Worker[_Call | _Write] = Worker(self._serve, name="gateway-sqlite", closed=self._closed)
        self._db: sqlite3.Connection | None = None
        self._writer: sqlite3.Cursor | None = None
        self._ranges: dict[Key, _Range] = {}  # the thread's own: see _UPDATE_KNOWN
        self._purged_at = 0.0
        self._opened: OpenFile | None = None  # the files the connection opened (the last connection's, once closed)
        self._generation = 0  # counts the files the thread moved on from (see `_settle`)
        self._cache_generation = 0  # the loop's: the generation its cache was filled in
        self._unwritable: str | None = None  # why the last write failed, until one goes through

    # ---- the thread's side: every statement runs here

    def _closed(self) -> StoreUnavailable:
        return StoreUnavailable(f"sqlite store at {self._shown_path}: the store is closed")

    async def _run(self, work: Callable[[sqlite3.Connection], T], then: Callable[[T], None] | None = None) -> T:
        """Run `work` on the store's thread with the open file; its sqlite errors are StoreUnavailable."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._worker.submit(_Call(functools.partial(self._with_db, work), done, then))
        return await done

    def _serve(self, jobs: list[_Call | _Write]) -> None:
        """On the thread: run the jobs in order, each run of appends in one transaction; then one hop to the loop."""
        writes: list[_Write] = []
        for job in jobs:
            if isinstance(job, _Write):
                writes.append(job)
                continue
            if writes:
                self._write_all(writes)
                writes = []
            try:
                job.result = job.work()
            except Exception as exc:
                job.error = self._unavailable(exc)
        if writes:
            self._write_all(writes)
        self._check_file(jobs)
        try:
            jobs[0].done.get_loop().call_soon_threadsafe(self._settle, jobs, self._generation)
        except RuntimeError:  # the loop is closed: nobody awaits these any more
            return

    def _unavailable(self, exc: Exception) -> Exception:
        """A job's error as its caller sees it; a fault of the file is remembered, and closes the connection (see _REOPEN)."""
        if isinstance(exc, OSError):  # the file's directory cannot be made
            self._unwritable = exc.strerror or type(exc).__name__  # never the path, which /readyz would show
        elif isinstance(exc, sqlite3.Error):
            code = getattr(exc, "sqlite_errorcode", None)  # absent from the store's own (MalformedRow)
            if code is not None and code & 0xFF in _UNWRITABLE:
                self._unwritable = str(exc)
                if code & 0xFF in _REOPEN:
                    self._close_file()
        else:
            return exc
        error = StoreUnavailable(f"sqlite store at {self._shown_path}: {exc}")
        error.__cause__ = exc
        return error

    def _close_file(self) -> None:
        """Close the connection; the next job opens the file again (`_opened` stays, to tell whether it is the same).

        Not a file gone from the path: `_check_file` leaves that one after the batch, with what it left beside the path.
        """
        if self._opened is not None and inode(self._path) != self._opened.main:
            return
        db = self._db
        self._db = self._writer = None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()

    def _open_file(self) -> sqlite3.Cursor:
        """Open the file at the store's path (made if missing); another file than the one last open there is a new start."""
        Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        db = open_file(self._path, busy_timeout_ms=self._busy_timeout_ms)
        opened = OpenFile.at(self._path)
        last = self._opened
        if last is not None and (opened is None or opened.main != last.main):
            log.error("sqlite memory store: %s is not the file last open there (deleted or replaced meanwhile); going on with it", self._shown_path)
            self._forget_file()
        self._db, self._opened = db, opened
        cursor = self._writer = db.cursor()
        return cursor

    def _forget_file(self) -> None:
        """Forget what the thread knew of the file (and, at its next settle, the cache): another one is at the path."""
        self._ranges.clear()
        self._generation += 1

    def _check_file(self, jobs: Sequence[_Call | _Write]) -> None:
        """Refuse the jobs just served if their file is no longer the one at the store's path; the next job opens that one.

        Checked after the jobs, not before, so no turn is acknowledged as stored in a file that was
        gone from its path before its commit.
        """
        db, opened = self._db, self._opened
        if db is None or opened is None:  # closed by a job, or a database with no file
            return
        now = inode(self._path)
        if now == opened.main:
            return
        what = "deleted or out of reach" if now is None else "replaced by another file"
        log.error(
            "sqlite memory store: %s was %s while open; %d jobs served there were refused (their turns are not stored), "
            "and the store goes on with a file made afresh at that path, or the one there now",
            self._shown_path,
            what,
            len(jobs),
        )
        error = StoreUnavailable(f"sqlite store at {self._shown_path}: the file was {what} while open; nothing was stored there")
        for job in jobs:
            job.error = error
        self._unwritable = f"the file was {what} while open"  # until the file at the path takes a write
        self._db = self._writer = None
        self._opened = None
        self._forget_file()
        leave_file(db, self._path, opened, shown_path=self._shown_path)

    def _ready(self) -> sqlite3.Cursor:
        """The thread's cursor on the open file, purged of expired rows when that is due.

        One cursor object for all the writes rather than one per statement; `.connection` is the file.
        """
        cursor = self._writer
        if cursor is None:  # opened lazily, so a gateway that never uses memory creates no file
            cursor = self._open_file()
        now = self._clock()
        if now - self._purged_at > _PURGE_EVERY:
            self._purged_at = now
            self._purge(cursor.connection, now)
        return cursor

    def _with_db(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return work(self._ready().connection)

    def _write_all(self, writes: list[_Write]) -> None:
        """Group commit: the writes in one statement or one transaction; a write whose holder lost its lease is refused."""
        try:
            cursor = self._ready()
            now = self._clock()
            cutoff = now - self._ttl
            today = int(now // DAY)
            if not self._append_alone(cursor, writes, now, cutoff, today):  # else the common batch: one statement
                with transaction(cursor.connection, cursor):
                    for write in writes:
                        if not self._append_alone(cursor, (write,), now, cutoff, today):
                            self._write_row(cursor, write, now, cutoff, today)
            self._unwritable = None
        except Exception as exc:
            error = self._unavailable(exc)
            for write in writes:
                write.error = error
                self._ranges.pop(write.key, None)  # rolled back: the row is not as remembered

    def _append_alone(self, cursor: sqlite3.Cursor, writes: Sequence[_Write], now: float, cutoff: float, today: int) -> bool:
        """The common batch: its turns' message rows alone, in one statement; the conversation rows left as they are.

        Only for conversations this thread knows (`_Range`: only it writes the file, unless shared),
        each once in the batch, whose rows still say all the file does not: the conversation is
        live, today is its `touched_day` and the system prompt stays (its range follows from its
        newest message row and the row's cap: see sqlite_file, so a due trim needs no row either:
        it follows the insert). False when a write does not qualify,
        or the file refuses a row (another writer took its number): nothing was written, and each
        write goes its own way in a transaction.
        """
        if self._shared or len(writes) > _MOST_TOGETHER:
            return False
        ranges = self._ranges
        moved: dict[Key, _Range] = {}
        params: list[Any] = []
        trims: list[tuple[Key, int, int]] = []
        for write in writes:
            key = write.key
            known = ranges.get(key)
            if known is None or write.new_system is not None or write.rows != 1 or key in moved:
                return False
            first, last, written_at, row = known
            if written_at < cutoff or row[3] != today:
                return False
            added = len(write.entries)
            start = last + 1
            last += added
            if last - first >= self._cap:
                first = last - self._cap + 1
            if _trim_due(first, start, added):
                trims.append((key, first, start))
            insert = write.insert
            insert[2] = start
            insert[3] = now
            params += insert
            moved[key] = _new_range(_Range, (first, last, now, row))
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
            self._trim(cursor, key, first, start)
        return True

    @staticmethod
    def _trim(cursor: sqlite3.Cursor, key: Key, first: int, start: int) -> None:
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

    def _write_row(self, cursor: sqlite3.Cursor, write: _Write, now: float, cutoff: float, today: int) -> None:
        """A write with its conversation row, in a transaction; a write whose holder lost its lease is refused."""
        key = write.key
        if write.token is not None and not self._owns(cursor.connection, key, write.token):
            write.error = LockLost("sqlite store: the conversation's lease passed to another holder")
            return
        added = len(write.entries)
        ranges = self._ranges
        known = ranges.get(key)
        first = last = 0
        # The row is as this thread last wrote it (`known`), unless another process, an undo or a
        # delete changed it since: it moves on by `added` without reading it first.
        if known is not None and known.written_at >= cutoff and added:
            last = known.last + added
            first = max(known.first, last - self._cap + 1)
            cursor.execute(_UPDATE_KNOWN, (*key, first, last, now, today, _system_json(write), *known.row))
            if cursor.rowcount != 1:
                known = None
        else:
            known = None
        if known is None:
            first, last = self._write_row_from_file(cursor, write, now, cutoff, today)
            if len(ranges) >= _KNOWN_RANGES and key not in ranges:
                del ranges[next(iter(ranges))]  # the longest remembered
        ranges[key] = _new_range(_Range, (first, last, now, (first, last, now, today)))
        start = last - added + 1
        rows = write.rows
        if 0 < rows <= MOST_IN_A_ROW:  # the common case: the turn's rows in one statement
            insert = write.insert
            insert[2] = start
            insert[3] = now
            cursor.execute(_insert_rows(rows), insert)
        elif rows:
            params = write.insert[4:]
            cursor.executemany(
                _insert_rows(1), [(*key, start + i, now, *params[4 * i : 4 * i + 4]) for i in range(rows)]
            )
        if _trim_due(first, start, added):  # a row that holds a message from first_seq on stays
            self._trim(cursor, key, first, start)
        write.updated_at = now

    def _write_row_from_file(self, cursor: sqlite3.Cursor, write: _Write, now: float, cutoff: float, today: int) -> tuple[int, int]:
        """Write the conversation row as the file says it is, moved on by `write`: the range its messages go in.

        An expired conversation starts afresh: its messages fall below first_seq, its system goes.
        """
        key = write.key
        added = len(write.entries)
        found = cursor.execute(STATE, key).fetchone()
        system = _system_json(write)
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

    def _purge(self, db: sqlite3.Connection, now: float) -> None:
        cutoff = now - self._ttl
        # touched_day is at most the day of the last write: its index finds every expired conversation,
        # and the few untouched for a day but not expired are told apart by their last write.
        expired = (int(cutoff // DAY), cutoff)
        with transaction(db):
            db.execute(_PURGE_MESSAGES, expired)
            db.execute(_PURGE_CONVERSATIONS, expired)  # after their messages, which say whether they expired
            db.execute('DELETE FROM "values" WHERE written_at < ?', (cutoff,))
            db.execute("DELETE FROM locks WHERE expires_at < ?", (now,))
        # A remembered range of a purged conversation is past the TTL: its next write reads the file.

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

    def _read(self, db: sqlite3.Connection, *, key: Key, reach: Reach | None) -> Conversation | None:
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
        return Conversation(read_system(system), entries, updated_at, older, self._plain(entries))

    def _plain(self, entries: list[Entry]) -> PlainHistory | None:
        """What the cache keeps beside `entries` for planning without a walk; nothing when it is off."""
        return PlainHistory.of(entries) if self._cache_limit > 0 else None

    @staticmethod
    def _owns(db: sqlite3.Connection, key: Key, token: str) -> bool:
        row = db.execute("SELECT owner FROM locks WHERE tenant = ? AND memory_id = ?", key).fetchone()
        return row is not None and row[0] == token

    def _delete(self, db: sqlite3.Connection, key: Key) -> bool:
        self._ranges.pop(key, None)
        with transaction(db):
            db.execute("DELETE FROM messages WHERE tenant = ? AND memory_id = ?", key)
            return db.execute("DELETE FROM conversations WHERE tenant = ? AND memory_id = ?", key).rowcount > 0

    # ---- the loop's side

    def _fresh(self, key: Key) -> Conversation | None:
        """The cached conversation unless it expired (then it is dropped)."""
        cached = self._cache.get(key)
        if cached is not None and self._clock() - cached.updated_at > self._ttl:
            self._remember(key, None)
            return None
        return cached

    def _remember(self, key: Key, conversation: Conversation | None) -> None:
        old = self._cache.pop(key, None)
        if old is not None:
            self._cached_entries -= len(old.entries)
        if conversation is None or self._cache_limit <= 0:
            return
        entries = list(conversation.entries)
        self._cache[key] = Conversation(
            list(conversation.system), entries, conversation.updated_at, conversation.older, conversation.plain
        )
        self._cached_entries += len(entries)
        self._evict()

    def _evict(self) -> None:
        while self._cached_entries > self._cache_limit and self._cache:
            _, evicted = self._cache.popitem(last=False)
            self._cached_entries -= len(evicted.entries)

    async def load(self, key: Key) -> Conversation | None:
        cached = self._fresh(key)
        if cached is not None and cached.older == 0:
            self._cache.move_to_end(key)
            return Conversation(list(cached.system), list(cached.entries), cached.updated_at)
        return await self._run(functools.partial(self._read, key=key, reach=None), functools.partial(self._remember, key))

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        """The cached conversation itself when it serves (to read, not to change), else a read of the file."""
        cached = self._cache.get(key)
        # What is cached serves unless it expired (the read replaces it) or it is a part too short
        # for the reach's count of messages: when its other bounds are not met, the planner says so
        # and a wider read comes here.
        if (
            cached is not None
            and self._clock() - cached.updated_at <= self._ttl
            and (cached.older == 0 or len(cached.entries) >= reach.messages)
        ):
            self._cache.move_to_end(key)
            return cached
        return await self._run(functools.partial(self._read, key=key, reach=reach), functools.partial(self._remember, key))

    def append(self, key: Key, entries: Sequence[Entry], *, system: Sequence[Message] | None) -> asyncio.Future[None]:
        # Out of the cache until written: a read meanwhile goes to the file, where it comes after this write.
        cached = self._cache.pop(key, None)
        if cached is not None:
            self._cached_entries -= len(cached.entries)
            if self._clock() - cached.updated_at > self._ttl:
                cached = None
        write: _Write = _new_write(_Write)
        write.key = key
        write.rows, params = message_rows(entries)
        write.insert = [*key, 0, 0.0, *params]
        write.done = done = asyncio.get_running_loop().create_future()
        write.token = self._held.get(key)
        write.entries = entries
        write.new_system = system
        write.cached = cached
        write.updated_at = 0.0
        write.error = None
        self._worker.submit(write)
        return done

    def _settle(self, jobs: list[_Call | _Write], generation: int) -> None:
        """On the loop, in the order the thread served them: bring the cache up to date, then wake each caller.

        Done here rather than by each caller once it resumes, so a read served before a write is
        never cached after it. A batch served after the thread moved on to another file
        (`generation`) first empties the cache, which held the old file's conversations.
        """
        if generation != self._cache_generation:
            self._cache_generation = generation
            self._cache.clear()
            self._cached_entries = 0
        for job in jobs:
            if isinstance(job, _Write):
                self._cache_written(job)
                result = None
            else:
                result = job.result
                if job.then is not None and job.error is None:
                    job.then(result)
            done = job.done
            if done.done():  # its caller left
                continue
            if job.error is None:
                done.set_result(result)
            else:
                done.set_exception(job.error)

    def _cache_written(self, write: _Write) -> None:
        """Bring the cached conversation up to date with a write, or forget it when the write failed."""
        key = write.key
        if write.error is not None:
            self._remember(key, None)  # the file is the truth: the next turn reads it
            return
        cached = self._cache.pop(key, None)  # read while the write was queued: before it
        if cached is not None:
            self._cached_entries -= len(cached.entries)
        else:
            cached = write.cached
            if cached is None:
                return
        added = write.entries
        entries = cached.entries
        entries += added
        over = cached.older + len(entries) - self._cap
        if over > 0:  # the cap dropped the oldest messages: those not read first
            older = cached.older
            if older:
                dropped = min(over, older)
                cached.older = older - dropped
                over -= dropped
            del entries[:over]
        if cached.plain is not None and not cached.plain.extend(added, over):
            cached.plain = None
        if write.new_system is not None:
            cached.system = list(write.new_system)
        cached.updated_at = write.updated_at
        self._cache[key] = cached
        self._cached_entries += len(entries)
        if self._cached_entries > self._cache_limit:
            self._evict()

    async def unwritable(self) -> str | None:
        """Why memory writes fail, or None while they go through; after a failure, a write is tried first.

        So the store is found healed without a turn to write: a gateway said not ready gets none.
        """
        if self._unwritable is None:
            return None
        with contextlib.suppress(StoreUnavailable):
            await self._run(self._probe)
        return self._unwritable

    def _probe(self, db: sqlite3.Connection) -> None:
        """A write that leaves nothing behind; the file takes writes again when it goes through."""
        with transaction(db):
            db.execute("""INSERT OR REPLACE INTO "values" (key, value, written_at) VALUES (?, '', 0)""", (_PROBE_KEY,))
            db.execute('DELETE FROM "values" WHERE key = ?', (_PROBE_KEY,))
        self._unwritable = None

    async def delete(self, key: Key) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            return self._live(db, key) is not None and self._delete(db, key)

        self._remember(key, None)
        return await self._run(work, functools.partial(self._forget, key))

    async def undo(self, key: Key) -> bool:
        """Forget the newest user message and what came after it (the whole conversation when it has none)."""

        def work(db: sqlite3.Connection) -> bool:
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
                self._ranges.pop(key, None)  # its row changes: the next write reads it
                self._cut(db, key, start, now)
                db.execute(  # the range as read, the newest messages gone: first_seq as it follows from them
                    "UPDATE conversations SET updated_at = ?, first_seq = ?, last_seq = ? WHERE tenant = ? AND memory_id = ?",
                    (now, first, start - 1, *key),
                )
                return True

        self._remember(key, None)
        return await self._run(work, functools.partial(self._forget, key))

    @staticmethod
    def _cut(db: sqlite3.Connection, key: Key, start: int, now: float) -> None:
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
        db.execute(_insert_rows(rows), (*key, seq, now, *params))

    def _forget(self, key: Key, _: object) -> None:
        """After a delete or an undo: a read served before it may have been cached meanwhile."""
        self._remember(key, None)

    async def put_value(self, key: str, value: str) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute('INSERT OR REPLACE INTO "values" (key, value, written_at) VALUES (?, ?, ?)', (key, value, self._clock()))

        await self._run(work)

    async def get_value(self, key: str) -> str | None:
        def work(db: sqlite3.Connection) -> str | None:
            row = db.execute('SELECT value FROM "values" WHERE key = ? AND written_at >= ?', (key, self._clock() - self._ttl))
            found = row.fetchone()
            return None if found is None else str(found[0])

        return await self._run(work)

    async def delete_value(self, key: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            cutoff = self._clock() - self._ttl
            return db.execute('DELETE FROM "values" WHERE key = ? AND written_at >= ?', (key, cutoff)).rowcount > 0

        return await self._run(work)

    def lock(self, key: Key) -> AbstractAsyncContextManager[None]:
        return self._hold_shared(key) if self._shared else self._locks.hold(key)

    @asynccontextmanager
    async def _hold_shared(self, key: Key) -> AsyncIterator[None]:
        """This process's waiters queue in memory; one of them at a time takes the row in the file."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._locks.timeout
        async with self._locks.hold(key):
            token = f"{self._owner}:{next(self._tokens)}"
            pause = 0.002
            while not await self._try_lock(key, token):
                if loop.time() >= deadline:
                    raise LockTimeout(f"conversation busy for more than {self._locks.timeout:g}s")
                await asyncio.sleep(min(pause, max(deadline - loop.time(), 0.0)))
                pause = min(pause * 2, 0.05)
            renewal = asyncio.create_task(self._renew(key, token))
            self._held[key] = token
            try:
                yield
            finally:
                del self._held[key]
                renewal.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewal
                try:
                    await self._run(functools.partial(self._unlock, key=key, token=token))
                except StoreUnavailable as exc:  # the lease ends it; never hide how the turn itself went
                    log.warning("memory %s: releasing the sqlite lease failed (%s); it will expire", key[1], exc)

    async def _try_lock(self, key: Key, token: str) -> bool:
        attempt = asyncio.ensure_future(self._run(functools.partial(self._insert_lock, key=key, token=token)))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:  # the caller left: never leave a lock behind for the lease to clear
            if await attempt:
                await self._run(functools.partial(self._unlock, key=key, token=token))
            raise

    def _insert_lock(self, db: sqlite3.Connection, *, key: Key, token: str) -> bool:
        now = time.time()
        row = (*key, token, now + LEASE_SECONDS, os.getpid(), self._boot)
        insert = (
            "INSERT OR IGNORE INTO locks (tenant, memory_id, owner, expires_at, pid, boot) VALUES (?, ?, ?, ?, ?, ?)"
        )
        with transaction(db):
            db.execute("DELETE FROM locks WHERE tenant = ? AND memory_id = ? AND expires_at < ?", (*key, now))
            if db.execute(insert, row).rowcount == 1:
                return True
            if not self._holder_died(db, key):
                return False
            db.execute("DELETE FROM locks WHERE tenant = ? AND memory_id = ?", key)
            return db.execute(insert, row).rowcount == 1

    def _holder_died(self, db: sqlite3.Connection, key: Key) -> bool:
        """Whether the lease on `key` belongs to a process of this boot that no longer runs."""
        holder = db.execute("SELECT pid, boot FROM locks WHERE tenant = ? AND memory_id = ?", key).fetchone()
        # Rows from older gateways carry no pid; rows from other machines name pids we cannot see.
        if holder is None or holder[0] is None or holder[1] != self._boot:
            return False
        return _process_gone(holder[0])

    @staticmethod
    def _unlock(db: sqlite3.Connection, *, key: Key, token: str) -> None:
        db.execute("DELETE FROM locks WHERE tenant = ? AND memory_id = ? AND owner = ?", (*key, token))

    async def _renew(self, key: Key, token: str) -> None:
        def extend(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE locks SET expires_at = ? WHERE tenant = ? AND memory_id = ? AND owner = ?",
                (time.time() + LEASE_SECONDS, *key, token),
            )

        pause = LEASE_SECONDS / 3
        while True:  # a file locked for a while is retried; whether the lease held is decided at the write
            await asyncio.sleep(pause)
            try:
                await self._run(extend)
                pause = LEASE_SECONDS / 3
            except StoreUnavailable as exc:
                log.warning("memory %s: renewing the sqlite lease failed (%s); retrying", key[1], exc)
                pause = 1.0

    async def close(self) -> None:
        """Close the file once the work queued so far is done, then end the thread."""
        if not self._worker.started:  # never used: no thread, no file
            self._worker.stop()
            return
        if self._worker.stopped:
            return

        def work() -> None:
            db, opened = self._db, self._opened
            self._db = self._writer = None
            if db is None:
                return
            if opened is not None and inode(self._path) != opened.main:  # its WAL would be a new file's there
                leave_file(db, self._path, opened, shown_path=self._shown_path)
            else:
                db.close()

        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._worker.submit(_Call(work, done))
        try:
            await done
        finally:
            self._worker.stop()


def _boot_id() -> str:
    """Names the space this process's pid is unique in: this boot's id and pid namespace, else the hostname.

    The pid namespace is part of it because containers on one host share the boot id but number
    their processes separately, so a pid from another container says nothing here.
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return socket.gethostname()
    try:
        return f"{boot} {os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return boot


def _process_gone(pid: int) -> bool:
    """Whether no process `pid` runs here; one that exited but was not yet reaped (a zombie) is gone."""
    if pid <= 0:  # kill(0) and kill(-n) address process groups, not a holder
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: it exists, as another user
        return False
    try:  # a worker killed under `serve --workers` stays a zombie until its parent joins it
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] in (["Z"], ["X"])
