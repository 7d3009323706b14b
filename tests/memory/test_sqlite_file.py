"""The SQLite store's file: expired conversations purged through the day index, trimmed rows bounded."""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

import pytest

from gateway.core.memory.entries import Entry
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.sqlite_file import DAY, open_file
from gateway.memory.sqlite_rows import MOST_IN_A_ROW, read_row
from gateway.memory.sqlite_writes import TRIM_EVERY
from gateway.memory.store import Key, StoreUnavailable
from tests.support.memory_stores import OLD_SCHEMA, Clock

_PURGE = "DELETE FROM conversations WHERE touched_day <= ? AND updated_at < ?"


def turn(text: str) -> list[Entry]:
    return [Entry({"role": "user", "content": text}, {"o200k_base": 3}), Entry({"role": "assistant", "content": "ok"}, {"o200k_base": 2})]


async def write(store: SQLiteStore, key: Key, text: str) -> None:
    async with store.lock(key):
        await store.append(key, turn(text), system=None)


def stored_messages(path: Path) -> int:
    """How many messages the file's rows hold, read or not (a turn's row holds several)."""
    with sqlite3.connect(path) as db:
        return sum(len(read_row(*row)) for row in db.execute("SELECT body, encoding, tokens FROM messages"))


async def test_the_purge_deletes_expired_conversations_and_keeps_one_touched_on_an_earlier_day(tmp_path: Path) -> None:
    clock = Clock()
    clock.now = 100 * DAY + 0.9 * DAY  # late in a day: the next write is on another day
    store = SQLiteStore(str(tmp_path / "m.db"), ttl_seconds=DAY, max_messages=100, lock_timeout=5, clock=clock)
    gone, kept, fresh = ("t", "gone"), ("t", "kept"), ("t", "fresh")
    await write(store, gone, "a")
    await write(store, kept, "b")
    clock.now += 0.3 * DAY  # the next day: kept is written again, its day moves on
    await write(store, kept, "c")
    clock.now += 0.9 * DAY  # gone is past the TTL; kept, written 0.9 days ago, is not
    await write(store, fresh, "d")  # the purge (due after 10 minutes) runs before this write
    assert await store.load(kept) is not None
    await store.close()
    with sqlite3.connect(tmp_path / "m.db") as db:
        assert {row[0] for row in db.execute("SELECT memory_id FROM conversations")} == {"kept", "fresh"}
        assert {row[0] for row in db.execute("SELECT DISTINCT memory_id FROM messages")} == {"kept", "fresh"}
        assert db.execute("SELECT touched_day FROM conversations WHERE memory_id = 'kept'").fetchone() == (101,)


async def test_an_old_file_loses_the_index_every_write_moved_and_its_purge_uses_the_day_index(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
        db.execute("INSERT INTO conversations VALUES ('t', 'old', '[]', strftime('%s', 'now'))")
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=100, lock_timeout=5)
    await write(store, ("t", "old"), "a")
    await store.close()
    with sqlite3.connect(path) as db:
        indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'conversations'")}
        assert "conversations_updated" not in indexes and "conversations_touched" in indexes
        plan = " ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + _PURGE, (1, 2.0)))
        assert "USING INDEX conversations_touched" in plan


async def test_rows_past_the_cap_are_never_read_and_are_deleted_in_bunches(tmp_path: Path) -> None:
    cap = 10
    store = SQLiteStore(str(tmp_path / "m.db"), ttl_seconds=3600, max_messages=cap, lock_timeout=5, cache_entries=0)
    key = ("t", "c")
    most = 0
    for index in range(100):
        await write(store, key, f"q{index}")
        conversation = await store.load(key)
        assert conversation is not None
        assert [m["content"] for m in conversation.messages[::2]] == [f"q{i}" for i in range(max(index - 4, 0), index + 1)]
        most = max(most, stored_messages(tmp_path / "m.db"))
    await store.close()
    # Trimmed rows wait for a bunch, never more than one; a turn's row holding a kept message stays
    # whole, and the rows before it that could (up to MOST_IN_A_ROW - 1 messages) stay too.
    assert cap < most <= cap + TRIM_EVERY + MOST_IN_A_ROW


