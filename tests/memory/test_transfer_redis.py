"""A Redis store as conversations move out and in, on a real redis-server: SCAN for keys, one script a restore."""

from __future__ import annotations

import asyncio
import dataclasses
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


def test_a_redo_stack_moves_from_sqlite_to_redis_and_back_and_redoes_there(tmp_path: Path, redis_url: str) -> None:
    key = ("acme", "c-1")

    async def go() -> None:
        await flush_redis(redis_url)
        store = sqlite_store(tmp_path / "a.db")
        await fill(store, tenant="acme", conversations=2)
        before = await held(store, key)
        assert before is not None and await store.undo(key)
        sqlite, redis = SQLiteTransfer(str(tmp_path / "a.db")), RedisTransfer(RedisConnection(url=redis_url), ttl_seconds=3600)
        record = await sqlite.export(key)
        assert record is not None and [len(turn) for turn in record.redo] == [2] and len(record.entries) == 2
        await redis.restore(record, replace=False)
        there = await redis.export(key)
        assert there is not None and there.redo == record.redo
        assert [[e.item_id for e in turn] for turn in there.redo] == [[e.item_id for e in turn] for turn in record.redo]
        back = SQLiteTransfer(str(tmp_path / "b.db"))
        await back.restore(there, replace=False)
        for closing in (sqlite, redis, back, store):
            await closing.close()

        for target in (redis_store(redis_url), sqlite_store(tmp_path / "b.db")):
            assert await target.redo(key)  # the undone turn comes back as it was stored
            after = await held(target, key)
            assert after is not None and dataclasses.replace(after, updated_at=0) == dataclasses.replace(before, updated_at=0)
            assert not await target.redo(key)
            await target.close()

    asyncio.run(go())
