"""The Redis store off the turn path: rows keep their time inside the append script, data the previous version
wrote still loads, undo and redo, and listing on one Redis and on a real Cluster of three primaries."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
import redis.asyncio as aioredis

from gateway.core.memory.entries import Entry, dump_entry
from gateway.core.memory.listing import Listing
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


async def test_the_append_script_stamps_each_row_and_empties_the_redo_stack(redis_url: str) -> None:
    await flush_redis(redis_url)
    store = RedisStore(redis_url, ttl_seconds=60, max_messages=10, lock_timeout=5)
    client = aioredis.Redis.from_url(redis_url)
    prefix = key_prefix(KEY)
    try:
        await store.append(KEY, [entry("user", "q1"), entry("assistant", "a1")], system=None)
        rows = [orjson.loads(row) for row in await client.lrange(f"{prefix}:msgs", 0, -1)]
        (updated_at,) = await client.hmget(f"{prefix}:meta", "updated_at")
        assert [row["c"] for row in rows] == [float(updated_at)] * 2
        assert await store.undo(KEY)
        assert await client.hexists(f"{prefix}:meta", "redo")
        await store.append(KEY, [entry("user", "q2")], system=None)
        assert not await client.hexists(f"{prefix}:meta", "redo")
    finally:
        await client.aclose()
        await store.close()


async def test_what_the_previous_version_wrote_loads_without_times_and_undoes_and_redoes(redis_url: str) -> None:
    """Rows as `dump_entry` writes them (no "c") and a meta hash with no `redo`: as the append script wrote them before."""
    await flush_redis(redis_url)
    prefix = key_prefix(KEY)
    client = aioredis.Redis.from_url(redis_url)
    store = RedisStore(redis_url, ttl_seconds=60, max_messages=10, lock_timeout=5)
    try:
        old = [entry("user", "q1"), entry("assistant", "a1"), entry("user", "q2"), entry("assistant", "a2")]
        await client.rpush(f"{prefix}:msgs", *[dump_entry(e) for e in old])
        await client.hset(f"{prefix}:meta", mapping={"write": "old:1", "updated_at": "1764000000.5", "system": "[]"})
        conversation = await store.load(KEY)
        assert conversation is not None and conversation.entries == old
        assert [e.created_at for e in conversation.entries] == [None] * 4
        assert await store.undo(KEY)
        assert await store.redo(KEY)
        redone = await store.load(KEY)
        assert redone is not None and redone.entries == old and redone.entries[3].created_at is None
        await store.append(KEY, [entry("user", "q3")], system=None)
        latest = await store.load(KEY)
        assert latest is not None and latest.entries[-1].created_at is not None and latest.entries[0].created_at is None
    finally:
        await client.aclose()
        await store.close()


async def test_listing_finds_a_tenants_conversations_on_every_primary_of_a_cluster(cluster: Cluster) -> None:
    store = RedisStore(RedisConnection(url=cluster.url, cluster=True), ttl_seconds=60, max_messages=10, lock_timeout=5)
    names = [f"chat-{i:02}" for i in range(12)]
    try:
        for name in names:
            await store.append(("team-list", name), [entry("user", "q"), entry("assistant", "a")], system=None)
        await store.append(("team-other", "chat-00"), [entry("user", "q")], system=None)
        assert len({cluster.owner(f"{key_prefix(('team-list', name))}:meta") for name in names}) > 1  # spread over primaries
        first = await store.list_conversations("team-list", Listing(prefix="chat-", limit=10))
        assert [c.memory_id for c in first.conversations] == names[:10] and first.has_more
        rest = await store.list_conversations("team-list", Listing(prefix="chat-", limit=10, after=names[9]))
        assert [c.memory_id for c in rest.conversations] == names[10:] and not rest.has_more
        assert {c.turns for c in first.conversations} == {1}
        # undo and redo on a Cluster: each a transaction over one conversation's slot
        assert await store.undo(("team-list", "chat-03"))
        assert await store.redo(("team-list", "chat-03"))
        redone = await store.load(("team-list", "chat-03"))
        assert redone is not None and [m["content"] for m in redone.messages] == ["q", "a"]
        assert None not in [e.created_at for e in redone.entries]  # stamped by the append script on a Cluster too
    finally:
        await store.close()
