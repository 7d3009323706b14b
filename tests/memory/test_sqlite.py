"""The SQLite store put together: processes sharing a file, its bounded cache, WAL mode, locks across stores."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import pytest

from gateway.core.memory.entries import Entry
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.sqlite_lockfile import LockFile, Place
from gateway.memory.store import LockTimeout
from tests.support.waiting import eventually

KEY = ("team-a", "conv-1")


def e(role: str, text: str) -> Entry:
    return Entry({"role": role, "content": text}, {})


async def test_sqlite_processes_sharing_a_file_see_each_others_turns(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    one, two = (SQLiteStore(path, ttl_seconds=60, max_messages=100, lock_timeout=1, shared=True) for _ in range(2))
    await one.append(KEY, [e("user", "from one")], system=None)
    await two.append(KEY, [e("user", "from two")], system=None)
    for store in (one, two):
        conversation = await store.load(KEY)
        assert conversation is not None and [m["content"] for m in conversation.messages] == ["from one", "from two"]
        await store.close()


async def test_sqlite_cache_is_bounded_and_falls_back_to_the_file(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "c.db"), ttl_seconds=60, max_messages=100, lock_timeout=1, cache_entries=3)
    keys = [("t", f"c{i}") for i in range(5)]
    for key in keys:
        await store.append(key, [e("user", key[1]), e("assistant", "ok")], system=None)
        await store.load(key)
    assert store._cache.entries <= 3
    for key in keys:
        conversation = await store.load(key)
        assert conversation is not None and conversation.messages[0]["content"] == key[1]
    await store.close()


async def test_sqlite_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=10, lock_timeout=1)
    await store.append(KEY, [e("user", "x")], system=None)
    await store.close()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_shared_sqlite_locks_across_stores_on_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "locks.db")
    one, two = (SQLiteStore(path, ttl_seconds=60, max_messages=100, lock_timeout=0.3, shared=True) for _ in range(2))
    held, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with one.lock(KEY):
            held.set()
            await release.wait()

    task = asyncio.create_task(holder())
    await held.wait()
    with pytest.raises(LockTimeout):  # the other "process" waits, then gives up
        async with two.lock(KEY):
            pass
    async with two.lock(("team-a", "other")):  # other conversations are free
        pass
    tries = 0
    lock = LockFile.lock

    def counted(file: LockFile, where: Place) -> bool:  # each try for the conversation asks the kernel
        nonlocal tries
        tries += 1
        return lock(file, where)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LockFile, "lock", counted)
        waiter = asyncio.create_task(two.lock(KEY).__aenter__())
        await eventually(lambda: tries >= 2, what="the waiter tried the lock file twice")
        waiter.cancel()  # a waiter that leaves must not leave a lock behind
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
    release.set()
    await task
    async with two.lock(KEY):  # free again for the other store at once
        pass
    for store in (one, two):
        await store.close()


async def test_write_pending_counts_while_a_write_waits_for_the_file_and_is_zero_once_it_is_done(tmp_path: Path) -> None:
    """What /readyz reads: a write in SQLite's busy wait (another connection holds the write lock) shows as pending."""
    path = tmp_path / "pending.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=10, lock_timeout=60, busy_timeout=120)
    await store.append(KEY, [e("user", "q1")], system=None)
    # The thread ends its batch just after handing it to the loop: the caller may be answered first.
    await eventually(lambda: store.write_pending() == 0.0, what="no write pending")
    competitor = sqlite3.connect(path, isolation_level=None)
    competitor.execute("BEGIN IMMEDIATE")
    try:
        write = store.append(KEY, [e("assistant", "a1")], system=None)
        await eventually(lambda: store.write_pending() > 0.1, what="the write pending")
        assert not write.done()
    finally:
        competitor.execute("ROLLBACK")
        competitor.close()
    await write
    await eventually(lambda: store.write_pending() == 0.0, what="no write pending")
    await store.close()
