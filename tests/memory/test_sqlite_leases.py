"""Conversation leases in a shared SQLite file, held by real processes that die or stay alive."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.core.memory.entries import Entry
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.sqlite_leases import LEASE_SECONDS
from gateway.memory.store import LockLost, LockTimeout, StoreUnavailable
from tests.support.memory_stores import OLD_SCHEMA

KEY = ("team-a", "chat-1")

# Holds KEY in a shared store on argv[1], says so on stdout, then waits to be killed.
_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from gateway.memory.sqlite import SQLiteStore

    async def main() -> None:
        store = SQLiteStore(sys.argv[1], ttl_seconds=60, max_messages=10, lock_timeout=5, shared=True)
        async with store.lock(("team-a", "chat-1")):
            print("held", flush=True)
            await asyncio.Event().wait()

    asyncio.run(main())
    """
)

def shared_store(path: Path, *, lock_timeout: float) -> SQLiteStore:
    return SQLiteStore(str(path), ttl_seconds=60, max_messages=100, lock_timeout=lock_timeout, shared=True)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding KEY's lease in tmp_path/shared.db; killed and reaped at the end."""
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path / "shared.db")], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    try:
        assert process.stdout.readline() == "held\n"
        yield process
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


def kill(process: subprocess.Popen[str], *, reap: bool) -> None:
    """SIGKILL the process and wait until it has exited; unreaped, it stays behind as a zombie."""
    os.kill(process.pid, signal.SIGKILL)
    if reap:
        process.wait()
    else:
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)


@pytest.mark.parametrize("reap", [True, False], ids=["reaped", "zombie"])
async def test_lease_of_a_killed_process_is_taken_over_at_once(
    tmp_path: Path, holder: subprocess.Popen[str], reap: bool
) -> None:
    kill(holder, reap=reap)
    store = shared_store(tmp_path / "shared.db", lock_timeout=3)
    assert LEASE_SECONDS > 3  # so acquiring within lock_timeout means the lease did not run out
    async with store.lock(KEY):
        await store.append(KEY, [Entry({"role": "user", "content": "after the crash"})], system=None)
    conversation = await store.load(KEY)
    assert conversation is not None and conversation.messages == [{"role": "user", "content": "after the crash"}]
    await store.close()


async def test_lease_of_a_live_process_still_blocks(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    store = shared_store(tmp_path / "shared.db", lock_timeout=0.3)
    with pytest.raises(LockTimeout):
        async with store.lock(KEY):
            pass
    async with store.lock(("team-a", "other")):  # only that conversation is held
        pass
    await store.close()


async def test_lease_from_another_machine_waits_for_expiry(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    kill(holder, reap=True)
    with sqlite3.connect(tmp_path / "shared.db") as db:  # as if the dead pid had run on another host
        assert db.execute("UPDATE locks SET boot = 'another-host'").rowcount == 1
    store = shared_store(tmp_path / "shared.db", lock_timeout=0.3)
    with pytest.raises(LockTimeout):
        async with store.lock(KEY):
            pass
    await store.close()


async def test_a_file_made_by_the_old_schema_opens_and_locks(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
        db.execute(
            "INSERT INTO locks VALUES ('team-a', 'held-by-old', 'old-owner', strftime('%s', 'now') + 60)"
        )
    store = shared_store(path, lock_timeout=0.3)
    async with store.lock(KEY):
        await store.append(KEY, [Entry({"role": "user", "content": "hi"})], system=None)
    conversation = await store.load(KEY)
    assert conversation is not None and conversation.messages == [{"role": "user", "content": "hi"}]
    with pytest.raises(LockTimeout):  # an old lease names no holder, so only its expiry frees it
        async with store.lock(("team-a", "held-by-old")):
            pass
    await store.close()
    with sqlite3.connect(path) as db:
        assert {"pid", "boot"} <= {row[1] for row in db.execute("PRAGMA table_info(locks)")}


async def test_busy_timeout_bounds_the_wait_for_a_locked_file(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=10, lock_timeout=1, busy_timeout=0.25)
    await store.append(KEY, [Entry({"role": "user", "content": "first"})], system=None)
    assert await store._run(lambda db: db.execute("PRAGMA busy_timeout").fetchone()[0]) == 250
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another connection holds the write lock
    with pytest.raises(StoreUnavailable, match="locked"):
        await store.append(KEY, [Entry({"role": "user", "content": "second"})], system=None)
    writer.execute("ROLLBACK")
    writer.close()
    await store.close()


async def test_a_write_after_the_lease_passed_on_is_refused(tmp_path: Path) -> None:
    """The lease ran out (a long stall) and another holder took it: the late write must not land."""
    store = shared_store(tmp_path / "m.db", lock_timeout=3)
    entry = Entry({"role": "user", "content": "late"}, {})
    try:
        async with store.lock(KEY):
            other = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
            other.execute("UPDATE locks SET owner = 'someone-else' WHERE tenant = ? AND memory_id = ?", KEY)
            with pytest.raises(LockLost):
                await store.append(KEY, [entry], system=None)
        assert await store.load(KEY) is None
        other.execute("DELETE FROM locks")  # the other holder is done
        other.close()
        async with store.lock(KEY):  # a holder that still owns its lease writes as usual
            await store.append(KEY, [entry], system=None)
        loaded = await store.load(KEY)
        assert loaded is not None and loaded.messages == [entry.message]
    finally:
        await store.close()
