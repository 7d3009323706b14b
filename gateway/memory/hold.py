"""A conversation held under its store's lock, with the store's failures as the client sees them."""

from __future__ import annotations

import logging
import time
from types import TracebackType

from gateway.memory.errors import busy, unavailable
from gateway.memory.store import Held, Key, LockTimeout, MemoryStore, StoreUnavailable
from gateway.observe.trace import Observer

log = logging.getLogger("gateway.memory")


class Hold:
    """`async with Hold(...)`: the conversation's lock; a timeout is a 409, a failing store a 503.

    A plain class rather than a generator-based context manager: it is entered on every memory
    request. Once the work under the lock is done (the answer may be on its way to the client),
    a failure to release is logged, never raised: the lock's lease (Redis) or the process's end (SQLite's kernel locks) ends it anyway.
    """

    __slots__ = ("_key", "_lock", "_observer", "_store_kind", "_waited")

    def __init__(self, store: MemoryStore, key: Key, observer: Observer | None, *, store_kind: str) -> None:
        self._key = key
        self._lock = store.lock(key)
        self._observer = observer
        self._store_kind = store_kind

    async def __aenter__(self) -> None:
        if not self._take_now():
            await self._wait()

    def _take_now(self) -> bool:
        """Take a free in-process lock (a Held: the common case) without an await; False: `_wait` for it."""
        lock = self._lock
        if type(lock) is Held and lock.locks.take(lock.key):
            self._waited = 0.0  # reported when the lock is let go
            return True
        return False

    async def _wait(self) -> None:
        """Take the lock by its `async with`, waiting as long as the store lets it."""
        started = time.monotonic()
        try:
            await self._lock.__aenter__()
        except BaseException as exc:
            raise self._not_held(exc, started) from None
        self._waited = time.monotonic() - started  # reported when the lock is let go

    def _not_held(self, exc: BaseException, started: float) -> BaseException:
        """What a wait for the lock that failed raises (LockTimeout: a 409); its wait is reported now."""
        self._waited = time.monotonic() - started
        self._report()
        if isinstance(exc, StoreUnavailable):
            return unavailable(exc)
        if isinstance(exc, LockTimeout):
            return busy(self._key, exc)
        return exc

    def _report(self) -> None:
        """Tell the observer what the hold did: how long it waited for the lock."""
        if self._observer is not None:
            self._observer.lock_waited(self._store_kind, self._waited)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:  # never swallows the exception
        self._report()
        lock = self._lock
        try:
            if type(lock) is Held:  # in-process: let go without an await
                lock.locks.release(lock.key)
            else:
                await lock.__aexit__(kind, exc, traceback)
        except StoreUnavailable as failure:
            if kind is not None:
                raise unavailable(failure) from None
            log.warning("memory %s: releasing the conversation's lock failed (%s); its lease or the process's end will end it", self._key[1], failure)
        if isinstance(exc, StoreUnavailable):
            raise unavailable(exc) from None
        if isinstance(exc, LockTimeout):
            raise busy(self._key, exc) from None
