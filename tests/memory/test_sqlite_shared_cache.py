"""Stores sharing one SQLite file (the workers of `serve --workers N`): each keeps its cache, served at its version."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.core.memory.entries import Entry
from gateway.core.memory.reach import Reach
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.sqlite_lockfile import place
from gateway.memory.sqlite_writes import INSERT
from gateway.memory.store import Key
from tests.support.waiting import eventually

KEY: Key = ("team-a", "conv-1")
REACH = Reach(messages=100)


def said(text: str) -> list[Entry]:
    return [Entry({"role": "user", "content": text}, {"o200k_base": 3}), Entry({"role": "assistant", "content": "ok"}, {})]


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SQLiteStore, SQLiteStore]]:
    """Two stores on one file, as two worker processes open it."""
    path = str(tmp_path / "shared.db")
    one, two = (SQLiteStore(path, ttl_seconds=60, max_messages=100, lock_timeout=1, shared=True) for _ in range(2))
    yield one, two
    for store in (one, two):
        await store.close()


async def turn(store: SQLiteStore, text: str) -> list[str]:
    """A turn as the gateway runs one: under the lock, read the conversation, append; the user messages it read."""
    async with store.lock(KEY):
        conversation = await store.load_tail(KEY, REACH)  # the cached copy itself: read before the append changes it
        users = [] if conversation is None else [m["content"] for m in conversation.messages if m["role"] == "user"]
        await store.append(KEY, said(text), system=None)
    return users


def traced(store: SQLiteStore) -> list[str]:
    """The statements `store` runs on its file from now on (its file must be open)."""
    statements: list[str] = []
    assert store._file.db is not None
    store._file.db.set_trace_callback(statements.append)  # called on the store's thread, for each statement
    return statements


async def test_alternating_turns_each_see_the_other_stores_turns(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    """Each store's cached copy is out of date once the other wrote: a turn never reads a stale window."""
    for index in range(6):
        assert await turn(stores[index % 2], f"turn {index}") == [f"turn {n}" for n in range(index)]


async def test_a_conversation_unchanged_since_is_served_from_the_cache(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    """Nobody else wrote it: the turn reads nothing, and its write is the message row alone, as in one process."""
    one, two = stores
    await turn(one, "a")
    await turn(two, "b")
    await turn(one, "c")  # read the file: two wrote since one cached it
    statements = traced(one)
    assert await turn(one, "d") == ["a", "b", "c"]
    assert [s.split()[0] for s in statements] == ["INSERT"]
    assert statements[0].startswith(INSERT)


async def test_a_conversation_another_store_wrote_is_read_from_the_file(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    """Its version slot moved on: the cached copy is not served; the row learned with the read, the write is its message row alone."""
    one, two = stores
    await turn(one, "a")
    await turn(one, "b")
    await turn(two, "c")
    statements = traced(one)
    assert await turn(one, "d") == ["a", "b", "c"]
    reads = [s for s in statements if s.lstrip().startswith("SELECT")]
    assert any("ORDER BY seq DESC" in read for read in reads)  # the messages read
    writes = [s for s in statements if not s.lstrip().startswith("SELECT")]
    assert len(writes) == 1 and writes[0].startswith(INSERT)  # no transaction, no row written


async def test_a_store_that_wrote_last_appends_by_its_row_after_the_other_read(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    """A read by the other store changes nothing: no version moves, and both cache and row still serve."""
    one, two = stores
    await turn(one, "a")
    await turn(one, "b")  # cached by its read, then its write
    async with two.lock(KEY):
        assert await two.load_tail(KEY, REACH) is not None
    statements = traced(one)
    assert await turn(one, "c") == ["a", "b"]
    assert [s.split()[0] for s in statements] == ["INSERT"]


async def test_a_read_without_the_lock_goes_to_the_file_and_is_not_cached(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    """Read while another process may be writing, it could be older than the version it would be kept at."""
    one, two = stores
    await turn(one, "a")
    await turn(one, "b")  # cached by its read, then its write
    await turn(two, "c")
    conversation = await one.load(KEY)
    assert conversation is not None and [m["content"] for m in conversation.messages if m["role"] == "user"] == ["a", "b", "c"]
    async with one.lock(KEY):
        assert not one._cached(KEY)


async def test_a_read_without_the_lock_during_another_stores_write_leaves_no_stale_copy(
    stores: tuple[SQLiteStore, SQLiteStore], tmp_path: Path
) -> None:
    """The other store's write has put its version in the slot but is not in the file yet: what is read then is older.

    As the memory API's GET can, in one worker while another one's turn is being written.
    """
    one, two = stores
    await turn(one, "a")
    await turn(one, "b")
    await two.load(KEY)  # its file open (opening writes)
    slot = place(KEY).slot
    lock_file = one._file.lock_file
    assert lock_file is not None
    before = lock_file.slots[slot]
    competitor = sqlite3.connect(tmp_path / "shared.db", isolation_level=None)
    competitor.execute("BEGIN IMMEDIATE")  # the file's write lock: two's write waits for it
    async with two.lock(KEY):
        written = two.append(KEY, said("c"), system=None)
        await eventually(lambda: lock_file.slots[slot] != before, what="two's write stamped the slot")
        conversation = await one.load(KEY)  # no lock: the file as it is, without c
        assert conversation is not None and [m["content"] for m in conversation.messages if m["role"] == "user"] == ["a", "b"]
        competitor.execute("ROLLBACK")
        await written
    competitor.close()
    assert await turn(one, "d") == ["a", "b", "c"]


async def test_an_undo_by_the_other_store_is_seen(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    one, two = stores
    await turn(one, "a")
    await turn(one, "b")
    async with two.lock(KEY):
        assert await two.undo(KEY)
    assert await turn(one, "c") == ["a"]
    assert await turn(two, "d") == ["a", "c"]


async def test_a_delete_by_the_other_store_is_seen(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    one, two = stores
    await turn(one, "a")
    await turn(one, "b")
    async with two.lock(KEY):
        assert await two.delete(KEY)
    assert await turn(one, "c") == []
    assert await turn(two, "d") == ["c"]
