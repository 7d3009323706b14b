"""Stores sharing one SQLite file (the workers of `serve --workers N`): each keeps its cache, checked under the lease."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from gateway.core.memory.entries import Entry
from gateway.core.memory.reach import Reach
from gateway.memory import sqlite_leases
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.store import Key, LockLost, StoreUnavailable
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
    """A turn as the gateway runs one: under the lease, read the conversation, append; the user messages it read."""
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
    """The lease's transaction is the turn's only read, and its write the message row alone, checked against the lease."""
    one, two = stores
    await turn(one, "a")
    await turn(two, "b")
    await turn(one, "c")  # read the file: two wrote since one cached it
    statements = traced(one)
    assert await turn(one, "d") == ["a", "b", "c"]
    reads = [s for s in statements if s.lstrip().startswith("SELECT")]
    assert len(reads) == 1 and "touched_day" in reads[0]  # the lease's look, no read of the messages
    writes = [s.strip() for s in statements if "INSERT INTO messages" in s or "UPDATE conversations" in s]
    assert len(writes) == 1 and "EXISTS (SELECT 1 FROM locks" in writes[0]


async def test_a_write_whose_lease_passed_on_is_refused(stores: tuple[SQLiteStore, SQLiteStore], tmp_path: Path) -> None:
    one, _ = stores
    await turn(one, "a")
    with pytest.raises(LockLost):
        async with one.lock(KEY):
            with sqlite3.connect(tmp_path / "shared.db") as db:  # as if it ran out and another holder took it
                db.execute("UPDATE locks SET owner = 'another'")
            await one.append(KEY, said("b"), system=None)
    with sqlite3.connect(tmp_path / "shared.db") as db:
        db.execute("DELETE FROM locks")
    assert await turn(one, "c") == ["a"]


async def test_a_read_without_the_lease_goes_to_the_file(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    one, two = stores
    await turn(one, "a")
    await turn(one, "b")  # cached by its read, then its write
    await turn(two, "c")
    conversation = await one.load(KEY)
    assert conversation is not None and [m["content"] for m in conversation.messages if m["role"] == "user"] == ["a", "b", "c"]


async def test_an_undo_by_the_other_store_is_seen(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    one, two = stores
    await turn(one, "a")
    await turn(one, "b")
    async with two.lock(KEY):
        assert await two.undo(KEY)
    assert await turn(one, "c") == ["a"]
    assert await turn(two, "d") == ["a", "c"]


def lease_ends(path: Path) -> list[float]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT expires_at FROM locks")]


async def test_a_lease_held_past_a_third_of_its_term_is_renewed(
    stores: tuple[SQLiteStore, SQLiteStore], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renewed by a task the lease's timer starts (a turn that ends before then starts none); let go, the row goes."""
    monkeypatch.setattr(sqlite_leases, "LEASE_SECONDS", 0.6)
    one, _ = stores
    path = tmp_path / "shared.db"
    async with one.lock(KEY):
        (first,) = lease_ends(path)
        await eventually(lambda: lease_ends(path)[0] > first, what="the lease renewed")
        await one.append(KEY, said("a"), system=None)
    await eventually(lambda: lease_ends(path) == [], what="the lease let go")


async def batch(store: SQLiteStore, *works: Callable[[sqlite3.Connection], object]) -> list[object]:
    """Run `works` on the store's thread as one batch (the thread held until all are queued); their results or errors."""
    queued = threading.Event()
    await store._run(lambda db: None)  # the file open, and the thread started
    blocker = asyncio.ensure_future(store._run(lambda db: queued.wait()))
    runs = [asyncio.ensure_future(store._run(work)) for work in works]
    queued.set()
    results = await asyncio.gather(blocker, *runs, return_exceptions=True)  # the blocker in their batch or ahead of it
    return results[1:]


async def test_jobs_queued_together_share_one_transaction(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    """Three leases taken in one batch: one BEGIN, one COMMIT; each lease is taken."""
    one, _ = stores
    await one.put_value("v", "x")
    statements = traced(one)
    keys = [("team-a", f"conv-{n}") for n in range(3)]
    leases = one._leases
    taken = await batch(one, *(functools.partial(leases._insert_lock, key=key, token=f"t{n}") for n, key in enumerate(keys)))
    assert [result[0] for result in taken] == [True, True, True]  # type: ignore[index]
    assert [s for s in statements if s.startswith(("BEGIN", "COMMIT"))] == ["BEGIN IMMEDIATE", "COMMIT"]


async def test_a_job_that_fails_fails_its_batch_which_leaves_nothing(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    one, _ = stores

    def store_value(db: sqlite3.Connection) -> None:
        db.execute("""INSERT INTO "values" (key, value, written_at) VALUES ('v', 'x', 1e12)""")

    def fail(db: sqlite3.Connection) -> None:
        db.execute("SELECT no_such_column FROM locks")

    results = await batch(one, store_value, fail)
    assert all(isinstance(result, StoreUnavailable) for result in results)
    assert await one.get_value("v") is None


async def test_a_lease_let_go_is_deleted_by_the_next_batch(stores: tuple[SQLiteStore, SQLiteStore], tmp_path: Path) -> None:
    """In the transaction of the store's next job (no job of its own), or by one sent when none comes."""
    one, _ = stores
    await turn(one, "a")
    await eventually(lambda: lease_ends(tmp_path / "shared.db") == [], what="the idle store sent the release")
    statements = traced(one)
    async with one.lock(KEY):
        pass
    async with one.lock(("team-a", "other")):
        assert [s.split()[0] for s in statements if s.startswith(("BEGIN", "DELETE FROM locks", "COMMIT"))][-4:] == [
            "BEGIN", "DELETE", "DELETE", "COMMIT"  # the release, the expired leases' delete, then the lease taken
        ]
        assert len(lease_ends(tmp_path / "shared.db")) == 1
