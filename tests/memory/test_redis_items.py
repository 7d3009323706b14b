"""gateway.memory.redis_items: rows the previous version wrote get ids from their bytes; the Conversations API's
writes on one Redis and on a real Cluster of three primaries (each a transaction over one conversation's slot)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis

from gateway.core.memory.entries import Entry, dump_entry
from gateway.core.stores import RedisConnection
from gateway.memory.redis import RedisStore
from gateway.memory.redis_history import key_prefix
from tests.support.redis_cluster import Cluster, redis_cluster
from tests.support.servers import flush_redis

KEY = ("team-a", "chat-1")


def entry(role: str, text: str) -> Entry:
    return Entry({"role": role, "content": text}, {"o200k_base": 2})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


async def test_rows_without_ids_get_ids_from_their_bytes_and_can_be_deleted(redis_url: str) -> None:
    """Rows as the previous version's append wrote them: dump_entry's JSON with "c", no "i"."""
    await flush_redis(redis_url)
    prefix = key_prefix(KEY)
    client = aioredis.Redis.from_url(redis_url)
    store = RedisStore(redis_url, ttl_seconds=60, max_messages=10, lock_timeout=5)
    try:
        old = [entry("user", "q1"), entry("assistant", "a1"), entry("user", "q2")]
        await client.rpush(f"{prefix}:msgs", *[dump_entry(e)[:-1] + b',"c":1764000000.5}' for e in old])
        await client.hset(f"{prefix}:meta", mapping={"write": "old:1", "updated_at": "1764000001.5", "system": "[]"})
        first = await store.load(KEY)
        again = await store.load(KEY)
        assert first is not None and again is not None
        ids = [e.item_id for e in first.entries]
        assert ids == [e.item_id for e in again.entries] and len(set(ids)) == 3 and all(i and i.startswith("msg_") for i in ids)
        about = await store.about(KEY)
        assert about is not None and about.created_at == 1764000000.5 and about.metadata == {}
        assert await store.delete_item(KEY, ids[1] or "")
        kept = await store.load(KEY)
        assert kept is not None and [(e.item_id, e.message["content"]) for e in kept.entries] == [(ids[0], "q1"), (ids[2], "q2")]
    finally:
        await client.aclose()
        await store.close()


async def test_metadata_of_no_conversation_leaves_no_key(redis_url: str) -> None:
    await flush_redis(redis_url)
    client = aioredis.Redis.from_url(redis_url)
    store = RedisStore(redis_url, ttl_seconds=60, max_messages=10, lock_timeout=5)
    try:
        assert not await store.set_metadata(KEY, {"a": "b"})
        assert await client.keys("*") == []
        await store.start(KEY, {"a": "b"})
        assert 0 < await client.ttl(f"{key_prefix(KEY)}:meta") <= 60  # an empty conversation expires as any other
    finally:
        await client.aclose()
        await store.close()


async def test_the_conversations_api_writes_on_a_cluster(cluster: Cluster) -> None:
    store = RedisStore(RedisConnection(url=cluster.url, cluster=True), ttl_seconds=60, max_messages=10, lock_timeout=5)
    try:
        keys = [("team-items", f"conv-{n}") for n in range(6)]
        assert len({cluster.owner(f"{key_prefix(key)}:meta") for key in keys}) > 1  # spread over primaries
        for key in keys:
            await store.start(key, {"n": key[1]})
            await store.append(key, [entry("user", "q1"), entry("assistant", "a1")], system=None)
            assert await store.set_metadata(key, {"n": key[1], "more": "yes"})
            conversation = await store.load(key)
            assert conversation is not None
            assert await store.delete_item(key, conversation.entries[0].item_id or "")
            kept = await store.load(key)
            assert kept is not None and [e.item_id for e in kept.entries] == [conversation.entries[1].item_id]
            about = await store.about(key)
            assert about is not None and about.metadata == {"n": key[1], "more": "yes"}
    finally:
        await store.close()
