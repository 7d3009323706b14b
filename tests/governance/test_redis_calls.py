"""The Redis governor's calls (gateway.governance.redis_calls), on a real Redis: a correction goes at a quiet second.

A correction sets this process's slots in Redis to those it holds. It goes with a renewal when no
other call is in flight or waits to go: a settlement still waiting would otherwise be counted twice
(the lease gave its slot back already; the settlement takes it from Redis again). Under steady load
it so waits for a lull (sending it with the next call would be exact for one governor per process,
not while another governor's queue holds this process's settlement: a reload's predecessor).
"""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from gateway.core.governance import Budget, BudgetPeriod, RateLimits
from gateway.governance.redis_script import slots_key
from tests.support.governance import api_key, limits_config, redis_governor
from tests.support.servers import flush_redis
from tests.support.waiting import eventually


async def test_a_correction_waits_while_a_settlement_waits_then_goes_at_the_next_quiet_second(redis_url: str) -> None:
    await flush_redis(redis_url)
    limits = RateLimits(concurrent_requests=100, budget=Budget(usd=1_000, period=BudgetPeriod.MONTH))
    config = limits_config(keys=(api_key("a", limits=limits),))
    # a spend waits for the next call (the renewal sends it after its own); no lease goes back idle meanwhile
    governor = redis_governor(redis_url, config, settle_seconds=4.0, idle_seconds=60.0)
    client = aioredis.Redis.from_url(redis_url)
    key = slots_key("key", "a")
    try:
        first, second = [await governor.admit("a", config.routes["fast"], tokens=0) for _ in range(2)]
        assert first is not None and second is not None
        governor.settle(first, tokens=0, cost_usd=0.01)  # its spend waits; its slot stays in the lease
        held = governor.holding.slots[key].leased
        assert int(await client.hget(key, governor.process_id) or 0) == held
        await client.hincrby(key, governor.process_id, 5)  # as if a reply were lost after its script took five more
        await asyncio.sleep(1.5)  # a renewal came while the spend waited: it did not correct, then sent the spend
        assert int(await client.hget(key, governor.process_id) or 0) == held + 5

        async def corrected() -> bool:
            return int(await client.hget(key, governor.process_id) or 0) == governor.holding.slots[key].leased

        await eventually(corrected, seconds=10, what="the slots set right at the first second with nothing waiting")
    finally:
        await governor.close()
        await client.aclose()
