"""The MemoryStore contract, held by three stores: in-process, SQLite and a real redis-server; the in-process locks."""

from __future__ import annotations

import asyncio
import os

import pytest

from gateway.core.memory.entries import Entry
from gateway.memory.store import KeyLocks, LockTimeout, MemoryStore, new_item_id
from tests.support.memory_stores import Clock
from tests.support.store_contract import StoreFactory, make_store
from tests.support.waiting import eventually

__all__ = ["make_store"]  # the fixture every contract test takes

KEY = ("team-a", "conv-1")


def e(role: str, text: str, tokens: int = 0) -> Entry:
    return Entry({"role": role, "content": text}, {"o200k_base": tokens} if tokens else {})


async def test_missing_conversation_is_none(make_store: StoreFactory) -> None:
    assert await make_store().load(KEY) is None


async def test_append_and_load_round_trip(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(KEY, [e("user", "hi", 4), e("assistant", "hello", 5)], system=[{"role": "system", "content": "S"}])
    conversation = await store.load(KEY)
    assert conversation is not None
    assert conversation.system == [{"role": "system", "content": "S"}]
    assert conversation.messages == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert conversation.entries[0].tokens == {"o200k_base": 4}
    assert conversation.updated_at > 0


async def test_system_none_keeps_the_stored_system(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(KEY, [e("user", "1")], system=[{"role": "system", "content": "S"}])
    await store.append(KEY, [e("user", "2")], system=None)
    conversation = await store.load(KEY)
    assert conversation is not None and conversation.system == [{"role": "system", "content": "S"}]
    await store.append(("team-a", "fresh"), [e("user", "x")], system=None)
    fresh = await store.load(("team-a", "fresh"))
    assert fresh is not None and fresh.system == []


async def test_cap_drops_the_oldest(make_store: StoreFactory) -> None:
    store = make_store(cap=3)
    await store.append(KEY, [e("user", "1"), e("assistant", "2")], system=None)
    await store.append(KEY, [e("user", "3"), e("assistant", "4")], system=None)
    conversation = await store.load(KEY)
    assert conversation is not None
    assert [m["content"] for m in conversation.messages] == ["2", "3", "4"]


async def test_tenants_are_isolated(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(("a", "same"), [e("user", "secret of a")], system=None)
    assert await store.load(("b", "same")) is None
    assert not await store.delete(("b", "same"))
    assert await store.load(("a", "same")) is not None


async def test_delete(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(KEY, [e("user", "x")], system=None)
    assert await store.delete(KEY)
    assert await store.load(KEY) is None
    assert not await store.delete(KEY)


async def test_undo_removes_the_last_turn(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(KEY, [e("user", "q1"), e("assistant", "a1")], system=None)
    await store.append(KEY, [e("user", "q2"), e("assistant", "call"), e("tool", "result"), e("assistant", "a2")], system=None)
    assert await store.undo(KEY)
    conversation = await store.load(KEY)
    assert conversation is not None and [m["content"] for m in conversation.messages] == ["q1", "a1"]
    assert await store.undo(KEY)
    assert not await store.undo(KEY)
    assert not await store.undo(("team-a", "never"))


async def test_ttl_forgets_untouched_conversations(make_store: StoreFactory) -> None:
    if make_store.kind == "redis":  # type: ignore[attr-defined]
        store = make_store(ttl=1)
        await store.append(KEY, [e("user", "x")], system=None)
        assert await store.load(KEY) is not None
        # redis-server's own clock expires it: polled until it did, within a deadline
        await eventually(lambda: _gone(store), what="the conversation expired")
    else:
        clock = Clock()
        store = make_store(ttl=60, clock=clock)
        await store.append(KEY, [e("user", "x")], system=None)
        clock.now += 30
        await store.append(KEY, [e("user", "y")], system=None)  # touching it restarts the clock
        clock.now += 59
        assert await store.load(KEY) is not None
        clock.now += 2
    assert await store.load(KEY) is None


async def _gone(store: MemoryStore) -> bool:
    return await store.load(KEY) is None


async def test_values_round_trip_and_are_replaced_and_deleted(make_store: StoreFactory) -> None:
    store = make_store()
    assert await store.get_value("response:a:resp_1") is None
    await store.put_value("response:a:resp_1", '{"route":"chat","target":"up"}')
    await store.put_value("response:a:resp_2", "other")
    assert await store.get_value("response:a:resp_1") == '{"route":"chat","target":"up"}'
    await store.put_value("response:a:resp_1", "replaced")
    assert await store.get_value("response:a:resp_1") == "replaced"
    assert await store.delete_value("response:a:resp_1")
    assert not await store.delete_value("response:a:resp_1")
    assert await store.get_value("response:a:resp_1") is None
    assert await store.get_value("response:a:resp_2") == "other"
    assert await store.load(KEY) is None  # values are not conversations


async def test_values_expire_with_the_stores_ttl(make_store: StoreFactory) -> None:
    if make_store.kind == "redis":  # type: ignore[attr-defined]
        import redis.asyncio as aioredis

        store = make_store(ttl=60)
        await store.put_value("k", "v")
        client = aioredis.Redis.from_url(make_store.url)  # type: ignore[attr-defined]
        try:
            assert 0 < await client.ttl("gw:value:k") <= 60
        finally:
            await client.aclose()
        return
    clock = Clock()
    store = make_store(ttl=60, clock=clock)
    await store.put_value("k", "v")
    clock.now += 59
    assert await store.get_value("k") == "v"
    await store.put_value("k", "w")  # writing it again restarts the clock
    clock.now += 59
    assert await store.get_value("k") == "w"
    clock.now += 2
    assert await store.get_value("k") is None
    assert not await store.delete_value("k")


async def test_lock_serializes(make_store: StoreFactory) -> None:
    store = make_store(lock_timeout=10)
    order: list[str] = []
    held, release = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with store.lock(KEY):
            order.append("first+")
            held.set()
            await release.wait()
            for index in range(3):  # awaits on the store while held: the second turn runs meanwhile, and must wait
                await store.append(KEY, [e("user", f"while held {index}")], system=None)
            order.append("first-")

    async def second() -> None:
        async with store.lock(KEY):
            order.append("second")

    task = asyncio.create_task(first())
    await held.wait()
    async with store.lock(("team-a", "other")):  # other conversations are not blocked
        order.append("other")
    waiting = asyncio.create_task(second())  # runs before `first` resumes: it tries the lock while held
    release.set()
    await asyncio.gather(task, waiting)
    assert order == ["first+", "other", "first-", "second"]


async def test_lock_times_out(make_store: StoreFactory) -> None:
    store = make_store(lock_timeout=0.2)
    held, release = asyncio.Event(), asyncio.Event()

    async def blocker() -> None:
        async with store.lock(KEY):
            held.set()
            await release.wait()

    task = asyncio.create_task(blocker())
    await held.wait()
    with pytest.raises(LockTimeout):
        async with store.lock(KEY):
            pass
    release.set()
    await task
    async with store.lock(KEY):  # and it is free again afterwards
        pass


async def test_a_waiter_that_leaves_passes_the_conversation_on() -> None:
    """Handed the conversation just as it left (cancelled, or timed out), a waiter hands it to the next one."""
    locks = KeyLocks(timeout=5)
    await locks.hold(KEY).__aenter__()
    gone = asyncio.create_task(locks.hold(KEY).__aenter__())
    leaving = asyncio.create_task(locks.hold(KEY).__aenter__())
    staying = asyncio.create_task(locks.hold(KEY).__aenter__())
    await eventually(lambda: len(locks._held[KEY]) == 3, what="all three queued, oldest first")
    gone.cancel()  # left while waiting: skipped
    with pytest.raises(asyncio.CancelledError):
        await gone
    await locks.hold(KEY).__aexit__()  # handed to `leaving` ...
    leaving.cancel()  # ... which leaves before it could take it
    with pytest.raises(asyncio.CancelledError):
        await leaving
    await asyncio.wait_for(staying, 5)
    await locks.hold(KEY).__aexit__()
    await asyncio.wait_for(locks.hold(KEY).__aenter__(), 5)  # free again


async def test_concurrent_locked_appends_lose_nothing(make_store: StoreFactory) -> None:
    store = make_store()

    async def turn(i: int) -> None:
        async with store.lock(KEY):
            before = await store.load(KEY)
            await asyncio.sleep(0)  # not a wait: the suspension point under test, where other turns run and must not get in
            await store.append(KEY, [e("user", str(i))], system=None)
            after = await store.load(KEY)
            assert after is not None and len(after.entries) == (len(before.entries) if before else 0) + 1

    await asyncio.gather(*(turn(i) for i in range(30)))
    conversation = await store.load(KEY)
    assert conversation is not None and sorted(int(m["content"]) for m in conversation.messages) == list(range(30))


def test_item_ids_differ_in_a_forked_process() -> None:
    """Workers forked from one gateway share a SQLite file: each draws its own prefix, so none gives an id another gave."""
    mine = {new_item_id(), new_item_id()}
    assert len(mine) == 2
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child's)
        os.write(write, new_item_id().encode())
        os._exit(0)
    os.waitpid(child, 0)
    theirs = os.read(read, 100).decode()
    os.close(read)
    os.close(write)
    assert theirs.startswith("msg_") and theirs not in mine and theirs[:20] != next(iter(mine))[:20]
