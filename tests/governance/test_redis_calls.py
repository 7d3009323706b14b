"""The Redis governor's calls (gateway.governance.redis_calls), on a real Redis: when a correction goes.

A correction sets this process's slots in Redis to those it holds. It rides on the call a
renewal sends each second, after the settlements waiting (which the leases count already) and
before the admissions, whenever no other call of the process is in flight: so it comes within a
second, under steady load too. Not while a reload's governor and the one it replaces share the
process's leases: the other's settlements would be counted twice.
"""

from __future__ import annotations

import asyncio
import contextlib

import redis.asyncio as aioredis

from gateway.core.governance import Budget, BudgetPeriod, RateLimits
from gateway.core.settings import Config
from gateway.governance.redis import RedisGovernor
from gateway.governance.redis_script import slots_key, spent_key
from tests.support.governance import api_key, limits_config, redis_governor
from tests.support.servers import flush_redis
from tests.support.waiting import eventually

KEY = slots_key("key", "a")
LIMITS = RateLimits(concurrent_requests=100, budget=Budget(usd=1_000, period=BudgetPeriod.MONTH))


def config() -> Config:
    return limits_config(keys=(api_key("a", limits=LIMITS),))


async def field(client: aioredis.Redis, governor: RedisGovernor) -> int:
    return int(await client.hget(KEY, governor.process_id) or 0)


async def test_a_correction_goes_with_the_settlements_waiting(redis_url: str) -> None:
    await flush_redis(redis_url)
    limited = config()
    # a spend waits for the next call: the renewal's, within a second; no lease goes back idle meanwhile
    governor = redis_governor(redis_url, limited, settle_seconds=30.0, idle_seconds=60.0)
    client = aioredis.Redis.from_url(redis_url)
    try:
        first, second = [await governor.admit("a", limited.routes["fast"], tokens=0) for _ in range(2)]
        assert first is not None and second is not None
        governor.settle(first, tokens=0, cost_usd=0.25)  # its spend waits; its slot stays in the lease
        held = governor.holding.slots[KEY].leased
        assert await field(client, governor) == held
        await client.hincrby(KEY, governor.process_id, 5)  # as if a reply were lost after its script took five more

        async def spent() -> bool:
            spends = await client.keys(spent_key("a", "*"))
            return [float(value) for value in await client.mget(spends)] == [0.25] if spends else False

        await eventually(spent, seconds=5, what="the spend sent by the renewal's call")
        assert await field(client, governor) == held  # set right in the same call
    finally:
        await governor.close()
        await client.aclose()


async def test_a_correction_comes_under_steady_load(redis_url: str) -> None:
    """Requests start and end every few milliseconds, each ending sending its spend within 20 ms: a slot count
    gone wrong is right again within a few seconds all the same."""
    await flush_redis(redis_url)
    limited = config()
    governor = redis_governor(redis_url, limited, settle_seconds=0.02)
    client = aioredis.Redis.from_url(redis_url)
    stop = asyncio.Event()

    async def load() -> None:
        while not stop.is_set():
            admission = await governor.admit("a", limited.routes["fast"], tokens=0)
            assert admission is not None
            await asyncio.sleep(0.003)
            governor.settle(admission, tokens=0, cost_usd=0.001)

    loads = [asyncio.create_task(load()) for _ in range(4)]
    try:
        await eventually(lambda: governor.holding.slots.get(KEY) is not None, what="slots leased")
        await asyncio.sleep(0.2)
        await client.hincrby(KEY, governor.process_id, 5)

        async def corrected() -> bool:
            return await field(client, governor) == governor.holding.slots[KEY].leased

        await asyncio.sleep(0.05)
        assert not await corrected()
        await eventually(corrected, seconds=5, what="the slots set right while requests keep coming")
        assert not any(task.done() for task in loads)  # the load ran throughout
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.gather(*loads)
        await governor.close()
        await client.aclose()


async def test_no_correction_while_a_reloads_governors_share_the_leases(redis_url: str) -> None:
    """A reload's governor takes the process's id and leases: neither it nor the one it replaces corrects
    until that one closed (a settlement waiting in either would be counted twice); then the successor does."""
    await flush_redis(redis_url)
    limited = config()
    predecessor = redis_governor(redis_url, limited, idle_seconds=60.0)
    client = aioredis.Redis.from_url(redis_url)
    successor: RedisGovernor | None = None
    try:
        admission = await predecessor.admit("a", limited.routes["fast"], tokens=0)
        assert admission is not None
        successor = redis_governor(
            redis_url, limited, idle_seconds=60.0, process_id=predecessor.process_id, holding=predecessor.holding
        )
        successor.keep_alive()
        held = predecessor.holding.slots[KEY].leased
        await client.hincrby(KEY, predecessor.process_id, 5)
        await asyncio.sleep(2.5)  # two renewals of each
        assert await field(client, predecessor) == held + 5
        predecessor.settle(admission, tokens=0, cost_usd=0.0)  # its last request ends: it is closed
        await predecessor.close()

        async def corrected() -> bool:
            return await field(client, predecessor) == predecessor.holding.slots[KEY].leased

        await eventually(corrected, seconds=5, what="the successor's correction once it is the only one")
    finally:
        if successor is not None:
            await successor.close()
        await predecessor.close()
        await client.aclose()
