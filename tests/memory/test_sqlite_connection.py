"""The SQLite store heals by itself: a file read-only for a while, and a file deleted or replaced under it.

Read-only for real (root ignores permission bits): the files are made immutable (tests/support).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import pytest

from gateway.core.memory.entries import Entry
from gateway.core.memory.reach import Reach
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.sqlite_lockfile import lock_path
from gateway.memory.store import Key, LockTimeout, StoreUnavailable
from tests.support.readonly import immutable

KEY: Key = ("team", "conv")


def said(text: str) -> list[Entry]:
    return [Entry({"role": "user", "content": text}, {}), Entry({"role": "assistant", "content": f"re {text}"}, {})]


def store_at(path: Path, *, shared: bool = False) -> SQLiteStore:
    return SQLiteStore(str(path), ttl_seconds=3600, max_messages=100, lock_timeout=5, busy_timeout=0.2, shared=shared)


async def stored(path: Path, key: Key = KEY) -> list[str] | None:
    """The user messages of `key` as a store opened afresh on `path` reads them (as after a restart)."""
    store = store_at(path)
    try:
        conversation = await store.load(key)
    finally:
        await store.close()
    return None if conversation is None else [m["content"] for m in conversation.messages if m["role"] == "user"]


async def made_with(path: Path, *turns: str, key: Key = KEY) -> None:
    """A store's file at `path` holding `turns`, closed (so no WAL beside it)."""
    store = store_at(path)
    for text in turns:
        await store.append(key, said(text), system=None)
    await store.close()


async def test_a_store_opened_while_its_file_was_read_only_writes_once_it_is_writable(tmp_path: Path) -> None:
    """SQLite opens a file it cannot write read-only, and such a connection stays read-only for good."""
    path = tmp_path / "m.db"
    await made_with(path, "one")
    store = store_at(path)
    with immutable(path) as read_only:
        with pytest.raises(StoreUnavailable, match="readonly"):
            await store.append(KEY, said("refused"), system=None)
        read_only.lift()
        await store.append(KEY, said("two"), system=None)
    await store.close()
    assert await stored(path) == ["one", "two"]


async def test_writes_said_to_fail_until_one_goes_through_and_the_store_tries_one_itself(tmp_path: Path) -> None:
    """The file (and its WAL) made read-only under an open connection: an I/O error, then a read-only connection."""
    path = tmp_path / "m.db"
    store = store_at(path)
    assert await store.unwritable() is None  # nothing failed: no write tried
    await store.append(KEY, said("one"), system=None)
    with immutable(path, Path(f"{path}-wal")) as read_only:
        for text in ("refused", "refused again"):  # the second on a connection opened while read-only
            with pytest.raises(StoreUnavailable):
                await store.append(KEY, said(text), system=None)
        reason = await store.unwritable()
        assert reason is not None and str(path) not in reason  # /readyz shows it to anyone
        assert await store.unwritable() == reason  # tried again, failed again
        read_only.lift()
        assert await store.unwritable() is None  # the store's own write went through
    await store.append(KEY, said("two"), system=None)
    await store.close()
    assert await stored(path) == ["one", "two"]


async def test_a_failed_write_that_is_no_fault_of_the_file_is_not_unwritable(tmp_path: Path) -> None:
    """A file locked by another writer past the busy timeout: the next turn may pass; readiness stays."""
    path = tmp_path / "m.db"
    store = store_at(path)
    await store.append(KEY, said("one"), system=None)
    competitor = sqlite3.connect(path, isolation_level=None)
    competitor.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            await store.append(KEY, said("refused"), system=None)
    finally:
        competitor.rollback()
        competitor.close()
    assert await store.unwritable() is None
    await store.close()


async def test_a_deleted_file_takes_no_turn_and_the_store_goes_on_with_a_new_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.db"
    store = store_at(path)
    await store.append(KEY, said("one"), system=None)
    os.remove(path)
    with caplog.at_level(logging.ERROR, "gateway.memory"), pytest.raises(StoreUnavailable, match="deleted"):
        await store.append(KEY, said("lost"), system=None)  # it went into the unlinked file: not acknowledged
    assert [r for r in caplog.records if r.levelno == logging.ERROR and "was deleted" in r.getMessage()]
    await store.append(KEY, said("two"), system=None)
    loaded = await store.load(KEY)  # not the cached conversation of the old file
    assert loaded is not None and [m["content"] for m in loaded.messages] == ["two", "re two"]
    assert await store.unwritable() is None
    await store.close()
    assert await stored(path) == ["two"]


