"""A turn whose store fails to read: the client sees a 503, and the conversation is let go."""

from __future__ import annotations

import pytest

from gateway.memory.reach import Reach
from gateway.memory.settings import MemorySettings
from gateway.memory.store import Conversation, InProcessStore, Key, StoreUnavailable
from gateway.memory.turns import Memory, MemoryUnavailableError, Turn
from gateway.observe import Trace

SYSTEM = {"role": "system", "content": "be brief"}
QUESTION = {"role": "user", "content": "and now?"}


class FailingReads(InProcessStore):
    """Reads fail while `failing` is set."""

    failing = True

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        if self.failing:
            raise StoreUnavailable("disk on fire")
        return await super().load_tail(key, reach)


@pytest.mark.parametrize("messages", [[SYSTEM, QUESTION], [QUESTION]], ids=["common-turn", "other-turn"])
async def test_a_failed_first_read_is_a_503_and_lets_the_conversation_go(messages: list[dict[str, str]]) -> None:
    store = FailingReads(ttl_seconds=60, max_messages=10, lock_timeout=0.5)
    memory = Memory(store)
    window = MemorySettings("token_window", max_tokens=330)
    try:
        with pytest.raises(MemoryUnavailableError) as caught:
            async with Turn(memory, ("t", "m"), window, messages, "gpt-4o", Trace()):
                pytest.fail("planned over a read that failed")
        assert caught.value.status == 503 and caught.value.code == "memory_unavailable"
        store.failing = False
        async with Turn(memory, ("t", "m"), window, messages, "gpt-4o", Trace()) as turn:  # not held by the failed turn
            assert turn.plan.forwarded == messages
    finally:
        await memory.close()
