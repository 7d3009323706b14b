"""Stores sharing one SQLite file, as the worker processes of `serve --workers N` open it: turns, and the statements run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry
from gateway.core.memory.reach import Reach
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.store import Key

KEY: Key = ("team-a", "conv-1")
REACH = Reach(messages=100)


def said(text: str) -> list[Entry]:
    """A turn of two messages: the user's `text` and the answer."""
    return [Entry({"role": "user", "content": text}, {"o200k_base": 3}), Entry({"role": "assistant", "content": "ok"}, {})]


@asynccontextmanager
async def shared_stores(
    path: Path, *, caps: tuple[int, int] = (100, 100), ttl: float = 60, clocks: tuple[Callable[[], float], ...] = ()
) -> AsyncIterator[tuple[SQLiteStore, SQLiteStore]]:
    """Two stores on the file `path` in shared mode, each with its own cache and thread, cap and clock; closed after."""
    options: dict[str, Any] = {"ttl_seconds": ttl, "lock_timeout": 5, "shared": True}
    made = [
        SQLiteStore(str(path), max_messages=caps[index], **options, **({"clock": clocks[index]} if clocks else {}))
        for index in range(2)
    ]
    try:
        yield made[0], made[1]
    finally:
        for store in made:
            await store.close()


async def turn(store: SQLiteStore, text: str, *, key: Key = KEY, reach: Reach = REACH) -> list[str]:
    """A turn as the gateway runs one: under the lock, read the conversation, append; the user messages it read."""
    async with store.lock(key):
        conversation = await store.load_tail(key, reach)  # the cached copy itself: read before the append changes it
        users = [] if conversation is None else [m["content"] for m in conversation.messages if m["role"] == "user"]
        await store.append(key, said(text), system=None)
    return users


async def window(store: SQLiteStore, *, key: Key = KEY, reach: Reach = REACH) -> Conversation | None:
    """What a turn of `store` would plan on now (read under the lock, nothing appended)."""
    async with store.lock(key):
        return await store.load_tail(key, reach)


def traced(store: SQLiteStore) -> list[str]:
    """The statements `store` runs on its file from now on (its file must be open), their parameters in them."""
    statements: list[str] = []
    assert store._file.db is not None
    store._file.db.set_trace_callback(statements.append)  # called on the store's thread, for each statement
    return statements
