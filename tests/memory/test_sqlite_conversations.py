"""The SQLite store's message rows: a turn is one row, read, capped and undone message by message as before."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.memory.entries import Entry
from gateway.core.memory.reach import Reach, Tally, stored_count
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.sqlite_rows import MOST_IN_A_ROW
from gateway.memory.store import Key, StoreUnavailable

KEY: Key = ("team-a", "conv-1")


def entry(role: str, text: str, tokens: int | None = 3) -> Entry:
    return Entry({"role": role, "content": text}, {} if tokens is None else {"o200k_base": tokens})


async def contents(store: SQLiteStore) -> list[str]:
    conversation = await store.load(KEY)
    assert conversation is not None
    return [m["content"] for m in conversation.messages]


def rows(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as db:
        return list(db.execute("SELECT seq, role FROM messages ORDER BY seq"))


async def test_a_turn_is_one_row_and_a_message_alone_is_a_row_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=100, lock_timeout=1, cache_entries=0)
    await store.append(KEY, [entry("user", "q1"), entry("assistant", "a1", 7), entry("user", "q2", None)], system=None)
    await store.append(KEY, [entry("user", "q3", 5)], system=None)
    conversation = await store.load(KEY)
    assert conversation is not None
    assert [m["content"] for m in conversation.messages] == ["q1", "a1", "q2", "q3"]
    assert [e.tokens for e in conversation.entries] == [{"o200k_base": 3}, {"o200k_base": 7}, {}, {"o200k_base": 5}]
    await store.close()
    assert rows(path) == [(1, "user"), (4, "user")]


async def test_a_turn_longer_than_a_row_holds_is_a_row_a_message(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=100, lock_timeout=1, cache_entries=0)
    turn = [entry("user", f"m{index}") for index in range(MOST_IN_A_ROW + 1)]
    await store.append(KEY, turn, system=None)
    assert await contents(store) == [f"m{index}" for index in range(MOST_IN_A_ROW + 1)]
    await store.close()
    assert len(rows(path)) == MOST_IN_A_ROW + 1


async def test_rows_of_a_message_each_from_an_earlier_version_are_read_and_written_on(tmp_path: Path) -> None:
    """Before turns were one row, each message was a row: (seq, role, the message's JSON, encoding, tokens)."""
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=5, lock_timeout=1, cache_entries=0)
    await store.append(KEY, [entry("user", "made the file")], system=None)
    await store.close()
    earlier = [("user", "q1", 4), ("assistant", "a1", 6), ("user", "q2", 4), ("assistant", "a2", 9)]
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM messages")
        for seq, (role, text, tokens) in enumerate(earlier, start=2):
            body = orjson.dumps({"role": role, "content": text}).decode()
            db.execute(
                "INSERT INTO messages (tenant, memory_id, seq, role, body, encoding, tokens) VALUES (?, ?, ?, ?, ?, 'o200k_base', ?)",
                (*KEY, seq, role, body, tokens),
            )
        db.execute("UPDATE conversations SET first_seq = 2, last_seq = 5")
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=5, lock_timeout=1, cache_entries=0)
    tail = await store.load_tail(KEY, Reach(messages=0, tokens=10, users=0))
    assert tail is not None and [m["content"] for m in tail.messages] == ["q2", "a2"] and tail.older == 2
    await store.append(KEY, [entry("user", "q3"), entry("assistant", "a3")], system=None)
    conversation = await store.load(KEY)
    assert conversation is not None
    assert [m["content"] for m in conversation.messages] == ["a1", "q2", "a2", "q3", "a3"]  # the cap, 5
    assert [e.tokens for e in conversation.entries[:3]] == [{"o200k_base": 6}, {"o200k_base": 4}, {"o200k_base": 9}]
    await store.close()


async def test_an_undo_inside_a_turn_row_keeps_the_turn_messages_before_it(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=100, lock_timeout=1, cache_entries=0)
    await store.append(KEY, [entry("user", "q1"), entry("tool", "t1"), entry("user", "q2"), entry("assistant", "a")], system=None)
    assert await store.undo(KEY)
    assert await contents(store) == ["q1", "t1"]
    await store.append(KEY, [entry("user", "q3"), entry("assistant", "a3")], system=None)
    assert await contents(store) == ["q1", "t1", "q3", "a3"]
    assert await store.undo(KEY)
    assert await store.undo(KEY)  # q1 is the newest user message now: all of the row goes
    assert not await store.undo(KEY)
    await store.close()
    assert rows(path) == []


