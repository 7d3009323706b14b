"""Two replicas leasing from one real Redis, hundreds of admissions at once: together never over a limit, to its end."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
import redis.asyncio as aioredis

from gateway.core.errors import RateLimitedError
from gateway.core.governance import RateLimits
from gateway.core.settings import Config
from gateway.governance.admission import Admission
from gateway.governance.local import Taken
from gateway.governance.policies import Policies
from gateway.governance.redis import RedisGovernor
from gateway.governance.redis_script import bucket_key, slots_key
from tests.support.governance import api_key, limits_config, redis_governor
from tests.support.servers import flush_redis

WAVES, EACH = 5, 150  # per wave, admissions through each replica at once


async def wave(replicas: tuple[RedisGovernor, ...], config: Config, *, tokens: int) -> list[Admission]:
    """EACH admissions of "a" on fast through every replica at once; those let in."""
    return [admission for _, admission in await wave_through(replicas, config, tokens=tokens)]


async def wave_through(
    replicas: tuple[RedisGovernor, ...], config: Config, *, tokens: int
) -> list[tuple[RedisGovernor, Admission]]:
    """As `wave`, each admission with the replica that let it in (and settles it, as a gateway's does)."""

    async def attempt(governor: RedisGovernor) -> tuple[RedisGovernor, Admission | None]:
        try:
            return governor, await governor.admit("a", config.routes["fast"], tokens=tokens)
        except RateLimitedError:
            return governor, None

    held = await asyncio.gather(*(attempt(governor) for _ in range(EACH) for governor in replicas))
    let_in = [(governor, admission) for governor, admission in held if admission is not None]
    assert not any(isinstance(admission.handle, Taken) for _, admission in let_in)  # none counted apart
    return let_in


@pytest.mark.parametrize(
    ("limited", "tokens"),
    [("requests", 0), ("tokens", 50), ("route", 0)],
)
async def test_two_leasing_replicas_never_let_more_through_than_the_limit(
    redis_url: str, limited: str, tokens: int
) -> None:
    """600 a minute (tokens: 30,000 at 50 a request), 1,500 asked in waves: at most 600 and what refilled meanwhile."""
    await flush_redis(redis_url)
    if limited == "requests":
        config = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=600)),))
    elif limited == "tokens":
        config = limits_config(keys=(api_key("a", limits=RateLimits(tokens_per_minute=30_000)),))
    else:
        config = limits_config(keys=(api_key("a"),), routes={"fast": RateLimits(requests_per_minute=600)})
    replicas = redis_governor(redis_url, config), redis_governor(redis_url, config)
    started = time.monotonic()
    admitted = 0
    try:
        for _ in range(WAVES):
            let_in = await wave(replicas, config, tokens=tokens)
            admitted += len(let_in)
            for admission in let_in:  # used what they reserved: nothing comes back
                replicas[0].settle(admission, tokens=tokens, cost_usd=0.0)
        refilled = 10 * (time.monotonic() - started) + 1  # 10 a second, and the one under way
        assert admitted <= 600 + refilled
        assert admitted >= 600 - 2 * 60  # a replica holds back at most a tenth in its lease
    finally:
        for governor in replicas:
            await governor.close()


async def test_two_leasing_replicas_never_hold_more_slots_than_the_limit(redis_url: str) -> None:
    """100 slots, waves of 300 asked while some end: in flight and leased, never more than 100 between them.

    Each replica corrects its slots ten times a second meanwhile (renewing every 0.1 s, as it gives
    back leases idle that long; its liveness record lasts the usual 3 s), with
    settlements waiting and admissions going in the same calls. An admission is settled by the
    replica that let it in, as in a gateway: each configuration's middleware settles with its own
    governor.
    """
    await flush_redis(redis_url)
    config = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=100)),))
    replicas = tuple(redis_governor(redis_url, config, idle_seconds=0.1) for _ in range(2))
    client = aioredis.Redis.from_url(redis_url)
    rng = random.Random(25)
    in_flight: list[tuple[RedisGovernor, Admission]] = []
    try:
        for round_ in range(WAVES * 3):
            in_flight += await wave_through(replicas, config, tokens=0)
            assert len(in_flight) <= 100
            if round_ == 0:
                assert len(in_flight) == 100  # to the last slot: leases shrink as the limit runs out
            fields = await client.hgetall(slots_key("key", "a"))
            assert sum(int(count) for count in fields.values()) <= 100  # leased, in flight or not
            rng.shuffle(in_flight)
            ending = rng.randint(10, 60)
            for governor, admission in in_flight[:ending]:
                governor.settle(admission, tokens=None, cost_usd=0.0)
            in_flight = in_flight[ending:]
            await asyncio.sleep(rng.uniform(0, 0.1))  # renewals come between waves too
    finally:
        for governor in replicas:
            await governor.close()
        await client.aclose()


async def test_a_lowered_concurrency_limit_holds_across_replicas_at_once(redis_url: str) -> None:
    """40 slots, each replica with 2 in flight and 4 more leased; lowered to 10: together never more than 10 in flight."""
    await flush_redis(redis_url)
    config = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=40)),))
    replicas = redis_governor(redis_url, config), redis_governor(redis_url, config)
    client = aioredis.Redis.from_url(redis_url)
    try:
        for governor in replicas:
            let_in = [await governor.admit("a", config.routes["fast"], tokens=0) for _ in range(10)]
            for admission in let_in[2:]:
                assert admission is not None
                governor.settle(admission, tokens=None, cost_usd=0.0)
            assert (governor.holding.slots[slots_key("key", "a")].in_flight,
                    governor.holding.slots[slots_key("key", "a")].leased) == (2, 6)  # fmt: skip
        lowered = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=10)),))
        for governor in replicas:
            governor.policies = Policies(lowered)
        let_in = await wave(replicas, lowered, tokens=0)
        assert 0 < 4 + len(let_in) <= 10
        fields = await client.hgetall(slots_key("key", "a"))
        assert sum(int(count) for count in fields.values()) <= 10
    finally:
        for governor in replicas:
            await governor.close()
        await client.aclose()


async def test_a_lowered_requests_limit_holds_across_replicas_at_once(redis_url: str) -> None:
    """600 a minute, each replica holding a lease of 60; lowered to 60: together never more than 60 (and its refill)."""
    await flush_redis(redis_url)
    config = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=600)),))
    replicas = redis_governor(redis_url, config), redis_governor(redis_url, config)
    try:
        for governor in replicas:
            await governor.admit("a", config.routes["fast"], tokens=0)
            assert governor.holding.buckets[bucket_key("key", "a", "requests")].left == 60
        lowered = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=60)),))
        started = time.monotonic()
        for governor in replicas:
            governor.policies = Policies(lowered)
        let_in = await wave(replicas, lowered, tokens=0)
        assert len(let_in) <= 60 + (time.monotonic() - started) + 1  # 1 a second refills, and the one under way
    finally:
        for governor in replicas:
            await governor.close()