async def test_a_replaced_file_is_taken_as_it_is_without_the_old_ones_wal(tmp_path: Path) -> None:
    """The old file's WAL and shared memory stay beside the path: a new connection would lay them over the new file."""
    path, other = tmp_path / "m.db", tmp_path / "restored.db"
    await made_with(other, "restored", key=("team", "restored"))
    store = store_at(path)
    for index in range(20):  # in the WAL only: SQLite checkpoints at close, never for a file gone from its path
        await store.append(KEY, said(f"old {index}"), system=None)
    assert Path(f"{path}-wal").stat().st_size > 0
    os.replace(other, path)
    with pytest.raises(StoreUnavailable, match="replaced"):
        await store.append(KEY, said("lost"), system=None)
    assert await store.load(KEY) is None  # the restored file has no such conversation
    await store.append(("team", "restored"), said("after"), system=None)
    await store.close()
    assert await stored(path, ("team", "restored")) == ["restored", "after"]
    assert await stored(path) is None
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


async def test_reads_of_a_deleted_file_are_refused_too_and_no_cached_conversation_outlives_it(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = store_at(path)
    await store.append(KEY, said("one"), system=None)
    assert await store.load(KEY) is not None  # read from the file, and cached
    assert await store.load(("team", "other")) is None
    os.remove(path)
    with pytest.raises(StoreUnavailable, match="deleted"):
        await store.load(("team", "other"))
    assert await store.load(KEY) is None  # the cache held it: emptied with the old file
    await store.close()


async def test_stores_sharing_a_deleted_file_all_move_to_the_new_one(tmp_path: Path) -> None:
    """Shared mode (`--workers`; here two stores of one process): each finds out at its next job, none removes the new file's WAL."""
    path = tmp_path / "m.db"
    one, two = store_at(path, shared=True), store_at(path, shared=True)
    for store, text in ((one, "a"), (two, "b")):
        async with store.lock(KEY):
            await store.append(KEY, said(text), system=None)
    os.remove(path)
    for store in (one, two):
        with pytest.raises(StoreUnavailable, match="deleted"):
            async with store.lock(KEY):  # the turn's write goes into the old file: refused
                await store.append(KEY, said("lost"), system=None)
    for store, text in ((one, "c"), (two, "d"), (one, "e")):
        async with store.lock(KEY):
            await store.append(KEY, said(text), system=None)
    assert await one.unwritable() is None and await two.unwritable() is None
    await one.close()
    await two.close()
    assert await stored(path) == ["c", "d", "e"]


async def test_a_store_closed_after_its_file_was_replaced_leaves_nothing_to_lay_over_the_new_one(tmp_path: Path) -> None:
    """Replaced, then the gateway stopped before its next turn: the next start must find the new file as it is."""
    path, other = tmp_path / "m.db", tmp_path / "restored.db"
    await made_with(other, "restored", key=("team", "restored"))
    store = store_at(path)
    for index in range(20):
        await store.append(KEY, said(f"old {index}"), system=None)
    os.replace(other, path)
    await store.close()
    assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()
    assert await stored(path) is None
    assert await stored(path, ("team", "restored")) == ["restored"]


async def test_a_file_gone_from_its_path_leaves_the_store_unready_until_the_path_takes_writes_again(tmp_path: Path) -> None:
    """Found out by a batch, the store is said unwritable at once: /readyz need not wait for the next turn to fail."""
    path = tmp_path / "m.db"
    store = store_at(path)
    await store.append(KEY, said("one"), system=None)
    os.remove(path)
    path.mkdir()  # what is at the path now cannot be opened as the store's file
    with pytest.raises(StoreUnavailable, match="replaced"):
        await store.append(KEY, said("lost"), system=None)
    assert await store.unwritable() is not None
    path.rmdir()
    assert await store.unwritable() is None  # the store's own probe made the file afresh
    await store.append(KEY, said("two"), system=None)
    await store.close()
    assert await stored(path) == ["two"]


async def test_a_lock_file_deleted_under_a_shared_store_is_made_again_and_locked_by(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Found out after the store's next job: the store moves to the lock file at the path, which a store opened since uses."""
    path = tmp_path / "m.db"
    one = store_at(path, shared=True)
    for text in ("a", "b"):
        async with one.lock(KEY):
            await one.append(KEY, said(text), system=None)
    os.remove(lock_path(str(path)))
    with caplog.at_level(logging.ERROR, logger="gateway.memory"):
        await one.load(KEY)  # a job: the file checked after it
    assert "lock file beside" in caplog.text
    two = SQLiteStore(str(path), ttl_seconds=3600, max_messages=100, lock_timeout=0.2, shared=True)
    async with one.lock(KEY):
        assert await one.load_tail(KEY, Reach(messages=10)) is not None
        with pytest.raises(LockTimeout):
            async with two.lock(KEY):
                pass
        await one.append(KEY, said("c"), system=None)
    async with two.lock(KEY):
        await two.append(KEY, said("d"), system=None)
    for store in (one, two):
        await store.close()
    assert await stored(path) == ["a", "b", "c", "d"]