class Model:
    """What a store holds, message by message: the visible messages of a conversation under a cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.messages: list[Entry] = []

    def append(self, turn: list[Entry]) -> None:
        self.messages = [*self.messages, *turn][-self.cap :]

    def undo(self) -> bool:
        if not self.messages:
            return False
        users = [index for index, stored in enumerate(self.messages) if stored.message["role"] == "user"]
        del self.messages[users[-1] if users else 0 :]
        return True

    def tail(self, reach: Reach) -> tuple[list[Entry], int]:
        tally = Tally(reach)
        for index in range(len(self.messages) - 1, -1, -1):
            stored = self.messages[index]
            if tally.add(stored.message["role"], stored_count(stored.tokens)):
                return self.messages[index:], index
        return self.messages, 0


messages = st.builds(
    entry, st.sampled_from(["user", "assistant", "tool"]), st.text("ab", max_size=3), st.one_of(st.none(), st.integers(0, 50))
)
steps = st.lists(
    st.one_of(st.lists(messages, min_size=1, max_size=MOST_IN_A_ROW + 2), st.just("undo")), min_size=1, max_size=12
)


@settings(max_examples=60, deadline=None)
@given(steps=steps, cap=st.integers(1, 40), reach=st.tuples(st.integers(0, 8), st.integers(0, 60), st.integers(0, 3)))
def test_turn_rows_hold_what_a_row_a_message_would(steps: list[Any], cap: int, reach: tuple[int, int, int]) -> None:
    """Any turns and undos, under any cap: the file reads back message by message as the model says."""

    async def run(path: str) -> None:
        store = SQLiteStore(path, ttl_seconds=60, max_messages=cap, lock_timeout=1, cache_entries=0)
        model = Model(cap)
        for step in steps:
            if step == "undo":
                assert await store.undo(KEY) == model.undo()
            else:
                await store.append(KEY, step, system=None)
                model.append(step)
            conversation = await store.load(KEY)
            assert (conversation.entries if conversation else []) == model.messages
            tail = await store.load_tail(KEY, Reach(*reach))
            entries, older = model.tail(Reach(*reach))
            assert ((tail.entries, tail.older) if tail else ([], 0)) == (entries, older)
        await store.close()

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(run(str(Path(directory) / "m.db")))


async def test_a_closed_store_says_it_is_unavailable(tmp_path: Path) -> None:
    for used in (False, True):
        store = SQLiteStore(str(tmp_path / f"m{used}.db"), ttl_seconds=60, max_messages=10, lock_timeout=1)
        if used:
            await store.append(KEY, [entry("user", "q")], system=None)
        await store.close()
        with pytest.raises(StoreUnavailable, match="closed"):
            await store.append(KEY, [entry("user", "q")], system=None)
        with pytest.raises(StoreUnavailable, match="closed"):
            await store.load_tail(("team-a", "other"), Reach(messages=1))


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        '"a string"',
        "[1, 2]",
        '[[{"role": "user", "content": "q"}]]',
        '[[{"role": "user", "content": "q"}, null], [{"role": "assistant", "content": "a"}, {}]]',
        '[["a string", {}], [{"role": "assistant", "content": "a"}, {}]]',
        '[[{"role": "user", "content": "q"}, {"o200k_base": "3"}], [{"role": "assistant", "content": "a"}, {}]]',
    ],
)
async def test_a_row_no_version_writes_makes_the_store_unavailable(tmp_path: Path, body: str) -> None:
    """A damaged file is the store failing (a 503 for the client), never an error of the gateway's own (a 500)."""
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=100, lock_timeout=1, cache_entries=0)
    await store.append(KEY, [entry("user", "q1"), entry("assistant", "a1")], system=None)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE messages SET body = ?", (body,))
    with pytest.raises(StoreUnavailable, match="cannot be read"):
        await store.load_tail(KEY, Reach(messages=4))
    with pytest.raises(StoreUnavailable, match="cannot be read"):
        await store.load(KEY)
    with pytest.raises(StoreUnavailable, match="cannot be read"):
        await store.undo(KEY)
    assert await store.delete(KEY)  # what the client can still do about it
    await store.close()


@pytest.mark.parametrize("system", ["{not json", '{"role": "system"}', '["a string"]'])
async def test_system_messages_no_version_writes_make_the_store_unavailable(tmp_path: Path, system: str) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=100, lock_timeout=1, cache_entries=0)
    await store.append(KEY, [entry("user", "q1"), entry("assistant", "a1")], system=[{"role": "system", "content": "s"}])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE conversations SET system = ?", (system,))
    with pytest.raises(StoreUnavailable, match="cannot be read"):
        await store.load_tail(KEY, Reach(messages=4))
    await store.close()


async def test_a_file_the_previous_version_wrote_loads_undoes_and_redoes(tmp_path: Path) -> None:
    """Its conversations have no redo column (added when opened) and some rows no written_at: createdAt None for those."""
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=100, lock_timeout=1)
    await store.append(KEY, [entry("user", "q1"), entry("assistant", "a1")], system=None)
    await store.append(KEY, [entry("user", "q2"), entry("assistant", "a2")], system=None)
    await store.close()
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE conversations DROP COLUMN redo")
        db.execute("UPDATE messages SET written_at = NULL WHERE seq = 1")
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=100, lock_timeout=1)
    try:
        conversation = await store.load(KEY)
        assert conversation is not None and [m["content"] for m in conversation.messages] == ["q1", "a1", "q2", "a2"]
        times = [e.created_at for e in conversation.entries]
        assert times[:2] == [None, None] and None not in times[2:]
        assert await store.undo(KEY)
        assert await store.undo(KEY)
        assert await store.redo(KEY)
        assert await store.redo(KEY)
        redone = await store.load(KEY)
        assert redone is not None and [e.created_at for e in redone.entries] == times
    finally:
        await store.close()


async def test_an_undo_that_cuts_a_turns_row_keeps_the_kept_messages_times(tmp_path: Path) -> None:
    """A turn's row holding two user messages: the undo rewrites the row's first part, with the time it had."""
    path = tmp_path / "m.db"
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=100, lock_timeout=1, cache_entries=0)
    try:
        await store.append(KEY, [entry("user", "q1"), entry("assistant", "a1"), entry("user", "q2")], system=None)
        with sqlite3.connect(path) as db:
            db.execute("UPDATE messages SET written_at = 1000.5")
        assert await store.undo(KEY)
        conversation = await store.load(KEY)
        assert conversation is not None
        assert [(e.message["content"], e.created_at) for e in conversation.entries] == [("q1", 1000.5), ("a1", 1000.5)]
    finally:
        await store.close()
