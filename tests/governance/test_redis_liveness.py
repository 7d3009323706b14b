"""Concurrency slots on Redis are a process's while it lives: a closed governor's free at once, a killed one's within seconds."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.core.governance import RateLimits
from gateway.governance.redis_script import live_key, slots_key
from tests.support.governance import api_key, holding_replica, limits_config, redis_governor
from tests.support.servers import RedisProcess, flush_redis
from tests.support.waiting import eventually

THREE = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=3)),))

async def in_use(url: str) -> int:
    reader = redis_governor(url, THREE)
    try:
        return int((await reader.usage("a"))["limits"]["concurrency"]["in_use"])
    finally:
        await reader.close()


async def test_a_closed_governors_slots_free_at_once(redis_url: str) -> None:
    await flush_redis(redis_url)
    governor = redis_governor(redis_url, THREE)
    for _ in range(3):
        await governor.admit("a", THREE.routes["fast"], tokens=0)
    assert await in_use(redis_url) == 3
    await governor.close()  # its requests never settled: the process is going
    assert await in_use(redis_url) == 0


async def test_a_killed_replicas_slots_free_within_seconds(redis_url: str) -> None:
    await flush_redis(redis_url)
    async with holding_replica(redis_url, RateLimits(concurrent_requests=3)) as replica:
        survivor = redis_governor(redis_url, THREE)
        try:
            assert await in_use(redis_url) == 2
            await survivor.admit("a", THREE.routes["fast"], tokens=0)
            with pytest.raises(Exception, match="concurrent"):
                await survivor.admit("a", THREE.routes["fast"], tokens=0)
            replica.kill()
            await replica.wait()

            async def freed() -> bool:
                return await in_use(redis_url) == 1  # the survivor's own slot alone

            await eventually(freed, seconds=30, what="the killed replica's slots freed by its liveness record's end")
            await survivor.admit("a", THREE.routes["fast"], tokens=0)
        finally:
            await survivor.close()


async def test_a_live_governor_renews_its_liveness_record(redis_url: str) -> None:
    await flush_redis(redis_url)
    governor = redis_governor(redis_url, THREE)
    client = aioredis.Redis.from_url(redis_url)
    try:
        await governor.admit("a", THREE.routes["fast"], tokens=0)
        record = live_key(governor.process_id)
        lowest = await client.pttl(record)
        assert 0 < lowest <= 3000

        async def renewed() -> bool:  # left alone, its time to live only falls, then it is gone
            nonlocal lowest
            left = int(await client.pttl(record))
            lowest = min(lowest, left)
            return left > lowest + 200

        await eventually(renewed, what="the liveness record renewed while the governor lives")
    finally:
        await governor.close()
        await client.aclose()


async def test_a_count_gone_wrong_is_set_right_by_the_next_renewal(redis_url: str) -> None:
    await flush_redis(redis_url)
    governor = redis_governor(redis_url, THREE)
    client = aioredis.Redis.from_url(redis_url)
    try:
        await governor.admit("a", THREE.routes["fast"], tokens=0)
        # as if a reply were lost after its script took two more slots
        await client.hincrby(slots_key("key", "a"), governor.process_id, 2)
        assert await in_use(redis_url) == 3

        async def corrected() -> bool:
            return await in_use(redis_url) == 1

        await eventually(corrected, what="the process's slots set back to the one it holds")
    finally:
        await governor.close()
        await client.aclose()


async def test_slots_held_when_redis_restarted_empty_count_again_within_seconds(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path)
    server.start()
    governor = redis_governor(server.url, THREE)
    try:
        for _ in range(2):
            await governor.admit("a", THREE.routes["fast"], tokens=0)
        server.stop()
        server.start()  # no data kept
        assert await in_use(server.url) == 0

        async def restored() -> bool:
            return await in_use(server.url) == 2

        await eventually(restored, what="the requests in flight counted again")
    finally:
        await governor.close()
        server.stop()
