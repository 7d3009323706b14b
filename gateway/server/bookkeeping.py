"""Records the gateway keeps only for its own bookkeeping, which never hold an answer up for long.

Which target produced a response (`pins`) and a translated response's record (`response_chain`)
only let a later request continue, read or delete it: an answer waits for its record at most
`WAIT_SECONDS`. A write still under way then goes on by itself (it lands if the store was only
slow), and for `PAUSE_SECONDS` after such a late write, or until one lands, answers do not wait
for their records at all: each is written in the background (at most MOST_BEHIND at once), and
reads of other records fail at once as the store being unavailable (a 503 to retry). After
a write or a read that failed, the store is skipped for `PAUSE_SECONDS`: records are not written,
and reads of them fail at once as the store being unavailable, instead of every request waiting
on a store that is down or hangs. A read of a record this process is still writing waits for
that write first, so a continuation that comes quickly is not refused.

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
MOST_BEHIND = 1000  # records written in the background at once while the store is slow; more are skipped
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
        self._behind_until = 0.0
        self._writing: dict[str, asyncio.Future[None]] = {}  # writes the answer stopped waiting for, by key

    @property
    def skipping(self) -> bool:
        """Whether records are skipped now (a write or a read failed less than `pause` ago)."""
        return self._clock() < self._skip_until

    @property
    def behind(self) -> bool:
        """Whether answers go on without waiting for their records (a write was late less than `pause` ago, none landed since)."""
        return self._clock() < self._behind_until

    async def write(self, key: str, value: str) -> bool:
        """Write `value` under `key`; False when it was skipped, failed, or is still under way (after `wait` seconds, or
        at once while the store is behind)."""
        if self.skipping or (len(self._writing) >= MOST_BEHIND and self.behind):
            log.debug("record %s: skipped while the memory store is paused or behind", key)
            return False
        writing = asyncio.ensure_future(self._store.put_value(key, value))
        if self.behind:  # the store is slow: the answer goes on, the record lands when it can
            self._left(key, writing)
            return False
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
        """The value under `key`, None when there is none; StoreUnavailable at once while the store is skipped or behind.

        A write of `key` this process is still making is waited for first, `pause` seconds at most (a store
        slow for a moment, not one that hangs): one that landed is read.
        """
        writing = self._writing.get(key)
        landed = False
        if writing is not None:
            await asyncio.wait([writing], timeout=self._pause)
            landed = writing.done() and not writing.cancelled() and writing.exception() is None
        if not landed and (self.skipping or self.behind):  # at once, a 503 the client may retry, not a wait on a slow store
            raise StoreUnavailable("the memory store is skipped for a few seconds after it failed or was late")
        try:
            return await self._store.get_value(key)
        except StoreUnavailable as exc:
            self._pause_after(exc)
            raise

    def _late(self, key: str, writing: asyncio.Future[None]) -> None:
        """The answer goes on without the write, which goes on by itself; the next answers do not wait for theirs either."""
        log.warning(
            "record %s: the memory store did not confirm it within %gs; answers go on without waiting for records "
            "for %gs or until one lands", key, self._wait, self._pause,
        )  # fmt: skip
        self._behind_until = self._clock() + self._pause
        self._left(key, writing)

    def _left(self, key: str, writing: asyncio.Future[None]) -> None:
        """`writing` goes on without its answer: a read of `key` here waits for it, its end is learned from."""
        self._writing[key] = writing
        writing.add_done_callback(lambda done: self._settled(key, done))

    def _settled(self, key: str, writing: asyncio.Future[None]) -> None:
        """A write left to itself ended: one that landed ends the store's being behind, one that failed pauses it."""
        if self._writing.get(key) is writing:
            del self._writing[key]
        if writing.cancelled():  # the loop ended first: nothing learned
            return
        failure = writing.exception()
        if failure is None:
            if self.behind:
                log.warning("record %s: written late; answers wait for their records again", key)
            self._behind_until = 0.0
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
