"""Limits on a Sentinel-watched Redis (issue 25 item 3): a failover loses no slot that requests hold.

Two gateway replicas count one key's three concurrency slots in the primary. While three
requests hold them, the sentinels promote the replica. No request fails: a replica that cannot
reach Redis meanwhile counts alone. Once both talk to the new primary, each refuses a fourth
request again, which its own count alone would not (one replica holds two of the three, the
other one): the slots held count there again, even when the new primary lost them (its limits'
keys deleted, as if the last writes were not replicated), set right by the holders' corrections.
When the three end, their slots are given back on the new primary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.gateway import Gateway
from tests.support.limits_replicas import outcome, replica_config
from tests.support.redis_cluster import MASTER_NAME, Watched, redis_sentinels
from tests.support.waiting import eventually


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[Watched]:
    """Asked for before the gateway, so it outlives the gateways' governors (whose close still talks to Redis)."""
    with redis_sentinels(tmp_path) as running:
        yield running


def replica(upstream: FakeUpstream, watched: Watched, tmp_path: Path) -> str:
    nodes = ", ".join(f"'{node}'" for node in watched.nodes)
    sentinel = f"sentinel: {{masterName: {MASTER_NAME}, nodes: [{nodes}]}}"
    return replica_config(upstream, tmp_path, limits="{concurrentRequests: 3}", redis=sentinel)


async def test_slots_held_across_a_sentinel_failover_count_on_the_new_primary(
    watched: Watched, gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    upstream.then(*(Step(body=chat_completion(), gate=gate) for _ in range(3)))  # later requests are answered at once
    config = replica(upstream, watched, tmp_path)
    first, second = await gateway(config, timeout=120), await gateway(config, timeout=120)  # held past a failover
    held = [asyncio.create_task(outcome(client)) for client in (first, first, second)]
    await eventually(lambda: upstream.active == 3, what="three requests holding the key's three slots")
    assert [await outcome(first), await outcome(second)] == [429, 429]

    old = await asyncio.to_thread(watched.fail_over)
    await eventually(lambda: watched.demoted(old), seconds=30, what="the old primary is a replica")
    with watched.server(watched.primary_port()) as primary:  # as if the last writes were lost with the old primary
        lost = primary.keys("gw:lim:*")
        assert lost
        primary.delete(*lost)
    probes: list[int] = []

    async def both_refuse() -> bool:
        answers = [await outcome(first), await outcome(second)]
        probes.extend(answers)
        return answers == [429, 429]

    await eventually(both_refuse, seconds=30, what="both replicas refuse a fourth request, counted on the new primary")
    assert set(probes) <= {200, 429}  # a probe admitted while a replica counted alone was answered, never failed
    with watched.server(watched.primary_port()) as primary:
        assert primary.info("replication")["role"] == "master"
        held_slots = primary.hgetall("gw:lim:{gateway-limits}:slots:key:team-a")
        assert sorted(int(count) for count in held_slots.values()) == [1, 2]  # each replica's, as it holds them
    gate.set()
    assert await asyncio.gather(*held) == [200, 200, 200]

    async def given_back() -> bool:
        return [await outcome(first), await outcome(second)] == [200, 200]

    await eventually(given_back, seconds=30, what="the three slots given back on the new primary")
