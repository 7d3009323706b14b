"""The Redis store's per-process cache of a conversation's newest rows (memory/redis_cache), kept while its version holds."""

from __future__ import annotations

from gateway.core.memory.reach import Reach
from tests.support.redis_stores import entry, redis_store
from tests.support.servers import flush_redis

KEY = ("team-a", "chat-1")




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
