"""The MemoryStore contract for redo, message times and listing, held by every store (see tests/support/store_contract)."""

from __future__ import annotations

import time

from gateway.core.memory.entries import Entry
from gateway.core.memory.listing import Listing
from gateway.memory.store import Key
from tests.support.store_contract import StoreFactory, make_store

__all__ = ["make_store"]  # the fixture every contract test takes

KEY = ("team-a", "conv-1")


def e(role: str, text: str) -> Entry:
    return Entry({"role": role, "content": text}, {"o200k_base": 3})


async def texts(store: object, key: Key = KEY) -> list[str]:
    conversation = await store.load(key)  # type: ignore[attr-defined]
    assert conversation is not None
    return [m["content"] for m in conversation.messages]


async def test_each_message_keeps_when_it_was_stored(make_store: StoreFactory) -> None:
    store = make_store()
    before = time.time()
    await store.append(KEY, [e("user", "q1"), e("assistant", "a1")], system=None)
    assert await store.load(KEY) is not None  # a store that caches what it read has it cached now
    await store.append(KEY, [e("user", "q2")], system=None)
    after = time.time()
    conversation = await store.load(KEY)
    assert conversation is not None
    times = [entry.created_at for entry in conversation.entries]
    assert all(t is not None and before - 1 <= t <= after + 1 for t in times), times  # redis-server's clock: this machine's
    assert times[0] == times[1] and times[1] <= times[2]  # a turn's messages were stored together
    assert all("createdAt" not in m and "c" not in m for m in conversation.messages)  # the store's record, not the message's


async def test_redo_puts_back_the_turn_undone_as_it_was(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(KEY, [e("user", "q1"), e("assistant", "a1")], system=None)
    await store.append(KEY, [e("user", "q2"), e("assistant", "call"), e("tool", "result"), e("assistant", "a2")], system=None)
    stored = await store.load(KEY)
    assert stored is not None
    assert await store.undo(KEY)
    assert await store.undo(KEY)
    assert await texts(store) == []
    assert await store.redo(KEY)
    assert await texts(store) == ["q1", "a1"]
    assert await store.redo(KEY)
    redone = await store.load(KEY)
    assert redone is not None and redone.entries == stored.entries
    assert [entry.created_at for entry in redone.entries] == [entry.created_at for entry in stored.entries]
    assert redone.entries[0].tokens == {"o200k_base": 3}
    assert not await store.redo(KEY)
    await store.append(KEY, [e("user", "q3")], system=None)  # a turn after redos is written after them
    assert await texts(store) == ["q1", "a1", "q2", "call", "result", "a2", "q3"]


async def test_a_new_turn_empties_the_redo_stack(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(KEY, [e("user", "q1"), e("assistant", "a1")], system=None)
    await store.append(KEY, [e("user", "q2"), e("assistant", "a2")], system=None)
    assert await store.undo(KEY)
    await store.append(KEY, [e("user", "q3"), e("assistant", "a3")], system=None)
    assert not await store.redo(KEY)
    # undone again after that turn: only the turn just undone comes back, never the one before the turn
    assert await store.undo(KEY)
    assert await store.redo(KEY)
    assert await texts(store) == ["q1", "a1", "q3", "a3"]
    assert not await store.redo(KEY)


async def test_redo_of_nothing(make_store: StoreFactory) -> None:
    store = make_store()
    assert not await store.redo(KEY)
    await store.append(KEY, [e("user", "q1")], system=None)
    assert not await store.redo(KEY)
    assert await store.undo(KEY)
    assert await store.delete(KEY)
    assert not await store.redo(KEY)  # the stack went with the conversation
    assert await store.load(KEY) is None


async def test_redo_keeps_the_cap(make_store: StoreFactory) -> None:
    store = make_store(cap=3)
    await store.append(KEY, [e("user", "q1"), e("assistant", "a1")], system=None)
    await store.append(KEY, [e("user", "q2"), e("assistant", "a2")], system=None)
    assert await store.undo(KEY)
    assert await texts(store) == ["a1"]
    assert await store.redo(KEY)
    assert await texts(store) == ["a1", "q2", "a2"]


async def test_redo_is_per_conversation_and_tenant(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(KEY, [e("user", "q1")], system=None)
    await store.append(("team-b", "conv-1"), [e("user", "b1")], system=None)
    assert await store.undo(KEY)
    assert not await store.redo(("team-b", "conv-1"))
    assert not await store.redo(("team-a", "other"))
    assert await store.redo(KEY)


async def test_listing_pages_through_a_tenants_conversations(make_store: StoreFactory) -> None:
    store = make_store()
    for name in ("chat-b", "chat-a", "chat-c", "notes-1"):
        await store.append(("team-a", name), [e("user", "q"), e("assistant", "a")], system=None)
    await store.append(("team-a", "chat-a"), [e("user", "q"), e("assistant", "a")], system=None)
    await store.append(("team-b", "chat-secret"), [e("user", "q")], system=None)
    await store.append(("team-a.x", "chat-z"), [e("user", "q")], system=None)  # a tenant whose name starts as this one

    everything = await store.list_conversations("team-a", Listing())
    assert [c.memory_id for c in everything.conversations] == ["chat-a", "chat-b", "chat-c", "notes-1"]
    assert [c.turns for c in everything.conversations] == [2, 1, 1, 1]
    assert all(c.updated_at > 0 for c in everything.conversations) and not everything.has_more

    first = await store.list_conversations("team-a", Listing(prefix="chat-", limit=2))
    assert [c.memory_id for c in first.conversations] == ["chat-a", "chat-b"] and first.has_more
    rest = await store.list_conversations("team-a", Listing(prefix="chat-", limit=2, after="chat-b"))
    assert [c.memory_id for c in rest.conversations] == ["chat-c"] and not rest.has_more

    assert not (await store.list_conversations("team-c", Listing())).conversations
    assert [c.memory_id for c in (await store.list_conversations("team-b", Listing())).conversations] == ["chat-secret"]


async def test_listing_leaves_out_deleted_conversations(make_store: StoreFactory) -> None:
    store = make_store()
    for name in ("a", "b", "c"):
        await store.append(("team-a", name), [e("user", "q")], system=None)
    assert await store.delete(("team-a", "b"))
    page = await store.list_conversations("team-a", Listing(limit=2))
    assert [c.memory_id for c in page.conversations] == ["a", "c"] and not page.has_more
