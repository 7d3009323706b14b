"""The liveness record's renewals end when the store stops, even when the client swallows the cancellation."""

from __future__ import annotations

import asyncio

from gateway.memory.redis_locks import Liveness


async def test_stop_ends_the_renewals_even_when_the_client_swallows_the_cancellation() -> None:
    marking = asyncio.Event()
    marks = 0

    async def mark() -> None:
        """A client call that, cancelled, returns as if it were done (as redis-py may)."""
        nonlocal marks
        marks += 1
        if marks == 2:  # the first renewal (the first mark is ensure()'s own); once, so a test that fails ends
            marking.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                return
        elif marks > 2:
            await asyncio.sleep(3600)

    async def tick() -> None:
        return None

    liveness = Liveness(mark=mark, tick=tick)
    await liveness.ensure()
    await asyncio.wait_for(marking.wait(), 30)  # a renewal is under way
    stopping = asyncio.ensure_future(liveness.stop())
    done, _ = await asyncio.wait([stopping], timeout=30)
    assert stopping in done, "stop() never returned: the renewals went on after their cancellation was swallowed"
