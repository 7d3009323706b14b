"""gateway.server.bookkeeping: records an answer waits for only briefly, on a real Redis that hangs (SIGSTOP) or is gone.

The clock of the pause is the test's; the waits are the store's own (10 s for a reply) and the
record's (`wait`). A step that must end before the store's own timeout runs under a deadline
below it: that is what is tested, that the step does not wait for the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway.memory.redis import RedisStore
from gateway.memory.store import StoreUnavailable
from gateway.server import bookkeeping
from gateway.server.bookkeeping import Bookkeeping
from tests.support.redis_hangs import hung, resume
from tests.support.redis_stores import redis_store
from tests.support.servers import RedisProcess, redis_server

BEFORE_THE_STORE_GIVES_UP = 8.0  # below the Redis store's 10 s for a reply


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisProcess]:
    with redis_server(tmp_path) as started:
        yield started


@pytest.fixture
async def store(server: RedisProcess) -> AsyncIterator[RedisStore]:
    opened = redis_store(server.url)
    await opened.ping()  # connected before the tests stop the server
    yield opened
    await opened.close()


async def test_a_write_to_a_hung_store_is_left_after_its_wait_and_the_next_ones_are_not_waited_for(
    server: RedisProcess, store: RedisStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A store that is slow for a while loses no record: each lands when it resumes (the second review's F1)."""
    books = Bookkeeping(store, wait=0.2, pause=5, clock=Clock())
    with hung(server):
        async with asyncio.timeout(BEFORE_THE_STORE_GIVES_UP):
            assert await books.write("late", "1") is False
            assert books.behind and not books.skipping
            assert await books.write("behind", "2") is False  # not waited for: written in the background
        reading = asyncio.ensure_future(books.read("late"))  # this process's own write of it: waited for
        resume(server)
        assert await reading == "1"
        assert await books.read("behind") == "2"
    assert not books.behind  # the late writes landed: answers wait for their records again
    assert await store.get_value("behind") == "2"
    assert "record late: the memory store did not confirm it within 0.2s" in caplog.text


async def test_while_the_store_is_behind_at_most_so_many_records_are_written_in_the_background(
    server: RedisProcess, store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bookkeeping, "MOST_BEHIND", 2)
    books = Bookkeeping(store, wait=0.2, pause=5, clock=Clock())
    with hung(server):
        async with asyncio.timeout(BEFORE_THE_STORE_GIVES_UP):
            await books.write("a", "1")
            await books.write("b", "2")
            await books.write("c", "3")  # a third: skipped
        resume(server)
        assert await books.read("b") == "2"
    assert await store.get_value("c") is None


async def test_after_a_failed_write_records_are_skipped_until_the_pause_ends(server: RedisProcess, store: RedisStore) -> None:
    clock = Clock()
    books = Bookkeeping(store, wait=30, pause=5, clock=clock)
    server.stop()
    assert await books.write("refused", "1") is False
    assert books.skipping
    server.start()
    assert await books.write("skipped", "2") is False
    with pytest.raises(StoreUnavailable, match="skipped"):
        await books.read("skipped")
    clock.now += 5
    assert not books.skipping
    assert await books.write("written", "3") is True
    assert await books.read("written") == "3"
    assert await books.read("skipped") is None


async def test_a_failed_read_pauses_the_records_too(server: RedisProcess, store: RedisStore) -> None:
    clock = Clock()
    books = Bookkeeping(store, wait=30, pause=5, clock=clock)
    server.stop()
    with pytest.raises(StoreUnavailable):
        await books.read("k")
    server.start()
    assert books.skipping
    assert await books.write("k", "v") is False
    clock.now += 5
    assert await books.write("k", "v") is True


async def test_a_store_has_one_bookkeeping(store: RedisStore) -> None:
    other = redis_store("redis://127.0.0.1:1/0")
    try:
        assert bookkeeping.of(store) is bookkeeping.of(store)
        assert bookkeeping.of(other) is not bookkeeping.of(store)
    finally:
        await other.close()
