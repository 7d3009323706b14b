"""The shared store for several gateway processes or hosts: redis-py asyncio.

Keys of one conversation share the hash tag `{tenant:memoryId}`, so a Redis Cluster keeps them
on one slot and a MULTI/EXEC covers them all. TTL is Redis expiry, refreshed on each write.
The lock is a Redis lock (SET NX PX, released by token) whose lease is renewed while held, in
front of which an in-process lock queues this process's own waiters. A turn is appended by one
script that first checks this holder still owns the lock: a lease that ran out while Redis was
unreachable fails the write (LockLost) instead of interleaving with another holder's turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import orjson
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import LockNotOwnedError, ResponseError

from gateway.core.masks import mask_password
from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message, dump_entry, last_turn_start, load_entry
from gateway.core.memory.reach import Reach
from gateway.core.memory.settings import StoreKind
from gateway.core.stores import RedisConnection
from gateway.memory.store import Key, KeyLocks, LockLost, LockTimeout, StoreUnavailable
from gateway.stores.redis import Patience, RedisClient, close_client, masked, open_client

LEASE_SECONDS = 30.0
_VALUE_PREFIX = "gw:value:"
RENEW_RETRY_SECONDS = 0.5
log = logging.getLogger("gateway.memory")

# KEYS: msgs, meta, lock. ARGV: lock token ('' = unlocked write), cap, ttl, system ('' = keep),
# write id, entries... The write id makes a retried call (the reply was lost, not the write) a no-op.
_APPEND = """
if redis.call('HGET', KEYS[2], 'write') == ARGV[5] then
  return 0
end
if ARGV[1] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[1] then
  return redis.error_reply('LOCKLOST the conversation lock is no longer held by this request')
end
local now = redis.call('TIME')
redis.call('HSET', KEYS[2], 'write', ARGV[5])
if #ARGV > 5 then
  redis.call('RPUSH', KEYS[1], unpack(ARGV, 6))
  redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
