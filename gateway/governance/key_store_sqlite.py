"""Keys issued through the API kept in a SQLite file (limits.path): the store when limits are local.

Every process serving the config opens the same file (WAL mode, writes in BEGIN IMMEDIATE
transactions that wait for each other up to the busy timeout), so a key issued or revoked by one is
seen by the others at their next refresh. The file is used on one thread of the store's own:
sqlite3 blocks, and the event loop must not. A failing file (gone, read-only, locked past the busy
timeout) fails the call with KeyStoreUnavailable and is opened afresh by the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

from gateway.governance.stored_keys import (
    KeyListing,
    KeyStoreUnavailable,
    StoredKey,
    encode_key,
    listing_of,
    readable_key,
)

T = TypeVar("T")

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS keys (name TEXT PRIMARY KEY, record BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS generation (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
"""
_BUMP: Final = "INSERT INTO generation VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET value = value + 1"
BUSY_TIMEOUT_MS: Final = 5000


class SQLiteKeyStore:
    """The keys in the SQLite file at `path`, opened at the first call (so after a worker forked)."""

    def __init__(self, path: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._db: sqlite3.Connection | None = None  # the store's thread's alone
        self._thread: ThreadPoolExecutor | None = None

    async def create(self, key: StoredKey) -> bool:
        def create(db: sqlite3.Connection) -> bool:
            with _transaction(db):
                added = db.execute("INSERT OR IGNORE INTO keys VALUES (?, ?)", (key.name, encode_key(key))).rowcount
                if added:
                    db.execute(_BUMP)
            return bool(added)

        return await self._run(create)

    async def get(self, name: str) -> StoredKey | None:
        def get(db: sqlite3.Connection) -> StoredKey | None:
            row = db.execute("SELECT record FROM keys WHERE name = ?", (name,)).fetchone()
            return None if row is None else readable_key(name, row[0])

        return await self._run(get)

    async def list(self) -> KeyListing:
        def listed(db: sqlite3.Connection) -> KeyListing:
            return listing_of(db.execute("SELECT name, record FROM keys"))

        return await self._run(listed)

    async def update(self, key: StoredKey) -> bool:
        def update(db: sqlite3.Connection) -> bool:
            with _transaction(db):
                changed = db.execute("UPDATE keys SET record = ? WHERE name = ?", (encode_key(key), key.name)).rowcount
                if changed:
                    db.execute(_BUMP)
            return bool(changed)

        return await self._run(update)

    async def delete(self, name: str) -> bool:
        def delete(db: sqlite3.Connection) -> bool:
            with _transaction(db):
                deleted = db.execute("DELETE FROM keys WHERE name = ?", (name,)).rowcount
                if deleted:
                    db.execute(_BUMP)
            return bool(deleted)

        return await self._run(delete)

    async def generation(self) -> int:
        def generation(db: sqlite3.Connection) -> int:
            row = db.execute("SELECT value FROM generation WHERE id = 1").fetchone()
            return 0 if row is None else int(row[0])

        return await self._run(generation)

    async def close(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.get_running_loop().run_in_executor(thread, self._close_file)
            thread.shutdown(wait=False)  # idle now: its thread ends without holding up the loop

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on the open file, on the store's thread; KeyStoreUnavailable when the file fails it."""
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-keys")
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._on_file, work)

    def _on_file(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            if self._db is None:
                self._db = _open(self.path, busy_timeout_ms=self._busy_timeout_ms)
            return work(self._db)
        except sqlite3.Error as exc:
            self._close_file()  # opened afresh by the next call: a file that failed may not recover by itself
            raise KeyStoreUnavailable(f"sqlite key store {self.path}: {exc}") from exc

    def _close_file(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()


def _open(path: str, *, busy_timeout_ms: int) -> sqlite3.Connection:
    """The file at `path` (made when absent) in WAL mode, with the store's tables."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        db.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
        _use_wal(db, wait=busy_timeout_ms / 1000)
        db.executescript(_SCHEMA)
    except BaseException:
        db.close()
        raise
    return db


def _use_wal(db: sqlite3.Connection, *, wait: float) -> None:
    """WAL mode, retried for up to `wait` seconds: processes opening a new file at once get SQLITE_BUSY at once, unwaited."""
    deadline = time.monotonic() + wait
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(0.01)  # on the store's thread, never the loop's


class _transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK when the block raised."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        if kind is None:
            self._db.execute("COMMIT")
        elif self._db.in_transaction:
            self._db.execute("ROLLBACK")
