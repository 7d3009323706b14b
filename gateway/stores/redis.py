"""The asyncio redis-py client of a Redis store: one Redis, a Redis Cluster, or Sentinel's primary.

One client serves a store for its life. A Cluster client follows `MOVED` and `ASK` itself and
learns the slots from any node given as the seed; a Sentinel client asks the sentinels for the
primary on each new connection, and drops a connection to a primary that became a replica
(redis-py's `SentinelManagedConnection`), so a retried command reaches the new primary.
redis-py reads replies with hiredis when it is installed.

A store's hot scripts may go through a lean client of their own instead (`open_lean`,
`stores.lean_redis`): on one Redis at a redis:// URL, or on Sentinel's primary.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialWithJitterBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as ConnectionLost
from redis.typing import EncodableT, KeyT

from gateway.core.masks import mask_password
from gateway.core.stores import RedisConnection
from gateway.stores.lean_redis import Find, LeanRedis, Login

RedisClient: TypeAlias = aioredis.Redis | RedisCluster
LEAN_SWITCH: Final = "GATEWAY_REDIS_LEAN"  # "off": a store's scripts go through redis-py too
# What a redis:// URL may say for the lean client to read it as redis-py does (a query option: no)
_LEAN_URL_PARTS: Final = frozenset({"host", "port", "db", "username", "password"})
log = logging.getLogger("gateway.stores")


class SeededCluster(RedisCluster):
    """A Cluster client that learns the cluster's slots from its seed before its first command runs.

    redis-py (8.1) learns them lazily, at the first command; commands that arrive meanwhile ask
    the seed for their keys over connections the learning then recycles, fail with "Connection
    closed by server", and each failure sets off another reading of the slots: under a burst of
    first requests, a churn of failures. Learning first, once, leaves nothing to recycle.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._learning = asyncio.Lock()
        self._learned = False

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if not self._learned:
            async with self._learning:
                if not self._learned:
                    await self.initialize()
                    self._learned = True
        return await super().execute_command(*args, **kwargs)


@dataclass(frozen=True, slots=True)
class Patience:
    """How long a store waits on Redis: per reply, per connection, and the retries of a failed command."""

    socket_seconds: float
    connect_seconds: float
    retry: Retry


def retrying_lost_connections(retries: int) -> Retry:
    """redis-py's retries of a command whose connection was lost (or refused): `retries` more, soon; a timeout is never retried.

    A reply that does not come within the socket timeout says the Redis hangs (stopped, swapping,
    a blocked script): each retry would wait as long again, and the caller's 503 would come after
    retries + 1 timeouts (40 s for a store's 10 s) instead of one.
    """
    return Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries, supported_errors=(ConnectionLost,))


def open_client(connection: RedisConnection, patience: Patience) -> RedisClient:
    """A client for `connection` (no connection is made yet); raises what the client refuses in it."""
    waits: dict[str, Any] = {
        "socket_timeout": patience.socket_seconds,
        "socket_connect_timeout": patience.connect_seconds,
        "retry": patience.retry,
    }
    sentinel = connection.sentinel
    if sentinel is not None:
        watchers = Sentinel(  # type: ignore[no-untyped-call]  # unannotated in redis-py
            list(sentinel.nodes),
            sentinel_kwargs={
                "password": sentinel.sentinel_password,
                "socket_timeout": patience.socket_seconds,
                "socket_connect_timeout": patience.connect_seconds,
            },
            password=sentinel.password,
            db=sentinel.db,
            **waits,
        )
        primary: aioredis.Redis = watchers.master_for(sentinel.master_name)
        return primary
    if connection.cluster:
        return SeededCluster.from_url(connection.url, **waits)
    return aioredis.Redis.from_url(connection.url, **waits)


