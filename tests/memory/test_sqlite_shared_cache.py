"""Stores sharing one SQLite file (the workers of `serve --workers N`): each keeps its cache, served at its version."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.memory.sqlite import SQLiteStore
from gateway.memory.sqlite_lockfile import place
from gateway.memory.sqlite_writes import INSERT
from tests.support.shared_sqlite import KEY, REACH, said, shared_stores, traced, turn
from tests.support.waiting import eventually


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SQLiteStore, SQLiteStore]]:
    """Two stores on one file, as two worker processes open it."""
    async with shared_stores(tmp_path / "shared.db") as both:
        yield both


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
    """Its version slot moved on: the cached copy is not served as it is; the row learned with the read, the write is its message row alone."""
    one, two = stores
    await turn(one, "a")
    await turn(one, "b")
    await turn(two, "c")
    statements = traced(one)
    assert await turn(one, "d") == ["a", "b", "c"]
    reads = [s for s in statements if s.lstrip().startswith("SELECT")]
    assert any("FROM messages" in read for read in reads)  # the messages read (those after the copy: see test_sqlite_moved)
    writes = [s for s in statements if not s.lstrip().startswith("SELECT")]
    assert len(writes) == 1 and writes[0].startswith(INSERT)  # no transaction, no row written


async def test_a_turn_appended_without_a_read_leaves_no_stale_copy(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    """Items added by the Conversations API (an append with no read first) to a copy another store's write made stale.

    The write is not taken onto the stale copy, which its version would then vouch for.
    """
    one, two = stores
    await turn(one, "a")
    await turn(one, "b")  # one's copy
    await turn(two, "c")
    async with one.lock(KEY):
        await one.append(KEY, said("added"), system=None)
    assert await turn(one, "d") == ["a", "b", "c", "added"]


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
