"""A Redis outage that outlives every replica's liveness record passes no live replica's lock to another.

Replica A holds a conversation mid-turn (its answer held upstream) when redis-server stops for
longer than a record's life and comes back from its append-only file: A's lock is there, A's
record is gone. Replica B, whose own renewals failed meanwhile, then asks for the conversation.
A is stopped (SIGSTOP) until B has found the lock held twice, so B could have judged A by its
missing record before A renewed it (A renews within a second of Redis' return, the window this
test makes certain). B must wait for A: A's turn stores, and B's comes after it.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.memory.redis_locks import LIVE_MS, LIVE_PREFIX
from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.memory_turns import a, stored, u
from tests.support.processes import free_port, spawn_gateway, stopped_at_exit, wait_ready
from tests.support.redis_monitor import Seen, watched
from tests.support.redis_replicas import ask, client_of, replica_config
from tests.support.servers import RedisProcess, redis_server
from tests.support.waiting import eventually

# How long redis-server is away: longer than a liveness record lives. The outage is what the test
# is about, not a wait for something to happen.
OUTAGE_SECONDS = LIVE_MS / 1000 + 0.5
PATIENT = 30  # seconds: B's lock wait and the SDK's timeout, far beyond what the turns take


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    with redis_server(tmp_path, durable=True) as server:
        yield server


async def live_records(redis: RedisProcess) -> list[bytes]:
    client = aioredis.Redis.from_url(redis.url, socket_timeout=PATIENT, socket_connect_timeout=PATIENT)
    try:
        return sorted(await client.keys(f"{LIVE_PREFIX}*"))
    finally:
        await client.aclose()


def lock_reads(seen: Seen, memory_id: str) -> int:
    """How many times scripts read the lock of conversation `memory_id` (TAKE reads it first)."""
    return len(seen.scripted_naming(f"{memory_id}}}:lock"))


def asked_whether_alive(seen: Seen) -> bool:
    """Whether a replica asked if another lives (it reads the other's liveness record)."""
    return any(command.startswith("EXISTS") for command in seen.sent_naming(LIVE_PREFIX))


async def test_a_live_replicas_lock_outlives_a_redis_outage_longer_than_its_record(
    tmp_path: Path, upstream: FakeUpstream, redis: RedisProcess
) -> None:
    config = replica_config(tmp_path / "gateway.yaml", upstream, redis, lock_timeout=PATIENT)
    release = asyncio.Event()
    upstream.then(Step(body=chat_completion("held answer"), gate=release))
    upstream.default = Step(body=chat_completion("answer"))
    with stopped_at_exit() as processes:
        ports = [free_port(), free_port()]
        for port in ports:
            processes.append(spawn_gateway(config, port, output=subprocess.DEVNULL))
        for port, process in zip(ports, processes, strict=True):
            await wait_ready(port, process)
        holder, waiter = client_of(ports[0], timeout=PATIENT), client_of(ports[1], timeout=PATIENT)
        try:
            held = asyncio.create_task(ask(holder, "conv", "first"))
            await eventually(lambda: upstream.calls == 1, what="A's turn held upstream")
            [holders_record] = await live_records(redis)
            assert await ask(waiter, "warm-up", "hello") == "answer"  # B renews a record of its own too
            redis.kill()
            processes[0].send_signal(signal.SIGSTOP)
            await asyncio.sleep(OUTAGE_SECONDS)
            redis.start()
            assert holders_record not in await live_records(redis), "the outage was too short to end A's record"
            async with watched(redis.url) as seen:
                waiting = asyncio.create_task(ask(waiter, "conv", "second"))
                await eventually(lambda: lock_reads(seen, "conv") >= 2, seconds=PATIENT, what="B finding it held twice")
                processes[0].send_signal(signal.SIGCONT)
                await eventually(lambda: asked_whether_alive(seen), seconds=PATIENT, what="B asking whether A lives")
                release.set()
                assert await held == "held answer"  # without the fix: 503 memory_lock_lost, B took the lock over
                assert await waiting == "answer"
            status, body = await stored(waiter, "conv")
            assert status == 200
            assert body["messages"] == [u("first"), a("held answer"), u("second"), a("answer")]
        finally:
            release.set()
            processes[0].send_signal(signal.SIGCONT)
            await holder.close()
            await waiter.close()
