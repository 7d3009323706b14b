"""The SQLite store's writes: a row this process last wrote moves on without a read, unless it changed since."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gateway.core.memory.entries import Entry
from gateway.memory import sqlite_writes
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.store import Key

KEY: Key = ("team-a", "conv-1")


def said(text: str) -> list[Entry]:
    return [Entry({"role": "user", "content": text}, {"o200k_base": 3})]


async def contents(store: SQLiteStore) -> list[str]:
    conversation = await store.load(KEY)
    assert conversation is not None
    return [m["content"] for m in conversation.messages]


async def test_processes_taking_turns_on_one_conversation_each_find_the_others_rows(tmp_path: Path) -> None:
    """Each store's remembered row is out of date once the other wrote: its next write must see that."""
    path = str(tmp_path / "shared.db")
    one, two = (SQLiteStore(path, ttl_seconds=60, max_messages=100, lock_timeout=1, shared=True) for _ in range(2))
    for index in range(6):
        await (one, two)[index % 2].append(KEY, said(f"turn {index}"), system=None)
    assert await contents(one) == [f"turn {index}" for index in range(6)]
    for store in (one, two):
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT first_seq, last_seq FROM conversations").fetchone() == (1, 6)


async def test_writes_after_an_undo_or_a_delete_continue_from_the_file(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_messages=100, lock_timeout=1)
    for text in ("a", "b"):
        await store.append(KEY, said(text), system=None)
    assert await store.undo(KEY)
    await store.append(KEY, said("c"), system=None)
    assert await contents(store) == ["a", "c"]
    assert await store.delete(KEY)
    await store.append(KEY, said("d"), system=None)
    await store.append(KEY, said("e"), system=None)
    assert await contents(store) == ["d", "e"]
    await store.close()


async def test_a_remembered_row_keeps_the_cap_and_a_new_system(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=3, lock_timeout=1, cache_entries=0)
    for index in range(5):
        system = [{"role": "system", "content": "be brief"}] if index == 3 else None
        await store.append(KEY, said(f"q{index}"), system=system)
    conversation = await store.load(KEY)
    assert conversation is not None
    assert [m["content"] for m in conversation.messages] == ["q2", "q3", "q4"]
    assert conversation.system == [{"role": "system", "content": "be brief"}]
    await store.close()


async def test_a_row_this_store_wrote_moves_on_by_the_guarded_update_without_a_read(tmp_path: Path) -> None:
    """A turn that must write its conversation row (here: a new system prompt) and whose row this store knows."""
    store = SQLiteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_messages=100, lock_timeout=1)
    await store.append(KEY, said("a"), system=None)  # a first write: the row read, then written
    statements: list[str] = []
    assert store._file.db is not None
    store._file.db.set_trace_callback(statements.append)  # called on the store's thread, for each statement
    await store.append(KEY, said("b"), system=[{"role": "system", "content": "be brief"}])
    rows = [s.strip() for s in statements if "conversations" in s]
    assert len(rows) == 1 and rows[0].startswith("UPDATE conversations SET first_seq") and "WHERE" in rows[0]
    assert await contents(store) == ["a", "b"]
    await store.close()


async def test_remembered_rows_are_bounded_and_a_forgotten_one_is_read_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writes, "KNOWN_RANGES", 3)
    store = SQLiteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_messages=100, lock_timeout=1)
    keys = [("team-a", f"conv-{n}") for n in range(4)]
    for key in keys:
        await store.append(key, said("first"), system=None)
    assert list(store._turns.ranges) == keys[1:]  # the oldest went, alone
    await store.append(keys[0], said("again"), system=None)  # forgotten: the row read first, still right
    conversation = await store.load(keys[0])
    assert conversation is not None and [m["content"] for m in conversation.messages] == ["first", "again"]
    await store.close()
