"""Keys issued through the API kept in Redis: the store when limits are counted there, shared by every replica.

The keys are one hash (field: the key's name, value: stored_keys.encode_key's JSON) beside a
generation counter, both under the hash tag {gateway-limits}, the slot every governance key is in
(so a Cluster serves them too). A change and its move of the generation are one script: a process
that reads the generation moved reads the change with it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from redis.exceptions import RedisError

from gateway.core.settings import Config, limits_redis
from gateway.governance.stored_keys import (
    KeyListing,
    KeyStoreUnavailable,
    StoredKey,
    encode_key,
    listing_of,
    readable_key,
)
from gateway.stores.redis import (
    Patience,
    RedisClient,
    close_client,
    masked,
    open_client,
    retrying_lost_connections,
)

KEYS: Final = "{gateway-limits}:keys"
GENERATION: Final = "{gateway-limits}:keys:generation"
# KEYS: the hash, the generation. ARGV: the name, the record. 1 when kept (the generation moved on), else 0.
_CREATE: Final = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('INCR', KEYS[2])
return 1
"""
_UPDATE: Final = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('INCR', KEYS[2])
return 1
"""
_DELETE: Final = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('INCR', KEYS[2])
return 1
"""
# Calls are rare (the refresher's read every 0.5 s, the keys API): patient ones, retried a little when the
# connection was lost, never when a reply did not come in time (a Redis that hangs: one wait, then the 503).
_PATIENCE: Final = Patience(socket_seconds=5, connect_seconds=5, retry=retrying_lost_connections(2))


class RedisKeyStore:
    """The keys in the Redis the limits of `config` are counted in (limits_redis); connected at the first call."""

    def __init__(self, config: Config) -> None:
        self._connection = limits_redis(config)
        self._client: RedisClient | None = None
        self._refusal = ""
        try:
            self._client = open_client(self._connection, _PATIENCE)
        except Exception as exc:  # settings the client refuses: a store that is never available
            self._refusal = f"redis key store: the URL is refused ({masked(str(exc), self._connection)})"

    async def create(self, key: StoredKey) -> bool:
        return bool(await self._script(_CREATE, key.name, encode_key(key)))

    async def get(self, name: str) -> StoredKey | None:
        record = await self._call(lambda client: client.hget(KEYS, name))
        return None if record is None else readable_key(name, record)

    async def list(self) -> KeyListing:
        records: dict[bytes, bytes] = await self._call(lambda client: client.hgetall(KEYS))
        return listing_of(records.items())

    async def update(self, key: StoredKey) -> bool:
        return bool(await self._script(_UPDATE, key.name, encode_key(key)))

    async def delete(self, name: str) -> bool:
        return bool(await self._script(_DELETE, name, b""))

    async def generation(self) -> int:
        value = await self._call(lambda client: client.get(GENERATION))
        try:
            return 0 if value is None else int(value)
        except ValueError:  # set by hand: no change can be told from another until it is a number again
            raise KeyStoreUnavailable(f"redis key store: {GENERATION} is not a number") from None

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await close_client(client)

    async def _script(self, script: str, name: str, record: bytes) -> Any:
        return await self._call(lambda client: client.eval(script, 2, KEYS, GENERATION, name, record))

    async def _call(self, command: Callable[[RedisClient], Any]) -> Any:
        """`command(client)` awaited; KeyStoreUnavailable (its text masked) when Redis fails it."""
        client = self._client
        if client is None:
            raise KeyStoreUnavailable(self._refusal or "redis key store: closed")
        try:
            reply: Awaitable[Any] = command(client)
            return await reply
        except (TimeoutError, RedisError, OSError) as exc:
            raise KeyStoreUnavailable(f"redis key store: {masked(str(exc), self._connection)}") from exc
