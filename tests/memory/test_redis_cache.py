"""The Redis store's per-process cache of a conversation's newest rows (memory/redis_cache), kept while its version holds."""

from __future__ import annotations

from typing import Any

from gateway.core.memory.entries import Entry
from gateway.core.memory.reach import Reach
from gateway.memory.redis import RedisStore
from tests.support.servers import flush_redis

KEY = ("team-a", "chat-1")


def entry(role: str, text: str) -> Entry:
    return Entry({"role": role, "content": text}, {"o200k_base": 3})


def redis_store(url: str, **options: Any) -> RedisStore:
    settings: dict[str, Any] = {"ttl_seconds": 60, "max_messages": 100, "lock_timeout": 5, **options}
    return RedisStore(url, **settings)


async def test_a_cached_window_follows_another_replicas_undo_and_delete(redis_url: str) -> None:
    await flush_redis(redis_url)
    reader, writer = redis_store(redis_url), redis_store(redis_url)
    reach = Reach(messages=10)
    try:
        await reader.append(KEY, [entry("user", "q1"), entry("assistant", "a1")], system=None)
        await reader.append(KEY, [entry("user", "q2"), entry("assistant", "a2")], system=None)
        cached = await reader.load_tail(KEY, reach)
        assert cached is not None and len(cached.entries) == 4
        assert await reader.load_tail(KEY, reach) is cached  # the same version: served from the cache
        async with writer.lock(KEY):
            assert await writer.undo(KEY)
        undone = await reader.load_tail(KEY, reach)
        assert undone is not None and [m["content"] for m in undone.messages] == ["q1", "a1"]
        async with writer.lock(KEY):
            assert await writer.delete(KEY)
        assert await reader.load_tail(KEY, reach) is None
    finally:
        await reader.close()
        await writer.close()
