"""gateway.upstream.breakers.open_breakers: the configured board, per process or shared through Redis, at which URL."""

from __future__ import annotations

from pathlib import Path

import redis.asyncio as aioredis

from gateway.config.loader import parse_config
from gateway.core.routing import Outcome
from gateway.core.tree import Target
from gateway.upstream.breakers import open_breakers
from gateway.upstream.breakers.board import LocalBreakers
from gateway.upstream.breakers.redis import RedisBreakers
from tests.support.breakers import PATIENT, note
from tests.support.servers import flush_redis, redis_server

ROUTES = "routes: {m: {provider: mock, breaker: {failures: 1}}}\n"


async def keys(url: str) -> int:
    client = aioredis.Redis.from_url(url)
    try:
        return int(await client.dbsize())
    finally:
        await client.aclose()


async def fail_once(config_text: str) -> type:
    """Open the board of `config_text` (with one mock route), tell it of one failure, close it; its type."""
    config = parse_config(config_text + ROUTES)
    target = config.routes["m"].root
    assert isinstance(target, Target)
    board = open_breakers(config)
    try:
        await note(board, target, Outcome(503))
    finally:
        await board.close()
    return type(board)


async def test_without_redis_anywhere_each_process_keeps_its_own() -> None:
    assert await fail_once("") is LocalBreakers


async def test_a_redis_memory_shares_the_breakers_at_its_url(redis_url: str) -> None:
    await flush_redis(redis_url)
    patient = f"breakers: {{timeoutSeconds: {PATIENT}}}\n"  # the failure must reach Redis, however loaded the machine
    assert await fail_once(f"memory: {{store: redis, url: '{redis_url}'}}\n" + patient) is RedisBreakers
    assert await keys(redis_url) > 0


async def test_the_breakers_own_url_wins_over_memorys(redis_url: str, tmp_path: Path) -> None:
    await flush_redis(redis_url)
    with redis_server(tmp_path) as elsewhere:
        breakers = f"breakers: {{url: '{elsewhere.url}', timeoutSeconds: {PATIENT}}}\n"
        await fail_once(f"memory: {{store: redis, url: '{redis_url}'}}\n" + breakers)
        assert await keys(elsewhere.url) > 0 and await keys(redis_url) == 0


async def test_a_local_store_stays_local_beside_a_redis_memory(redis_url: str) -> None:
    await flush_redis(redis_url)
    assert await fail_once(f"memory: {{store: redis, url: '{redis_url}'}}\nbreakers: {{store: local}}\n") is LocalBreakers
    assert await keys(redis_url) == 0


async def test_the_breakers_wait_on_redis_as_long_as_the_config_says(redis_url: str) -> None:
    for setting, timeout in (("", 0.5), ("breakers: {timeoutSeconds: 7}\n", 7.0)):
        board = open_breakers(parse_config(f"memory: {{store: redis, url: '{redis_url}'}}\n{setting}{ROUTES}"))
        try:
            assert isinstance(board, RedisBreakers) and board.timeout == timeout
        finally:
            await board.close()
