"""A Redis memory store as `gateway memory` moves conversations out of and into it: scan, export, restore.

Keys are found by SCAN (on every primary of a Cluster), a batch at a time: the scan holds one
page of keys, never the keyspace. SCAN has no order to resume after, so a resumed export from
Redis starts over, and the import skips what it already wrote (see transfer).

A restore is one script on the conversation's two keys (one hash slot): it checks whether the
conversation is there, and writes its meta hash and its rows (each with the time it was stored
and its item id, as the append script writes them) whole, or nothing. The summary, a value
under a key of its own (another slot), is written after it. A restored conversation lives the
store's TTL from the restore, as after a write, and keeps its redo stack (the meta field `redo`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Final

import orjson
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from gateway.core.memory.entries import Entry, load_entry
from gateway.core.memory.summary import summary_key
from gateway.core.stores import RedisConnection
from gateway.memory import redis_history, redis_items
from gateway.memory.redis_faults import Unavailable
from gateway.memory.redis_history import key_prefix
from gateway.memory.store import Key
from gateway.memory.transfer_record import Record
from gateway.memory.transfer_store import Restored
from gateway.stores.redis import Patience, RedisClient, close_client, open_client

_HEAD: Final = "gw:mem:{"
_TAIL: Final = "}:meta"
_VALUE_PREFIX: Final = "gw:value:"  # as the store keeps values (memory.redis)
# KEYS: meta, msgs. ARGV: replace (0/1), ttl, system, updated_at, created_at, metadata, write, redo ('' for none), then the rows.
# Returns {0 (there: kept), 1 (written) or 2 (there: replaced); the messages it holds then}.
_RESTORE: Final = """
local there = redis.call('EXISTS', KEYS[1]) == 1
if there and ARGV[1] == '0' then
  return {0, 0}
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'system', ARGV[3], 'updated_at', ARGV[4], 'created_at', ARGV[5], 'metadata', ARGV[6], 'write', ARGV[7])
if ARGV[8] ~= '' then
  redis.call('HSET', KEYS[1], 'redo', ARGV[8])
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
if #ARGV > 8 then
  redis.call('RPUSH', KEYS[2], unpack(ARGV, 9))
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
local outcome = 1
if there then
  outcome = 2
end
return {outcome, redis.call('LLEN', KEYS[2])}
"""
_OUTCOMES: Final = {0: Restored.SKIPPED, 1: Restored.WRITTEN, 2: Restored.REPLACED}
_ROWS_A_CALL: Final = 4_000  # rows given to one script call: Lua's unpack has a stack limit


class RedisTransfer:
    """The conversations of the Redis at `connection`; a restored one lives `ttl_seconds`."""

    ordered = False  # SCAN's order: a pass starts over

    def __init__(self, connection: RedisConnection, *, ttl_seconds: float) -> None:
        patience = Patience(
            socket_seconds=30, connect_seconds=10, retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries=3)
        )
        self._client: RedisClient = open_client(connection, patience)
        self._unavailable = Unavailable(connection)
        self._ttl = max(int(ttl_seconds), 1)

    async def scan(self, after: Key | None, page: int) -> AsyncIterator[list[Key]]:
        """Every conversation's key, in SCAN's order (`after` is not used: SCAN has no order to start after)."""
        keys: list[Key] = []
        with self._unavailable:
            async for name in self._client.scan_iter(match=f"{_HEAD}*{_TAIL}", count=page):
                tenant, _, memory_id = name.decode()[len(_HEAD) : -len(_TAIL)].partition(":")
                keys.append((tenant, memory_id))
                if len(keys) >= page:
                    yield keys
                    keys = []
        if keys:
            yield keys

    async def export(self, key: Key) -> Record | None:
        with self._unavailable:
            conversation = await redis_history.load(self._client, key)
            about = await redis_items.about(self._client, key)
            summary = await self._client.get(f"{_VALUE_PREFIX}{summary_key(*key)}")
            redo = await self._client.hget(f"{key_prefix(key)}:meta", "redo")
        if conversation is None or about is None:
            return None
        turns = [[load_entry(row) for row in turn] for turn in orjson.loads(redo)] if redo else []
        return Record.of(key, conversation, about=about, summary=None if summary is None else _text(summary), redo=turns)

    async def restore(self, record: Record, *, replace: bool) -> tuple[Restored, int]:
        if len(record.entries) > _ROWS_A_CALL:
            raise ValueError(f"{record.key[1]}: more than {_ROWS_A_CALL} messages, which one restore does not write")
        prefix = key_prefix(record.key)
        args = [
            b"1" if replace else b"0",
            self._ttl,
            orjson.dumps(record.system),
            repr(record.updated_at),
            repr(record.about.created_at),
            orjson.dumps(record.about.metadata),
            b"import-" + os.urandom(8).hex().encode(),  # a new version: caches of the conversation read it again
            orjson.dumps([[_row(entry).decode() for entry in turn] for turn in record.redo]) if record.redo else b"",
            *(_row(entry) for entry in record.entries),
        ]
        with self._unavailable:
            done, held = await self._client.eval(_RESTORE, 2, f"{prefix}:meta", f"{prefix}:msgs", *args)
            outcome = _OUTCOMES[int(done)]
            if outcome is not Restored.SKIPPED and record.summary is not None:
                await self._client.set(f"{_VALUE_PREFIX}{summary_key(*record.key)}", record.summary, ex=self._ttl)
        return outcome, int(held)

    async def close(self) -> None:
        await close_client(self._client)


def _row(entry: Entry) -> bytes:
    """A message row as the append script stores it: the message, its counts, its item id and when it was stored."""
    row: dict[str, object] = {"m": entry.message, "t": entry.tokens, "i": entry.item_id}
    if entry.created_at is not None:
        row["c"] = entry.created_at
    return orjson.dumps(row, default=dict)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
