"""The SQLite store's common turn is its message row alone: the conversation's state follows from its newest row."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from gateway.core.memory.entries import Entry
from gateway.core.memory.reach import Reach
from gateway.memory import sqlite_writes
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.sqlite_file import DAY, STATE, live_state, settle
from gateway.memory.sqlite_writes import INSERT
from gateway.memory.store import Key, StoreUnavailable
from tests.support.memory_stores import Clock

KEY: Key = ("team-a", "conv-1")

# The file as session 9's gateways made it: no `cap` on conversations, no `written_at` on messages.
_SESSION_9_SCHEMA = """
CREATE TABLE conversations (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, system TEXT NOT NULL, updated_at REAL NOT NULL,
    first_seq INTEGER NOT NULL DEFAULT 1, last_seq INTEGER NOT NULL DEFAULT 0, touched_day INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, memory_id)
) WITHOUT ROWID;
CREATE INDEX conversations_touched ON conversations (touched_day);
CREATE TABLE locks (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, owner TEXT NOT NULL, expires_at REAL NOT NULL, pid INTEGER, boot TEXT,
    PRIMARY KEY (tenant, memory_id)
) WITHOUT ROWID;
CREATE TABLE "values" (key TEXT PRIMARY KEY, value TEXT NOT NULL, written_at REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE messages (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL, body BLOB NOT NULL,
    encoding TEXT, tokens INTEGER,
    PRIMARY KEY (tenant, memory_id, seq)
) WITHOUT ROWID;
"""


def said(text: str, role: str = "user") -> list[Entry]:
    return [Entry({"role": role, "content": text}, {"o200k_base": 3})]


def turn(text: str) -> list[Entry]:
    return [*said(text), *said(f"re {text}", "assistant")]


async def contents(store: SQLiteStore, key: Key = KEY) -> list[str]:
    conversation = await store.load(key)
    return [] if conversation is None else [m["content"] for m in conversation.messages]


def traced(store: SQLiteStore) -> list[str]:
    """The statements the store's thread runs from now on."""
    statements: list[str] = []
    assert store._file.db is not None
    store._file.db.set_trace_callback(statements.append)  # called on the store's thread, for each statement
    return statements


def file_state(path: Path, key: Key = KEY) -> tuple[str, float, int, int] | None:
    with sqlite3.connect(path) as db:
        row = db.execute(STATE, key).fetchone()
    return None if row is None else live_state(row)


async def test_a_turn_to_a_conversation_this_store_wrote_is_one_insert_in_no_transaction(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=100, lock_timeout=1)
    await store.append(KEY, turn("a"), system=None)  # a first write: the conversation row too
    statements = traced(store)
    await store.append(KEY, turn("b"), system=None)
    assert len(statements) == 1 and statements[0].startswith("INSERT INTO messages")
    await store.close()
    with sqlite3.connect(path) as db:  # the row as the first write left it; the messages say the rest
        assert db.execute("SELECT first_seq, last_seq FROM conversations").fetchone() == (1, 2)
    assert file_state(path) is not None and file_state(path)[2:] == (1, 4)  # type: ignore[index]
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=100, lock_timeout=1)
    assert await contents(store) == ["a", "re a", "b", "re b"]
    await store.close()


BLOCKER: Key = ("team-a", "blocker")


async def queued_behind_a_blocked_write(store: SQLiteStore, path: Path, append: Callable[[], list[asyncio.Future[None]]]) -> list[str]:
    """Make appends while the thread waits on the file for another write: they queue, and are served as one batch.

    The statements the thread ran from then on, the blocked write's first.
    """
    await store.append(BLOCKER, turn("a"), system=None)  # known: its next write is its row alone
    statements: list[str] = []
    started = threading.Event()

    def trace(statement: str) -> None:  # on the thread, as a statement starts (before it waits for the file)
        statements.append(statement)
        started.set()

    assert store._file.db is not None
    store._file.db.set_trace_callback(trace)
    competitor = sqlite3.connect(path, isolation_level=None)
    competitor.execute("BEGIN IMMEDIATE")
    blocked = store.append(BLOCKER, turn("b"), system=None)
    await asyncio.to_thread(started.wait)
    appends = append()
    competitor.execute("ROLLBACK")
    competitor.close()
    await asyncio.gather(blocked, *appends)
    return statements


async def test_plain_turns_queued_together_are_one_insert_in_no_transaction(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_messages=100, lock_timeout=1)
    keys = [("team-a", f"conv-{n}") for n in range(3)]
    for key in keys:
        await store.append(key, turn("a"), system=None)
    statements = await queued_behind_a_blocked_write(
        store, tmp_path / "m.db", lambda: [store.append(key, turn("b"), system=None) for key in keys]
    )
    assert [s.split(" VALUES")[0] for s in statements] == [INSERT.removesuffix(" VALUES ")] * 2  # the blocked one's, theirs
    for key in keys:
        assert await contents(store, key) == ["a", "re a", "b", "re b"]
    await store.close()


