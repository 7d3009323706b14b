"""The SQLite store's item ids and conversation metadata: rows older versions wrote, files without the new columns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from gateway.core.memory.entries import Entry
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.store import Key

KEY: Key = ("team-a", "conv-1")


def entry(role: str, text: str) -> Entry:
    return Entry({"role": role, "content": text}, {"o200k_base": 3})


async def ids_and_texts(store: SQLiteStore) -> list[tuple[str | None, str]]:
    conversation = await store.load(KEY)
    assert conversation is not None
    return [(e.item_id, e.message["content"]) for e in conversation.entries]


async def test_rows_written_before_ids_get_them_from_their_numbers_and_keep_them_through_a_delete(tmp_path: Path) -> None:
    """A turn's row of [message, counts] pairs (seq 1-2) and a message's own row (seq 3), as earlier versions wrote them."""
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=50, lock_timeout=1, cache_entries=0)
    await store.append(KEY, [entry("user", "made the file")], system=None)
    await store.close()
    pair_row = orjson.dumps([[{"role": "user", "content": "q1"}, {}], [{"role": "assistant", "content": "a1"}, {}]]).decode()
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM messages")
        db.execute("INSERT INTO messages (tenant, memory_id, seq, role, body, encoding, tokens) VALUES (?, ?, 1, 'user', ?, '', 2)", (*KEY, pair_row))
        db.execute(
            "INSERT INTO messages (tenant, memory_id, seq, role, body, encoding, tokens) VALUES (?, ?, 3, 'user', ?, 'o200k_base', 4)",
            (*KEY, orjson.dumps({"role": "user", "content": "q2"}).decode()),
        )
        db.execute("UPDATE conversations SET first_seq = 1, last_seq = 3")
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=50, lock_timeout=1, cache_entries=0)
    try:
        assert await ids_and_texts(store) == [("msg_n1", "q1"), ("msg_n2", "a1"), ("msg_n3", "q2")]
        assert await store.delete_item(KEY, "msg_n1")
        assert await ids_and_texts(store) == [("msg_n2", "a1"), ("msg_n3", "q2")]  # renumbered, ids as they were
        await store.append(KEY, [entry("user", "q3")], system=None)
        listed = await ids_and_texts(store)
        assert listed[:2] == [("msg_n2", "a1"), ("msg_n3", "q2")] and listed[2][1] == "q3"
    finally:
        await store.close()


async def test_a_file_without_the_new_columns_gains_them_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=100, lock_timeout=1)
    await store.append(KEY, [entry("user", "q1"), entry("assistant", "a1")], system=None)
    await store.close()
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE conversations DROP COLUMN created_at")
        db.execute("ALTER TABLE conversations DROP COLUMN metadata")
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=100, lock_timeout=1)
    try:
        about = await store.about(KEY)
        conversation = await store.load(KEY)
        assert about is not None and conversation is not None and about.metadata == {}
        assert about.created_at == conversation.entries[0].created_at
        assert await store.set_metadata(KEY, {"topic": "old"})
        assert (await store.about(KEY)).metadata == {"topic": "old"}  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_a_turn_of_more_messages_than_a_row_holds_keeps_an_id_each(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "m.db"), ttl_seconds=3600, max_messages=100, lock_timeout=1)
    try:
        await store.append(KEY, [entry("user", f"m{n}") for n in range(20)], system=None)
        listed = await ids_and_texts(store)
        assert [text for _, text in listed] == [f"m{n}" for n in range(20)] and len({i for i, _ in listed}) == 20
        assert await store.delete_item(KEY, listed[5][0] or "")
        assert await ids_and_texts(store) == listed[:5] + listed[6:]
    finally:
        await store.close()
