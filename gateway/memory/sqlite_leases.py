"""Conversations locked across the processes sharing one SQLite file, by leases in the file itself.

Worker processes sharing one file (`--workers N`) serialize a conversation's turns through the
`locks` table: a lease is a row naming its holder, renewed while held, and gone once it runs out.
A lease also names its holder's pid and boot (see `boot_id`), so a holder that died on this
machine is taken over at once rather than after the lease runs out.

Taking a lease also reads what the holder needs to trust what its process remembers of the
conversation (`look`, in the same transaction): while the lease is held no other process writes
it, so its process's cache and remembered row serve the turn as they would one process's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import socket
import sqlite3
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Final, Protocol, TypeVar

from gateway.memory.sqlite_file import transaction
from gateway.memory.store import Key, KeyLocks, LockTimeout, StoreUnavailable

T = TypeVar("T")
log = logging.getLogger("gateway.memory")

LEASE_SECONDS = 15.0
_INSERT: Final = "INSERT OR IGNORE INTO locks (tenant, memory_id, owner, expires_at, pid, boot) VALUES (?, ?, ?, ?, ?, ?)"
# A lease let go waits this long at most for a batch of the store's thread to delete it with (see
# `Leases.let_go`); other processes poll for a lease every 2 to 50 ms.
RELEASE_WITHIN: Final = 0.002
_FIRST_PAUSE: Final = 0.002  # between tries for a lease another process holds, doubling up to _LONGEST_PAUSE
_LONGEST_PAUSE: Final = 0.05


class Run(Protocol):
    """Runs `work` on the store's thread with its open file."""

    def __call__(self, work: Callable[[sqlite3.Connection], T], /) -> Awaitable[T]: ...


Look = Callable[[sqlite3.Connection, Key], float | None]  # on the thread, once a lease is taken: the conversation's stamp
Seen = Callable[[Key, float | None], None]  # on the loop, before the holder goes on: that stamp
_BUSY: Final = (False, None)  # what `_insert_lock` answers when another holder has the lease


def owns(db: sqlite3.Connection, key: Key, token: str) -> bool:
    """Whether the lease on `key` is still the one `token` names."""
    row = db.execute("SELECT owner FROM locks WHERE tenant = ? AND memory_id = ?", key).fetchone()
    return row is not None and row[0] == token


