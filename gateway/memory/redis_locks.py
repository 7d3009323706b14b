"""Conversation locks shared by replicas over Redis: whose a lock is, whether its holder lives, how a waiter waits.

A lock's value is its holder's replica id and a token (`<replica>:<token>`). Each replica keeps
a short-lived liveness record (`gw:live:<replica>`, renewed every second by one task, the
`Liveness`), which also extends the lease of the locks this replica has held for a while, so a
live but slow holder keeps its lock. A waiter that finds the lock held asks whether its holder
lives: a holder whose record is gone died, and its lock is taken over at once, by a script that
replaces it only while it is still that holder's (see `redis_scripts.TAKE`). The liveness
record lives in another Cluster slot than the conversation, so it is read apart, and only when
a lock is contended.

A missing record means a dead holder only when Redis answered long enough for a live one to
renew it. After an outage that outlived the records, every replica's is gone at once, and a live
holder's comes back with its next renewal; so a waiter asks about no holder until its own
renewals have gone through, none failing, for a record's life (`Liveness.steady`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Protocol

from gateway.memory.redis_scripts import Taken
from gateway.memory.store import Key, LockTimeout, StoreUnavailable

LIVE_PREFIX: Final = "gw:live:"
# A replica's record outlives it by this much: a dead holder's locks are free within about 4 s
LIVE_MS: Final = 3000
LIVE_EVERY: Final = 1.0  # seconds between renewals of the record
RECHECK_SECONDS: Final = 0.5  # a waiter asks again whether a holder lives after this long
FIRST_PAUSE: Final = 0.005  # a waiter's first pause before trying again; doubled each time
LONGEST_PAUSE: Final = 0.1
log = logging.getLogger("gateway.memory")


def live_key(replica: bytes) -> str:
    """The key of `replica`'s liveness record."""
    return LIVE_PREFIX + replica.decode()


def replica_of(value: bytes) -> bytes:
    """The replica id a lock value names."""
    return value.partition(b":")[0]


@dataclass(slots=True)
class Holding:
    """One hold of a conversation by this replica: its lock value and how far it got.

    The Redis lock is taken by the hold's first operation on the conversation (`locked`), with
    the read of its window, and let go with its write. `seen` is the version that write left:
    an operation after it takes the lock again only if no other holder wrote meanwhile.
    """

    value: bytes
    deadline: float  # of the loop's clock: waiting past it is a LockTimeout
    locked: bool = False
    renewed: float = 0.0  # the loop's time the lease was set or last extended
    seen: bytes | None = None


class Contention:
    """A waiter's choices while another holder has the lock: ask whether it lives, or pause and try again.

    `liveness` is this replica's record: it asks about no holder before that is steady (see the module).
    """

    __slots__ = ("_asked", "_asked_at", "_deadline", "_liveness", "_pause", "_replica", "_timeout")

    def __init__(self, replica: bytes, deadline: float, timeout: float, *, liveness: Liveness) -> None:
        self._replica = replica
        self._deadline = deadline
        self._timeout = timeout
        self._liveness = liveness
        self._pause = FIRST_PAUSE
        self._asked = b""
        self._asked_at = 0.0

    def ours(self, holder: bytes) -> bool:
        """Whether `holder` is a lock of this replica: one it failed to let go (this hold is its only one)."""
        return replica_of(holder) == self._replica

    def ask(self, holder: bytes, now: float) -> bool:
        """Whether to ask now if `holder` lives: a new holder at once, the same one every RECHECK_SECONDS.

        None before this replica's record is steady: a record missing then may be a live holder's.
        """
        if not self._liveness.steady(now):
            return False
        if holder == self._asked and now - self._asked_at < RECHECK_SECONDS:
            return False
        self._asked, self._asked_at = holder, now
        return True

    def pause(self, now: float) -> float:
        """Seconds to wait before trying again; LockTimeout once the deadline passed."""
        left = self._deadline - now
        if left <= 0:
            raise LockTimeout(f"conversation busy for more than {self._timeout:g}s")
        pause = self._pause
        self._pause = min(pause * 2, LONGEST_PAUSE)
        return min(pause, left)


