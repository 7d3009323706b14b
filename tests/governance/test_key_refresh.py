"""The process's snapshot of stored keys follows the store: read at start, replaced whole on each change, kept through outages."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from pathlib import Path

import pytest

from gateway.governance.key_refresh import REFRESH_SECONDS, KeyRefresher
from gateway.governance.key_store_sqlite import SQLiteKeyStore
from gateway.governance.stored_keys import KeyListing, StoredKeys
from tests.support.key_stores import stored_key
from tests.support.waiting import eventually


class CountedLists(SQLiteKeyStore):
    """A SQLite store that counts how often every key is read."""

    lists = 0

    async def list(self) -> KeyListing:
        self.lists += 1
        return await super().list()


def test_a_revocation_reaches_every_process_within_a_second(tmp_path: Path) -> None:
    """Issue 25's bound: each process's refresher (the app makes it with the default) reads the store's
    generation more often than once a second, so a revoked key stops working everywhere within one."""
    refresher = KeyRefresher(SQLiteKeyStore(tmp_path / "keys.db"), StoredKeys())
    assert refresher.every == REFRESH_SECONDS < 1.0


async def test_the_keys_are_known_once_started(tmp_path: Path) -> None:
    store = SQLiteKeyStore(str(tmp_path / "keys.db"))
    await store.create(stored_key("team-b"))
    known = StoredKeys()
    refresher = KeyRefresher(store, known)
    await refresher.start()
    assert set(known.by_name) == {"team-b"} and set(known.by_digest) == {stored_key("team-b").sha256}
    await refresher.close()
    await store.close()


async def test_a_change_made_elsewhere_replaces_the_maps_whole(tmp_path: Path) -> None:
    elsewhere = SQLiteKeyStore(str(tmp_path / "keys.db"))
    await elsewhere.create(stored_key("team-b"))
    store, known = SQLiteKeyStore(str(tmp_path / "keys.db")), StoredKeys()
    refresher = KeyRefresher(store, known, every=0.05)
    await refresher.start()
    before = known.by_digest
    await elsewhere.delete("team-b")
    await elsewhere.create(stored_key("team-c"))
    await eventually(lambda: set(known.by_name) == {"team-c"}, what="the refresher read the change")
    assert set(before.values()) == {stored_key("team-b")}  # a reader holding the old map saw no mix
    assert known.generation == await elsewhere.generation()
    await refresher.close()
    await store.close()
    await elsewhere.close()


async def test_the_keys_are_read_again_only_when_the_generation_moved(tmp_path: Path) -> None:
    store, known = CountedLists(str(tmp_path / "keys.db")), StoredKeys()
    refresher = KeyRefresher(store, known)
    await refresher.refresh()
    await refresher.refresh()
    assert store.lists == 1
    await store.create(stored_key("team-b"))
    await refresher.refresh()
    await refresher.refresh()
    assert store.lists == 2 and set(known.by_name) == {"team-b"}
    await store.close()


async def test_a_failing_store_is_logged_once_keeps_the_keys_known_and_is_read_again_once_it_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "gateway.governance")
    path = tmp_path / "gone" / "keys.db"
    store = SQLiteKeyStore(str(path))
    known = StoredKeys(by_name={"team-b": stored_key("team-b")}, by_digest={stored_key("team-b").sha256: stored_key("team-b")})
    refresher = KeyRefresher(store, known)
    assert known.awaiting_store
    await refresher.start()  # does not raise
    assert not await refresher.refresh() and not await refresher.refresh()
    assert set(known.by_name) == {"team-b"} and known.awaiting_store  # never read yet
    assert len([r for r in caplog.records if "keeping the keys known" in r.getMessage()]) == 1
    os.mkdir(path.parent)
    assert await refresher.refresh()
    assert known.by_name == {} and "answers again" in caplog.records[-1].getMessage()
    await refresher.close()
    await store.close()


class Hanging(SQLiteKeyStore):
    """A store whose generation is never answered (an unroutable Redis) until `answer` is set."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.answer = asyncio.Event()

    async def generation(self) -> int:
        await self.answer.wait()
        return await super().generation()


async def test_a_store_that_does_not_answer_holds_up_the_start_no_longer_than_its_wait(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, known = Hanging(str(tmp_path / "keys.db")), StoredKeys()
    writer = SQLiteKeyStore(str(tmp_path / "keys.db"))
    await writer.create(stored_key("team-b"))
    await writer.close()
    refresher = KeyRefresher(store, known, every=0.05)
    await refresher.start(wait=0.01)  # the wait is what this test is about
    assert not known.by_name and "has not answered" in caplog.text
    assert known.awaiting_store  # the keys it lacks may be valid ones (the authenticator answers them 503)
    store.answer.set()
    await eventually(lambda: set(known.by_name) == {"team-b"}, what="the first read ended after the start")
    assert not known.awaiting_store
    await refresher.close()
    await store.close()


async def test_a_record_that_cannot_be_read_is_skipped_told_once_a_generation_and_the_refresh_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "gateway.governance")
    path = tmp_path / "keys.db"
    store, known = SQLiteKeyStore(str(path)), StoredKeys()
    await store.create(stored_key("team-b"))
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("INSERT INTO keys VALUES ('broken', 'not json')")
    db.close()
    await store.create(stored_key("team-c"))  # the generation moves past the broken record
    refresher = KeyRefresher(store, known)
    assert await refresher.refresh() and await refresher.refresh()
    assert set(known.by_name) == {"team-b", "team-c"} and not known.awaiting_store

    def told() -> list[str]:
        return [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]

    assert len(told()) == 1 and "'broken'" in told()[0] and "not JSON" in told()[0]
    await store.delete("team-c")  # a change elsewhere is still read
    assert await refresher.refresh()
    assert set(known.by_name) == {"team-b"} and len(told()) == 2  # read again with the new generation: told again
    await store.delete("broken")
    assert await refresher.refresh() and len(told()) == 2
    await store.close()
