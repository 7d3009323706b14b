"""The shared store for several gateway processes or hosts: redis-py asyncio.

Keys of one conversation share the hash tag `{tenant:memoryId}`, so a Redis Cluster keeps them
on one slot and a MULTI/EXEC covers them all. TTL is Redis expiry, refreshed on each write.
The lock is a Redis lock (SET NX PX, released by token) whose lease is renewed while held, in
front of which an in-process lock queues this process's own waiters.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import LockError, RedisError

from gateway.memory.policies import Entry, Message
from gateway.memory.store import (
    Conversation,
    Key,
    KeyLocks,
    LockTimeout,
    StoreUnavailable,
    dump_entry,
    last_turn_start,
    load_entry,
)

LEASE_SECONDS = 30.0


@contextlib.contextmanager
def _unavailable_on_redis_errors() -> Iterator[None]:
    try:
        yield
    except (RedisError, OSError) as exc:
        raise StoreUnavailable(f"redis store: {exc}") from exc


def key_prefix(key: Key) -> str:
    tenant, memory_id = key
    return f"gw:mem:{{{tenant}:{memory_id}}}"


class RedisStore:
    def __init__(self, url: str, *, ttl_seconds: float, max_messages: int, lock_timeout: float) -> None:
        self._client: aioredis.Redis = aioredis.Redis.from_url(url)
        self._ttl = max(int(ttl_seconds), 1)
        self._cap = max_messages
        self._lock_timeout = lock_timeout
        self._local = KeyLocks(lock_timeout)

    async def ping(self) -> None:
        await self._client.ping()

    async def load(self, key: Key) -> Conversation | None:
        prefix = key_prefix(key)
        with _unavailable_on_redis_errors():
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hgetall(f"{prefix}:meta")
                pipe.lrange(f"{prefix}:msgs", 0, -1)
                meta, rows = await pipe.execute()
        if not meta:
            return None
        return Conversation(
            orjson.loads(meta.get(b"system", b"[]")), [load_entry(row) for row in rows], float(meta[b"updated_at"])
        )

    async def append(self, key: Key, entries: Sequence[Entry], *, system: Sequence[Message] | None) -> None:
        prefix = key_prefix(key)
        with _unavailable_on_redis_errors():
            now = await self._now()
            async with self._client.pipeline(transaction=True) as pipe:
                if entries:
                    pipe.rpush(f"{prefix}:msgs", *[dump_entry(entry) for entry in entries])
                    pipe.ltrim(f"{prefix}:msgs", -self._cap, -1)
                pipe.hset(f"{prefix}:meta", "updated_at", now)
                if system is not None:
                    pipe.hset(f"{prefix}:meta", "system", orjson.dumps(list(system)))
                else:
                    pipe.hsetnx(f"{prefix}:meta", "system", b"[]")
                pipe.expire(f"{prefix}:msgs", self._ttl)
                pipe.expire(f"{prefix}:meta", self._ttl)
                await pipe.execute()

    async def _now(self) -> float:
        seconds, micros = await self._client.time()
        return seconds + micros / 1e6

    async def delete(self, key: Key) -> bool:
        prefix = key_prefix(key)
        with _unavailable_on_redis_errors():
            return bool(await self._client.delete(f"{prefix}:meta", f"{prefix}:msgs"))

    async def undo(self, key: Key) -> bool:
        """Callers hold the conversation's lock, so the read and the trim cannot interleave."""
        conversation = await self.load(key)
        if conversation is None or not conversation.entries:
            return False
        prefix = key_prefix(key)
        start = last_turn_start(conversation.entries)
        with _unavailable_on_redis_errors():
            now = await self._now()
            async with self._client.pipeline(transaction=True) as pipe:
                if start == 0:
                    pipe.delete(f"{prefix}:msgs")
                else:
                    pipe.ltrim(f"{prefix}:msgs", 0, start - 1)
                pipe.hset(f"{prefix}:meta", "updated_at", now)
                await pipe.execute()
        return True

    def lock(self, key: Key) -> AbstractAsyncContextManager[None]:
        return self._hold(key)

    @asynccontextmanager
    async def _hold(self, key: Key) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._lock_timeout
        async with self._local.hold(key):
            lock = self._client.lock(
                f"{key_prefix(key)}:lock",
                timeout=LEASE_SECONDS,
                sleep=0.01,
                blocking_timeout=max(deadline - loop.time(), 0.001),
            )
            with _unavailable_on_redis_errors():
                acquired = await lock.acquire()
            if not acquired:
                raise LockTimeout(f"conversation busy for more than {self._lock_timeout:g}s")
            renewal = asyncio.create_task(self._renew(lock))
            try:
                yield
            finally:
                renewal.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewal
                with contextlib.suppress(LockError):
                    await lock.release()

    @staticmethod
    async def _renew(lock: Any) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            await lock.reacquire()

    async def close(self) -> None:
        await self._client.aclose()
