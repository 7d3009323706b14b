"""A lease on a real Redis from taking to giving back: idle leases return, debts are charged, a close or a kill strands
at most the lease, and a reload's successor keeps it."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from gateway.core.errors import RateLimitedError
from gateway.core.governance import LimitStoreKind, RateLimits
from gateway.governance.admission import Admission
from gateway.governance.build import open_governor
from gateway.governance.redis import RedisGovernor
from gateway.governance.redis_script import bucket_key, slots_key
from tests.support.governance import api_key, holding_replica, limits_config, redis_governor
from tests.support.redis_monitor import watched
from tests.support.waiting import eventually

REQUESTS = bucket_key("key", "a", "requests")
TOKENS = bucket_key("key", "a", "tokens")
SLOTS = slots_key("key", "a")
LIMITS = RateLimits(requests_per_minute=600, tokens_per_minute=6000, concurrent_requests=100)
CONFIG = limits_config(keys=(api_key("a", limits=LIMITS),))
FAST = CONFIG.routes["fast"]


async def stored(client: aioredis.Redis, key: str) -> tuple[float, int]:
    """A bucket's level and the moment (Redis ms) it was last written."""
    level, at = await client.hmget(key, "l", "at")
    return float(level), int(at)


async def admitted(governor: RedisGovernor, tokens: int = 0) -> Admission:
    admission = await governor.admit("a", FAST, tokens=tokens)
    assert admission is not None
    return admission




async def test_a_bucket_lease_unused_for_the_idle_time_goes_back_to_redis(redis_url: str, client: aioredis.Redis) -> None:
    governor = redis_governor(redis_url, CONFIG)
    try:
        await admitted(governor)
        assert (await stored(client, REQUESTS))[0] == 600 - 1 - 60  # the request, and a lease of a tenth
        assert governor.holding.buckets[REQUESTS].left == 60

        async def given_back() -> bool:
            return (await stored(client, REQUESTS))[0] >= 599  # nothing but the lease's return writes it

        await eventually(given_back, what="the idle lease given back")
        assert governor.holding.buckets[REQUESTS].left == 0
    finally:
        await governor.close()


async def test_idle_slots_go_back_and_another_replica_can_hold_them_all(redis_url: str, client: aioredis.Redis) -> None:
    first, second = redis_governor(redis_url, CONFIG), redis_governor(redis_url, CONFIG)
    try:
        admission = await admitted(first)
        assert int(await client.hget(SLOTS, first.process_id) or 0) == 11  # 1, and a tenth of 100 leased
        first.settle(admission, tokens=None, cost_usd=0.0)  # its slot stays leased

        async def field_gone() -> bool:
            return await client.hget(SLOTS, first.process_id) is None

        await eventually(field_gone, what="the idle slots given back")
        held = await asyncio.gather(*(second.admit("a", FAST, tokens=0) for _ in range(150)), return_exceptions=True)
        assert len([admission for admission in held if isinstance(admission, Admission)]) == 100
    finally:
        await first.close()
        await second.close()


async def test_tokens_used_past_the_reservation_are_charged_as_a_debt(redis_url: str, client: aioredis.Redis) -> None:
    governor = redis_governor(redis_url, CONFIG)
    try:
        admission = await admitted(governor, tokens=100)
        lease = governor.holding.buckets[TOKENS]
        assert lease.left == 600  # a tenth of 6,000 leased besides the 100
        before, at = await stored(client, TOKENS)
        governor.settle(admission, tokens=1000, cost_usd=0.0)
        assert lease.left == -300  # 600 + 100 reserved - 1,000 used

        async def charged() -> bool:
            return (await stored(client, TOKENS))[1] != at

        await eventually(charged, what="the debt charged by the flush of idle leases")
        after, later = await stored(client, TOKENS)
        assert after == pytest.approx(before + (later - at) * 6000 / 60000 - 300)
        assert lease.left == 0
    finally:
        await governor.close()


