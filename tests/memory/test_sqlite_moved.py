"""A turn that moved to another worker: its copy, only appended to since, is brought up to date by the new rows alone."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry
from gateway.core.memory.reach import Reach
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.sqlite_writes import INSERT
from tests.support.memory_stores import Clock
from tests.support.shared_sqlite import KEY, said, shared_stores, traced, turn, window

SYSTEM = [{"role": "system", "content": "be brief"}]


def rows_after(statements: list[str]) -> list[int]:
    """The message numbers after which the traced statements read the rows appended (see sqlite_moved)."""
    return [int(found) for statement in statements for found in re.findall(r"AND seq > (\d+) ORDER BY seq$", statement)]


def read_whole(statements: list[str]) -> bool:
    """Whether the traced statements read the conversation's window, newest first."""
    return any("ORDER BY seq DESC" in statement for statement in statements)


def shown(conversation: Conversation | None) -> tuple[list[object], list[object], int]:
    """What a turn plans on: the system messages, the messages, how many older ones were not read."""
    assert conversation is not None
    return conversation.system, conversation.messages, conversation.older


async def in_file(store: SQLiteStore) -> tuple[list[object], list[object]]:
    """The conversation as the file holds it (a read that never uses the cache)."""
    conversation = await store.load(KEY)
    assert conversation is not None
    return conversation.system, conversation.messages


async def test_a_copy_another_store_appended_to_reads_the_new_rows_alone(tmp_path: Path) -> None:
    """The other store's three turns are read, nothing before them; the window is the file's, and the write is its row alone."""
    async with shared_stores(tmp_path / "m.db") as (one, two):
        await turn(one, "a")
        await turn(one, "b")  # one's copy: messages 1 to 4
        for text in "cde":
            await turn(two, text)
        statements = traced(one)
        system, messages, older = shown(await window(one))
        assert rows_after(statements) == [4] and not read_whole(statements)
        assert (system, messages) == await in_file(two) and older == 0
        statements.clear()
        assert await turn(one, "f") == ["a", "b", "c", "d", "e"]
        assert [s.split()[0] for s in statements] == ["INSERT"] and statements[0].startswith(INSERT)


async def test_turns_taken_in_turn_each_read_the_other_stores_turn_alone(tmp_path: Path) -> None:
    async with shared_stores(tmp_path / "m.db") as (one, two):
        for index in range(3):  # each store's first read of it is whole (a write makes no copy of a new conversation)
            assert await turn((one, two)[index % 2], f"t{index}") == [f"t{n}" for n in range(index)]
        for index in range(3, 11):
            store = (one, two)[index % 2]
            statements = traced(store)
            assert await turn(store, f"t{index}") == [f"t{n}" for n in range(index)]
            assert rows_after(statements) == [2 * index - 2] and not read_whole(statements)
        assert (await in_file(one))[1] == (await in_file(two))[1]


async def test_past_the_cap_the_copy_drops_its_oldest_messages_as_the_file_did(tmp_path: Path) -> None:
    async with shared_stores(tmp_path / "m.db", caps=(6, 6)) as (one, two):
        await turn(one, "a")
        await turn(one, "b")
        await turn(two, "c")
        await turn(two, "d")  # messages 1 to 8, the cap keeps 3 to 8
        statements = traced(one)
        system, messages, older = shown(await window(one))
        assert rows_after(statements) == [4] and not read_whole(statements)
        assert (system, messages) == await in_file(two) and [m["content"] for m in messages][::2] == ["b", "c", "d"]
        assert older == 0


async def test_a_copy_of_the_newest_part_keeps_its_count_of_older_messages(tmp_path: Path) -> None:
    """Read with a short reach, the copy holds the newest messages and counts the others; appends move both as the file's."""
    short = Reach(messages=4)
    async with shared_stores(tmp_path / "m.db", caps=(10, 10)) as (one, two):
        for text in "abc":
            await turn(two, text)
        await turn(one, "d", reach=short)  # one's copy: c's and d's messages, 4 older
        await turn(two, "e")
        await turn(two, "f")  # messages 1 to 12, the cap keeps 3 to 12
        statements = traced(one)
        conversation = await window(one, reach=short)
        assert rows_after(statements) == [8]
        _, stored = await in_file(two)
        assert conversation is not None and conversation.older + len(conversation.entries) == len(stored) == 10
        assert conversation.messages == stored[conversation.older :]


async def test_a_conversation_another_cap_trimmed_is_read_again(tmp_path: Path) -> None:
    """A worker started with another maxMessages (a reload under way): its range is not the one the copy would have."""
    async with shared_stores(tmp_path / "m.db", caps=(100, 6)) as (one, two):
        await turn(one, "a")
        await turn(one, "b")
        await turn(two, "c")
        await turn(two, "d")  # messages 1 to 8, two's cap keeps 3 to 8
        statements = traced(one)
        assert await turn(one, "e") == ["b", "c", "d"]
        assert read_whole(statements)


