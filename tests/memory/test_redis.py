"""The Redis store's own ways: one hash slot a conversation, a TTL of the server's, failures without the URL's password,
locks shared by replicas (a dead holder's taken over, a live one's kept), a window cached while its version holds."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
import redis.asyncio as aioredis

from gateway.core.memory.entries import Entry, dump_entry
from gateway.core.memory.reach import Reach
from gateway.memory.redis import RedisStore, key_prefix
from gateway.memory.redis_locks import live_key
from gateway.memory.store import LockLost, LockTimeout, StoreUnavailable
from tests.support.redis_stores import entry, redis_store
from tests.support.servers import flush_redis
from tests.support.tcp_relay import relay_to

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




async def test_a_retried_append_that_landed_is_a_no_op_even_after_the_lock_went(redis_url: str) -> None:
    """redis-py retries a call whose reply was lost: the write it repeats already happened, and let the lock go."""
    await flush_redis(redis_url)
    store = redis_store(redis_url)
    prefix = key_prefix(KEY)
    keys = [f"{prefix}:msgs", f"{prefix}:meta", f"{prefix}:lock"]
    args = [b"holder:1", 10, 60, b"", b"write-1", b"1", dump_entry(entry("user", "q"))]
    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.set(keys[2], b"holder:1")
        assert (await store._run.append(keys=keys, args=args))[0] == 1
        assert not await client.exists(keys[2])  # let go with the write
        assert await store._run.append(keys=keys, args=args) == [0]  # done already: not LOCKLOST, not twice
        loaded = await store.load(KEY)
        assert loaded is not None and loaded.messages == [{"role": "user", "content": "q"}]
    finally:
        await client.aclose()
        await store.close()


async def test_a_dead_holders_lock_is_taken_over_and_its_write_refused(redis_url: str) -> None:
    """A holder whose liveness record is gone died: a waiter takes its lock once its own record has held for a record's life (~3 s); were it alive, its write fails."""
    await flush_redis(redis_url)
    dead, other = redis_store(redis_url), redis_store(redis_url, lock_timeout=30)
    client = aioredis.Redis.from_url(redis_url)
    try:
        await dead.append(KEY, [entry("user", "q0"), entry("assistant", "a0")], system=None)
        async with dead.lock(KEY):
            assert await dead.load_tail(KEY, Reach(messages=5)) is not None  # the Redis lock is taken here
            await dead._liveness.stop()  # it stops renewing its record, as a killed process does
            await client.delete(live_key(dead._replica))
            async with other.lock(KEY):
                conversation = await other.load_tail(KEY, Reach(messages=5))
                assert conversation is not None and len(conversation.entries) == 2
                await other.append(KEY, [entry("user", "q1"), entry("assistant", "a1")], system=None)
            with pytest.raises(LockLost):
                await dead.append(KEY, [entry("user", "late"), entry("assistant", "torn")], system=None)
        loaded = await other.load(KEY)
        assert loaded is not None and [m["content"] for m in loaded.messages] == ["q0", "a0", "q1", "a1"]
    finally:
        await client.aclose()
        await dead.close()
        await other.close()


async def test_a_live_holder_keeps_its_lock_past_its_lease(redis_url: str) -> None:
    """The replica's liveness task extends the lease of a lock held long: a waiter times out, the write goes through."""
    await flush_redis(redis_url)
    slow, waiter = redis_store(redis_url, lease_seconds=2.0), redis_store(redis_url, lock_timeout=4.5)
    try:
        async with slow.lock(KEY):
            assert await slow.load_tail(KEY, Reach(messages=5)) is None
            with pytest.raises(LockTimeout):  # more than twice the lease
                async with waiter.lock(KEY):
                    await waiter.load_tail(KEY, Reach(messages=5))
            await slow.append(KEY, [entry("user", "q"), entry("assistant", "a")], system=None)
        loaded = await waiter.load(KEY)
        assert loaded is not None and len(loaded.entries) == 2
    finally:
        await slow.close()
        await waiter.close()


async def test_a_hold_that_wrote_writes_again_only_if_nobody_else_did(redis_url: str) -> None:
    """A write lets the Redis lock go; the hold's next write takes it again, refused if another replica wrote between."""
    await flush_redis(redis_url)
    first, second = redis_store(redis_url), redis_store(redis_url)
    try:
        async with first.lock(KEY):
            await first.append(KEY, [entry("user", "1")], system=None)
            await first.append(KEY, [entry("user", "2")], system=None)  # nobody wrote between: taken again
            async with second.lock(KEY):
                await second.append(KEY, [entry("user", "other")], system=None)
            with pytest.raises(LockLost):
                await first.append(KEY, [entry("user", "3")], system=None)
        loaded = await first.load(KEY)
        assert loaded is not None and [m["content"] for m in loaded.messages] == ["1", "2", "other"]
    finally:
        await first.close()
        await second.close()


async def test_a_hold_cut_off_while_its_lock_is_being_taken_lets_it_go(redis_url: str) -> None:
    """The first script ran, its reply had not come: the hold lets the lock go anyway, not after its lease."""
    await flush_redis(redis_url)
    async with relay_to(redis_url) as relay:
        store, other = redis_store(relay.url), redis_store(redis_url, lock_timeout=3)
        try:
            async with store.lock(("t", "warm")):  # the scripts are loaded and the liveness record set
                await store.load_tail(("t", "warm"), Reach(messages=5))

            async def cut_off() -> None:
                async with store.lock(KEY):
                    await store.load_tail(KEY, Reach(messages=5))

            relay.replies.clear()
            turn = asyncio.create_task(cut_off())
            await relay.arrived(f"{key_prefix(KEY)}:lock".encode())  # redis-server runs it; its reply is held
            turn.cancel()
            relay.replies.set()
            with contextlib.suppress(asyncio.CancelledError):
                await turn
            async with other.lock(KEY):
                assert await other.load_tail(KEY, Reach(messages=5)) is None
        finally:
            await store.close()
            await other.close()
