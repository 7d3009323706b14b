"""The conversations an import writes into a SQLite file that running gateways may share: held, and marked changed.

Worker processes sharing one file (`serve --workers N`) hold a conversation for a turn by a lock
on its byte of the lock file beside it, and keep a copy of each conversation they read, marked
with its version and change slots there (see sqlite_locks, sqlite_lockfile). A copy whose
version slot moved while its change slot did not is brought up to date by the rows numbered
after it (see sqlite_moved): a conversation replaced without moving them would have its
imported rows read as appended to the old copy, a window of both.

So a restore holds the conversation by that same lock, with the store's own code (`SharedLocks`),
waiting behind a turn under way as another process's turn would, and puts fresh values in both
its slots before it writes (`mark_changed`), as the store's own changes that are not appends do
(an undo, a delete): a worker then reads the conversation whole at its next turn. The lock file
is made when there is none (a gateway opens it only once it serves a conversation), so one
starting while the import runs locks by the same file.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from gateway.memory.sqlite_lockfile import LockFile, open_lock_file
from gateway.memory.sqlite_locks import SharedLocks
from gateway.memory.store import Key, KeyLocks, LockTimeout, StoreUnavailable

log = logging.getLogger("gateway.memory")

LOCK_WAIT: Final = 120.0  # the store's default lockTimeoutSeconds: a turn's own wait for a conversation


class ImportLocks:
    """The conversations of the SQLite file at `database` as an import holds them; `wait`: how long for one a turn holds."""

    def __init__(self, database: str, *, wait: float = LOCK_WAIT) -> None:
        self._database = database
        self._file: LockFile | None = None
        self._wait = wait
        self._locks = SharedLocks(KeyLocks(wait), current=lambda: self._file, opened=self._open, barrier=_no_barrier)

    async def _open(self) -> None:
        if self._file is None:
            self._file = open_lock_file(self._database)

    @asynccontextmanager
    async def hold(self, key: Key) -> AsyncIterator[None]:
        """Hold the conversation as a turn does; StoreUnavailable when a gateway holds it past the wait."""
        locks = self._locks
        # `take` gives the loop a turn only while the byte is busy: then, and only then, this says why the import stalls
        waiting = asyncio.get_running_loop().call_soon(
            log.warning, "memory %s:%s is held by a running gateway: waiting up to %gs for its turn to end", *key, self._wait
        )
        try:
            await locks.take(key)
        except LockTimeout as exc:
            raise StoreUnavailable(f"conversation {key[0]}:{key[1]}: {exc} (held by a running gateway)") from None
        finally:
            waiting.cancel()
        try:
            yield
        finally:
            locks.let_go(key)

    def mark_changed(self, key: Key) -> None:
        """Fresh values in the held conversation's version and change slots, before it is written otherwise than by appends."""
        file = self._file
        assert file is not None, "hold the conversation first"
        slot = self._locks.held[key].place.slot
        file.stamp(slot)
        file.mark_changed(slot)

    def close(self) -> None:
        """Close the lock file; the kernel lets go of anything still held."""
        self._locks.close()


def _no_barrier() -> asyncio.Future[None]:
    """No store thread writes here: a conversation is let go once its restore is done, never after a queued write."""
    raise StoreUnavailable("no store thread")
