"""The Redis store's own ways: one hash slot a conversation, a TTL of the server's, failures without the URL's password."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from gateway.core.memory.entries import Entry
from gateway.memory.redis import RedisStore, key_prefix
from gateway.memory.store import StoreUnavailable
from tests.support.servers import flush_redis

KEY = ("team-a", "chat-1")


def test_a_conversations_keys_share_one_hash_slot() -> None:
    """Redis Cluster runs a script only over keys of one slot: the braces make the conversation's keys one."""
    assert key_prefix(KEY) == "gw:mem:{team-a:chat-1}"


async def test_a_conversation_is_kept_with_the_servers_ttl(redis_url: str) -> None:
    await flush_redis(redis_url)
    store = RedisStore(redis_url, ttl_seconds=120, max_messages=10, lock_timeout=1)
    try:
        await store.append(KEY, [Entry({"role": "user", "content": "hi"}, {"o200k_base": 2})], system=None)
        client = aioredis.from_url(redis_url)
        ttls = [await client.ttl(name) for name in await client.keys(key_prefix(KEY) + "*")]
        await client.aclose()
        assert ttls and all(0 < ttl <= 120 for ttl in ttls)
    finally:
        await store.close()


async def test_an_unreachable_server_is_unavailable_and_its_password_is_never_shown() -> None:
    store = RedisStore("redis://:s3cret@127.0.0.1:1/0", ttl_seconds=60, max_messages=10, lock_timeout=1)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.load(KEY)
        assert "s3cret" not in str(caught.value)
    finally:
        await store.close()