class Leases:
    """This process's leases: its waiters queue in memory (`locks`), one of them at a time takes the row in the file.

    `held` maps each conversation this process holds to its lease's token, which its writes check
    (see `owns`): a write after the lease passed on is refused. Each lease taken is `look`ed at
    in its transaction, and what that says is `seen` before the holder goes on.
    """

    def __init__(self, run: Run, locks: KeyLocks, *, look: Look, seen: Seen) -> None:
        self._run = run
        self._locks = locks
        self._look = look
        self._seen = seen
        self._owner = f"{os.getpid()}-{os.urandom(4).hex()}"
        self._boot = boot_id()
        self._tokens = itertools.count(1)
        self.held: dict[Key, str] = {}
        self.released: deque[tuple[Key, str]] = deque()  # let go, their rows not yet deleted (see `delete_released`)
        self._flush: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task[None]] = set()

    def hold(self, key: Key) -> Lease:
        """`async with leases.hold(key)`: the conversation's lease, renewed until let go; LockTimeout after the locks' timeout."""
        return Lease(self, key)

    async def take(self, key: Key) -> tuple[str, Renewal]:
        """Take the lease on `key`, which this process's own lock (`locks`) is held on; its token and renewal."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._locks.timeout
        await self._locks.acquire(key)
        try:
            token = f"{self._owner}:{next(self._tokens)}"
            pause = _FIRST_PAUSE
            while True:
                taken, stamp = await self._try_lock(key, token)
                if taken:
                    break
                if loop.time() >= deadline:
                    raise LockTimeout(f"conversation busy for more than {self._locks.timeout:g}s")
                await asyncio.sleep(min(pause, max(deadline - loop.time(), 0.0)))  # another process holds it: poll the file
                pause = min(pause * 2, _LONGEST_PAUSE)
        except BaseException:
            self._locks.release(key)
            raise
        self._seen(key, stamp)
        self.held[key] = token
        return token, Renewal(functools.partial(self._renew, key, token), after=LEASE_SECONDS / 3)

    async def let_go(self, key: Key, token: str, renewal: Renewal) -> None:
        """Let go of the lease `take` gave, then of this process's own lock.

        Its row is deleted by the store thread's next batch, in that batch's transaction (see
        `delete_released`), rather than by a job of its own: a turn costs one hop to the thread
        and one transaction less. When no batch comes within RELEASE_WITHIN, one is sent. The
        thread serves jobs in order, so this process's own next try for the lease comes after.
        """
        try:
            del self.held[key]
            await renewal.stop()
            self.released.append((key, token))
            if self._flush is None:
                self._flush = asyncio.get_running_loop().call_later(RELEASE_WITHIN, self._send_released)
        finally:
            self._locks.release(key)

    def _send_released(self) -> None:
        """Have the store's thread delete the leases let go, unless a batch did meanwhile."""
        self._flush = None
        if self.released:
            task = asyncio.ensure_future(self._delete_released())
            self._flushes.add(task)  # held until done: the loop keeps only a weak reference
            task.add_done_callback(self._flushes.discard)

    async def _delete_released(self) -> None:
        try:
            await self._run(lambda db: None)  # each batch starts by deleting them
        except StoreUnavailable as exc:  # the leases end them; never hide how the turns went
            log.warning("sqlite store: releasing leases failed (%s); they will expire", exc)

    def delete_released(self, db: sqlite3.Connection) -> None:
        """On the store's thread, first in each batch: delete the rows of the leases let go since the last one."""
        released = self.released
        while released:
            key, token = released.popleft()
            _unlock(db, key=key, token=token)

    async def _try_lock(self, key: Key, token: str) -> tuple[bool, float | None]:
        """Whether the lease was taken, and then the conversation's stamp (see `look`)."""
        try:
            return await self._run(functools.partial(self._insert_lock, key=key, token=token))
        except asyncio.CancelledError:  # the caller left: never leave a lock behind for the lease to clear
            # Queued after the try on the store's thread, which serves jobs in order: it removes the lease if taken.
            await self._run(functools.partial(_unlock, key=key, token=token))
            raise

    def _insert_lock(self, db: sqlite3.Connection, *, key: Key, token: str) -> tuple[bool, float | None]:
        now = time.time()
        row = (*key, token, now + LEASE_SECONDS, os.getpid(), self._boot)
        with transaction(db):
            db.execute("DELETE FROM locks WHERE tenant = ? AND memory_id = ? AND expires_at < ?", (*key, now))
            if db.execute(_INSERT, row).rowcount != 1:
                if not self._holder_died(db, key):
                    return _BUSY
                db.execute("DELETE FROM locks WHERE tenant = ? AND memory_id = ?", key)
                if db.execute(_INSERT, row).rowcount != 1:
                    return _BUSY
            return True, self._look(db, key)

    def _holder_died(self, db: sqlite3.Connection, key: Key) -> bool:
        """Whether the lease on `key` belongs to a process of this boot that no longer runs."""
        holder = db.execute("SELECT pid, boot FROM locks WHERE tenant = ? AND memory_id = ?", key).fetchone()
        # Rows from older gateways carry no pid; rows from other machines name pids we cannot see.
        if holder is None or holder[0] is None or holder[1] != self._boot:
            return False
        return process_gone(holder[0])

    async def _renew(self, key: Key, token: str) -> None:
        def extend(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE locks SET expires_at = ? WHERE tenant = ? AND memory_id = ? AND owner = ?",
                (time.time() + LEASE_SECONDS, *key, token),
            )

        while True:  # a file locked for a while is retried; whether the lease held is decided at the write
            try:
                await self._run(extend)
                pause = LEASE_SECONDS / 3
            except StoreUnavailable as exc:
                log.warning("memory %s: renewing the sqlite lease failed (%s); retrying", key[1], exc)
                pause = 1.0
            await asyncio.sleep(pause)  # the lease's renewal period, not a wait for another task


class Lease:
    """`async with`: a conversation's lease (see `Leases.hold`); a plain class, as it is entered on every turn."""

    __slots__ = ("_key", "_leases", "_renewal", "_token")

    def __init__(self, leases: Leases, key: Key) -> None:
        self._leases = leases
        self._key = key

    async def __aenter__(self) -> None:
        self._token, self._renewal = await self._leases.take(self._key)

    async def __aexit__(self, *exc: object) -> None:
        await self._leases.let_go(self._key, self._token, self._renewal)


class Renewal:
    """Renews a lease from `after` seconds on, by a task started then: most turns end before, and cost a timer, not a task."""

    __slots__ = ("_renew", "_task", "_timer")

    def __init__(self, renew: Callable[[], Coroutine[object, object, None]], *, after: float) -> None:
        self._renew = renew
        self._task: asyncio.Task[None] | None = None
        self._timer = asyncio.get_running_loop().call_later(after, self._start)

    def _start(self) -> None:
        self._task = asyncio.create_task(self._renew())

    async def stop(self) -> None:
        """Stop renewing; a renewal under way is cancelled, and waited for."""
        self._timer.cancel()
        task = self._task
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _unlock(db: sqlite3.Connection, *, key: Key, token: str) -> None:
    db.execute("DELETE FROM locks WHERE tenant = ? AND memory_id = ? AND owner = ?", (*key, token))


def boot_id() -> str:
    """Names the space this process's pid is unique in: this boot's id and pid namespace, else the hostname.

    The pid namespace is part of it because containers on one host share the boot id but number
    their processes separately, so a pid from another container says nothing here.
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return socket.gethostname()
    try:
        return f"{boot} {os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return boot


def process_gone(pid: int) -> bool:
    """Whether no process `pid` runs here; one that exited but was not yet reaped (a zombie) is gone."""
    if pid <= 0:  # kill(0) and kill(-n) address process groups, not a holder
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: it exists, as another user
        return False
    try:  # a worker killed under `serve --workers` stays a zombie until its parent joins it
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] in (["Z"], ["X"])
