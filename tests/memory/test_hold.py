"""A conversation held: its wait reported, a timeout a 409, a failing store a 503, a failed release after success logged."""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from gateway.core.errors import ConflictError
from gateway.memory.errors import MemoryUnavailableError
from gateway.memory.hold import Hold
from gateway.memory.store import InProcessStore, Key, StoreUnavailable
from gateway.observe.trace import Observer
from tests.support.waiting import eventually

KEY: Key = ("team-a", "chat-1")


class Waits(Observer):
    def __init__(self) -> None:
        self.waits: list[tuple[str, float]] = []

    def lock_waited(self, store: str, seconds: float) -> None:
        self.waits.append((store, seconds))


class FailingLock:
    """A store's lock whose taking or letting go fails as a store down does."""

    def __init__(self, *, enter: bool = False, exit: bool = False) -> None:
        self._enter, self._exit = enter, exit

    async def __aenter__(self) -> None:
        if self._enter:
            raise StoreUnavailable("down while locking")

    async def __aexit__(self, *exc: object) -> None:
        if self._exit:
            raise StoreUnavailable("down while releasing")


class FailingStore:
    def __init__(self, lock: FailingLock) -> None:
        self._lock = lock

    def lock(self, key: Key) -> AbstractAsyncContextManager[None]:
        return self._lock


def hold(store: Any, observer: Observer | None = None) -> Hold:
    return Hold(store, KEY, observer, store_kind="test")


async def test_a_free_conversation_is_held_at_once_and_its_wait_reported() -> None:
    store = InProcessStore(ttl_seconds=60, max_messages=10, lock_timeout=5)
    observer = Waits()
    async with hold(store, observer):
        assert observer.waits == []  # reported when it is let go
    assert observer.waits == [("test", 0.0)]
    async with hold(store):  # and free again
        pass


async def test_a_wait_past_the_timeout_is_a_409_and_is_reported() -> None:
    store = InProcessStore(ttl_seconds=60, max_messages=10, lock_timeout=0.05)
    observer = Waits()
    async with store.lock(KEY):
        with pytest.raises(ConflictError) as caught:
            async with hold(store, observer):
                pass
    assert caught.value.code == "memory_busy"
    [(kind, waited)] = observer.waits
    assert kind == "test" and waited > 0


async def test_a_store_that_fails_to_lock_is_a_503() -> None:
    with pytest.raises(MemoryUnavailableError):
        async with hold(FailingStore(FailingLock(enter=True))):
            pass


async def test_a_store_that_fails_under_the_hold_is_a_503() -> None:
    store = InProcessStore(ttl_seconds=60, max_messages=10, lock_timeout=5)
    with pytest.raises(MemoryUnavailableError):
        async with hold(store):
            raise StoreUnavailable("down while reading")
    async with hold(store):  # let go all the same
        pass


async def test_a_release_that_fails_after_the_work_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gateway.memory"):
        async with hold(FailingStore(FailingLock(exit=True))):
            pass
    assert "releasing the conversation's lock failed (down while releasing)" in caplog.text
    with pytest.raises(MemoryUnavailableError):  # after a failure, the store's failure is the one to report
        async with hold(FailingStore(FailingLock(exit=True))):
            raise KeyError("the work failed")


async def test_a_cancelled_wait_leaves_the_conversation_to_its_holder() -> None:
    store = InProcessStore(ttl_seconds=60, max_messages=10, lock_timeout=5)
    async with store.lock(KEY):
        waiter = asyncio.create_task(hold(store).__aenter__())
        await eventually(lambda: len(store._locks._held[KEY]) == 1, what="the waiter queued")
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    async with hold(store):  # nobody holds it
        pass