async def test_writes_queued_together_that_write_their_rows_still_share_one_transaction(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_messages=100, lock_timeout=1)
    keys = [("team-a", f"conv-{n}") for n in range(3)]
    for key in keys:
        await store.append(key, turn("a"), system=None)
    brief = [{"role": "system", "content": "be brief"}]
    statements = await queued_behind_a_blocked_write(
        store,
        tmp_path / "m.db",
        lambda: [store.append(key, turn("b"), system=brief if index else None) for index, key in enumerate(keys)],
    )
    assert [s for s in statements if s.startswith(("BEGIN", "COMMIT"))] == ["BEGIN IMMEDIATE", "COMMIT"]
    for key in keys:
        assert await contents(store, key) == ["a", "re a", "b", "re b"]
    await store.close()


async def test_a_file_of_session_9_is_upgraded_read_and_written_on(tmp_path: Path) -> None:
    path = tmp_path / "s9.db"
    body = orjson.dumps([[m.message, dict(m.tokens)] for m in turn("old")]).decode()
    with sqlite3.connect(path) as db:
        db.executescript(_SESSION_9_SCHEMA)
        db.execute("INSERT INTO conversations VALUES (?, ?, '[]', strftime('%s', 'now'), 3, 4, 0)", KEY)
        db.execute("INSERT INTO messages VALUES (?, ?, 1, 'user', ?, '', 2)", (*KEY, body))  # below first_seq
        db.execute("INSERT INTO messages VALUES (?, ?, 3, 'user', ?, '', 2)", (*KEY, body))
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=4, lock_timeout=1, cache_entries=0)
    tail = await store.load_tail(KEY, Reach(messages=2))
    assert tail is not None and [m["content"] for m in tail.messages] == ["old", "re old"]
    for text in ("new", "newer"):  # the first through the row, the second its message row alone
        await store.append(KEY, turn(text), system=None)
    assert await contents(store) == ["new", "re new", "newer", "re newer"]  # the cap, 4
    await store.close()
    with sqlite3.connect(path) as db:
        assert {row[1] for row in db.execute("PRAGMA table_info(messages)")} >= {"written_at"}
        assert {row[1] for row in db.execute("PRAGMA table_info(conversations)")} >= {"cap"}
    state = file_state(path)
    assert state is not None and state[2:] == (5, 8)


async def test_a_conversation_whose_row_is_a_day_old_but_whose_messages_are_fresh_survives_the_purge(tmp_path: Path) -> None:
    clock = Clock()
    clock.now = 100 * DAY + 60  # early in a day: the writes below are all on it
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=DAY / 2, max_messages=100, lock_timeout=5, clock=clock)
    for step in range(9):  # a turn every 0.1 day; the purge, due every 10 minutes, runs before each
        await store.append(KEY, turn(f"q{step}"), system=None)
        clock.now += DAY / 10
    await store.append(("team-a", "other"), turn("x"), system=None)  # one more purge, 0.9 days after the first write
    await store.close()
    with sqlite3.connect(path) as db:
        updated_at, last = db.execute("SELECT updated_at, last_seq FROM conversations WHERE memory_id = 'conv-1'").fetchone()
        assert updated_at < clock.now - DAY / 2 and last == 2  # the row is past the TTL ...
        assert db.execute("SELECT count(*) FROM messages WHERE memory_id = 'conv-1'").fetchone() == (9,)  # ... its messages not


async def test_a_conversation_whose_row_is_stale_reads_as_its_messages_say(tmp_path: Path) -> None:
    """Its last write and its range (under the cap it was written with) come from its newest message row."""
    clock = Clock()
    clock.now = 100 * DAY + 60
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=DAY / 2, max_messages=5, lock_timeout=5, clock=clock)
    for step in range(4):
        await store.append(KEY, turn(f"q{step}"), system=None)
        clock.now += DAY / 5
    await store.close()
    with sqlite3.connect(path) as db:  # as written by the first turn: past the TTL, and the first 2 messages
        assert db.execute("SELECT updated_at, first_seq, last_seq FROM conversations").fetchone() == (100 * DAY + 60, 1, 2)
    store = SQLiteStore(str(path), ttl_seconds=DAY / 2, max_messages=100, lock_timeout=5, clock=clock)  # a larger cap now
    tail = await store.load_tail(KEY, Reach(messages=3))
    assert tail is not None and [m["content"] for m in tail.messages] == ["re q2", "q3", "re q3"] and tail.older == 2
    assert await contents(store) == ["re q1", "q2", "re q2", "q3", "re q3"]  # the newest 5, as written
    await store.close()