async def test_a_debt_is_charged_by_the_next_call_that_needs_the_bucket(redis_url: str, client: aioredis.Redis) -> None:
    governor = redis_governor(redis_url, CONFIG)
    try:
        governor.settle(await admitted(governor, tokens=100), tokens=1000, cost_usd=0.0)
        before, at = await stored(client, TOKENS)
        await admitted(governor, tokens=100)  # the lease owes 300: Redis is asked for the 100 and the debt
        after, later = await stored(client, TOKENS)
        granted = governor.holding.buckets[TOKENS].left
        assert after == pytest.approx(before + (later - at) * 6000 / 60000 - 300 - 100 - granted)
    finally:
        await governor.close()


async def test_a_debt_is_charged_even_when_the_request_that_needs_the_bucket_is_refused(redis_url: str) -> None:
    governor = redis_governor(redis_url, CONFIG)
    try:
        governor.settle(await admitted(governor, tokens=100), tokens=6000, cost_usd=0.0)  # 5,300 owed
        with pytest.raises(RateLimitedError) as refused:
            await admitted(governor, tokens=100)  # the 5,300 Redis had left pay the debt: none for this one
        assert refused.value.type == "tokens"
        assert governor.holding.buckets[TOKENS].left == 0
    finally:
        await governor.close()


async def test_a_closed_governor_gives_every_lease_back(redis_url: str, client: aioredis.Redis) -> None:
    governor = redis_governor(redis_url, CONFIG)
    await admitted(governor, tokens=100)  # and never settled: the process is going
    assert (await stored(client, REQUESTS))[0] < 600 - 60
    await governor.close()
    assert (await stored(client, REQUESTS))[0] >= 599
    assert (await stored(client, TOKENS))[0] >= 5900  # its request's 100 still taken
    reader = redis_governor(redis_url, CONFIG)
    try:  # the slot of its request in flight is its retired process's: no longer counted
        assert (await reader.usage("a"))["limits"]["concurrency"]["in_use"] == 0
    finally:
        await reader.close()


async def test_a_reloads_successor_admits_from_the_leases_it_takes_over(redis_url: str, client: aioredis.Redis) -> None:
    """Requests alone (no slot, whose liveness record the successor would renew anyway): it gives them back too."""
    sixty = RateLimits(requests_per_minute=600)
    config = limits_config(keys=(api_key("a", limits=sixty),), store=LimitStoreKind.REDIS, url=redis_url)
    previous = open_governor(config)
    assert isinstance(previous, RedisGovernor)
    await previous.admit("a", config.routes["fast"], tokens=0)
    successor = open_governor(config, previous=previous)
    await previous.close()  # handed over: its leases stay the process's
    try:
        async with watched(redis_url) as seen:
            assert await successor.admit("a", config.routes["fast"], tokens=0) is not None
        assert seen.sent_naming("EVALSHA") == []
        assert (await stored(client, REQUESTS))[0] < 600 - 50

        async def given_back() -> bool:
            return (await stored(client, REQUESTS))[0] >= 598

        await eventually(given_back, what="the successor gives back what it took over, once idle")
    finally:
        await successor.close()


async def test_a_killed_replica_strands_at_most_its_lease_and_its_slots_free(
    redis_url: str, client: aioredis.Redis
) -> None:
    limits = RateLimits(requests_per_minute=600, concurrent_requests=100)  # its first request leases
    survivor = redis_governor(redis_url, CONFIG)
    try:
        async with holding_replica(redis_url, limits) as replica:
            replica.kill()
            await replica.wait()

        async def slots_freed() -> bool:
            return bool((await survivor.usage("a"))["limits"]["concurrency"]["in_use"] == 0)

        await eventually(slots_freed, seconds=30, what="the killed replica's slots freed by its liveness record's end")
        # what it took and its lease (a tenth) at most, coming back as the bucket refills
        assert (await stored(client, REQUESTS))[0] == 600 - 1 - 60
        assert (await survivor.usage("a"))["limits"]["requests"]["remaining"] >= 600 - 1 - 60
    finally:
        await survivor.close()
