"""open_governor: none when nothing is limited, local or Redis as limits.store (or memory) says, counts carried over a reload."""

from __future__ import annotations

import dataclasses

from gateway.core.governance import LimitStoreKind, RateLimits
from gateway.core.memory.settings import StoreKind
from gateway.core.settings import limit_store
from gateway.governance.admission import Unlimited
from gateway.governance.build import open_governor
from gateway.governance.local import LocalGovernor
from gateway.governance.redis import RedisGovernor
from gateway.governance.stored_keys import StoredKey, StoredKeys
from tests.support.governance import api_key, limits_config
from tests.support.servers import flush_redis

SIXTY = RateLimits(requests_per_minute=60)


def test_nothing_limited_needs_no_governor() -> None:
    assert isinstance(open_governor(limits_config(keys=(api_key("a"),))), Unlimited)


def test_admin_keys_may_issue_limited_keys_so_they_need_one() -> None:
    stored = StoredKeys()
    governor = open_governor(limits_config(admins=("root",)), stored=stored)
    assert isinstance(governor, LocalGovernor)
    stored.by_name = {"issued": StoredKey(name="issued", sha256=b"x", limits=SIXTY)}
    assert governor.policy("issued").limits == SIXTY


def test_the_store_follows_limits_store_else_memory() -> None:
    config = limits_config(defaults=SIXTY)
    assert limit_store(config) is LimitStoreKind.LOCAL
    on_redis = dataclasses.replace(config, memory=dataclasses.replace(config.memory, store=StoreKind.REDIS))
    assert limit_store(on_redis) is LimitStoreKind.REDIS
    told = dataclasses.replace(on_redis, limits=dataclasses.replace(on_redis.limits, store=LimitStoreKind.LOCAL))
    assert limit_store(told) is LimitStoreKind.LOCAL


async def test_a_local_successor_takes_the_counts() -> None:
    config = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=2)),))
    first = open_governor(config)
    assert isinstance(first, LocalGovernor)
    await first.admit("a", config.routes["fast"], tokens=0)
    successor = open_governor(config, previous=first)
    assert isinstance(successor, LocalGovernor) and successor is not first
    assert (await successor.usage("a"))["limits"]["requests"]["remaining"] == 1


async def test_a_redis_successor_keeps_the_process_id_and_its_slots(redis_url: str) -> None:
    await flush_redis(redis_url)
    config = limits_config(keys=(api_key("a", limits=RateLimits(concurrent_requests=2)),),
                           store=LimitStoreKind.REDIS, url=redis_url)
    first = open_governor(config)
    assert isinstance(first, RedisGovernor)
    in_flight = await first.admit("a", config.routes["fast"], tokens=0)
    assert in_flight is not None
    successor = open_governor(config, previous=first)
    another = open_governor(config)  # another replica's view
    try:
        assert isinstance(successor, RedisGovernor) and successor.process_id == first.process_id
        await first.close()  # the reload is done with it: its in-flight request still holds its slot
        assert (await another.usage("a"))["limits"]["concurrency"]["in_use"] == 1
        successor.settle(in_flight, tokens=None, cost_usd=0.0)
        await successor.admit("a", config.routes["fast"], tokens=0)
        await successor.admit("a", config.routes["fast"], tokens=0)
    finally:
        await successor.close()
        await another.close()


async def test_a_successor_closed_before_it_served_leaves_the_serving_governor_as_it_was(redis_url: str) -> None:
    """A reload that fails once open_governor made its governor (its app fails to set up, or SIGTERM) closes it."""
    await flush_redis(redis_url)
    config = limits_config(keys=(api_key("a", limits=RateLimits(requests_per_minute=600, concurrent_requests=100)),),
                           store=LimitStoreKind.REDIS, url=redis_url)
    serving = open_governor(config)
    assert isinstance(serving, RedisGovernor)
    in_flight = [await serving.admit("a", config.routes["fast"], tokens=0) for _ in range(5)]
    another = open_governor(config)  # another replica's view
    try:
        failed = open_governor(config, previous=serving)
        await failed.close()
        assert all(lease.open for lease in serving.holding.all())
        assert (await another.usage("a"))["limits"]["concurrency"]["in_use"] >= 5  # in flight (and leased, till idle)
        successor = open_governor(config, previous=serving)  # the next reload, committed
        await serving.close()
        assert (await another.usage("a"))["limits"]["concurrency"]["in_use"] >= 5
        for admission in in_flight:
            assert admission is not None
            successor.settle(admission, tokens=None, cost_usd=0.0)
        await successor.close()  # the last: every lease back, the process id retired
        assert (await another.usage("a"))["limits"]["concurrency"]["in_use"] == 0
    finally:
        await another.close()
