"""A Redis store as conversations move out and in, on a real redis-server: SCAN for keys, one script a restore."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.core.memory.about import About
from gateway.core.memory.entries import Entry
from gateway.core.stores import RedisConnection
from gateway.memory.transfer_record import Record
from gateway.memory.transfer_redis import RedisTransfer
from gateway.memory.transfer_sqlite import SQLiteTransfer
from gateway.memory.transfer_store import Restored
from tests.support.memory_transfer import SUMMARY, fill, held, redis_store, sqlite_store
from tests.support.servers import flush_redis

KEYS = [("acme", "c-0"), ("acme", "c-1"), ("acme", "meta"), ("beta", "c-0"), ("beta", "meta")]


def test_every_conversation_is_scanned_and_restored_whole(tmp_path: Path, redis_url: str) -> None:
    async def go() -> None:
        await flush_redis(redis_url)
        store = sqlite_store(tmp_path / "a.db")
        await fill(store, tenant="acme", conversations=2)
        await fill(store, tenant="beta", conversations=1)
        source = SQLiteTransfer(str(tmp_path / "a.db"))
        target = RedisTransfer(RedisConnection(url=redis_url), ttl_seconds=3600)
        for key in KEYS:
            record = await source.export(key)
            assert record is not None
            assert await target.restore(record, replace=False) == (Restored.WRITTEN, len(record.entries))
            assert await target.restore(record, replace=False) == (Restored.SKIPPED, 0)
            assert await target.restore(record, replace=True) == (Restored.REPLACED, len(record.entries))
        scanned = sorted(key for keys in [keys async for keys in target.scan(None, 2)] for key in keys)
        assert scanned == sorted(KEYS)
        exported = await target.export(("acme", "c-0"))
        assert exported is not None and exported.summary == SUMMARY
        redis = redis_store(redis_url)
        for key in KEYS:
            assert await held(redis, key) == await held(store, key)
        for closing in (source, target, store, redis):
            await closing.close()

    asyncio.run(go())


def test_a_conversation_too_long_for_one_script_is_refused_before_anything_is_written(redis_url: str) -> None:
    entries = [Entry({"role": "user", "content": "x"}, {}, 1.0, item_id=f"msg_{n}") for n in range(4_001)]

    async def go() -> None:
        target = RedisTransfer(RedisConnection(url=redis_url), ttl_seconds=3600)
        with pytest.raises(ValueError, match="more than 4000 messages"):
            await target.restore(Record(("acme", "long"), [], entries, updated_at=2.0, about=About(1.0)), replace=True)
        assert await target.export(("acme", "long")) is None
        await target.close()

    asyncio.run(go())
