"""Limits shared by two gateway replicas through one real Redis (issue 25 item 3), under concurrency.

Two gateway applications (two replicas, each its own governor) count one key's limits in one
redis-server: however the requests are spread and however many arrive at once, the two together
never admit more than the key's limit, and each refused request reaches no upstream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.gateway import Gateway
from tests.support.limits_replicas import outcome, replica_config
from tests.support.processes import free_port
from tests.support.servers import flush_redis, redis_server
from tests.support.waiting import eventually

REFILL_SECONDS = 10  # requestsPerMinute 6: one request comes back every 10 s


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of this module's own (flushed by each test)."""
    with redis_server(tmp_path_factory.mktemp("redis-limits")) as server:
        yield server.url


def replica(upstream: FakeUpstream, url: str, tmp_path: Path, limits: str) -> str:
    return replica_config(upstream, tmp_path, limits=limits, redis=f'url: "{url}"')


async def test_two_replicas_together_admit_no_more_requests_than_the_limit(
    gateway: Gateway, upstream: FakeUpstream, redis_url: str, tmp_path: Path
) -> None:
    await flush_redis(redis_url)
    config = replica(upstream, redis_url, tmp_path, "{requestsPerMinute: 6}")
    first, second = await gateway(config), await gateway(config)
    started = time.monotonic()
    statuses = await asyncio.gather(*(outcome(client) for _ in range(12) for client in (first, second)))
    came_back = int((time.monotonic() - started) // REFILL_SECONDS)  # requests refilled while the burst lasted
    admitted = statuses.count(200)
    assert 6 <= admitted <= 6 + came_back, statuses
    assert statuses.count(429) == len(statuses) - admitted
    assert upstream.calls == admitted


async def test_two_replicas_together_hold_no_more_slots_than_the_concurrency_limit(
    gateway: Gateway, upstream: FakeUpstream, redis_url: str, tmp_path: Path
) -> None:
    """Three slots: while the upstream holds the admitted, every other request of either replica is refused."""
    await flush_redis(redis_url)
    gate = asyncio.Event()
    upstream.default = Step(body=chat_completion(), gate=gate)
    config = replica(upstream, redis_url, tmp_path, "{concurrentRequests: 3}")
    first, second = await gateway(config), await gateway(config)
    calls = [asyncio.create_task(outcome(client)) for _ in range(8) for client in (first, second)]
    # every request accounted for: answered (refused), or waiting at the gate (admitted)
    await eventually(lambda: sum(call.done() for call in calls) + upstream.active == len(calls), what="all answered or held")
    assert upstream.active == 3
    gate.set()
    statuses = await asyncio.gather(*calls)
    assert (statuses.count(200), statuses.count(429)) == (3, 13)
    assert await outcome(first) == 200 and await outcome(second) == 200  # every slot was given back


async def test_an_unreachable_redis_fails_no_request_and_limits_act_per_process(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    client = await gateway(replica(upstream, nowhere, tmp_path, "{requestsPerMinute: 1}"))
    assert await outcome(client) == 200
    assert await outcome(client) == 429  # counted in this process meanwhile
    assert upstream.calls == 1
