"""A SQLite file as conversations move out and in: keys scanned in order, a conversation exported and restored whole."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.core.memory.entries import Entry
from gateway.memory.transfer_sqlite import SQLiteTransfer
from gateway.memory.transfer_store import Restored
from tests.support.memory_transfer import SUMMARY, fill, held, sqlite_store


def filled(path: Path, conversations: int) -> None:
    async def go() -> None:
        store = sqlite_store(path)
        await fill(store, tenant="acme", conversations=conversations)
        await fill(store, tenant="beta", conversations=1)
        await store.close()

    asyncio.run(go())


def test_keys_are_scanned_in_order_a_page_at_a_time_from_after_a_key(tmp_path: Path) -> None:
    filled(tmp_path / "a.db", 3)

    async def go() -> tuple[list[list[tuple[str, str]]], list[list[tuple[str, str]]]]:
        transfer = SQLiteTransfer(str(tmp_path / "a.db"))
        every = [keys async for keys in transfer.scan(None, 2)]
        rest = [keys async for keys in transfer.scan(("acme", "c-2"), 10)]
        await transfer.close()
        return every, rest

    every, rest = asyncio.run(go())
    assert every == [[("acme", "c-0"), ("acme", "c-1")], [("acme", "c-2"), ("acme", "meta")], [("beta", "c-0"), ("beta", "meta")]]
    assert rest == [[("acme", "meta"), ("beta", "c-0"), ("beta", "meta")]]


def test_a_restored_conversation_is_what_was_exported_and_takes_turns_on(tmp_path: Path) -> None:
    filled(tmp_path / "a.db", 2)

    async def go() -> None:
        source, target = SQLiteTransfer(str(tmp_path / "a.db")), SQLiteTransfer(str(tmp_path / "b.db"))
        for key in (("acme", "c-0"), ("acme", "meta")):
            record = await source.export(key)
            assert record is not None
            assert await target.restore(record, replace=False) == (Restored.WRITTEN, len(record.entries))
            assert await target.restore(record, replace=False) == (Restored.SKIPPED, 0)
            assert await target.restore(record, replace=True) == (Restored.REPLACED, len(record.entries))
        assert await source.export(("acme", "nobody")) is None
        await source.close()
        await target.close()
        before, after = sqlite_store(tmp_path / "a.db"), sqlite_store(tmp_path / "b.db")
        for key in (("acme", "c-0"), ("acme", "meta")):
            assert await held(after, key) == await held(before, key)
        restored = await held(after, ("acme", "c-0"))
        assert restored is not None and restored.summary == SUMMARY
        async with after.lock(("acme", "c-0")):
            await after.append(("acme", "c-0"), [Entry({"role": "user", "content": "next"}, {})], system=None)
        conversation = await after.load(("acme", "c-0"))
        assert conversation is not None and [e.message["content"] for e in conversation.entries][-2:] == ["yes", "next"]
        assert await after.undo(("acme", "c-0")) and await after.redo(("acme", "c-0"))
        await before.close()
        await after.close()

    asyncio.run(go())