def open_lean(connection: RedisConnection, client: RedisClient, patience: Patience) -> LeanRedis | None:
    """A lean client for a store's hot scripts on `connection` (no connection is made yet), or None: redis-py keeps them.

    redis-py keeps them on a Redis Cluster (which node holds a key, MOVED and ASK are its client's
    work), for a URL the lean client does not read as redis-py would (rediss://, unix://, any query
    option, a username without a password), and when the environment says GATEWAY_REDIS_LEAN=off.
    On Sentinel, each new connection asks `client`'s sentinels for the primary.
    """
    if os.environ.get(LEAN_SWITCH, "").lower() == "off" or connection.cluster:
        return None
    waits: dict[str, Any] = {
        "reply_seconds": patience.socket_seconds, "connect_seconds": patience.connect_seconds, "retry": patience.retry,
    }  # fmt: skip
    sentinel = connection.sentinel
    pool = client.connection_pool if isinstance(client, aioredis.Redis) else None
    if sentinel is not None and isinstance(pool, SentinelConnectionPool):
        find: Find = functools.partial(pool.sentinel_manager.discover_master, sentinel.master_name)
        return LeanRedis(find, login=Login(password=sentinel.password, db=sentinel.db), **waits)
    if not connection.url.startswith("redis://"):
        return None
    parts = parse_url(connection.url)
    if not parts.keys() <= _LEAN_URL_PARTS or ("username" in parts and "password" not in parts):
        return None
    address = (str(parts.get("host", "localhost")), int(parts.get("port", 6379)))
    login = Login(username=parts.get("username"), password=parts.get("password"), db=int(parts.get("db", 0)))
    return LeanRedis(functools.partial(_at, address), login=login, **waits)


async def _at(address: tuple[str, int]) -> tuple[str, int]:
    """Where a Redis given by its URL is: always `address`."""
    return address


async def close_client(client: RedisClient) -> None:
    """Close `client`'s connections, and a Sentinel client's connections to the sentinels."""
    await client.aclose()
    pool = client.connection_pool if isinstance(client, aioredis.Redis) else None
    if isinstance(pool, SentinelConnectionPool):
        for watcher in pool.sentinel_manager.sentinels:
            await watcher.aclose()


def masked(text: str, connection: RedisConnection) -> str:
    """`text` with every password of `connection` (its URL's, the Sentinel settings') shown as ***."""
    text = mask_password(text, connection.url)
    for secret in connection.secrets:
        text = text.replace(secret, "***")
    return text


class Replicated(AsyncScript):
    """A script whose writes `replicas` replicas confirm (WAIT) before its call returns, or `timeout` passes.

    The script and the WAIT share one connection (a pipeline without MULTI), as WAIT counts the
    writes of its own connection; a Cluster client has no such pipeline, so only one Redis or a
    Sentinel's primary. When fewer confirm, how many did is handed to `short`: the write stands on
    the primary either way, so the caller decides what that is worth.
    """

    def __init__(
        self, client: aioredis.Redis, script: str, *, replicas: int, timeout: float, short: Callable[[int], None]
    ) -> None:
        """`script` on `client`, each call confirmed by `replicas` replicas."""
        super().__init__(client, script)
        self._client = client
        self._replicas = replicas
        self._timeout_ms = max(round(timeout * 1000), 1)  # 0 would be WAIT's "forever"
        self._short = short

    async def __call__(
        self,
        keys: Sequence[KeyT] | None = None,
        args: Iterable[EncodableT] | None = None,
        client: aioredis.Redis | RedisCluster | None = None,
    ) -> Any:
        if client is not None:  # run inside the caller's own pipeline: its WAIT is the caller's
            return await super().__call__(keys, args, client)
        async with self._client.pipeline(transaction=False) as pipe:
            await super().__call__(keys, args, pipe)  # queued, with the script to load if Redis lost it
            pipe.wait(self._replicas, self._timeout_ms)
            result, confirmed = await pipe.execute()
        if confirmed < self._replicas:
            self._short(confirmed)
        return result


def replicated(client: RedisClient, script: str, *, replicas: int, timeout: float, what: str) -> Replicated:
    """`script`, each call confirmed by `replicas` replicas within `timeout`; fewer is logged as `what` at risk.

    Raises ValueError on a Cluster client (see Replicated).
    """
    if not isinstance(client, aioredis.Redis):
        raise ValueError("waiting for replicas is not supported on a Redis Cluster")

    def short(confirmed: int) -> None:
        log.warning(
            "redis: %s was confirmed by %d of %d replicas within %gs; it stands on the primary, "
            "and a failover before a replica has it loses it",
            what, confirmed, replicas, timeout,
        )  # fmt: skip

    return Replicated(client, script, replicas=replicas, timeout=timeout, short=short)