async def wait_for_holder(
    holder: bytes,
    *,
    attempt: Callable[[bytes], Awaitable[list[Any]]],
    lives: Callable[[bytes], Awaitable[bool]],
    contention: Contention,
) -> list[Any]:
    """The lock is `holder`'s: try `attempt(stale)` again until it is not HELD (see redis_scripts.TAKE).

    A holder that is dead (or this replica's own, left over) is named as `stale`, so the next try
    takes its lock over at once; a live one is waited for, pausing a little longer each time.
    """
    loop = asyncio.get_running_loop()
    while True:
        now = loop.time()
        stale = b""
        if contention.ours(holder) or (contention.ask(holder, now) and not await lives(holder)):
            stale = holder
        else:
            await asyncio.sleep(contention.pause(now))
        reply = await attempt(stale)
        if reply[0] != Taken.HELD:
            return reply
        holder = reply[1]


async def extend_leases(
    held: Mapping[Key, Holding], *, lease: float, extend: Callable[[Key, Holding], Awaitable[bool]]
) -> None:
    """Extend the lease of each lock held for a third of it (`extend`: False when it is no longer this holder's)."""
    now = asyncio.get_running_loop().time()
    due = [(key, holding) for key, holding in held.items() if holding.locked and now - holding.renewed >= lease / 3]
    for key, holding in due:
        try:
            extended = await extend(key, holding)
        except StoreUnavailable as exc:  # retried at the next tick
            log.warning("memory %s: renewing the redis lock failed (%s); retrying", key[1], exc)
            continue
        if extended:
            holding.renewed = now
        else:  # whether the lock still holds is decided where it matters, atomically, by the append script
            log.warning("memory %s: the redis lock's lease ran out while held", key[1])
            holding.renewed = math.inf


class Liveness:
    """This replica's liveness record, set before its first lock and renewed every LIVE_EVERY seconds.

    `mark` sets the record; `tick` runs after each renewal (the store extends its leases there).
    A failure is logged once until a renewal goes through again, and retried at the next tick.
    """

    def __init__(self, *, mark: Callable[[], Awaitable[object]], tick: Callable[[], Awaitable[None]]) -> None:
        self._mark = mark
        self._tick = tick
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self._steady_since: float | None = None  # the loop's time since which every renewal went through

    def steady(self, now: float) -> bool:
        """Whether every renewal of the record went through for a record's life (LIVE_MS) up to `now`.

        Redis then answered long enough for each live replica to renew its own record, so a record
        missing now is a dead replica's. After a failed renewal the count starts again at the next
        that goes through: the outage may have let every record run out, a live one's until its next
        renewal.
        """
        return self._steady_since is not None and now - self._steady_since >= LIVE_MS / 1000

    async def ensure(self) -> None:
        """Set the record and start renewing it, unless that is done already."""
        if self._task is not None:
            return
        await self._renew()  # before the first lock: a waiter must never find a new holder without a record
        if self._task is None:
            self._task = asyncio.create_task(self._keep())

    async def _renew(self) -> None:
        try:
            await self._mark()
        except BaseException:  # cancelled too: whether the record was set is not known
            self._steady_since = None
            raise
        if self._steady_since is None:
            self._steady_since = asyncio.get_running_loop().time()

    async def _keep(self) -> None:
        # Until stop() lets it go, not until a cancellation: redis-py may swallow the one stop() sends
        # (seen: a worker that never stopped, its loop stuck awaiting this task after SIGTERM).
        while self._task is asyncio.current_task():
            await asyncio.sleep(LIVE_EVERY)
            try:
                await self._renew()
                self._failing = False
            except Exception as exc:  # whatever the client raised: retried at the next tick
                if not self._failing:
                    log.warning("memory: renewing this replica's liveness record failed (%s); retrying", exc)
                self._failing = True
            try:
                await self._tick()
            except Exception:  # a fault there must not end the record's renewals
                log.exception("memory: extending the redis locks' leases failed")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class Holds(Protocol):
    """A store whose holds are entered and left by RedisHold."""

    async def enter_hold(self, key: Key) -> None: ...

    async def leave_hold(self, key: Key) -> None: ...


class RedisHold:
    """`async with store.lock(key)` on Redis: a plain class, entered on every memory turn."""

    __slots__ = ("_key", "_store")

    def __init__(self, store: Holds, key: Key) -> None:
        self._store = store
        self._key = key

    async def __aenter__(self) -> None:
        await self._store.enter_hold(self._key)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self._store.leave_hold(self._key)
