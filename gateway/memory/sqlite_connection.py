"""The SQLite store's connection to its file, on the store's thread: opened lazily, healed after faults, purged.

The store heals by itself. A fault of the file (read-only, an I/O error, gone: `_REOPEN`) closes
the connection, and the next job opens the file afresh: a connection SQLite opened while the
file was read-only would stay read-only after it became writable. Until a write goes through
again, `unwritable` says why writes fail (the gateway's /readyz). After each batch of jobs the
store checks that the file is still the one at the path (`check`, one stat): SQLite goes on
writing into a file deleted or replaced under it, lost at the next start. The jobs of a batch
served there are refused (a 503 for their turns: nothing they wrote is kept), the error is
logged, and the store goes on with the file then at the path, made afresh when there is none;
what it remembered of the old file is forgotten (`generation` moves on).

A store sharing its file with other processes opens the lock file beside it too (`lock_file`,
see sqlite_lockfile), with the database, and checks it after each batch the same way: a lock
file deleted or replaced under the store is one the other processes no longer lock by, so the
store goes on with the one then at the path, made afresh when there is none, and forgets what
it remembered (versions of the old file's slots say nothing of the new one's). Until each
process has noticed (at its next batch), a conversation may be held by two of them: what
deleting the lock file under running gateways costs. A database replaced keeps its lock file,
which serves the new database as well as the old.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Final

from gateway.memory.sqlite_file import DAY, OpenFile, inode, leave_file, open_file, transaction
from gateway.memory.sqlite_lockfile import LockFile, lock_path, open_lock_file
from gateway.memory.store import StoreUnavailable

log = logging.getLogger("gateway.memory")

_PURGE_EVERY: Final = 600.0
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


class StoreFile:
    """The store's file as its thread uses it; every method but `unwritable`'s read runs on that thread.

    `shown_path` is what logs and errors name (no value from the environment). `on_new_file`
    is called when the file at the path is another than the one last open there. `shared`: other
    processes share the file, locking its conversations by the lock file beside it.
    """

    def __init__(
        self,
        path: str,
        *,
        shown_path: str,
        busy_timeout_ms: int,
        ttl: float,
        clock: Callable[[], float],
        on_new_file: Callable[[], None],
        shared: bool = False,
    ) -> None:
        self.path = path
        self._shared = shared
        # Opened here, used on the loop (sqlite_locks), which closes one the thread moved on from
        self.lock_file: LockFile | None = None
        self.shown_path = shown_path
        self._busy_timeout_ms = busy_timeout_ms
        self._ttl = ttl
        self._clock = clock
        self._on_new_file = on_new_file
        self.db: sqlite3.Connection | None = None
        self._writer: sqlite3.Cursor | None = None
        self._opened: OpenFile | None = None  # the files the connection opened (the last connection's, once closed)
        self._purged_at = 0.0
        self.generation = 0  # counts the files the thread moved on from
        self.unwritable: str | None = None  # why the last write failed, until one goes through

    def ready(self) -> sqlite3.Cursor:
        """The thread's cursor on the open file, purged of expired rows when that is due.

        One cursor object for all the writes rather than one per statement; `.connection` is the file.
        """
        cursor = self._writer
        if cursor is None:  # opened lazily, so a gateway that never uses memory creates no file
            cursor = self._open()
        if self._shared and self.lock_file is None:
            self.lock_file = open_lock_file(self.path)
        now = self._clock()
        if now - self._purged_at > _PURGE_EVERY:
            self._purged_at = now
            self._purge(cursor.connection, now)
        return cursor

    def unavailable(self, exc: Exception) -> Exception:
        """A job's error as its caller sees it; a fault of the file is remembered, and closes the connection (see _REOPEN)."""
        if isinstance(exc, OSError):  # the file's directory cannot be made
            self.unwritable = exc.strerror or type(exc).__name__  # never the path, which /readyz would show
        elif isinstance(exc, sqlite3.Error):
            code = getattr(exc, "sqlite_errorcode", None)  # absent from the store's own (MalformedRow)
            if code is not None and code & 0xFF in _UNWRITABLE:
                self.unwritable = str(exc)
                if code & 0xFF in _REOPEN:
                    self._close_connection()
        else:
            return exc
        error = StoreUnavailable(f"sqlite store at {self.shown_path}: {exc}")
        error.__cause__ = exc
        return error

    def check(self, jobs: int) -> StoreUnavailable | None:
        """The error for the `jobs` just served if their file is no longer the one at the path; the next job opens that one.

        Checked after the jobs, not before, so no turn is acknowledged as stored in a file that was
        gone from its path before its commit.
        """
        db, opened = self.db, self._opened
        if db is None or opened is None:  # closed by a job, or a database with no file
            return None
        now = inode(self.path)
        if now == opened.main:
            if self._shared:
                self._check_lock_file()
            return None
        what = "deleted or out of reach" if now is None else "replaced by another file"
        log.error(
            "sqlite memory store: %s was %s while open; %d jobs served there were refused (their turns are not stored), "
            "and the store goes on with a file made afresh at that path, or the one there now",
            self.shown_path,
            what,
            jobs,
        )
        self.unwritable = f"the file was {what} while open"  # until the file at the path takes a write
        self.db = self._writer = None
        self._opened = None
        self._forget_file()
        leave_file(db, self.path, opened, shown_path=self.shown_path)
        return StoreUnavailable(f"sqlite store at {self.shown_path}: the file was {what} while open; nothing was stored there")

    def _check_lock_file(self) -> None:
        """Go on with the lock file at the path when it is not the one open (see the module docstring)."""
        lock_file = self.lock_file
        if lock_file is None or inode(lock_path(self.path)) == lock_file.inode:
            return
        log.error(
            "sqlite memory store: the lock file beside %s was deleted or replaced while in use; going on with the one there now "
            "(made afresh if none): until every process sharing the file has, a conversation may be held by two of them",
            self.shown_path,
        )
        self.lock_file = None  # the next job opens it; the loop retires the old one
        self._forget_file()

    def opened_lock_file(self) -> LockFile:
        """The lock file beside the database (shared mode), opened by the job being served (`ready`)."""
        lock_file = self.lock_file
        if lock_file is None:
            lock_file = self.lock_file = open_lock_file(self.path)
        return lock_file

    def probe(self, db: sqlite3.Connection) -> None:
        """A write that leaves nothing behind; the file takes writes again when it goes through."""
        with transaction(db):
            db.execute("""INSERT OR REPLACE INTO "values" (key, value, written_at) VALUES (?, '', 0)""", (_PROBE_KEY,))
            db.execute('DELETE FROM "values" WHERE key = ?', (_PROBE_KEY,))
        self.unwritable = None

    def close(self) -> None:
        """Close the connection for good; a file gone from the path is left as `leave_file` leaves it."""
        db, opened = self.db, self._opened
        self.db = self._writer = None
        if db is None:
            return
        if opened is not None and inode(self.path) != opened.main:  # its WAL would be a new file's there
            leave_file(db, self.path, opened, shown_path=self.shown_path)
        else:
            db.close()

    def _close_connection(self) -> None:
        """Close the connection; the next job opens the file again (`_opened` stays, to tell whether it is the same).

        Not a file gone from the path: `check` leaves that one after the batch, with what it left beside the path.
        """
        if self._opened is not None and inode(self.path) != self._opened.main:
            return
        db = self.db
        self.db = self._writer = None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()

    def _open(self) -> sqlite3.Cursor:
        """Open the file at the path (made if missing); another file than the one last open there is a new start."""
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        db = open_file(self.path, busy_timeout_ms=self._busy_timeout_ms)
        opened = OpenFile.at(self.path)
        last = self._opened
        if last is not None and (opened is None or opened.main != last.main):
            log.error("sqlite memory store: %s is not the file last open there (deleted or replaced meanwhile); going on with it", self.shown_path)
            self._forget_file()
        self.db, self._opened = db, opened
        cursor = self._writer = db.cursor()
        return cursor

    def _forget_file(self) -> None:
        """Forget what the thread knew of the file (and, at the store's next settle, the cache): another one is at the path."""
        self._on_new_file()
        self.generation += 1

    def _purge(self, db: sqlite3.Connection, now: float) -> None:
        cutoff = now - self._ttl
        # touched_day is at most the day of the last write: its index finds every expired conversation,
        # and the few untouched for a day but not expired are told apart by their last write.
        expired = (int(cutoff // DAY), cutoff)
        with transaction(db):
            db.execute(_PURGE_MESSAGES, expired)
            db.execute(_PURGE_CONVERSATIONS, expired)  # after their messages, which say whether they expired
            db.execute('DELETE FROM "values" WHERE written_at < ?', (cutoff,))
            db.execute("DELETE FROM locks WHERE expires_at < ?", (now,))  # leases older gateways left
        # A remembered range of a purged conversation is past the TTL: its next write reads the file.
