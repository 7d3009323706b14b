"""A replica judges another by its missing liveness record only once its own renewals went through for a record's life."""

from __future__ import annotations

import asyncio
import math

from gateway.memory.redis_locks import LIVE_MS, Contention, Liveness

LIFE = LIVE_MS / 1000


async def nothing() -> None:
    return None


async def test_a_replica_is_steady_a_record_life_after_its_first_renewal() -> None:
    async def mark() -> None:
        return None

    liveness = Liveness(mark=mark, tick=nothing)
    await liveness.ensure()
    now = asyncio.get_running_loop().time()
    try:
        assert not liveness.steady(now)
        assert liveness.steady(now + LIFE)
    finally:
        await liveness.stop()


async def test_a_failed_renewal_ends_steadiness_until_a_record_life_after_the_next_one_that_goes_through() -> None:
    outcomes = [True, False, True]  # the first mark is ensure()'s, then the renewals
    marked = asyncio.Condition()
    marks = 0

    async def mark() -> None:
        nonlocal marks
        async with marked:
            marks += 1
            marked.notify_all()
        if marks > len(outcomes):
            await asyncio.Event().wait()  # no more renewals: the test looks between them
        if not outcomes[marks - 1]:
            raise ConnectionError("redis is away")

    async def renewed(count: int) -> float:
        """The loop's time once `count` marks ran (the Liveness took each outcome before the test runs again)."""
        async with marked:
            await asyncio.wait_for(marked.wait_for(lambda: marks >= count), 30)
        await asyncio.sleep(0)
        return asyncio.get_running_loop().time()

    loop = asyncio.get_running_loop()
    liveness = Liveness(mark=mark, tick=nothing)
    await liveness.ensure()
    first = loop.time()
    try:
        assert liveness.steady(first + LIFE)
        failed = await renewed(2)
        assert not liveness.steady(failed + LIFE)
        assert not liveness.steady(math.inf)
        back = await renewed(3)
        assert not liveness.steady(back)
        assert liveness.steady(back + LIFE)
    finally:
        await liveness.stop()


async def test_a_waiter_asks_about_no_holder_before_it_is_steady() -> None:
    async def mark() -> None:
        return None

    liveness = Liveness(mark=mark, tick=nothing)
    await liveness.ensure()
    now = asyncio.get_running_loop().time()
    contention = Contention(b"waiter", math.inf, 5, liveness=liveness)
    try:
        assert not contention.ask(b"holder:1", now)
        assert contention.ask(b"holder:1", now + LIFE)
    finally:
        await liveness.stop()
