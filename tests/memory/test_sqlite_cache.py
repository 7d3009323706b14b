"""The SQLite store's cache: plans from it equal plans over the stored history, and it never runs behind the file."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.core.memory.entries import Entry
from gateway.core.memory.policies import plan_turn
from gateway.core.memory.reach import Reach
from gateway.core.memory.settings import MemorySettings
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.store import Key
from gateway.memory.turns import Memory
from gateway.observe.trace import Trace
from tests.support.memory_stores import Clock, count, stored, tool_unit, window_settings

KEY: Key = ("team-a", "conv-1")
_ids = itertools.count()


def e(role: str, text: str) -> Entry:
    return stored({"role": role, "content": text}, "o200k_base")


@st.composite
def turns(draw: st.DrawFn) -> list[list[Entry]]:
    """Turns as a gateway writes them: a question and its answer, sometimes a tool call and results between."""
    written = []
    for index in range(draw(st.integers(1, 14))):
        how = draw(st.sampled_from(["o200k_base"] * 6 + ["cl100k_base", "none"]))
        turn = [{"role": "user", "content": f"question {index}"}]
        if draw(st.integers(0, 5)) == 0:
            turn.extend(tool_unit(index, draw(st.integers(0, 2))))
        turn.append({"role": "assistant", "content": draw(st.sampled_from(["ok", "a longer answer " * 4]))})
        written.append([stored(message, how) for message in turn])
    return written


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(written=turns(), window=window_settings, cap=st.sampled_from([3, 8, 1000]))
def test_plans_from_the_cache_equal_plans_over_the_stored_history(
    tmp_path: Path, written: list[list[Entry]], window: MemorySettings, cap: int
) -> None:
    """Each turn plans from what the previous turns' writes left in the cache (trimmed by the cap)."""

    async def check() -> None:
        store = SQLiteStore(str(tmp_path / "cache.db"), ttl_seconds=3600, max_messages=cap, lock_timeout=5)
        memory = Memory(store)
        key: Key = ("team-a", f"conv-{next(_ids)}")  # one file for every example: a conversation each
        history: list[Entry] = []
        try:
            for turn in written:
                messages = [{"role": "user", "content": "and now?"}]
                planned = await memory.plan(key, window, messages, count=count, encoding="o200k_base", trace=Trace())
                assert planned == plan_turn([], history[-cap:], messages, settings=window, count=count, encoding="o200k_base")
                async with store.lock(key):
                    await store.append(key, turn, system=None)
                history.extend(turn)
        finally:
            await memory.close()

    asyncio.run(check())


def told_of_submits(store: SQLiteStore) -> asyncio.Event:
    """An event set each time the store queues a job for its thread."""
    submitted = asyncio.Event()
    submit = store._worker.submit

    def submit_and_tell(job: Any) -> None:
        submit(job)
        submitted.set()

    store._worker.submit = submit_and_tell  # type: ignore[method-assign]
    return submitted


async def test_a_read_served_before_a_write_is_not_cached_after_it(tmp_path: Path) -> None:
    path = str(tmp_path / "order.db")
    store = SQLiteStore(path, ttl_seconds=3600, max_messages=100, lock_timeout=5)
    await store.append(KEY, [e("user", "q1")], system=None)
    await store.close()
    store = SQLiteStore(path, ttl_seconds=3600, max_messages=100, lock_timeout=5)  # nothing cached yet
    submitted = told_of_submits(store)
    read = asyncio.create_task(store.load_tail(KEY, Reach(messages=5)))
    await submitted.wait()  # the read is queued for the thread first ...
    await store.append(KEY, [e("assistant", "a1")], system=None)  # ... the write after it
    before = await read
    assert before is not None and [entry.message["content"] for entry in before.entries] == ["q1"]
    after = await store.load_tail(KEY, Reach(messages=5))
    assert after is not None and [entry.message["content"] for entry in after.entries] == ["q1", "a1"]
    await store.close()


async def test_a_write_whose_caller_left_is_seen_by_the_next_read(tmp_path: Path) -> None:
    """A client gone mid-write: its turn is still written, and no read serves the conversation without it."""
    path = tmp_path / "left.db"
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=100, lock_timeout=5)
    await store.append(KEY, [e("user", "q1")], system=None)
    assert await store.load_tail(KEY, Reach(messages=5)) is not None  # cached now
    competitor = sqlite3.connect(path, isolation_level=None)
    competitor.execute("BEGIN IMMEDIATE")  # the write waits for the file

    async def write() -> None:
        await store.append(KEY, [e("assistant", "a1")], system=None)

    submitted = told_of_submits(store)
    writer = asyncio.create_task(write())
    await submitted.wait()  # the write is queued ...
    writer.cancel()  # ... and its caller leaves
    with contextlib.suppress(asyncio.CancelledError):
        await writer
    submitted.clear()
    reader = asyncio.create_task(store.load_tail(KEY, Reach(messages=5)))
    await asyncio.wait([reader, asyncio.create_task(submitted.wait())], return_when=asyncio.FIRST_COMPLETED)
    assert not reader.done()  # sent to the file, not served from what was cached before the write
    competitor.execute("ROLLBACK")
    conversation = await reader
    assert conversation is not None and [entry.message["content"] for entry in conversation.entries] == ["q1", "a1"]
    competitor.close()
    await store.close()



async def test_a_cached_conversation_past_its_ttl_is_not_served(tmp_path: Path) -> None:
    clock = Clock()
    store = SQLiteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_messages=10, lock_timeout=1, clock=clock)
    await store.append(KEY, [e("user", "q"), e("assistant", "a")], system=None)
    assert await store.load_tail(KEY, Reach(messages=1)) is not None  # served from the cache
    clock.now += 61
    assert await store.load_tail(KEY, Reach(messages=1)) is None
    assert await store.load(KEY) is None
    await store.close()
