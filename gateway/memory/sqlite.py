"""The embedded default store: SQLite in WAL mode, on one worker thread so the loop never blocks.

A hop to that thread costs more than the query itself, so conversations this process wrote or
read are also kept in a bounded write-through cache and served from it. That is only right
while this process is the file's only writer. Worker processes sharing one file (`--workers N`)
open it with `shared=True`: no cache, and conversations are locked through a lease table in the
file itself, renewed while held, so turns stay serialized across the processes. A lease names its
holder's pid and boot (see `_boot_id`), so a holder that died on this machine is taken over at once
rather than after the lease runs out.
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
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import orjson

from gateway.memory.policies import Entry, Message
from gateway.memory.store import (
    Conversation,
    Key,
    KeyLocks,
    LockLost,
    LockTimeout,
    StoreUnavailable,
    dump_entry,
    load_entry,
)

T = TypeVar("T")
log = logging.getLogger("gateway.memory")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    system TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (tenant, memory_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS conversations_updated ON conversations (updated_at);
CREATE TABLE IF NOT EXISTS locks (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL,
    pid INTEGER,
    boot TEXT,
    PRIMARY KEY (tenant, memory_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS "values" (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    written_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (tenant, memory_id, seq)
) WITHOUT ROWID;
"""
# Columns added to `locks` after its first release; files made before then gain them when opened.
_LOCK_COLUMNS = {"pid": "INTEGER", "boot": "TEXT"}
_PURGE_EVERY = 600.0
LEASE_SECONDS = 15.0


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
    ) -> None:
        self._path = path
        self._shared = shared
        self._busy_timeout_ms = max(round(busy_timeout * 1000), 0)
        self._owner = f"{os.getpid()}-{os.urandom(4).hex()}"
        self._boot = _boot_id()
        self._tokens = itertools.count(1)
        if shared:
            cache_entries = 0
        self._cache: OrderedDict[Key, Conversation] = OrderedDict()
        self._cache_limit = cache_entries
        self._cached_entries = 0
        self._queue: list[_Write] = []
        self._flusher: asyncio.Future[None] | None = None
        self._ttl = ttl_seconds
        self._cap = max_messages
        self._clock = clock
        self._locks = KeyLocks(lock_timeout)
        self._held: dict[Key, str] = {}  # lease tokens this process holds (shared mode)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-sqlite")
        self._db: sqlite3.Connection | None = None
        self._purged_at = 0.0

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, self._with_db, work)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"sqlite store at {self._path}: {exc}") from exc

    def _with_db(self, work: Callable[[sqlite3.Connection], T]) -> T:
        if self._db is None:  # opened lazily, so a gateway that never uses memory creates no file
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            db.executescript(_SCHEMA)
            _add_lock_columns(db)
            self._db = db
        now = self._clock()
        if now - self._purged_at > _PURGE_EVERY:
            self._purged_at = now
            self._purge(self._db, now)
        return work(self._db)

    def _purge(self, db: sqlite3.Connection, now: float) -> None:
        cutoff = now - self._ttl
        with _transaction(db):
            db.execute(
                "DELETE FROM messages WHERE (tenant, memory_id) IN "
                "(SELECT tenant, memory_id FROM conversations WHERE updated_at < ?)",
                (cutoff,),
            )
            db.execute("DELETE FROM conversations WHERE updated_at < ?", (cutoff,))
            db.execute('DELETE FROM "values" WHERE written_at < ?', (cutoff,))
            db.execute("DELETE FROM locks WHERE expires_at < ?", (now,))

    def _live(self, db: sqlite3.Connection, key: Key) -> tuple[str, float] | None:
        row = db.execute(
            "SELECT system, updated_at FROM conversations WHERE tenant = ? AND memory_id = ?", key
        ).fetchone()
        if row is None:
            return None
        if self._clock() - row[1] > self._ttl:
            self._delete(db, key)
            return None
        return row[0], row[1]

    def _remember(self, key: Key, conversation: Conversation | None) -> None:
        old = self._cache.pop(key, None)
        if old is not None:
            self._cached_entries -= len(old.entries)
        if conversation is None or self._cache_limit <= 0:
            return
        self._cache[key] = conversation
        self._cached_entries += len(conversation.entries)
        while self._cached_entries > self._cache_limit and self._cache:
            _, evicted = self._cache.popitem(last=False)
            self._cached_entries -= len(evicted.entries)

    async def load(self, key: Key) -> Conversation | None:
        cached = self._cache.get(key)
        if cached is not None and self._clock() - cached.updated_at <= self._ttl:
            self._cache.move_to_end(key)
            return Conversation(list(cached.system), list(cached.entries), cached.updated_at)
        conversation = await self._load(key)
        self._remember(key, conversation)
        return conversation

    async def _load(self, key: Key) -> Conversation | None:
        def work(db: sqlite3.Connection) -> Conversation | None:
            found = self._live(db, key)
            if found is None:
                return None
            rows = db.execute(
                "SELECT body FROM messages WHERE tenant = ? AND memory_id = ? ORDER BY seq", key
            ).fetchall()
            return Conversation(orjson.loads(found[0]), [load_entry(r[0]) for r in rows], found[1])

        return await self._run(work)

    async def append(self, key: Key, entries: Sequence[Entry], *, system: Sequence[Message] | None) -> None:
        write = _Write(
            key,
            [(entry.message.get("role") or "", dump_entry(entry)) for entry in entries],
            orjson.dumps(list(system)).decode() if system is not None else None,
            asyncio.get_running_loop().create_future(),
            self._held.get(key),
        )
        cached = self._cache.get(key)
        if cached is not None and self._clock() - cached.updated_at > self._ttl:
            cached = None
            self._remember(key, None)
        self._queue.append(write)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())
        try:
            updated_at = await asyncio.shield(write.done)
        except BaseException:
            self._remember(key, None)  # the file is the truth; read it again next time
            raise
        if cached is not None and self._cache.get(key) is cached:
            merged = [*cached.entries, *entries][-self._cap :]
            self._remember(key, Conversation(list(system) if system is not None else cached.system, merged, updated_at))

    async def _flush(self) -> None:
        """Group commit: every append queued meanwhile goes in one transaction, one thread hop."""
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                updated_at, lost = await self._run(functools.partial(self._write, batch=batch))
            except asyncio.CancelledError:
                _settle(batch, StoreUnavailable("the store is closing"))
                raise
            except Exception as exc:
                _settle(batch, exc)
            else:
                _settle(lost, LockLost("sqlite store: the conversation's lease passed to another holder"))
                _settle(batch, updated_at)

    def _write(self, db: sqlite3.Connection, *, batch: Sequence[_Write]) -> tuple[float, list[_Write]]:
        """Write the batch in one transaction; a write whose holder lost its lease is left out, and returned."""
        now = self._clock()
        lost: list[_Write] = []
        with _transaction(db):
            for write in batch:
                if write.token is not None and not self._owns(db, write.key, write.token):
                    lost.append(write)
                    continue
                last = self._last_seq(db, write.key, now)
                db.execute(
                    "INSERT INTO conversations (tenant, memory_id, system, updated_at) "
                    "VALUES (?, ?, COALESCE(?, '[]'), ?) ON CONFLICT (tenant, memory_id) DO UPDATE SET "
                    "system = COALESCE(?, conversations.system), updated_at = excluded.updated_at",
                    (*write.key, write.system, now, write.system),
                )
                db.executemany(
                    "INSERT INTO messages (tenant, memory_id, seq, role, body) VALUES (?, ?, ?, ?, ?)",
                    [(*write.key, last + i + 1, role, body) for i, (role, body) in enumerate(write.bodies)],
                )
                if last + len(write.bodies) > self._cap:
                    db.execute(
                        "DELETE FROM messages WHERE tenant = ? AND memory_id = ? AND seq <= ?",
                        (*write.key, last + len(write.bodies) - self._cap),
                    )
        return now, lost

    @staticmethod
    def _owns(db: sqlite3.Connection, key: Key, token: str) -> bool:
        row = db.execute("SELECT owner FROM locks WHERE tenant = ? AND memory_id = ?", key).fetchone()
        return row is not None and row[0] == token

    def _last_seq(self, db: sqlite3.Connection, key: Key, now: float) -> int:
        """The conversation's last message number; an expired conversation is forgotten first (0)."""
        row = db.execute(
            "SELECT c.updated_at, (SELECT MAX(seq) FROM messages m WHERE m.tenant = c.tenant "
            "AND m.memory_id = c.memory_id) FROM conversations c WHERE c.tenant = ? AND c.memory_id = ?",
            key,
        ).fetchone()
        if row is None:
            return 0
        if now - row[0] > self._ttl:
            self._delete(db, key)
            return 0
        return int(row[1] or 0)

    @staticmethod
    def _delete(db: sqlite3.Connection, key: Key) -> bool:
        with _transaction(db):
            db.execute("DELETE FROM messages WHERE tenant = ? AND memory_id = ?", key)
            return db.execute("DELETE FROM conversations WHERE tenant = ? AND memory_id = ?", key).rowcount > 0

    async def delete(self, key: Key) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            return self._live(db, key) is not None and self._delete(db, key)

        self._remember(key, None)
        return await self._run(work)

    async def undo(self, key: Key) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            with _transaction(db):
                if self._live(db, key) is None:
                    return False
                first, last_user = db.execute(
                    "SELECT MIN(seq), MAX(CASE WHEN role = 'user' THEN seq END) FROM messages "
                    "WHERE tenant = ? AND memory_id = ?",
                    key,
                ).fetchone()
                if first is None:
                    return False
                start = last_user if last_user is not None else first
                db.execute("DELETE FROM messages WHERE tenant = ? AND memory_id = ? AND seq >= ?", (*key, start))
                db.execute(
                    "UPDATE conversations SET updated_at = ? WHERE tenant = ? AND memory_id = ?", (self._clock(), *key)
                )
                return True

        self._remember(key, None)
        return await self._run(work)

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
        with _transaction(db):
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
        if self._flusher is not None and not self._flusher.done():
            await self._flusher

        def work() -> None:
            if self._db is not None:
                self._db.close()
                self._db = None

        await asyncio.get_running_loop().run_in_executor(self._executor, work)
        self._executor.shutdown(wait=True)


@dataclass(slots=True)
class _Write:
    key: Key
    bodies: list[tuple[str, bytes]]
    system: str | None
    done: asyncio.Future[float]
    token: str | None = None  # the lease this write must still hold (shared mode)


def _add_lock_columns(db: sqlite3.Connection) -> None:
    """Give a `locks` table made by an older gateway the columns this one writes."""
    with _transaction(db):  # serializes processes opening one old file together: one of them alters it
        present = {row[1] for row in db.execute("PRAGMA table_info(locks)")}
        for column, kind in _LOCK_COLUMNS.items():
            if column not in present:
                db.execute(f"ALTER TABLE locks ADD COLUMN {column} {kind}")


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


def _settle(batch: Sequence[_Write], outcome: float | Exception) -> None:
    for write in batch:
        if write.done.done():
            continue
        if isinstance(outcome, Exception):
            write.done.set_exception(outcome)
        else:
            write.done.set_result(outcome)


class _transaction:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error) on an autocommit connection; re-entrant."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._outer = False

    def __enter__(self) -> None:
        if not self._db.in_transaction:
            self._db.execute("BEGIN IMMEDIATE")
            self._outer = True

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        if self._outer:
            self._db.execute("COMMIT" if kind is None else "ROLLBACK")