async def test_a_conversation_started_afresh_after_expiry_keeps_none_of_its_old_rows(tmp_path: Path) -> None:
    clock = Clock()
    store = SQLiteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_messages=100, lock_timeout=5, clock=clock)
    key = ("t", "c")
    for index in range(3):
        await write(store, key, f"old{index}")
    clock.now += 61
    await write(store, key, "new")
    conversation = await store.load(key)
    assert conversation is not None and [m["content"] for m in conversation.messages] == ["new", "ok"]
    await store.close()
    assert stored_messages(tmp_path / "m.db") == 2


def test_connections_opening_a_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    """As the workers of `serve --workers N` do on their first memory request: none fails with 'database is locked'."""
    failures: list[str] = []
    for trial in range(40):  # each opening races; without the retry about one trial in five fails
        path = str(tmp_path / f"new-{trial}.db")
        start = threading.Barrier(3)

        def open_it(path: str = path, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                open_file(path, busy_timeout_ms=10_000).close()
            except sqlite3.Error as exc:
                failures.append(str(exc))

        openers = [threading.Thread(target=open_it) for _ in range(3)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join()
    assert failures == []


async def test_a_turn_that_fills_the_disk_in_its_transaction_says_so(tmp_path: Path) -> None:
    """SQLite rolls such a transaction back by itself: the store reports the full disk, not a ROLLBACK refused after it."""
    store = SQLiteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_messages=100, lock_timeout=5)
    await write(store, ("t", "c"), "a")
    assert store._file.db is not None
    pages = store._file.db.execute("PRAGMA page_count").fetchone()[0]
    store._file.db.execute(f"PRAGMA max_page_count={pages}")  # the file may not grow: as on a full disk
    big = [Entry({"role": "user", "content": "x" * 50_000}, {})]
    with pytest.raises(StoreUnavailable, match="full"):  # a first write: its row and its message in a transaction
        await store.append(("t", "other"), big, system=None)
    assert not store._file.db.in_transaction
    await store.close()


async def test_a_turn_whose_commit_is_refused_leaves_no_transaction_open(tmp_path: Path) -> None:
    """The transaction is rolled back: left open, every later write would join it, never committed, the file locked.

    A COMMIT fails so with SQLITE_BUSY while another connection reads a file not in WAL mode.
    """
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=100, lock_timeout=5, busy_timeout=0.05)
    await write(store, ("t", "a"), "a")
    assert store._file.db is not None
    store._file.db.execute("PRAGMA journal_mode=DELETE")  # as where WAL mode cannot be used: a commit waits for readers
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT * FROM messages").fetchall()  # holds its read until the COMMIT below
    with pytest.raises(StoreUnavailable, match="locked"):  # a first write: a transaction, whose COMMIT waits in vain
        await store.append(("t", "b"), turn("b"), system=None)
    reader.execute("COMMIT")
    reader.close()
    await write(store, ("t", "c"), "c")
    await store.close()
    with sqlite3.connect(path) as db:
        assert [row[0] for row in db.execute("SELECT DISTINCT memory_id FROM messages ORDER BY 1")] == ["a", "c"]


def test_a_file_that_cannot_use_wal_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """An in-memory database stands for a file system without WAL: SQLite keeps its own mode and says so."""
    with caplog.at_level(logging.WARNING, logger="gateway.memory"):
        db = open_file(":memory:", busy_timeout_ms=100)
    db.close()
    assert "not WAL" in caplog.text and "'memory'" in caplog.text


def test_a_file_in_wal_mode_is_not_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gateway.memory"):
        open_file(str(tmp_path / "m.db"), busy_timeout_ms=100).close()
    assert caplog.text == ""
