"""Conversations locked across the processes sharing one SQLite file, by kernel locks on the lock file beside it.

Worker processes sharing one file (`--workers N`) serialize a conversation's turns by a lock
on its byte of `<db>-locks` (see sqlite_lockfile): taken by one system call on the event loop,
with no hop to the store's thread and nothing written to the database. This process's own
waiters queue in memory first (`KeyLocks`), so it never asks the kernel twice for a byte; while
another process holds it, the byte is tried again after 2 ms, doubling up to 50 ms, until the
lock timeout (LockTimeout).

The kernel lets go of a process's locks when it dies, so a dead holder's conversations are free
at once. A live holder keeps its lock until it lets go: there is no lease to run out and
nothing to renew. A holder stopped (SIGSTOP, a debugger) therefore holds its conversations
until it runs again or dies; the other processes' turns to them wait their lock timeout and
are refused (409), as they would be behind any slow turn.

A lock is let go only once the holder's write is done (`let_go`): a holder whose caller left
while its write was queued keeps the byte until the store's thread has served it, so the next
holder, in any process, reads the conversation with that write in it.

While a process holds a conversation no other one writes it, so what the process remembers of
it serves the turn as it would one process's, as long as no other process wrote it since it
was remembered: the conversation's version slot still holds the version recorded with it
(`Holding.version`; see sqlite_lockfile). That check is a read of mapped memory, on the loop.

Every process sharing a file must lock this way: a gateway from before the lock file (leases
in the `locks` table) does not see these locks, nor they its leases.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from gateway.memory.sqlite_lockfile import LockFile, Place, place
from gateway.memory.store import Key, KeyLocks, LockTimeout, StoreUnavailable

log = logging.getLogger("gateway.memory")

_FIRST_PAUSE: Final = 0.002  # between tries for a byte another process holds, doubling up to _LONGEST_PAUSE
_LONGEST_PAUSE: Final = 0.05


class Holding:
    """A conversation this process holds: the file and byte its lock is on; `pending`, its last write's future."""

    __slots__ = ("file", "pending", "place")

    def __init__(self, file: LockFile, where: Place) -> None:
        self.file = file
        self.place = where
        self.pending: asyncio.Future[Any] | None = None

    def version(self) -> int:
        """The conversation's version slot as it is now."""
        return self.file.slots[self.place.slot]

    def changes(self) -> int:
        """The conversation's change slot as it is now (see sqlite_lockfile)."""
        return self.file.changes[self.place.slot]


class SharedLocks:
    """This process's locks on the conversations of a file it shares with other processes.

    `locks` queues this process's waiters; `current` is the lock file the store's thread has
    open (None until it opened the database), `opened` has the thread open it, and `barrier`
    gives a future done once the thread served every job queued before it.
    """

    def __init__(
        self,
        locks: KeyLocks,
        *,
        current: Callable[[], LockFile | None],
        opened: Callable[[], Awaitable[object]],
        barrier: Callable[[], asyncio.Future[None]],
    ) -> None:
        self._locks = locks
        self._current = current
        self._opened = opened
        self._barrier = barrier
        self._file: LockFile | None = None
        self.held: dict[Key, Holding] = {}

    def hold(self, key: Key) -> SharedHold:
        """`async with locks.hold(key)`: the conversation, in this process and across; LockTimeout after the locks' timeout."""
        return SharedHold(self, key)

    def take_now(self, key: Key) -> bool:
        """Take a conversation nobody holds without an await (the common case); False: `take` it."""
        file = self._file
        if file is None or file is not self._current() or not self._locks.take(key):
            return False
        where = place(key)
        try:
            taken = file.lock(where)
        except OSError as exc:
            self._locks.release(key)
            raise StoreUnavailable(f"sqlite store: locking the conversation failed ({exc.strerror})") from None
        if not taken:
            self._locks.release(key)
            return False
        self.held[key] = Holding(file, where)
        return True

    async def take(self, key: Key) -> None:
        """Take the conversation, waiting behind this process's holders, then for other processes' (polled)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._locks.timeout
        await self._locks.acquire(key)
        try:
            file = await self._open_file()
            where = place(key)
            pause = _FIRST_PAUSE
            while not file.lock(where):
                left = deadline - loop.time()
                if left <= 0:
                    raise LockTimeout(f"conversation busy for more than {self._locks.timeout:g}s")
                await asyncio.sleep(min(pause, left))  # another process holds it: the kernel says when to no one
                pause = min(pause * 2, _LONGEST_PAUSE)
        except OSError as exc:
            self._locks.release(key)
            raise StoreUnavailable(f"sqlite store: locking the conversation failed ({exc.strerror})") from None
        except BaseException:
            self._locks.release(key)
            raise
        self.held[key] = Holding(file, where)

    async def _open_file(self) -> LockFile:
        """The lock file the store's thread has open, opened by a job first when it has none; a file replaced is retired."""
        file = self._current()
        if file is None:
            await self._opened()
            file = self._current()
            if file is None:
                raise StoreUnavailable("sqlite store: no lock file beside the database")
        if file is not self._file:
            if self._file is not None:
                self._file.retire()
            self._file = file
        return file

    def writing(self, key: Key, done: asyncio.Future[Any]) -> int:
        """A write of `key` was queued (its future `done`): the slot it goes to; the lock waits for it (see `let_go`)."""
        holding = self.held.get(key)
        if holding is None:  # written without the lock (not by a turn): its slot all the same
            return place(key).slot
        holding.pending = done
        return holding.place.slot

    def let_go(self, key: Key) -> None:
        """Let go of the conversation: this process's next waiter has it at once, other processes once its write is done.

        A write whose caller left is still queued: the byte then waits for the store's thread to
        have served it (`barrier`).
        """
        holding = self.held.pop(key)
        self._locks.release(key)
        pending = holding.pending
        if pending is not None and (pending.cancelled() or not pending.done()):
            try:
                self._barrier().add_done_callback(lambda _: self._unlock(holding))
                return
            except StoreUnavailable:  # the store is closed: its thread served everything
                pass
        self._unlock(holding)

    def _unlock(self, holding: Holding) -> None:
        try:
            holding.file.unlock(holding.place)
        except OSError as exc:  # the kernel lets go of it when the process ends
            log.warning("sqlite store: letting go of a conversation's lock failed (%s)", exc.strerror)

    def close(self) -> None:
        """Close the lock file (the one in use, and the one the thread opened since): the kernel lets go of what is held."""
        for file in (self._file, self._current()):
            if file is not None:
                file.close()
        self._file = None


class SharedHold:
    """`async with`: a conversation's lock (see `SharedLocks.hold`); a plain class, as it is entered on every turn."""

    __slots__ = ("_key", "_locks")

    def __init__(self, locks: SharedLocks, key: Key) -> None:
        self._locks = locks
        self._key = key

    async def __aenter__(self) -> None:
        if not self._locks.take_now(self._key):
            await self._locks.take(self._key)

    async def __aexit__(self, *exc: object) -> None:
        self._locks.let_go(self._key)