async def test_an_undo_or_a_delete_after_one_statement_turns_is_written_on_right(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=3, lock_timeout=1, cache_entries=0)
    for text in ("a", "b", "c", "d"):  # the row written by the first; the cap moved first_seq on since
        await store.append(KEY, said(text), system=None)
    assert await store.undo(KEY)
    assert await contents(store) == ["b", "c"]
    await store.append(KEY, said("e"), system=None)
    assert await contents(store) == ["b", "c", "e"]
    await store.append(KEY, said("f"), system=None)
    assert await contents(store) == ["c", "e", "f"]
    assert await store.delete(KEY)
    assert await contents(store) == []
    await store.append(KEY, said("g"), system=None)
    await store.append(KEY, said("h"), system=None)
    assert await contents(store) == ["g", "h"]
    await store.close()
    state = file_state(path)
    assert state is not None and state[2:] == (1, 2)


async def test_a_turn_whose_number_another_writer_took_goes_after_it(tmp_path: Path) -> None:
    """The file refuses the turn's row (its primary key): nothing was written, and the turn goes by the row."""
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=100, lock_timeout=1, cache_entries=0)
    await store.append(KEY, turn("a"), system=None)
    with sqlite3.connect(path) as db:  # someone else (another process, against the rules) wrote message 3
        db.execute(
            "INSERT INTO messages (tenant, memory_id, seq, role, body, encoding, tokens, written_at) VALUES (?, ?, 3, 'user', ?, '', NULL, 0)",
            (*KEY, orjson.dumps({"role": "user", "content": "theirs"}).decode()),
        )
    await store.append(KEY, turn("b"), system=None)
    assert await contents(store) == ["a", "re a", "theirs", "b", "re b"]
    await store.close()


async def test_a_one_statement_turn_that_fails_leaves_memory_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=100, lock_timeout=1, busy_timeout=0.05)
    await store.append(KEY, turn("a"), system=None)
    competitor = sqlite3.connect(path, isolation_level=None)
    competitor.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreUnavailable, match="locked"):
        await store.append(KEY, turn("b"), system=None)
    competitor.execute("ROLLBACK")
    competitor.close()
    assert await contents(store) == ["a", "re a"]
    await store.append(KEY, turn("c"), system=None)
    assert await contents(store) == ["a", "re a", "c", "re c"]
    await store.close()
    state = file_state(path)
    assert state is not None and state[2:] == (1, 4)  # numbered on from the write that was made


async def test_a_settled_file_holds_each_conversation_in_its_row_as_older_gateways_read_it(tmp_path: Path) -> None:
    """What a downgrade needs: an older gateway takes a conversation's range and last write from its row alone."""
    clock = Clock()
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=5, lock_timeout=1, clock=clock)
    for step in range(4):
        for key in (KEY, ("team-a", "other")):
            await store.append(key, turn(f"q{step}"), system=None)
        clock.now += 10
    await store.close()
    with sqlite3.connect(path, isolation_level=None) as db:
        before = {key: live_state(db.execute(STATE, key).fetchone()) for key in (KEY, ("team-a", "other"))}
        assert settle(db) == 2
        rows = dict(((t, m), (u, f, last)) for t, m, u, f, last in db.execute(
            "SELECT tenant, memory_id, updated_at, first_seq, last_seq FROM conversations"
        ))
        assert rows == {key: state[1:] for key, state in before.items()} == {
            key: (clock.now - 10, 4, 8) for key in before
        }
        assert settle(db) == 0


async def test_a_due_trim_follows_a_turns_row_alone_and_the_conversation_row_is_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writes, "TRIM_EVERY", 4)  # first_seq 5, 9, 13, ...: a trim every second turn at the cap
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=4, lock_timeout=1)
    for step in range(3):
        await store.append(KEY, turn(f"q{step}"), system=None)
    statements = traced(store)
    await store.append(KEY, turn("q3"), system=None)  # messages 7-8: first_seq 5, a trim is due
    assert [s.split()[0] for s in statements] == ["INSERT", "DELETE"]
    for step in range(4, 12):
        await store.append(KEY, turn(f"q{step}"), system=None)
    assert await contents(store) == ["q10", "re q10", "q11", "re q11"]
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT first_seq, last_seq FROM conversations").fetchone() == (1, 2)  # the first write's
        assert db.execute("SELECT min(seq) FROM messages").fetchone() == (7,)  # below row_floor(21) = 6: deleted
    state = file_state(path)
    assert state is not None and state[2:] == (21, 24)


async def test_a_trim_that_fails_after_its_turn_was_written_leaves_the_turn_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writes, "TRIM_EVERY", 4)
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=4, lock_timeout=1, cache_entries=0)
    for step in range(3):
        await store.append(KEY, turn(f"q{step}"), system=None)
    assert store._file.db is not None

    def no_deletes(action: int, table: str | None, *_: object) -> int:
        return sqlite3.SQLITE_DENY if action == sqlite3.SQLITE_DELETE and table == "messages" else sqlite3.SQLITE_OK

    store._file.db.set_authorizer(no_deletes)
    await store.append(KEY, turn("q3"), system=None)  # its trim is refused: logged, the turn stands
    assert await contents(store) == ["q2", "re q2", "q3", "re q3"]
    await store.close()
    state = file_state(path)
    assert state is not None and state[2:] == (5, 8)
