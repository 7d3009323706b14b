"""Conversations locked across processes sharing one SQLite file, held by real processes that die, stop or stay alive."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.core.memory.entries import Entry
from gateway.core.memory.reach import Reach
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.sqlite_lockfile import LockFile, Place, lock_path, place
from gateway.memory.store import LockTimeout, StoreUnavailable
from tests.support.file_locks import lock_holders
from tests.support.memory_stores import OLD_SCHEMA

KEY = ("team-a", "chat-1")
REACH = Reach(messages=100)

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
    """Another process holding KEY in tmp_path/shared.db; killed and reaped at the end."""
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path / "shared.db")], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    try:
        assert process.stdout.readline() == "held\n"
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGCONT)
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


async def test_the_holder_is_the_process_that_took_the_conversation(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    assert lock_holders(Path(lock_path(str(tmp_path / "shared.db"))), place(KEY).offset) == [holder.pid]


@pytest.mark.parametrize("reap", [True, False], ids=["reaped", "zombie"])
async def test_a_conversation_of_a_killed_process_is_taken_at_once(
    tmp_path: Path, holder: subprocess.Popen[str], reap: bool
) -> None:
    """The kernel let go of the dead holder's lock: the first try takes it (a timeout of 0 allows no second)."""
    kill(holder, reap=reap)
    store = shared_store(tmp_path / "shared.db", lock_timeout=0)
    async with store.lock(KEY):
        await store.append(KEY, [Entry({"role": "user", "content": "after the crash"})], system=None)
    conversation = await store.load(KEY)
    assert conversation is not None and conversation.messages == [{"role": "user", "content": "after the crash"}]
    await store.close()


async def test_a_conversation_of_a_live_process_waits_for_the_timeout(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    store = shared_store(tmp_path / "shared.db", lock_timeout=0.3)
    with pytest.raises(LockTimeout):
        async with store.lock(KEY):
            pass
    async with store.lock(("team-a", "other")):  # only that conversation is held
        pass
    await store.close()


async def test_a_stopped_holder_keeps_its_conversation_until_it_dies(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    """No lease runs out: a holder stopped (SIGSTOP) holds on; killed, it lets go at once."""
    os.kill(holder.pid, signal.SIGSTOP)
    store = shared_store(tmp_path / "shared.db", lock_timeout=0.3)
    with pytest.raises(LockTimeout):
        async with store.lock(KEY):
            pass
    kill(holder, reap=True)
    async with store.lock(KEY):
        pass
    await store.close()


async def test_a_conversation_let_go_by_another_process_is_taken_while_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiter polls the kernel: a holder that lets go during the wait hands it over within the timeout."""
    path = tmp_path / "shared.db"
    one, two = shared_store(path, lock_timeout=5), shared_store(path, lock_timeout=5)
    refused = asyncio.Event()
    lock = LockFile.lock

    def told(file: LockFile, where: Place) -> bool:
        taken = lock(file, where)
        if not taken:
            refused.set()
        return taken

    monkeypatch.setattr(LockFile, "lock", told)
    async with one.lock(KEY):
        waiting = asyncio.create_task(two.lock(KEY).__aenter__())
        await refused.wait()  # the waiter tried, and polls
    await waiting  # no LockTimeout: it was taken
    await two.lock(KEY).__aexit__(None, None, None)
    for store in (one, two):
        await store.close()


async def test_a_file_made_by_the_old_schema_opens_and_locks_past_old_leases(tmp_path: Path) -> None:
    """A lease row an older gateway left is no lock any more (every process sharing a file runs one version)."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
        db.execute("INSERT INTO locks VALUES ('team-a', 'chat-1', 'old-owner', strftime('%s', 'now') + 60)")
    store = shared_store(path, lock_timeout=0)
    async with store.lock(KEY):
        await store.append(KEY, [Entry({"role": "user", "content": "hi"})], system=None)
    conversation = await store.load(KEY)
    assert conversation is not None and conversation.messages == [{"role": "user", "content": "hi"}]
    await store.close()
    with sqlite3.connect(path) as db:
        assert {"pid", "boot"} <= {row[1] for row in db.execute("PRAGMA table_info(locks)")}


async def test_turns_write_no_lock_rows(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = shared_store(path, lock_timeout=1)
    statements: list[str] = []
    for index in range(3):
        async with store.lock(KEY):
            if index == 0:
                assert store._file.db is not None
                store._file.db.set_trace_callback(statements.append)  # on the store's thread, for each statement
            await store.load_tail(KEY, REACH)
            await store.append(KEY, [Entry({"role": "user", "content": f"q{index}"})], system=None)
    await store.close()
    assert statements and not [s for s in statements if "locks" in s]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM locks").fetchone() == (0,)


async def test_a_lock_let_go_before_its_write_is_done_waits_for_it(tmp_path: Path) -> None:
    """A holder whose caller left while its write was queued: the next holder, in another process, reads that write."""
    path = tmp_path / "m.db"
    one, two = shared_store(path, lock_timeout=0.3), shared_store(path, lock_timeout=5)
    async with one.lock(KEY):
        await one.append(KEY, [Entry({"role": "user", "content": "first"})], system=None)
    gate = threading.Event()
    blocked = asyncio.ensure_future(one._run(lambda db: gate.wait()))  # the thread held until the test lets it go

    queued = asyncio.Event()

    async def turn() -> None:
        async with one.lock(KEY):
            written = one.append(KEY, [Entry({"role": "user", "content": "second"})], system=None)
            queued.set()
            await written

    leaving = asyncio.create_task(turn())
    await queued.wait()  # in the lock, its write queued behind the blocked thread
    leaving.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await leaving
    two_short = shared_store(path, lock_timeout=0.2)
    with pytest.raises(LockTimeout):  # still held: the write is not done
        async with two_short.lock(KEY):
            pass
    gate.set()
    await blocked
    async with two.lock(KEY):
        conversation = await two.load_tail(KEY, REACH)
    assert conversation is not None and [m["content"] for m in conversation.messages] == ["first", "second"]
    for store in (one, two, two_short):
        await store.close()


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
