"""A turn reads only the newest part of a conversation, and plans exactly as over the whole of it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry
from gateway.core.memory.policies import plan_turn
from gateway.core.memory.reach import Reach
from gateway.core.memory.settings import MemorySettings
from gateway.memory.redis import RedisStore
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.sqlite_file import STATE, live_state
from gateway.memory.store import Key, MemoryStore
from gateway.memory.turns import Memory
from gateway.observe.trace import Trace
from tests.support.memory_stores import OLD_SCHEMA, count, stored, tool_unit, window_settings

_ids = itertools.count()


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Plain turns with tool calls (answered, half-answered) among them; sometimes an orphaned result first."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "tool", "tool_call_id": "gone", "content": "orphan"})
    for index in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(["user", "assistant", "assistant", "tools"]))
        if kind == "tools":
            messages.extend(tool_unit(index, draw(st.integers(0, 2))))
        else:
            messages.append({"role": kind, "content": draw(st.sampled_from(["hi", "a longer sentence " * 3, "x" * 90]))})
    return messages



async def plans_agree(
    store: MemoryStore, history: list[Entry], resend: int, window: MemorySettings, *, first_read: int | None = None
) -> None:
    """The plan from tail reads equals the plan over the whole stored history.

    `first_read`: start from a read of this many messages, whatever the window, so that the
    wider reads that follow a short first guess are exercised too.
    """
    key: Key = ("team-a", f"conv-{next(_ids)}")
    async with store.lock(key):
        await store.append(key, history, system=[{"role": "system", "content": "be brief"}])
    whole = await store.load(key)
    assert whole is not None
    new = [m.message for m in whole.entries[len(whole.entries) - resend :]] if resend else []
    messages = [*new, {"role": "user", "content": "and now?"}]
    expected = plan_turn(whole.system, whole.entries, messages, settings=window, count=count, encoding="o200k_base")
    with contextlib.ExitStack() as patches:
        if first_read is not None:
            patches.enter_context(mock.patch("gateway.memory.turns.first_reach", lambda *_: Reach(messages=first_read)))
        planned = await Memory(store).plan(key, window, messages, count=count, encoding="o200k_base", trace=Trace())
    assert planned == expected


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    messages=histories(),
    how=st.sampled_from(["o200k_base", "cl100k_base", "none"]),
    resend=st.integers(0, 8),
    window=window_settings,
    cap=st.sampled_from([8, 1000]),
    first_read=st.sampled_from([None, 1, 3]),
)
def test_sqlite_tail_reads_plan_as_the_whole_history_does(
    tmp_path: Path,
    messages: list[dict[str, Any]],
    how: str,
    resend: int,
    window: MemorySettings,
    cap: int,
    first_read: int | None,
) -> None:
    async def check() -> None:
        store = SQLiteStore(str(tmp_path / "tail.db"), ttl_seconds=3600, max_messages=cap, lock_timeout=5, cache_entries=0)
        try:
            history = [stored(m, how) for m in messages]
            await plans_agree(store, history, min(resend, len(messages)), window, first_read=first_read)
        finally:
            await store.close()

    asyncio.run(check())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    messages=histories(),
    how=st.sampled_from(["o200k_base", "cl100k_base", "none"]),
    resend=st.integers(0, 8),
    window=window_settings,
    first_read=st.sampled_from([None, 1, 3]),
)
def test_redis_tail_reads_plan_as_the_whole_history_does(
    redis_url: str, messages: list[dict[str, Any]], how: str, resend: int, window: MemorySettings, first_read: int | None
) -> None:
    async def check() -> None:
        store = RedisStore(redis_url, ttl_seconds=3600, max_messages=1000, lock_timeout=5)
        try:
            history = [stored(m, how) for m in messages]
            await plans_agree(store, history, min(resend, len(messages)), window, first_read=first_read)
        finally:
            await store.close()

    asyncio.run(check())


class Reads:
    """A store's load_tail, counting the entries each read brought back."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.entries_read = 0
        self.reads = 0

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        conversation = await self.store.load_tail(key, reach)
        self.reads += 1
        self.entries_read += len(conversation.entries) if conversation else 0
        return conversation

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.mark.parametrize(
    "window",
    [
        MemorySettings(memory_type="message_window", max_messages=20),
        MemorySettings(memory_type="token_window", max_tokens=330),
        MemorySettings(memory_type="round_window", max_rounds=5),
    ],
    ids=lambda window: window.memory_type,
)
@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_a_long_conversation_is_read_only_as_far_as_the_window_goes(
    kind: str, window: MemorySettings, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "redis":
        store: MemoryStore = RedisStore(request.getfixturevalue("redis_url"), ttl_seconds=60, max_messages=2000, lock_timeout=5)
    else:
        store = SQLiteStore(str(tmp_path / "long.db"), ttl_seconds=60, max_messages=2000, lock_timeout=5, cache_entries=0)
    key: Key = ("team-a", f"long-{next(_ids)}")
    turns = [[{"role": "user", "content": f"question {n}"}, {"role": "assistant", "content": f"answer {n}"}] for n in range(500)]
    history = [stored(m, "o200k_base") for m in itertools.chain.from_iterable(turns)]
    async with store.lock(key):
        await store.append(key, history, system=None)
    reads = Reads(store)
    messages = [{"role": "user", "content": "next"}]
    planned = await Memory(reads).plan(key, window, messages, count=count, encoding="o200k_base", trace=Trace())  # type: ignore[arg-type]
    whole = await store.load(key)
    assert whole is not None and len(whole.entries) == 1000
    assert planned == plan_turn([], whole.entries, messages, settings=window, count=count, encoding="o200k_base")
    assert planned.evicted > 900
    assert reads.reads == 1 and reads.entries_read <= 128  # of 1,000 stored (redis reads in chunks)
    await store.close()


async def test_a_file_with_messages_of_the_old_shape_is_upgraded_and_read(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}]
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
        db.execute("INSERT INTO conversations VALUES ('team-a', 'conv-1', '[]', strftime('%s', 'now'))")
        for seq, message in enumerate(old, start=5):  # an older gateway's trims left numbers from 5 on
            body = orjson.dumps({"m": message, "t": {"o200k_base": count(message)}})
            db.execute("INSERT INTO messages VALUES ('team-a', 'conv-1', ?, ?, ?)", (seq, message["role"], body))
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=3, lock_timeout=5, cache_entries=0)
    key: Key = ("team-a", "conv-1")
    window = MemorySettings(memory_type="token_window", max_tokens=1000)
    planned = await Memory(store).plan(key, window, [{"role": "user", "content": "q2"}], count=count, encoding="o200k_base", trace=Trace())
    assert planned.forwarded == [*old, {"role": "user", "content": "q2"}]
    async with store.lock(key):  # the cap (3) drops the oldest old-shape row
        await store.append(key, [stored({"role": "user", "content": "q2"}, "o200k_base")], system=None)
        await store.append(key, [stored({"role": "assistant", "content": "a2"}, "o200k_base")], system=None)
    whole = await store.load(key)
    assert whole is not None
    assert whole.messages == [old[1], {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}]
    assert whole.entries[0].tokens == {"o200k_base": count(old[1])}
    await store.close()
    with sqlite3.connect(path) as db:
        # the range as its newest row tells it (the second append wrote that row alone: see sqlite_file)
        assert live_state(db.execute(STATE, key).fetchone())[2:] == (6, 8)
        # row 5, below first_seq, is never read again; it goes with a later bunch (see sqlite_writes.TRIM_EVERY)
        assert [row[0] for row in db.execute("SELECT seq FROM messages WHERE seq >= 6 ORDER BY seq")] == [6, 7, 8]
