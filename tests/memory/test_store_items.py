"""The ItemStore contract (the Conversations API's needs), held by every store (see tests/support/store_contract).

Item ids: given when a message is stored (or kept when the caller gave one), the same at each
read, through trims, undos and redos; one message deleted by its id; a conversation started
empty with its metadata and created_at; metadata replaced without a write of the conversation.
"""

from __future__ import annotations

import time

from gateway.core.memory.about import About
from gateway.core.memory.entries import Entry
from gateway.core.memory.listing import Listing
from gateway.core.memory.reach import Reach
from gateway.memory.store import ItemStore, Key, MemoryStore
from tests.support.store_contract import StoreFactory, make_store

__all__ = ["make_store"]  # the fixture every contract test takes

KEY = ("team-a", "conv-1")


def e(role: str, text: str, item_id: str | None = None) -> Entry:
    return Entry({"role": role, "content": text}, {"o200k_base": 3}, item_id=item_id)


def items(store: MemoryStore) -> ItemStore:
    assert isinstance(store, ItemStore)
    return store


async def ids_and_texts(store: MemoryStore, key: Key = KEY) -> list[tuple[str | None, str]]:
    conversation = await store.load(key)
    assert conversation is not None
    return [(entry.item_id, entry.message["content"]) for entry in conversation.entries]


async def test_each_message_gets_an_id_when_stored_and_keeps_it(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(KEY, [e("user", "q1"), e("assistant", "a1", item_id="msg_given")], system=None)
    await store.append(KEY, [e("user", "q2")], system=None)
    first = await ids_and_texts(store)
    ids = [item_id for item_id, _ in first]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == 3 and ids[1] == "msg_given"
    assert await ids_and_texts(store) == first  # the same at each read
    assert all("i" not in entry for entry in (await store.load(KEY)).messages)  # type: ignore[union-attr]  # the store's, not the message's


async def test_ids_survive_trims_undos_and_redos(make_store: StoreFactory) -> None:
    store = make_store(cap=3)
    await store.append(KEY, [e("user", "q1"), e("assistant", "a1")], system=None)
    await store.append(KEY, [e("user", "q2"), e("assistant", "a2")], system=None)
    kept = await ids_and_texts(store)
    assert [text for _, text in kept] == ["a1", "q2", "a2"]
    assert await store.undo(KEY)
    assert await store.redo(KEY)
    assert await ids_and_texts(store) == kept
    await store.append(KEY, [e("user", "q3")], system=None)
    assert await ids_and_texts(store) == [*kept[1:], (await ids_and_texts(store))[-1]]


async def test_one_message_is_deleted_by_its_id(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(KEY, [e("user", "q1"), e("assistant", "a1"), e("user", "q2")], system=None)
    await store.append(KEY, [e("assistant", "a2")], system=None)
    await store.load_tail(KEY, Reach(messages=10))  # a store that caches what it read has it cached now
    before = await ids_and_texts(store)
    assert await items(store).delete_item(KEY, before[1][0] or "")
    assert await ids_and_texts(store) == [before[0], *before[2:]]
    tail = await store.load_tail(KEY, Reach(messages=10))
    assert tail is not None and [m["content"] for m in tail.messages] == ["q1", "q2", "a2"]
    assert not await items(store).delete_item(KEY, before[1][0] or "")
    assert not await items(store).delete_item(KEY, "msg_none")
    assert not await items(store).delete_item(("team-a", "never"), "msg_none")
    await store.append(KEY, [e("user", "q3")], system=None)  # a turn after it is stored after the others
    assert [text for _, text in await ids_and_texts(store)] == ["q1", "q2", "a2", "q3"]
    assert [i for i, _ in await ids_and_texts(store)][:3] == [before[0][0], before[2][0], before[3][0]]


async def test_a_deleted_message_of_a_turn_stays_deleted_after_undo_and_redo(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(KEY, [e("user", "q1"), e("assistant", "a1")], system=None)
    await store.append(KEY, [e("user", "q2"), e("assistant", "a2")], system=None)
    before = await ids_and_texts(store)
    assert await items(store).delete_item(KEY, before[0][0] or "")
    assert await store.undo(KEY)
    assert await ids_and_texts(store) == [before[1]]
    assert await store.redo(KEY)
    assert await ids_and_texts(store) == before[1:]


async def test_a_conversation_started_empty_exists_with_its_metadata(make_store: StoreFactory) -> None:
    store = make_store()
    before = time.time()
    await items(store).start(KEY, {"topic": "demo"})
    about = await items(store).about(KEY)
    assert about is not None and about.metadata == {"topic": "demo"} and before - 1 <= about.created_at <= time.time() + 1
    conversation = await store.load(KEY)
    assert conversation is not None and conversation.entries == [] and conversation.system == []
    assert [listed.memory_id for listed in (await store.list_conversations("team-a", Listing())).conversations] == ["conv-1"]
    await store.append(KEY, [e("user", "q1")], system=None)
    assert await items(store).about(KEY) == about
    assert [text for _, text in await ids_and_texts(store)] == ["q1"]
    await items(store).start(KEY, {})  # in place of what was there
    assert await ids_and_texts(store) == [] and (await items(store).about(KEY)).metadata == {}  # type: ignore[union-attr]


async def test_metadata_is_replaced_without_a_write_of_the_conversation(make_store: StoreFactory) -> None:
    store = make_store()
    await items(store).start(KEY, {"a": "1"})
    await store.append(KEY, [e("user", "q1")], system=None)
    updated_at = (await store.load(KEY)).updated_at  # type: ignore[union-attr]
    assert await items(store).set_metadata(KEY, {"b": "2", "c": "3"})
    assert (await items(store).about(KEY)).metadata == {"b": "2", "c": "3"}  # type: ignore[union-attr]
    assert (await store.load(KEY)).updated_at == updated_at  # type: ignore[union-attr]
    assert not await items(store).set_metadata(("team-a", "never"), {"a": "1"})
    assert await items(store).about(("team-a", "never")) is None
    assert await store.load(("team-a", "never")) is None


async def test_a_conversation_its_turns_made_was_created_with_its_first_message(make_store: StoreFactory) -> None:
    store = make_store()
    await store.append(KEY, [e("user", "q1"), e("assistant", "a1")], system=None)
    await store.append(KEY, [e("user", "q2")], system=None)
    conversation = await store.load(KEY)
    about = await items(store).about(KEY)
    assert conversation is not None and about == About(about.created_at, {})  # type: ignore[union-attr]
    assert about is not None and abs(about.created_at - (conversation.entries[0].created_at or 0)) < 1
    await store.delete(KEY)
    assert await items(store).about(KEY) is None
