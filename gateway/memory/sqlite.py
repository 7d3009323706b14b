"""The embedded default store: SQLite in WAL mode, on one worker thread so the loop never blocks.

Its parts: the file's tables and row shapes (sqlite_file), the thread's connection to it, which
heals after faults and notices a file replaced (sqlite_connection), the writes of turns, most
of them one statement and appends queued together one insert or one transaction
(sqlite_writes), reads, deletes and undos (sqlite_conversations), the loop's write-through
cache (sqlite_cache), and the leases processes sharing the file lock conversations with
(sqlite_leases). Here they are put together behind the MemoryStore protocol: every statement
runs on the store's thread, and each batch of jobs comes back to the loop in one hop (`_settle`).

Worker processes sharing one file (`--workers N`) open it with `shared=True`: conversations are
locked by leases in the file, so turns stay serialized across the processes, and the cache serves
a conversation only while its lease is held, once the lease's transaction found it unchanged
since it was cached (its stamp, the time of its last write: see `TurnWriter.learn`). Another
process's write in between changes the stamp, and the cached copy is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.reach import Reach
from gateway.core.memory.settings import StoreKind
from gateway.memory.sqlite_cache import ConversationCache
from gateway.memory.sqlite_connection import StoreFile
from gateway.memory.sqlite_conversations import Conversations
from gateway.memory.sqlite_leases import Leases
from gateway.memory.sqlite_writes import TurnWriter, Write
from gateway.memory.store import Key, KeyLocks, LockLost, StoreUnavailable
from gateway.memory.worker import Worker

T = TypeVar("T")
log = logging.getLogger("gateway.memory")


@dataclass(slots=True)
class _Call:
    """Work for the thread; `then` runs on the loop with its result before its caller sees it (see `_settle`)."""

    work: Callable[[], Any]
    done: asyncio.Future[Any]
    then: Callable[[Any], None] | None = None
    result: Any = None
    error: BaseException | None = None
    together: bool = True  # may run in one transaction with the jobs beside it (see `_serve_together`)


class SQLiteStore:
    """Survives restarts; every statement runs on a single dedicated thread."""

    kind = StoreKind.SQLITE  # the `store` label of its metrics

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
        self._ttl = ttl_seconds
        self._clock = clock
        self._shared = shared
        self._cache = ConversationCache(cache_entries, ttl=ttl_seconds, cap=max_messages, clock=clock)
        self._locks = KeyLocks(lock_timeout)
        # the thread's own
        self._turns = TurnWriter(cap=max_messages, shared=shared)
        self._leases = Leases(self._run, self._locks, look=self._turns.learn, seen=self._cache.check)
        self._conversations = Conversations(self._turns, ttl=ttl_seconds, clock=clock, plain=cache_entries > 0)
        self._file = StoreFile(
            path,
            shown_path=shown_path or path,  # what logs and errors name: no value from the environment
            busy_timeout_ms=max(round(busy_timeout * 1000), 0),
            ttl=ttl_seconds,
            clock=clock,
            on_new_file=self._turns.ranges.clear,
        )
        self._worker: Worker[_Call | Write] = Worker(self._serve, name="gateway-sqlite", closed=self._closed)

    def _closed(self) -> StoreUnavailable:
        return StoreUnavailable(f"sqlite store at {self._file.shown_path}: the store is closed")

    async def _run(self, work: Callable[[sqlite3.Connection], T], then: Callable[[T], None] | None = None) -> T:
        """Run `work` on the store's thread with the open file; its sqlite errors are StoreUnavailable."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._worker.submit(_Call(functools.partial(self._with_db, work), done, then))
        return await done

    def _with_db(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return work(self._file.ready().connection)

    # on the thread

    def _serve(self, jobs: list[_Call | Write]) -> None:
        """On the thread: run the jobs in order (see `_serve_each`, `_serve_together`); then one hop to the loop."""
        if self._shared and (len(jobs) > 1 or self._leases.released):
            self._serve_together(jobs)
        else:
            self._serve_each(jobs)
        error = self._file.check(len(jobs))
        if error is not None:
            for job in jobs:
                job.error = error
        try:
            jobs[0].done.get_loop().call_soon_threadsafe(self._settle, jobs, self._file.generation)
        except RuntimeError:  # the loop is closed: nobody awaits these any more
            return

    def _serve_together(self, jobs: list[_Call | Write]) -> None:
        """Shared mode: the leases let go, then the jobs, in one transaction; a failure of a job rolls it back and fails them all.

        A transaction locks the file across the processes sharing it, which costs more than the
        statements of a turn's lease, write or release; the jobs queued together (most of them
        for other conversations) share one.
        """
        together = all(isinstance(job, Write) or job.together for job in jobs)
        try:
            db = self._file.ready().connection
        except Exception:  # each job meets the file's failure by itself
            self._serve_each(jobs)
            return
        try:
            if together:
                db.execute("BEGIN IMMEDIATE")
            self._leases.delete_released(db)
        except Exception as exc:
            log.warning("sqlite store at %s: releasing leases failed (%s); they will expire", self._file.shown_path, exc)
            with contextlib.suppress(sqlite3.Error):
                if db.in_transaction:
                    db.execute("ROLLBACK")
            together = False
        if not together:
            self._serve_each(jobs)
            return
        self._serve_each(jobs)
        failure = next((job.error for job in jobs if job.error is not None and not isinstance(job.error, LockLost)), None)
        if failure is None:
            try:
                db.execute("COMMIT")
                return
            except Exception as exc:
                failure = self._file.unavailable(exc)
        with contextlib.suppress(sqlite3.Error):
            if db.in_transaction:
                db.execute("ROLLBACK")
        self._turns.ranges.clear()  # what the jobs wrote and learned is undone
        for job in jobs:
            job.error = failure

    def _serve_each(self, jobs: list[_Call | Write]) -> None:
        """Run the jobs in order, each run of appends in one statement or transaction (see TurnWriter)."""
        writes: list[Write] = []
        for job in jobs:
            if isinstance(job, Write):
                writes.append(job)
                continue
            if writes:
                self._write_all(writes)
                writes = []
            try:
                job.result = job.work()
            except Exception as exc:
                job.error = self._file.unavailable(exc)
        if writes:
            self._write_all(writes)

    def _write_all(self, writes: list[Write]) -> None:
        """The writes in one statement or one transaction (see TurnWriter); a failure fails them all."""
        try:
            cursor = self._file.ready()
            now = self._clock()
            self._turns.write(cursor, writes, now=now, cutoff=now - self._ttl)
            self._file.unwritable = None
        except Exception as exc:
            error = self._file.unavailable(exc)
            for write in writes:
                write.error = error
                self._turns.forget(write.key)  # rolled back: the row is not as remembered

    # on the loop

    def _settle(self, jobs: list[_Call | Write], generation: int) -> None:
        """On the loop, in the order the thread served them: bring the cache up to date, then wake each caller.

        Done here rather than by each caller once it resumes, so a read served before a write is
        never cached after it. A batch served after the thread moved on to another file
        (`generation`) first empties the cache, which held the old file's conversations.
        """
        cache = self._cache
        cache.start_over(generation)
        for job in jobs:
            if isinstance(job, Write):
                cache.written(job)
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

    def _cached(self, key: Key) -> bool:
        """Whether the cache may serve `key`: always for the file's only writer, else while its lease is held (see `Leases`)."""
        return not self._shared or key in self._leases.held

    async def load(self, key: Key) -> Conversation | None:
        cached = self._cache.whole(key) if self._cached(key) else None
        if cached is not None:
            return Conversation(list(cached.system), list(cached.entries), cached.updated_at)
        read = functools.partial(self._conversations.read, key=key, reach=None)
        return await self._run(read, functools.partial(self._cache.remember, key))

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        """The cached conversation itself when it serves (to read, not to change), else a read of the file."""
        cached = self._cache.tail(key, reach) if self._cached(key) else None
        if cached is not None:
            return cached
        read = functools.partial(self._conversations.read, key=key, reach=reach)
        return await self._run(read, functools.partial(self._cache.remember, key))

    def append(self, key: Key, entries: Sequence[Entry], *, system: Sequence[Message] | None) -> asyncio.Future[None]:
        write = Write(key, entries, system)
        write.token = self._leases.held.get(key)
        write.cached = self._cache.take(key)  # out of the cache until written: a read meanwhile comes after this write
        self._worker.submit(write)
        return write.done

    async def unwritable(self) -> str | None:
        """Why memory writes fail, or None while they go through; after a failure, a write is tried first.

        So the store is found healed without a turn to write: a gateway said not ready gets none.
        """
        if self._file.unwritable is None:
            return None
        with contextlib.suppress(StoreUnavailable):
            await self._run(self._file.probe)
        return self._file.unwritable

    async def delete(self, key: Key) -> bool:
        self._cache.forget(key)
        return await self._run(functools.partial(self._conversations.delete, key=key), functools.partial(self._cache.forget, key))

    async def undo(self, key: Key) -> bool:
        """Forget the newest user message and what came after it (the whole conversation when it has none)."""
        self._cache.forget(key)
        return await self._run(functools.partial(self._conversations.undo, key=key), functools.partial(self._cache.forget, key))

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
        return self._leases.hold(key) if self._shared else self._locks.hold(key)

    async def close(self) -> None:
        """Close the file once the work queued so far is done, then end the thread."""
        if not self._worker.started:  # never used: no thread, no file
            self._worker.stop()
            return
        if self._worker.stopped:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._worker.submit(_Call(self._file.close, done, together=False))
        try:
            await done
        finally:
            self._worker.stop()
