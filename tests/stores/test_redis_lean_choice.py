"""gateway.stores.redis.open_lean: which connections run a store's scripts on the lean client, and which keep redis-py's."""

from __future__ import annotations

import asyncio

import pytest
import redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from gateway.core.stores import RedisConnection, SentinelSettings
from gateway.stores.lean_redis import LeanRedis
from gateway.stores.redis import LEAN_SWITCH, Patience, open_client, open_lean
from tests.support.redis_stores import entry, redis_store

PATIENCE = Patience(socket_seconds=1, connect_seconds=1, retry=Retry(NoBackoff(), 0))
SENTINEL = SentinelSettings(master_name="m", nodes=(("127.0.0.1", 1),), password="pw")


@pytest.fixture(autouse=True)
def lean_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the lean client: a run with GATEWAY_REDIS_LEAN=off (the fallback's) must not turn it off."""
    monkeypatch.delenv(LEAN_SWITCH, raising=False)


def chosen(connection: RedisConnection) -> LeanRedis | None:
    return open_lean(connection, open_client(connection, PATIENCE), PATIENCE)


@pytest.mark.parametrize(
    "connection",
    [
        RedisConnection(url="redis://127.0.0.1:6379/0"),
        RedisConnection(url="redis://:pw@127.0.0.1:6379/3"),
        RedisConnection(url="redis://user:pw@[::1]:6379"),
        RedisConnection(sentinel=SENTINEL),
    ],
    ids=["url", "password-and-db", "user-ipv6", "sentinel"],
)
def test_one_redis_or_sentinels_primary_runs_the_scripts_on_the_lean_client(connection: RedisConnection) -> None:
    assert isinstance(chosen(connection), LeanRedis)


@pytest.mark.parametrize(
    "connection",
    [
        RedisConnection(url="redis://127.0.0.1:7000/0", cluster=True),  # which node holds a key: redis-py's work
        RedisConnection(url="rediss://127.0.0.1:6379/0"),  # TLS
        RedisConnection(url="unix:///run/redis.sock"),
        RedisConnection(url="redis://127.0.0.1:6379/0?client_name=gw"),  # any query option
        RedisConnection(url="redis://user@127.0.0.1:6379/0"),  # a username without a password
    ],
    ids=["cluster", "rediss", "unix", "query-option", "user-without-password"],
)
def test_what_the_lean_client_does_not_read_keeps_redis_py(connection: RedisConnection) -> None:
    assert chosen(connection) is None


def test_the_environment_can_keep_every_script_on_redis_py(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEAN_SWITCH, "off")
    assert chosen(RedisConnection(url="redis://127.0.0.1:6379/0")) is None


@pytest.mark.parametrize(("wait_replicas", "connections"), [(0, 1), (1, 8)])
async def test_a_store_waiting_for_replicas_keeps_redis_py(redis_url: str, wait_replicas: int, connections: int) -> None:
    """WAIT blocks its connection until replicas confirm: on the shared connection it would hold up every call.

    Seen by the connections 8 appends at once open: the lean client's one, or one each from redis-py's pool.
    """
    store = redis_store(redis_url, wait_replicas=wait_replicas, wait_timeout=0.01)
    try:
        with redis.Redis.from_url(redis_url) as admin:
            before = admin.info("stats")["total_connections_received"]
            keys = [("t", f"waiting-{wait_replicas}-{n}") for n in range(8)]
            await asyncio.gather(*(store.append(key, [entry("user", "q")], system=None) for key in keys))
            assert admin.info("stats")["total_connections_received"] - before == connections
    finally:
        await store.close()
