"""RedisGovernor on a real Redis Cluster: one hash tag, one slot, one script per call; two replicas share the limits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from gateway.core.errors import RateLimitedError
from gateway.core.governance import RateLimits
from gateway.governance.admission import Admission
from gateway.governance.local import Taken
from gateway.governance.redis import RedisGovernor
from gateway.governance.redis_script import bucket_key, slots_key
from tests.support.governance import api_key, limits_config, redis_governor
from tests.support.redis_cluster import Cluster, redis_cluster
from tests.support.waiting import eventually


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


async def test_two_replicas_share_the_limits_on_a_cluster(cluster: Cluster) -> None:
    limits = RateLimits(requests_per_minute=12, concurrent_requests=10)
    config = limits_config(keys=(api_key("a", limits=limits), api_key("b", limits=limits)), cluster=True)
    replicas = tuple(redis_governor(cluster.url, config, cluster=True) for _ in range(2))
    route = config.routes["fast"]

    async def attempt(governor: RedisGovernor, tenant: str) -> Admission | None:
        try:
            return await governor.admit(tenant, route, tokens=0)
        except RateLimitedError:
            return None

    try:
        held = await asyncio.gather(*(attempt(governor, "a") for _ in range(50) for governor in replicas))
        let_in = [admission for admission in held if admission is not None]
        assert len(let_in) == 10  # the slots, before the 12 requests a minute
        assert not any(isinstance(admission.handle, Taken) for admission in let_in)  # all through the cluster
        for admission in let_in:
            replicas[1].settle(admission, tokens=None, cost_usd=0.0)
        more = await asyncio.gather(*(attempt(governor, "a") for _ in range(50) for governor in replicas))
        assert len([admission for admission in more if admission is not None]) == 2  # the requests' 12

        async def two_in_use() -> bool:  # once the slots leased and unused are given back, either replica sees it
            return bool((await replicas[0].usage("a"))["limits"]["concurrency"]["in_use"] == 2)

        await eventually(two_in_use, what="the idle slots given back")
        assert len({cluster.owner(slots_key("key", "a")), cluster.owner(slots_key("route", "fast"))}) == 1
    finally:
        for governor in replicas:
            await governor.close()


async def test_two_leasing_replicas_on_a_cluster_never_let_more_through_than_the_limit(cluster: Cluster) -> None:
    # key "c": the cluster is the module's, and "a" spent its requests in the test above
    config = limits_config(keys=(api_key("c", limits=RateLimits(requests_per_minute=600)),), cluster=True)
    replicas = tuple(redis_governor(cluster.url, config, cluster=True) for _ in range(2))
    route = config.routes["fast"]

    async def attempt(governor: RedisGovernor) -> Admission | None:
        try:
            return await governor.admit("c", route, tokens=0)
        except RateLimitedError:
            return None

    started, admitted = time.monotonic(), 0
    try:
        for _ in range(4):  # 1,200 asked, 600 a minute
            held = await asyncio.gather(*(attempt(governor) for _ in range(150) for governor in replicas))
            admitted += len([admission for admission in held if admission is not None])
        assert 600 - 2 * 60 <= admitted <= 600 + 10 * (time.monotonic() - started) + 1  # 10 a second come back
        assert sum(governor.holding.buckets[bucket_key("key", "c", "requests")].left for governor in replicas) <= 120
    finally:
        for governor in replicas:
            await governor.close()


async def test_the_limits_slot_moved_to_another_node_under_load_fails_no_admission(cluster: Cluster) -> None:
    """A reshard moves the one slot every limit lives in while two replicas admit: none fails, and once it is done
    both count on its new owner again, with nothing of the limits left behind on the old one."""
    config = limits_config(keys=(api_key("m", limits=RateLimits(requests_per_minute=100_000, concurrent_requests=8)),),
                           cluster=True)  # fmt: skip  # under ten slots none is leased: a call an admission
    replicas = tuple(redis_governor(cluster.url, config, cluster=True) for _ in range(2))
    route = config.routes["fast"]
    key = slots_key("key", "m")
    moved = asyncio.Event()
    admitted: list[Admission] = []

    async def admit_until_moved(governor: RedisGovernor) -> None:
        while not moved.is_set():
            admission = await governor.admit("m", route, tokens=0)
            assert admission is not None
            admitted.append(admission)
            governor.settle(admission, tokens=0, cost_usd=0.0)
            await asyncio.sleep(0.001)

    try:
        load = [asyncio.create_task(admit_until_moved(governor)) for governor in replicas]
        await eventually(lambda: len(admitted) >= 20, what="admissions under way")
        source = cluster.owner(key)
        target = next(port for port in cluster.ports if port != source)
        await asyncio.to_thread(cluster.move_slot, key, target)
        await eventually(lambda: len(admitted) >= 200, what="admissions after the move")
        moved.set()
        await asyncio.gather(*load)

        async def both_count_on_the_cluster() -> bool:  # a replica whose call gave up mid-move counts alone a while
            after = [await governor.admit("m", route, tokens=0) for governor in replicas]
            for governor, admission in zip(replicas, after, strict=True):
                if admission is not None:
                    governor.settle(admission, tokens=0, cost_usd=0.0)
            return all(admission is not None and not isinstance(admission.handle, Taken) for admission in after)

        await eventually(both_count_on_the_cluster, seconds=20, what="both replicas admitting through the cluster again")
        with cluster.node(source) as old, cluster.node(target) as new:
            assert old.keys("gw:lim:*") == []
            assert new.exists(bucket_key("key", "m", "requests"))
    finally:
        for governor in replicas:
            await governor.close()
