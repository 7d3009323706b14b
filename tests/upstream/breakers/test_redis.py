"""gateway.upstream.breakers.redis: the board shared through Redis, cheap while healthy, never in a call's way."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.core.breaker import CLOSED, OPEN, PROBE, REFUSED
from gateway.core.routing import Outcome
from gateway.core.tree import Fallback
from gateway.upstream.breakers.redis import RedisBreakers
from tests.support.breakers import FAIL, FAST, OK, ORDER, PATIENT, Clock, Heard, cooled, note, route, t
from tests.support.servers import RedisProcess, flush_redis
from tests.support.silent_server import silent_server


async def evalsha_calls(url: str) -> int:
    client = aioredis.Redis.from_url(url)
    try:
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def test_redis_healthy_calls_cost_no_round_trip_and_a_failure_costs_one(redis_url: str) -> None:
    await flush_redis(redis_url)
    a = t("a", FAST)
    r = route(a)
    clock = Clock()
    board = RedisBreakers({"r": r}, redis_url, clock=clock, timeout=PATIENT)
    try:
        await board.snapshot()  # one fresh read: the cached view is good for the ttl
        before = await evalsha_calls(redis_url)
        for _ in range(200):
            assert board.health(r) is None
            assert board.record(a, OK) is None
            assert board.record(a, Outcome(400)) is None  # not a failure: as cheap as a success
        assert await evalsha_calls(redis_url) == before
        await note(board, a, FAIL)
        assert await evalsha_calls(redis_url) == before + 1
        await note(board, a, OK)  # ends a run of failures: the shared count must hear it
        await note(board, a, OK)
        assert await evalsha_calls(redis_url) == before + 2
        [health] = (await board.snapshot())["r"]
        assert (health.calls, health.failures, health.consecutive_failures) == (403, 1, 0)  # the successes were handed over
    finally:
        await board.close()


async def test_redis_state_is_shared_by_every_process(redis_url: str) -> None:
    await flush_redis(redis_url)
    a, b = t("a", FAST), t("b", FAST)
    r = route(Fallback("f", 1, (a, b)))
    heard = Heard()
    clocks = {1: Clock(), 2: Clock()}  # each process's clock: moved past the 1 s ttl of its cached view
    first = RedisBreakers({"r": r}, redis_url, clock=clocks[1], timeout=PATIENT)
    second = RedisBreakers({"r": r}, redis_url, clock=clocks[2], listener=heard, timeout=PATIENT)
    boards = {1: first, 2: second}

    async def reread(number: int) -> None:
        clocks[number].now += 1.1
        boards[number].health(r)  # past the ttl: reads the shared state, in the background
        await boards[number].settled()

    try:
        await note(first, a, FAIL)
        await note(second, a, FAIL)  # failures in a row, counted across processes
        assert not second.available(a) and heard.states == [("a", OPEN)]
        assert first.available(a) and first.health(r) is None  # its cached view is still fresh
        await reread(1)
        assert not first.available(a) and first.health(r) is first
        await cooled()  # Redis' clock decides when the cooldown is over
        admitted = await asyncio.gather(first.admit(a), second.admit(a), first.admit(a), second.admit(a))
        assert sorted(admitted, key=ORDER.index) == [PROBE, REFUSED, REFUSED, REFUSED]  # one trial in all processes
        prober, other = (1, 2) if PROBE in (admitted[0], admitted[2]) else (2, 1)
        await note(boards[prober], a, OK, probe=True)
        assert boards[prober].health(r) is None
        await reread(other)
        assert boards[other].available(a) and boards[other].health(r) is None
        assert heard.states[-1] == ("a", CLOSED)
    finally:
        await first.close()
        await second.close()


async def test_redis_unreachable_never_fails_a_call_and_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisProcess(tmp_path)  # its port, not yet listening
    a = t("a", FAST)
    r = route(a)
    clock = Clock()
    board = RedisBreakers({"r": r}, server.url, clock=clock, retry_seconds=5)
    try:
        with caplog.at_level(logging.WARNING, logger="gateway.breakers"):
            await note(board, a, FAIL)
            await note(board, a, FAIL)  # decided here, on this process's view
            assert not board.available(a) and board.health(r) is not None
            clock.now += FAST.cooldown_seconds
            assert await board.admit(a) == PROBE
            await note(board, a, OK, probe=True)
            assert board.available(a)
            for _ in range(5):
                clock.now += 6  # past retry_seconds: Redis is tried again, and still not there
                await note(board, a, FAIL)
                await board.snapshot()
        lost = [r for r in caplog.records if "unreachable" in r.getMessage()]
        assert len(lost) == 1
        server.start()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="gateway.breakers"):
            clock.now += 6
            await board.snapshot()
        assert [r.getMessage() for r in caplog.records if "reachable again" in r.getMessage()]
    finally:
        await board.close()
        server.stop()


async def test_a_snapshot_stops_reading_once_redis_did_not_answer() -> None:
    """/v1/gateway/health on a Redis that hangs waits for one read, not one a route (seen: 25 s for 51 routes)."""
    routes = {name: route(t(f"{name}-a", FAST), name) for name in ("r1", "r2", "r3")}
    async with silent_server() as hung:
        board = RedisBreakers(routes, hung.url, clock=Clock(), timeout=0.5)
        try:
            snapshot = await board.snapshot()
        finally:
            await board.close()
        assert set(snapshot) == {"r1", "r2", "r3"}  # this process's view of each
        assert hung.connections == 1
