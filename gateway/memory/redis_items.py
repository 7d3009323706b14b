"""What the Conversations API does to conversations in Redis besides turns: start one empty, its metadata, delete one message.

A conversation's meta hash (see redis_history) has two more fields here: `created_at` (Redis's
clock, as the append script stamps rows by) and `metadata` (JSON), written by `start` and
`set_metadata` alone; a conversation its turns made has neither (`about` takes its oldest
row's time). Callers hold the conversation's lock; each write is one transaction of the
conversation's keys (one hash slot).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import orjson
from redis.typing import EncodableT, FieldT

from gateway.core.memory.about import About
from gateway.core.memory.entries import load_entry
from gateway.memory.redis_history import key_prefix, redis_now
from gateway.memory.store import Key
from gateway.stores.redis import RedisClient

# KEYS: meta. ARGV: the metadata's JSON. Sets it only on a conversation there: a hash made here alone would never expire.
_SET_METADATA: Final = """
if redis.call('HEXISTS', KEYS[1], 'updated_at') == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'metadata', ARGV[1])
return 1
"""


async def start(client: RedisClient, key: Key, *, metadata: Mapping[str, str], version: bytes, ttl: int) -> None:
    """Store an empty conversation created now with `metadata`, in place of any under `key`; it lives `ttl` seconds."""
    prefix = key_prefix(key)
    meta = f"{prefix}:meta"
    created = await redis_now(client)
    fields: dict[FieldT, EncodableT] = {
        "system": "[]", "updated_at": created, "write": version, "created_at": created, "metadata": orjson.dumps(metadata)
    }
    async with client.pipeline(transaction=True) as pipe:
        pipe.delete(meta, f"{prefix}:msgs")
        pipe.hset(meta, mapping=fields)
        pipe.expire(meta, ttl)
        await pipe.execute()


async def about(client: RedisClient, key: Key) -> About | None:
    """When the conversation was created (its oldest row's time when not by `start`) and its metadata; None when there is none."""
    prefix = key_prefix(key)
    async with client.pipeline(transaction=True) as pipe:
        pipe.hmget(f"{prefix}:meta", "updated_at", "created_at", "metadata")
        pipe.lindex(f"{prefix}:msgs", 0)
        (updated_at, created_at, metadata), oldest = await pipe.execute()
    if updated_at is None:
        return None
    if created_at is None:
        first = None if oldest is None else load_entry(oldest).created_at
        created_at = updated_at if first is None else first
    return About(float(created_at), orjson.loads(metadata) if metadata else {})


async def set_metadata(client: RedisClient, key: Key, *, metadata: Mapping[str, str]) -> bool:
    """Replace the conversation's metadata; False when there is none."""
    return bool(await client.eval(_SET_METADATA, 1, f"{key_prefix(key)}:meta", orjson.dumps(metadata)))


async def delete_item(client: RedisClient, key: Key, *, item_id: str, version: bytes) -> bool:
    """Remove the row of the message with this item id (the first, for rows older gateways wrote alike); False when none has it."""
    prefix = key_prefix(key)
    msgs = f"{prefix}:msgs"
    for row in await client.lrange(msgs, 0, -1):
        if load_entry(row).item_id == item_id:
            async with client.pipeline(transaction=True) as pipe:
                pipe.lrem(msgs, 1, row)  # type: ignore[arg-type]  # redis-py's stubs say str; bytes go as they are
                pipe.hset(f"{prefix}:meta", "write", version)  # a new version: caches of the conversation read it again
                removed, _ = await pipe.execute()
            return bool(removed)
    return False