end
redis.call('HSET', KEYS[2], 'updated_at', now[1] .. '.' .. string.format('%06d', tonumber(now[2])))
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[2], 'system', ARGV[4])
else
  redis.call('HSETNX', KEYS[2], 'system', '[]')
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1
"""


@contextlib.contextmanager
def _unavailable_on_redis_errors(connection: RedisConnection) -> Iterator[None]:
    """Any failure of the client is the store being unavailable, its text without the URL's password.

    Not only RedisError and OSError: an option the connection does not take is a TypeError at the
    first command, and an unreachable Redis never fails a request.
    """
    try:
        yield
    except StoreUnavailable:
        raise
    except Exception as exc:
        raise StoreUnavailable(f"redis store: {masked(str(exc), connection)}") from exc


def key_prefix(key: Key) -> str:
    tenant, memory_id = key
    return f"gw:mem:{{{tenant}:{memory_id}}}"


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
    ) -> None:
        """A store on `connection` (a URL alone: one Redis there)."""
        self._connection = RedisConnection(url=connection) if isinstance(connection, str) else connection
        self._url = self._connection.url
        # A Redis that hangs or is gone fails requests within seconds (503), not after a long retry loop.
        # Settings the client refuses make a store that is never available, not a gateway that cannot start.
        self._client: RedisClient | None = None
        self._append: AsyncScript | None = None
        self._refusal = ""
        patience = Patience(
            socket_seconds=10,
            connect_seconds=5,
            retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries=3),
        )
        try:
            self._client = open_client(self._connection, patience)
            self._append = self._client.register_script(_APPEND)
        except Exception as exc:
            self._refusal = f"redis store: the URL is refused ({masked(str(exc), self._connection)})"
            log.error("memory: %s; every memory turn will be answered 503", self._refusal)
        self._ttl = max(int(ttl_seconds), 1)
        self._cap = max_messages
        self._lock_timeout = lock_timeout
        self._lease = LEASE_SECONDS if lease_seconds is None else lease_seconds
        self._local = KeyLocks(lock_timeout)
        self._tokens: dict[Key, bytes] = {}  # the lock token of each conversation this process holds
        self._writing: dict[Key, asyncio.Future[None]] = {}  # appends under way, which the lock outlives

    @property
    def _redis(self) -> RedisClient:
        """The client; StoreUnavailable when the URL was refused."""
        if self._client is None:
            raise StoreUnavailable(self._refusal)
        return self._client

    def _unavailable(self) -> contextlib.AbstractContextManager[None]:
        return _unavailable_on_redis_errors(self._connection)

    async def ping(self) -> None:
        with self._unavailable():
            await self._redis.ping()

    async def load(self, key: Key) -> Conversation | None:
        prefix = key_prefix(key)
        with self._unavailable():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hgetall(f"{prefix}:meta")
                pipe.lrange(f"{prefix}:msgs", 0, -1)
                meta, rows = await pipe.execute()
            if not meta:
                return None
            # read here too: a conversation stored unreadable is a store fault (503), not a 500
            return Conversation(
                orjson.loads(meta.get(b"system", b"[]")), [load_entry(row) for row in rows], float(meta[b"updated_at"])
            )

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        """The newest entries, fetched from the end of the list in chunks until `reach` is covered.

        Callers hold the conversation's lock, so the list does not change between chunks.
        """
        prefix = key_prefix(key)
        chunk = reach.first_chunk
        with self._unavailable():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hgetall(f"{prefix}:meta")
                pipe.llen(f"{prefix}:msgs")
                pipe.lrange(f"{prefix}:msgs", -chunk, -1)
                meta, total, rows = await pipe.execute()
            if not meta:
                return None
            entries = [load_entry(row) for row in rows]
            while len(entries) < total and not reach.covered_by(entries):
                chunk = max(min(2 * len(entries), total - len(entries)), 1)
                rows = await self._redis.lrange(f"{prefix}:msgs", -len(entries) - chunk, -len(entries) - 1)
                if not rows:  # shorter than it was: nothing older to read
                    break
                entries[:0] = [load_entry(row) for row in rows]
            return Conversation(
                orjson.loads(meta.get(b"system", b"[]")),
                entries,
                float(meta[b"updated_at"]),
                older=max(total - len(entries), 0),
            )

    def append(self, key: Key, entries: Sequence[Entry], *, system: Sequence[Message] | None) -> Awaitable[None]:
        """Runs as its own task: a caller that leaves does not cut it, and the lock waits for it."""
        args: list[bytes | str | int] = [
            self._tokens.get(key, b""),
            self._cap,
            self._ttl,
            orjson.dumps(list(system)) if system is not None else b"",
            os.urandom(8).hex(),
            *[dump_entry(entry) for entry in entries],
        ]
        write = asyncio.ensure_future(self._write(key, args))
        self._writing[key] = write
        write.add_done_callback(functools.partial(self._written, key))
        return asyncio.shield(write)

    def _written(self, key: Key, write: asyncio.Future[None]) -> None:
        if self._writing.get(key) is write:
            del self._writing[key]
        if not write.cancelled():
            write.exception()  # its caller may have left; the outcome was for it alone

    async def _write(self, key: Key, args: list[bytes | str | int]) -> None:
        prefix = key_prefix(key)
        with self._unavailable():
            if self._append is None:
                raise StoreUnavailable(self._refusal)
            try:
                await self._append(keys=[f"{prefix}:msgs", f"{prefix}:meta", f"{prefix}:lock"], args=args)
            except ResponseError as exc:
                if str(exc).startswith("LOCKLOST"):
                    raise LockLost(f"redis store: {exc}") from None
                raise

    async def _now(self) -> float:
        seconds, micros = await self._redis.time()
        return seconds + micros / 1e6

    async def delete(self, key: Key) -> bool:
        prefix = key_prefix(key)
        with self._unavailable():
            return bool(await self._redis.delete(f"{prefix}:meta", f"{prefix}:msgs"))

    async def undo(self, key: Key) -> bool:
        """Callers hold the conversation's lock, so the read and the trim cannot interleave."""
        conversation = await self.load(key)
        if conversation is None or not conversation.entries:
            return False
        prefix = key_prefix(key)
        start = last_turn_start(conversation.entries)
        with self._unavailable():
            now = await self._now()
            async with self._redis.pipeline(transaction=True) as pipe:
                if start == 0:
                    pipe.delete(f"{prefix}:msgs")
                else:
                    pipe.ltrim(f"{prefix}:msgs", 0, start - 1)
                pipe.hset(f"{prefix}:meta", "updated_at", now)
                await pipe.execute()
        return True

    async def put_value(self, key: str, value: str) -> None:
        with self._unavailable():
            await self._redis.set(f"{_VALUE_PREFIX}{key}", value, ex=self._ttl)

    async def get_value(self, key: str) -> str | None:
        with self._unavailable():
            value = await self._redis.get(f"{_VALUE_PREFIX}{key}")
            return value.decode() if isinstance(value, bytes) else value  # not UTF-8: not the store's

    async def delete_value(self, key: str) -> bool:
        with self._unavailable():
            return bool(await self._redis.delete(f"{_VALUE_PREFIX}{key}"))

    def lock(self, key: Key) -> AbstractAsyncContextManager[None]:
        return self._hold(key)

    @asynccontextmanager
    async def _hold(self, key: Key) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._lock_timeout
        async with self._local.hold(key):
            with self._unavailable():
                lock = self._redis.lock(
                    f"{key_prefix(key)}:lock",
                    timeout=self._lease,
                    sleep=0.01,
                    blocking_timeout=max(deadline - loop.time(), 0.001),
                )
                acquired = await lock.acquire()
            if not acquired:
                raise LockTimeout(f"conversation busy for more than {self._lock_timeout:g}s")
            self._tokens[key] = lock.local.token
            renewal = asyncio.create_task(self._renew(lock, key))
            try:
                yield
            finally:
                writing = self._writing.get(key)
                if writing is not None:  # an append whose caller left: the lock outlives it
                    await asyncio.wait([writing])
                del self._tokens[key]
                renewal.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewal
                try:
                    await lock.release()
                except Exception as exc:  # the lease ends it; the turn's fate is already known
                    problem = mask_password(str(exc), self._url)
                    log.warning("memory %s: releasing the redis lock failed (%s); its lease will end it", key[1], problem)

    async def _renew(self, lock: Any, key: Key) -> None:
        """Keep the lease while held; an unreachable Redis is retried, a lost lock is only logged.

        Whether the lock still holds is decided where it matters, atomically, by the append script.
        """
        pause = self._lease / 3
        while True:
            await asyncio.sleep(pause)
            try:
                await lock.reacquire()
                pause = self._lease / 3
            except LockNotOwnedError:
                log.warning("memory %s: the redis lock's lease ran out while held", key[1])
                return
            except Exception as exc:  # whatever the client raised: retried, like an unreachable Redis
                problem = mask_password(str(exc), self._url)
                log.warning("memory %s: renewing the redis lock failed (%s); retrying", key[1], problem)
                pause = RENEW_RETRY_SECONDS

    async def close(self) -> None:
        if self._client is not None:
            await close_client(self._client)