async def undo(store: SQLiteStore) -> None:
    """Undo b, then three turns: the file's messages 5 on follow on from one's copy, but message 3 is another."""
    async with store.lock(KEY):
        assert await store.undo(KEY)
    for text in "cde":
        await turn(store, text)


async def redo(store: SQLiteStore) -> None:
    """Undo b and redo it: the file holds what one's copy does."""
    async with store.lock(KEY):
        assert await store.undo(KEY)
        assert await store.redo(KEY)


async def delete_item(store: SQLiteStore) -> None:
    """Delete a's message, then a message and a turn: messages 5 and 6 follow on from one's copy, the ones before moved down."""
    conversation = await store.load(KEY)
    assert conversation is not None and conversation.entries[0].item_id is not None
    async with store.lock(KEY):
        assert await store.delete_item(KEY, conversation.entries[0].item_id)
        await store.append(KEY, [Entry({"role": "user", "content": "x"}, {})], system=None)
    await turn(store, "c")


async def new_system(store: SQLiteStore) -> None:
    """A turn with a new system prompt, which its message row does not hold."""
    async with store.lock(KEY):
        await store.load_tail(KEY, Reach(messages=100))
        await store.append(KEY, said("c"), system=SYSTEM)


async def delete(store: SQLiteStore) -> None:
    """Delete the conversation and start another under its key: its message 5 follows on from one's copy."""
    async with store.lock(KEY):
        assert await store.delete(KEY)
    for text in "cde":
        await turn(store, text)


async def start_again(store: SQLiteStore) -> None:
    """Start an empty conversation in its place (the Conversations API), then three turns."""
    async with store.lock(KEY):
        await store.start(KEY, {})
    for text in "cde":
        await turn(store, text)


@pytest.mark.parametrize("change", [undo, redo, delete_item, new_system, delete, start_again])
async def test_after_any_change_but_appends_the_copy_is_read_again(
    tmp_path: Path, change: Callable[[SQLiteStore], Awaitable[None]]
) -> None:
    """Each of them marks the change slot: the window is read whole, and is the file's."""
    async with shared_stores(tmp_path / "m.db") as (one, two):
        await turn(one, "a")
        await turn(one, "b")  # one's copy: messages 1 to 4
        await change(two)
        statements = traced(one)
        system, messages, _ = shown(await window(one))
        assert (system, messages) == await in_file(two)
        assert read_whole(statements) and not rows_after(statements)
        users = [m["content"] for m in messages if m["role"] == "user"]
        assert await turn(one, "z") == users
        assert await turn(two, "last") == [*users, "z"]


async def test_a_conversation_expired_and_started_afresh_between_is_read_again(tmp_path: Path) -> None:
    """Another process, whose clock is a TTL on, deleted the expired conversation and wrote new turns from message 1.

    The copy has not expired by its own store's clock: the rows after it were written more than a TTL after it.
    """
    early, late = Clock(), Clock()
    late.now += 61
    async with shared_stores(tmp_path / "m.db", ttl=60, clocks=(early, late)) as (one, two):
        await turn(one, "a")
        await turn(one, "b")  # one's copy: messages 1 to 4
        for text in "cde":
            await turn(two, text)  # messages 1 to 6 of a new conversation
        statements = traced(one)
        assert await turn(one, "f") == ["c", "d", "e"]
        assert read_whole(statements)


async def test_a_conversation_expired_and_started_afresh_to_the_copys_length_is_read_again(tmp_path: Path) -> None:
    """As many messages as the copy has, and none after them: the conversation's last write is not the copy's."""
    early, late = Clock(), Clock()
    late.now += 61
    async with shared_stores(tmp_path / "m.db", ttl=60, clocks=(early, late)) as (one, two):
        await turn(one, "a")
        await turn(one, "b")  # one's copy: messages 1 to 4
        await turn(two, "c")
        await turn(two, "d")  # messages 1 to 4 of a new conversation
        assert await turn(one, "f") == ["c", "d"]


async def test_a_copy_expired_by_the_stores_clock_is_read_again(tmp_path: Path) -> None:
    clock = Clock()
    async with shared_stores(tmp_path / "m.db", ttl=60, clocks=(clock, clock)) as (one, two):
        await turn(one, "a")
        clock.now += 61
        await turn(two, "b")
        statements = traced(one)
        assert await turn(one, "c") == ["b"]
        assert read_whole(statements) and not rows_after(statements)
