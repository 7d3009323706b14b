"""A turn's reads: a store that fails to read is a 503 that lets the conversation go (the turn did not plan); a read too short
is widened. Large token counts leave the event loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry
from gateway.core.memory.plain import PlainHistory
from gateway.core.memory.reach import Reach
from gateway.core.memory.settings import MemorySettings
from gateway.memory.counting import OFF_LOOP_CHARS
from gateway.memory.errors import MemoryUnavailableError
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.store import InProcessStore, Key, StoreUnavailable
from gateway.memory.turns import Memory, Turn
from gateway.observe.trace import Observer, Trace
from gateway.tokens import count_message, get_encoding

O200K = get_encoding("o200k_base")

SYSTEM = {"role": "system", "content": "be brief"}
QUESTION = {"role": "user", "content": "and now?"}


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def a(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


class FailingReads(InProcessStore):
    """Reads fail while `failing` is set."""

    failing = True

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        if self.failing:
            raise StoreUnavailable("disk on fire")
        return await super().load_tail(key, reach)


@pytest.mark.parametrize("messages", [[SYSTEM, QUESTION], [QUESTION]], ids=["common-turn", "other-turn"])
async def test_a_failed_first_read_is_a_503_and_lets_the_conversation_go(messages: list[dict[str, str]]) -> None:
    store = FailingReads(ttl_seconds=60, max_messages=10, lock_timeout=5)
    memory = Memory(store)
    window = MemorySettings("token_window", max_tokens=330)
    try:
        with pytest.raises(MemoryUnavailableError) as caught:
            async with Turn(memory, ("t", "m"), settings=window, messages=messages, model="gpt-4o", trace=Trace()):
                pytest.fail("planned over a read that failed")
        assert caught.value.status == 503 and caught.value.code == "memory_unavailable"
        store.failing = False
        async with Turn(memory, ("t", "m"), settings=window, messages=messages, model="gpt-4o", trace=Trace()) as turn:  # not held by the failed turn
            assert turn.plan.forwarded == messages
    finally:
        await memory.close()


async def test_a_common_turn_over_a_tail_too_short_for_its_window_reads_further(tmp_path: Path) -> None:
    """After a restart, a narrow window's turn caches the tail it read; a wider window then reads the rest."""
    path = str(tmp_path / "memory.db")
    store = SQLiteStore(path, ttl_seconds=3600, max_messages=1000, lock_timeout=5)
    history = [Entry(m, {"o200k_base": count_message(m, O200K)}) for i in range(20) for m in (u(f"question {i}"), a(f"answer {i}"))]
    await store.append(("t", "m"), history, system=[SYSTEM])
    await store.close()
    memory = Memory(SQLiteStore(path, ttl_seconds=3600, max_messages=1000, lock_timeout=5))  # a restart: nothing cached
    try:
        async with Turn(memory, ("t", "m"), settings=MemorySettings("token_window", max_tokens=40), messages=[SYSTEM, QUESTION], model="gpt-4o", trace=Trace()) as turn:
            assert 0 < turn.plan.history_kept < len(history)
            await turn.commit_answer({"choices": [{"message": a("so")}]})
        async with Turn(memory, ("t", "m"), settings=MemorySettings("token_window", max_tokens=5000), messages=[SYSTEM, QUESTION], model="gpt-4o", trace=Trace()) as turn:
            assert (turn.plan.history_kept, turn.plan.evicted) == (len(history) + 2, 0)
            assert turn.plan.forwarded == [SYSTEM, *(e.message for e in history), QUESTION, a("so"), QUESTION]
    finally:
        await memory.close()


class TailThenFailure(InProcessStore):
    """The first read gives the newest two of many messages; a wider read fails."""

    reads = 0

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        self.reads += 1
        if self.reads > 1:
            raise StoreUnavailable("disk on fire")
        tail = [Entry(m, {"o200k_base": count_message(m, O200K)}) for m in (u("q"), a("a"))]
        return Conversation([SYSTEM], tail, 0.0, 10, PlainHistory.of(tail))


class Events(Observer):
    """The turn events told, by name."""

    def __init__(self) -> None:
        self.told: list[str] = []

    def lock_waited(self, store: str, seconds: float) -> None:
        self.told.append("lock_waited")

    def memory_turn(self, trace: Trace, store: str, *, waited: float, loaded: float, appended: float | None, stored: int) -> None:
        self.told.append("memory_turn")


@pytest.mark.parametrize("messages", [[SYSTEM, QUESTION], [QUESTION]], ids=["common-turn", "other-turn"])
async def test_a_turn_whose_wider_read_fails_did_not_plan_and_reports_its_lock_wait_alone(messages: list[dict[str, str]]) -> None:
    """Not a memory_turn of no memory type (a `memory_type=""` series) with the first read's time."""
    memory, events = Memory(TailThenFailure(ttl_seconds=60, max_messages=10, lock_timeout=5)), Events()
    try:
        with pytest.raises(MemoryUnavailableError):
            async with Turn(memory, ("t", "m"), settings=MemorySettings("token_window", max_tokens=1000), messages=messages, model="gpt-4o", trace=Trace(events)):
                pytest.fail("planned over a read that failed")
        assert events.told == ["lock_waited"]
    finally:
        await memory.close()


async def test_small_counts_run_inline_and_large_ones_on_a_thread() -> None:
    memory = Memory(InProcessStore(ttl_seconds=60, max_messages=10, lock_timeout=5))
    here = threading.current_thread().name
    small = [{"role": "user", "content": "x" * (OFF_LOOP_CHARS - 100)}]
    large = [{"role": "user", "content": "x" * (OFF_LOOP_CHARS + 1)}]
    try:
        assert await memory.offload(lambda: threading.current_thread().name, small) == here
        assert (await memory.offload(lambda: threading.current_thread().name, large)).startswith("gateway-tokens")
    finally:
        await memory.close()


class NeverCloses(InProcessStore):
    """A store whose close waits for ever (a Redis that stopped answering, say)."""

    async def close(self) -> None:
        await asyncio.Event().wait()


async def test_a_store_that_hangs_on_close_does_not_keep_the_gateway_from_stopping(caplog: pytest.LogCaptureFixture) -> None:
    memory = Memory(NeverCloses(ttl_seconds=60, max_messages=10, lock_timeout=5), close_seconds=0.05)
    await asyncio.wait_for(memory.close(), 30)  # without the bound: TimeoutError here
    assert "did not close within 0.05s" in caplog.text
