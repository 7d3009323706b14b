"""The embedded default store: SQLite in WAL mode, on one worker thread so the loop never blocks.

Its parts: the file's tables (sqlite_file) and its rows' shapes (sqlite_rows), the thread's connection to it, which
heals after faults and notices a file replaced (sqlite_connection), the writes of turns, most
of them one statement and appends queued together one insert or one transaction
(sqlite_writes), reads, deletes, undos, redos and listings (sqlite_conversations), the loop's write-through
cache (sqlite_cache), and the locks processes sharing the file hold conversations by
(sqlite_locks, on the lock file beside it: sqlite_lockfile). Here they are put together behind
the MemoryStore protocol: every statement runs on the store's thread, and each batch of jobs
comes back to the loop in one hop (`_settle`).

Worker processes sharing one file (`--workers N`) open it with `shared=True`: a conversation is
locked by a kernel lock on its byte of the lock file, so turns stay serialized across the
processes, and a turn costs what it does in one process: the lock is a system call on the loop,
the cache serves, and the write is the same one statement. Each write first puts a fresh version
in the conversation's slot of the lock file (on the thread, before its statements); a process
serves its cached copy, and its thread appends by what it remembers of the row, only while the
slot holds the version they were recorded with: no other process wrote the conversation since.
When other processes only appended to it since (its change slot did not move), the copy is
brought up to date by the rows written after it (sqlite_moved), not read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

from gateway.core.memory.about import About
from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.listing import Listing, Page
from gateway.core.memory.reach import Reach
from gateway.core.memory.settings import StoreKind
from gateway.memory.sqlite_cache import ConversationCache
from gateway.memory.sqlite_connection import StoreFile
from gateway.memory.sqlite_conversations import Conversations
from gateway.memory.sqlite_locks import Holding, SharedLocks
from gateway.memory.sqlite_moved import Copy, HeldRead, Mark, read_appended
from gateway.memory.sqlite_writes import TurnWriter, Write
from gateway.memory.store import Key, KeyLocks, StoreUnavailable
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
        self._cache = ConversationCache(cache_entries, ttl=ttl_seconds, cap=max_messages, clock=clock, versions=shared)
        self._locks = KeyLocks(lock_timeout)
        self._cap = max_messages
        # the thread's own
        self._turns = TurnWriter(cap=max_messages)
        self._conversations = Conversations(
            self._turns, ttl=ttl_seconds, cap=max_messages, clock=clock, plain=cache_entries > 0
        )
        self._file = StoreFile(
            path,
            shown_path=shown_path or path,  # what logs and errors name: no value from the environment
            busy_timeout_ms=max(round(busy_timeout * 1000), 0),
            ttl=ttl_seconds,
            clock=clock,
            on_new_file=self._turns.ranges.clear,
            shared=shared,
        )
        self._worker: Worker[_Call | Write] = Worker(self._serve, name="gateway-sqlite", closed=self._closed)
        self._shared_locks = SharedLocks(
            self._locks, current=lambda: self._file.lock_file, opened=lambda: self._run(_nothing), barrier=self._barrier
        )

    def _closed(self) -> StoreUnavailable:
        return StoreUnavailable(f"sqlite store at {self._file.shown_path}: the store is closed")

    def _run(self, work: Callable[[sqlite3.Connection], T], then: Callable[[T], None] | None = None) -> asyncio.Future[T]:
        """Run `work` on the store's thread with the open file; its sqlite errors are StoreUnavailable."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._worker.submit(_Call(functools.partial(self._with_db, work), done, then))
        return done

    def _barrier(self) -> asyncio.Future[None]:
        """A future done once the thread served every job queued before it (the file untouched)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._worker.submit(_Call(_nothing, done))
        return done

    def _with_db(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return work(self._file.ready().connection)

    # on the thread

    def _serve(self, jobs: list[_Call | Write]) -> None:
        """On the thread: run the jobs in order (see `_serve_each`); then one hop to the loop."""
        self._serve_each(jobs)
        error = self._file.check(len(jobs))
        if error is not None:
            for job in jobs:
                job.error = error
        try:
            jobs[0].done.get_loop().call_soon_threadsafe(self._settle, jobs, self._file.generation)
        except RuntimeError:  # the loop is closed: nobody awaits these any more
            return

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
            if self._shared:
                self._stamp(writes)
            now = self._clock()
            self._turns.write(cursor, writes, now=now, cutoff=now - self._ttl)
            self._file.unwritable = None
        except Exception as exc:
            error = self._file.unavailable(exc)
            for write in writes:
                write.error = error
                self._turns.forget(write.key)  # rolled back: the row is not as remembered

    def _stamp(self, writes: list[Write]) -> None:
        """Shared mode: a fresh version in each write's slot, before its statements; a new system prompt marks a change too.

        See sqlite_lockfile.
        """
        lock_file = self._file.opened_lock_file()
        stamp, changes = lock_file.stamp, lock_file.changes
        for write in writes:
            slot = write.slot
            write.seen, write.version = stamp(slot)
            write.changes = changes[slot] if write.new_system is None else lock_file.mark_changed(slot)

    def _stamped(self, slot: int, work: Callable[[sqlite3.Connection], T], db: sqlite3.Connection) -> T:
        """`work`, which changes a conversation otherwise than by appending, after fresh values in its slots (shared mode)."""
        lock_file = self._file.opened_lock_file()
        lock_file.stamp(slot)
        lock_file.mark_changed(slot)
        return work(db)

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
        """Whether the cache may serve `key`: always for the file's only writer, else while held and at its version.

        Shared: the cached copy is the file's while no other process wrote the conversation
        since it was cached (its slot holds the version recorded with it: see sqlite_locks),
        which holds on while this process holds the conversation.
        """
        if not self._shared:
            return True
        holding = self._shared_locks.held.get(key)
        return holding is not None and self._cache.version(key) == holding.version()

    def _read(self, key: Key, reach: Reach | None) -> Awaitable[Conversation | None]:
        """Read the conversation on the thread, kept in the cache (shared mode: see `_read_held`)."""
        read = functools.partial(self._conversations.read, key=key, reach=reach)
        if not self._shared:
            return self._run(read, functools.partial(self._cache.remember, key))
        holding = self._shared_locks.held.get(key)
        if holding is None:  # another process may be writing it: what was read may be older than its version says
            return self._run(read)
        copy = None if reach is None else self._cache.out_of_date(key, reach, changes=holding.changes())
        work = functools.partial(self._read_held, read, key=key, slot=holding.place.slot, copy=copy, generation=self._cache.generation)
        done: asyncio.Future[HeldRead] = self._run(work, functools.partial(self._remember_held, key, holding))
        self._shared_locks.writing(key, done)  # the lock stays until it is served, as for a write (see `_read_held`)
        return self._settled(done)

    async def _settled(self, done: asyncio.Future[HeldRead]) -> Conversation | None:
        """The conversation a read under this process's lock gives, once served."""
        return (await done).settled(cap=self._cap)

    def _read_held(
        self,
        read: Callable[[sqlite3.Connection], Conversation | None],
        db: sqlite3.Connection,
        *,
        key: Key,
        slot: int,
        copy: Copy | None,
        generation: int,
    ) -> HeldRead:
        """On the thread, shared mode, under this process's lock: what was appended to `copy` since, or `read`.

        The messages appended alone when only appends followed the copy (see sqlite_moved): its
        change slot holds what it was recorded with, in the file it was read from (`generation`).
        Either way the thread learns the row, so the turn's write after it is its message row
        alone, as after this process's own write: the row is learned at the version its slot
        holds, which no other process changes while this one holds the conversation.
        """
        lock_file = self._file.opened_lock_file()
        version, changes = lock_file.slots[slot], lock_file.changes[slot]
        if copy is not None and copy.mark.changes == changes and generation == self._file.generation:
            state = self._turns.learn(db, key, version=version)
            now = self._clock()
            appended = None if state is None else read_appended(db, key, state, copy=copy, cap=self._cap, ttl=self._ttl, now=now)
            if appended is not None and state is not None:
                log.debug("memory %s: %d messages another process appended read alone", key[1], len(appended.entries))
                return HeldRead(None, Mark(version, changes, state[3]), copy=copy, appended=appended)
        conversation = read(db)
        state = self._turns.learn(db, key, version=version)
        return HeldRead(conversation, Mark(version, changes, 0 if state is None else state[3]))

    def _remember_held(self, key: Key, holding: Holding, read: HeldRead) -> None:
        """Cache a read made under `holding`, with the slots' values it was read at, if still held the same way."""
        conversation = read.settled(cap=self._cap)
        if self._shared_locks.held.get(key) is holding:
            self._cache.remember(key, conversation, mark=read.mark)

    async def load(self, key: Key) -> Conversation | None:
        """Read from the file, never the cache: the file has when each message was written (the memory API's, not a turn's)."""
        return await self._read(key, None)

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        """The cached conversation itself when it serves (to read, not to change), else a read of the file."""
        cached = self._cache.tail(key, reach) if self._cached(key) else None
        if cached is not None:
            return cached
        return await self._read(key, reach)

    def append(self, key: Key, entries: Sequence[Entry], *, system: Sequence[Message] | None) -> asyncio.Future[None]:
        write = Write(key, entries, system)
        if self._shared:
            write.slot = self._shared_locks.writing(key, write.done)
        write.cached = self._cache.take(key)  # out of the cache until written: a read meanwhile comes after this write
        self._worker.submit(write)
        return write.done

    def write_pending(self) -> float:
        """How long the thread has been on its batch in flight: reads run in order with the writes, and only writes wait on the file."""
        return self._worker.busy_for()

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
        return await self._change(key, functools.partial(self._conversations.delete, key=key))

    async def undo(self, key: Key) -> bool:
        """Forget the newest user message and what came after it (the whole conversation when it has none)."""
        return await self._change(key, functools.partial(self._conversations.undo, key=key))

    async def redo(self, key: Key) -> bool:
        """Write back the turn the last undo removed, unless a turn was written since."""
        return await self._change(key, functools.partial(self._conversations.redo, key=key))

    async def list_conversations(self, tenant: str, listing: Listing) -> Page:
        return await self._run(functools.partial(self._conversations.page, tenant=tenant, listing=listing))

    async def start(self, key: Key, metadata: Mapping[str, str]) -> None:
        await self._change(key, functools.partial(self._conversations.start, key=key, metadata=metadata))

    async def about(self, key: Key) -> About | None:
        return await self._run(functools.partial(self._conversations.about, key=key))

    async def set_metadata(self, key: Key, metadata: Mapping[str, str]) -> bool:
        """Not a change of the conversation as a turn reads it: no cache to forget, no version to stamp."""
        return await self._run(functools.partial(self._conversations.set_metadata, key=key, metadata=metadata))

    async def delete_item(self, key: Key, item_id: str) -> bool:
        return await self._change(key, functools.partial(self._conversations.delete_item, key=key, item_id=item_id))

    def _change(self, key: Key, work: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """Run `work`, which changes the conversation otherwise than by a turn; shared, after a fresh version in its slot."""
        self._cache.forget(key)
        forget = functools.partial(self._cache.forget, key)
        if not self._shared:
            return self._run(work, forget)
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        stamped = functools.partial(self._stamped, self._shared_locks.writing(key, done), work)
        self._worker.submit(_Call(functools.partial(self._with_db, stamped), done, forget))
        return done

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
        return self._shared_locks.hold(key) if self._shared else self._locks.hold(key)

    async def close(self) -> None:
        """Close the file once the work queued so far is done, then end the thread."""
        if not self._worker.started:  # never used: no thread, no file
            self._worker.stop()
            return
        if self._worker.stopped:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._worker.submit(_Call(self._file.close, done))
        try:
            await done
        finally:
            self._worker.stop()
            self._shared_locks.close()


def _nothing(*_: object) -> None:
    """A job that does nothing: run for what running any job does (open the file), or to come after the jobs before it."""
