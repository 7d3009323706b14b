"""The shared store for several gateway processes or hosts: redis-py asyncio, and a lean client for a turn's scripts.

Keys of one conversation share the hash tag `{tenant:memoryId}` (one Redis Cluster slot), and
every script names only those. TTL is Redis expiry, refreshed on each write. A memory turn is two
round trips (`redis_scripts`): one script takes the conversation's lock and reads its window (rows
only when it changed since this process cached it: `redis_cache`), another appends the turn and
lets the lock go; the append first checks the lock is still this holder's (else LockLost). In
front, an in-process lock queues this process's own waiters; across replicas, a dead holder's
lock is taken over within seconds and a live one's kept (`redis_locks`). What the memory API
does besides (whole reads, undo, redo, listing) is in `redis_history`, what the Conversations API
does (a conversation's metadata, deleting one message) in `redis_items`.

The four scripts go through a lean client of their own (`stores.lean_redis`: one shared
connection, no pool) on one Redis or Sentinel's primary; on a Cluster, with waitReplicas, or a URL
it does not read, through redis-py like everything else (`stores.redis.open_lean`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import orjson
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.core.memory.about import About
from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message, dump_entry, load_entry
from gateway.core.memory.listing import Listing, Page
from gateway.core.memory.plain import PlainHistory
from gateway.core.memory.reach import Reach
from gateway.core.memory.settings import StoreKind
from gateway.core.stores import RedisConnection
from gateway.memory import redis_history, redis_items, redis_locks
from gateway.memory.redis_cache import TailCache
from gateway.memory.redis_faults import Unavailable
from gateway.memory.redis_history import key_prefix
from gateway.memory.redis_locks import Holding, Liveness, RedisHold
from gateway.memory.redis_scripts import APPEND, Scripts, Taken
from gateway.memory.store import Key, KeyLocks, LockLost, StoreUnavailable, Unconfirmed, new_item_id
from gateway.stores.lean_redis import LeanRedis
from gateway.stores.redis import (
    Patience,
    RedisClient,
    close_client,
    masked,
    open_client,
    open_lean,
    replicated,
    retrying_lost_connections,
)

LEASE_SECONDS = 30.0  # a lock's own expiry, extended while held (see Liveness): ends a lock nobody let go
CACHE_ENTRIES = 50_000  # entries of conversations cached per process
_VALUE_PREFIX = "gw:value:"
log = logging.getLogger("gateway.memory")
T = TypeVar("T")


class RedisStore:
    kind = StoreKind.REDIS  # the `store` label of its metrics

    def __init__(
        self,
        connection: RedisConnection | str,
        *,
        ttl_seconds: float,
        max_messages: int,
        lock_timeout: float,
        lease_seconds: float | None = None,
        cache_entries: int = CACHE_ENTRIES,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
    ) -> None:
        """A store on `connection` (a URL alone: one Redis there); appends wait for `wait_replicas` (stores.redis.Replicated)."""
        self._connection = RedisConnection(url=connection) if isinstance(connection, str) else connection
        # A Redis that hangs or is gone fails requests within seconds (503), not after a long retry loop.
        # Settings the client refuses make a store that is never available, not a gateway that cannot start.
        self._client: RedisClient | None = None
        self._lean: LeanRedis | None = None
        self._scripts: Scripts | None = None
        self._refusal = ""
        self._unavailable = Unavailable(self._connection)
        patience = Patience(socket_seconds=10, connect_seconds=5, retry=retrying_lost_connections(3))
        try:
            self._client = open_client(self._connection, patience)
            if wait_replicas:
                # redis-py's scripts: WAIT blocks its connection until replicas confirm, which on the
                # lean client's one shared connection would hold up every other call
                confirmed = replicated(self._client, APPEND, replicas=wait_replicas, timeout=wait_timeout, what="a turn")
                self._scripts = dataclasses.replace(Scripts.of(self._client.register_script), append=confirmed)
            else:
                self._lean = open_lean(self._connection, self._client, patience)
                self._scripts = Scripts.of((self._lean or self._client).register_script)
        except Exception as exc:
            self._refusal = f"redis store: the URL is refused ({masked(str(exc), self._connection)})"
            log.error("memory: %s; every memory turn will be answered 503", self._refusal)
        self._ttl = max(int(ttl_seconds), 1)
        self._cap = max_messages
        self._lock_timeout = lock_timeout
        self._lease = LEASE_SECONDS if lease_seconds is None else lease_seconds
        self._local = KeyLocks(lock_timeout)
        self._writing: dict[Key, asyncio.Future[None]] = {}  # appends under way, which the lock outlives
        self._replica = os.urandom(6).hex().encode()  # this store's, in its locks' values and its write ids
        self._serials = itertools.count()
        self._held: dict[Key, Holding] = {}  # this replica's holds, by conversation
        self._cache = TailCache(cache_entries, cap=max_messages)
        self._liveness = Liveness(mark=self._mark_alive, tick=self._renew_due)

    @property
    def _redis(self) -> RedisClient:
        """The client; StoreUnavailable when the URL was refused."""
        if self._client is None:
            raise StoreUnavailable(self._refusal)
        return self._client

    async def ping(self) -> None:
        with self._unavailable:
            await self._redis.ping()

    @property
    def _lease_ms(self) -> int:
        return max(round(self._lease * 1000), 1)

    @property
    def _run(self) -> Scripts:
        """The scripts; StoreUnavailable when the URL was refused."""
        if self._scripts is None:
            raise StoreUnavailable(self._refusal)
        return self._scripts

    # reads

    async def load(self, key: Key) -> Conversation | None:
        """The whole conversation: for the memory API, never a turn."""
        await self._taken(key)
        with self._unavailable:
            return await redis_history.load(self._redis, key)

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        """The newest entries that cover `reach`: this process's cached part while the conversation is still
        at its version, else read from the end of the list in chunks.

        Under a hold, the first read takes the conversation's lock in the same script.
        """
        cached = self._cache.serving(key, reach)
        version = b"" if cached is None else cached.version
        rows = reach.first_chunk
        holding = self._held.get(key)
        if holding is not None and not holding.locked:
            reply = await self._take(key, holding, version=version, rows=rows)
        else:
            with self._unavailable:
                reply = await self._run.take(keys=self._take_keys(key), args=[b"", 0, b"", version, rows, b""])
        state = reply[0]
        if state == Taken.SAME and cached is not None:
            return cached.conversation
        if state == Taken.READ:
            with self._unavailable:
                return await self._read(key, reply, reach)
        self._cache.forget(key)
        return None

    async def _read(self, key: Key, reply: list[Any], reach: Reach) -> Conversation:
        """The conversation `TAKE` read (READ), with older chunks while `reach` is not covered; cached."""
        version, system, updated_at, total = reply[1:5]
        entries = [load_entry(row) for row in reply[5:]]
        msgs = f"{key_prefix(key)}:msgs"
        while len(entries) < total and not reach.covered_by(entries):
            chunk = max(min(2 * len(entries), total - len(entries)), 1)
            rows = await self._redis.lrange(msgs, -len(entries) - chunk, -len(entries) - 1)
            if not rows:  # shorter than it was: nothing older to read
                break
            entries[:0] = [load_entry(row) for row in rows]
        conversation = Conversation(
            orjson.loads(system), entries, float(updated_at), older=max(total - len(entries), 0), plain=PlainHistory.of(entries)
        )
        self._cache.remember(key, conversation, version)
        return conversation

    # writes

    def append(self, key: Key, entries: Sequence[Entry], *, system: Sequence[Message] | None) -> Awaitable[None]:
        """Runs as its own task: a caller that leaves does not cut it, and the lock waits for it.

        Under a hold, the write lets the conversation's lock go; an operation after it in the same
        hold takes it again, only if no other holder wrote meanwhile (else LockLost).
        """
        write = asyncio.ensure_future(self._write(key, entries, system))
        self._writing[key] = write
        write.add_done_callback(functools.partial(self._written, key))
        return asyncio.shield(write)

    def _written(self, key: Key, write: asyncio.Future[None]) -> None:
        if self._writing.get(key) is write:
            del self._writing[key]
        if not write.cancelled():
            write.exception()  # its caller may have left; the outcome was for it alone

    async def _write(self, key: Key, entries: Sequence[Entry], system: Sequence[Message] | None) -> None:
        prefix = key_prefix(key)
        holding = self._held.get(key)
        write_id = self._serial()
        new_system = orjson.dumps(list(system)) if system is not None else b""
        let_go = b"0" if holding is None else b"1"
        args: list[bytes | int] = [b"", self._cap, self._ttl, new_system, write_id, let_go, *[dump_entry(entry, item_id=entry.item_id or new_item_id()) for entry in entries]]
        try:
            if holding is not None:
                await self._taken(key)
                args[0] = holding.value
            with self._unavailable:
                reply = await self._run.append(keys=[f"{prefix}:msgs", f"{prefix}:meta", f"{prefix}:lock"], args=args)
        except BaseException as exc:
            self._cache.forget(key)
            cause = exc.__cause__
            if isinstance(cause, ResponseError) and str(cause).startswith("LOCKLOST"):
                if holding is not None:
                    holding.locked = False  # another's now: nothing to let go
                raise LockLost(f"redis store: {cause}") from None
            if isinstance(cause, RedisTimeoutError):  # sent, and never answered: it may run yet
                raise Unconfirmed(str(exc)) from cause
            raise
        if holding is not None:
            holding.locked, holding.seen = False, write_id
        if reply[0] == 1:
            self._cache.written(key, before=reply[1], version=write_id, entries=entries, system=system, updated_at=float(reply[2]))
        else:  # a retried call whose first try was written
            self._cache.forget(key)

    async def delete(self, key: Key) -> bool:
        prefix = key_prefix(key)
        await self._taken(key)
        with self._unavailable:
            self._cache.forget(key)
            return bool(await self._redis.delete(f"{prefix}:meta", f"{prefix}:msgs"))

    async def undo(self, key: Key) -> bool:
        """Callers hold the conversation's lock, so the read and the trim cannot interleave."""
        return await self._change(key, functools.partial(redis_history.undo, version=self._serial()))

    async def redo(self, key: Key) -> bool:
        """Callers hold the conversation's lock, as for undo."""
        return await self._change(key, functools.partial(redis_history.redo, version=self._serial(), cap=self._cap, ttl=self._ttl))

    async def start(self, key: Key, metadata: Mapping[str, str]) -> None:
        await self._change(key, functools.partial(redis_items.start, metadata=metadata, version=self._serial(), ttl=self._ttl))

    async def about(self, key: Key) -> About | None:
        await self._taken(key)
        with self._unavailable:
            return await redis_items.about(self._redis, key)

    async def set_metadata(self, key: Key, metadata: Mapping[str, str]) -> bool:
        return await self._change(key, functools.partial(redis_items.set_metadata, metadata=metadata))

    async def delete_item(self, key: Key, item_id: str) -> bool:
        return await self._change(key, functools.partial(redis_items.delete_item, item_id=item_id, version=self._serial()))

    async def _change(self, key: Key, work: Callable[[RedisClient, Key], Awaitable[T]]) -> T:
        """`work` (a redis_history or redis_items function), which changes the conversation: callers hold its lock."""
        await self._taken(key)
        with self._unavailable:
            self._cache.forget(key)
            return await work(self._redis, key)

    async def list_conversations(self, tenant: str, listing: Listing) -> Page:
        with self._unavailable:
            return await redis_history.page(self._redis, tenant, listing)

    async def put_value(self, key: str, value: str) -> None:
        with self._unavailable:
            await self._redis.set(f"{_VALUE_PREFIX}{key}", value, ex=self._ttl)

    async def get_value(self, key: str) -> str | None:
        with self._unavailable:
            value = await self._redis.get(f"{_VALUE_PREFIX}{key}")
            return value.decode() if isinstance(value, bytes) else value  # not UTF-8: not the store's

    async def delete_value(self, key: str) -> bool:
        with self._unavailable:
            return bool(await self._redis.delete(f"{_VALUE_PREFIX}{key}"))

    # locks

    def lock(self, key: Key) -> AbstractAsyncContextManager[None]:
        return RedisHold(self, key)

    def _serial(self) -> bytes:
        """A value no other lock holder or write ever had: this store's replica id and a serial number."""
        return b"%s:%x" % (self._replica, next(self._serials))

    @staticmethod
    def _take_keys(key: Key) -> list[str]:
        prefix = key_prefix(key)
        return [f"{prefix}:lock", f"{prefix}:meta", f"{prefix}:msgs"]

    async def enter_hold(self, key: Key) -> None:
        """Hold `key` in this process; the Redis lock comes with the hold's first operation on it (`_take`)."""
        deadline = asyncio.get_running_loop().time() + self._lock_timeout
        if not self._local.take(key):
            await self._local.acquire(key)
        try:
            await self._liveness.ensure()
        except BaseException:
            self._local.release(key)
            raise
        self._held[key] = Holding(self._serial(), deadline)

    async def leave_hold(self, key: Key) -> None:
        """Wait for an append under way, let the Redis lock go unless the append did, then the local one."""
        try:
            writing = self._writing.get(key)
            if writing is not None:  # an append whose caller left: the lock outlives it
                await asyncio.wait([writing])
            holding = self._held.pop(key, None)
            if holding is not None and holding.locked:
                try:
                    with self._unavailable:
                        await self._run.release(keys=[f"{key_prefix(key)}:lock"], args=[holding.value])
                except StoreUnavailable as exc:  # the lease ends it; the turn's fate is already known
                    log.warning("memory %s: releasing the redis lock failed (%s); its lease will end it", key[1], exc)
        finally:
            self._local.release(key)

    async def _taken(self, key: Key) -> None:
        """Under a hold whose Redis lock is not taken (yet, or again after its write): take it."""
        holding = self._held.get(key)
        if holding is not None and not holding.locked:
            await self._take(key, holding)

    async def _take(self, key: Key, holding: Holding, *, version: bytes = b"", rows: int = 0) -> list[Any]:
        """Run `TAKE` until it takes the lock: a dead holder's is taken over, a live one's waited for.

        `version` and `rows`: what to read with it (see TAKE). LockTimeout past the hold's deadline.
        """
        attempt = functools.partial(self._attempt, self._take_keys(key), holding, version=version, rows=rows)
        reply = await attempt(b"")
        if reply[0] == Taken.HELD:
            contention = redis_locks.Contention(self._replica, holding.deadline, self._lock_timeout, liveness=self._liveness)
            reply = await redis_locks.wait_for_holder(reply[1], attempt=attempt, lives=self._lives, contention=contention)
        if reply[0] == Taken.MOVED_ON:
            raise LockLost("redis store: another request wrote the conversation after this one let it go")
        holding.locked, holding.renewed = True, asyncio.get_running_loop().time()
        return reply

    async def _attempt(self, keys: list[str], holding: Holding, stale: bytes, *, version: bytes, rows: int) -> list[Any]:
        """One run of `TAKE` for `holding`, replacing the lock if it is still `stale`'s."""
        try:
            with self._unavailable:
                reply: list[Any] = await self._run.take(
                    keys=keys, args=[holding.value, self._lease_ms, stale, version, rows, holding.seen or b""]
                )
        except asyncio.CancelledError:  # the script may have run: let go at the end (a no-op if it did not)
            holding.locked = True
            raise
        return reply

    async def _lives(self, holder: bytes) -> bool:
        with self._unavailable:
            return bool(await self._redis.exists(redis_locks.live_key(redis_locks.replica_of(holder))))

    async def _mark_alive(self) -> None:
        with self._unavailable:
            await self._redis.set(redis_locks.live_key(self._replica), b"1", px=redis_locks.LIVE_MS)

    async def _renew_due(self) -> None:
        await redis_locks.extend_leases(self._held, lease=self._lease, extend=self._extend)

    async def _extend(self, key: Key, holding: Holding) -> bool:
        with self._unavailable:
            return bool(await self._run.renew(keys=[f"{key_prefix(key)}:lock"], args=[holding.value, self._lease_ms]))

    async def _retire(self) -> None:
        """Stop renewing this replica's liveness record and drop it: its locks (none, once drained) are free."""
        await self._liveness.stop()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._redis.delete(redis_locks.live_key(self._replica))

    async def close(self) -> None:
        await self._retire()
        if self._lean is not None:
            await self._lean.close()
        if self._client is not None:
            await close_client(self._client)

