"""Records the gateway keeps only for its own bookkeeping, which never hold an answer up for long.

Which target produced a response (`pins`) and a translated response's record (`response_chain`)
only let a later request continue, read or delete it: an answer waits for its record at most
`WAIT_SECONDS`. A write still under way then goes on by itself (it lands if the store was only
slow) and the answer goes without waiting for it. After a write that failed or was late, or a
read that failed, the store is skipped for `PAUSE_SECONDS`: records are not written, and reads
of them fail at once as the store being unavailable, instead of every request waiting on a store
that hangs. A late write that lands ends the pause early. A read of a record this process is
still writing waits for that write first, so a continuation that comes quickly is not refused.

One `Bookkeeping` per store (`of`): the process's store outlives reloads of the configuration.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable

from gateway.memory.store import MemoryStore, StoreUnavailable

WAIT_SECONDS = 1.0  # the longest an answer waits for its record
PAUSE_SECONDS = 5.0  # records skipped after a failure, as the limits governor leaves a Redis that failed
log = logging.getLogger("gateway")


class Bookkeeping:
    """Writes and reads of bookkeeping records in `store`: writes waited for `wait` seconds at most, the store skipped `pause` seconds after a failure."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        wait: float = WAIT_SECONDS,
        pause: float = PAUSE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._wait = wait
        self._pause = pause
        self._clock = clock
        self._skip_until = 0.0
        self._writing: dict[str, asyncio.Future[None]] = {}  # writes the answer stopped waiting for, by key

    @property
    def skipping(self) -> bool:
        """Whether records are skipped now (a write or read failed, or a write was late, less than `pause` ago)."""
        return self._clock() < self._skip_until

    async def write(self, key: str, value: str) -> bool:
        """Write `value` under `key`; False when it was skipped, failed, or is still under way after `wait` seconds (logged)."""
        if self.skipping:
            log.debug("record %s: skipped while the memory store is paused", key)
            return False
        writing = asyncio.ensure_future(self._store.put_value(key, value))
        try:
            await asyncio.wait([writing], timeout=self._wait)
        except asyncio.CancelledError:  # the request ended: its record goes on by itself
            writing.add_done_callback(_retrieved)
            raise
        if not writing.done():
            self._late(key, writing)
            return False
        failure = writing.exception()
        if isinstance(failure, StoreUnavailable):
            log.warning("record %s: could not be written (%s)", key, failure)
            self._pause_after(failure)
            return False
        if failure is not None:
            raise failure
        return True

    async def read(self, key: str) -> str | None:
        """The value under `key`, None when there is none; StoreUnavailable at once while the store is skipped.

        A write of `key` this process is still making is waited for first (for as long as the store's own timeout).
        """
        writing = self._writing.get(key)
        if writing is not None:
            await asyncio.wait([writing])  # ended: a write that landed has ended the pause, one that failed extended it
        if self.skipping:
            raise StoreUnavailable("the memory store is skipped for a few seconds after it failed or was late")
        try:
            return await self._store.get_value(key)
        except StoreUnavailable as exc:
            self._pause_after(exc)
            raise

    def _late(self, key: str, writing: asyncio.Future[None]) -> None:
        """The answer goes on without the write, which goes on by itself; the store is skipped meanwhile."""
        log.warning("record %s: the memory store did not confirm it within %gs; the answer goes on without it", key, self._wait)
        self._pause_after(TimeoutError(f"a write took more than {self._wait:g}s"))
        self._writing[key] = writing
        writing.add_done_callback(lambda done: self._settled(key, done))

    def _settled(self, key: str, writing: asyncio.Future[None]) -> None:
        """A late write ended: one that landed ends the pause, one that failed extends it."""
        if self._writing.get(key) is writing:
            del self._writing[key]
        if writing.cancelled():  # the loop ended first: nothing learned
            return
        failure = writing.exception()
        if failure is None:
            self._skip_until = 0.0
            log.warning("record %s: written late; the memory store is used for records again", key)
        else:
            self._pause_after(failure)

    def _pause_after(self, exc: BaseException) -> None:
        if not self.skipping:
            log.warning("memory store: records are skipped for %gs (%s)", self._pause, exc)
        self._skip_until = self._clock() + self._pause


def _retrieved(writing: asyncio.Future[None]) -> None:
    """Take a finished write's outcome, which nobody waits for any longer."""
    if not writing.cancelled():
        writing.exception()


_BOOKS: weakref.WeakKeyDictionary[MemoryStore, Bookkeeping] = weakref.WeakKeyDictionary()


def of(store: MemoryStore) -> Bookkeeping:
    """The bookkeeping of `store`, made at its first use."""
    books = _BOOKS.get(store)
    if books is None:
        books = _BOOKS[store] = Bookkeeping(store)
    return books
