"""Keys issued through the API in a SQLite file: kept, changed and forgotten, shared by processes, healed after a fault."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from gateway.governance.key_store_sqlite import SQLiteKeyStore
from gateway.governance.stored_keys import KeyStoreUnavailable
from tests.support.key_stores import (
    check_a_key_is_kept_changed_and_forgotten,
    check_an_unreadable_record_is_skipped,
    check_two_stores_on_one_place_see_each_other,
    stored_key,
)


async def test_a_key_is_kept_changed_and_forgotten(tmp_path: Path) -> None:
    store = SQLiteKeyStore(str(tmp_path / "keys.db"))
    assert await store.generation() == 0
    await check_a_key_is_kept_changed_and_forgotten(store)
    await store.close()


async def test_two_processes_on_one_file_see_each_others_keys(tmp_path: Path) -> None:
    one, other = SQLiteKeyStore(str(tmp_path / "keys.db")), SQLiteKeyStore(str(tmp_path / "keys.db"))
    await check_two_stores_on_one_place_see_each_other(one, other)
    await one.close()
    await other.close()


async def test_keys_outlive_the_store_and_only_digests_are_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    store = SQLiteKeyStore(str(path))
    await store.create(stored_key("team-b", key="gk-secret-value"))
    await store.close()
    reopened = SQLiteKeyStore(str(path))
    assert await reopened.get("team-b") == stored_key("team-b", key="gk-secret-value")
    await reopened.close()
    assert b"gk-secret-value" not in b"".join(p.read_bytes() for p in tmp_path.iterdir())


async def test_a_file_that_cannot_be_opened_fails_each_call_and_the_store_heals_once_it_can(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "keys.db"
    store = SQLiteKeyStore(str(path))
    with pytest.raises(KeyStoreUnavailable, match=r"keys\.db"):
        await store.generation()
    os.mkdir(path.parent)
    assert await store.create(stored_key("team-b"))
    assert await store.generation() == 1
    await store.close()


async def test_a_write_locked_out_past_the_busy_timeout_is_unavailable_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    store = SQLiteKeyStore(str(path), busy_timeout_ms=50)
    assert await store.generation() == 0  # the file and its tables exist
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(KeyStoreUnavailable, match="locked"):
            await store.create(stored_key("team-b"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert await store.create(stored_key("team-b"))
    await store.close()


async def test_a_record_that_cannot_be_read_is_skipped_not_the_end_of_the_listing(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    store = SQLiteKeyStore(str(path))

    async def write_raw(name: str, record: bytes) -> None:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("INSERT INTO keys VALUES (?, ?)", (name, record))
        db.close()

    await check_an_unreadable_record_is_skipped(store, write_raw)
    await store.close()
