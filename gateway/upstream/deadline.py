"""Deadlines for the running task, many under one timer.

`Deadline` bounds a block (an attempt); `IdleDeadline` bounds each wait of a stream for its
upstream's next bytes, one timer for the whole stream.

On Python 3.11 `asyncio.timeout()` builds its object through enum-state checks and asks for the
running loop three times per use (each a getpid() syscall there), and a timer of the loop's own
(uvloop's) is costly to set and cancel on every attempt. A Deadline is kept in a queue of its
`Deadlines` instead: when the time is up the task is cancelled, and on leaving the block that
cancellation becomes TimeoutError; a cancellation from outside (the client left) stays a
CancelledError, even when it arrives together with the expiry.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

# Timers fire on a millisecond clock (uvloop's), possibly a rounding early: a deadline this close
# to its time has reached it.
_SLACK = 0.001


class Deadlines:
    """The deadlines of one event loop, those of each length under one timer.

    Deadlines of one length end in the order they began. So one timer, set for the oldest, serves
    a whole queue of them: when it fires, those that are due expire, and it is set again for the
    oldest left. A block that ends in time only takes its deadline out of its queue; the timer set
    for it fires anyway, finds a younger one first, and is set again (one wake-up per length of
    time at most, not one timer per block).
    """

    __slots__ = ("loop", "queues")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queues: dict[float, _Queue] = {}

    def queue(self, seconds: float) -> _Queue:
        """The queue of the deadlines `seconds` long."""
        queue = self.queues.get(seconds)
        if queue is None:
            queue = self.queues[seconds] = _Queue(self.loop)
        return queue


class _Queue:
    """Deadlines of one length, oldest first (a dict keeps their order), and whether a timer is set."""

    __slots__ = ("_loop", "live", "timed")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.live: dict[Deadline, None] = {}
        self.timed = False

    def time(self, deadline: Deadline) -> None:
        """Set the timer for `deadline` (the queue has none)."""
        self.timed = True
        self._loop.call_at(deadline.when, self._fire)

    def _fire(self) -> None:
        due = self._loop.time() + _SLACK
        expired = []
        for deadline in self.live:
            if deadline.when > due:
                self._loop.call_at(deadline.when, self._fire)
                break
            expired.append(deadline)
        else:
            self.timed = False
        for deadline in expired:
            del self.live[deadline]
            deadline.expire()


class Deadline:
    """`with Deadline(deadlines, seconds):` raises TimeoutError when the block outlasts `seconds`.

    Running when built (no frame for a separate start on every attempt): build it where the block begins.
    """

    __slots__ = ("_cancelling", "_queue", "_task", "expired", "when")

    def __init__(self, deadlines: Deadlines, seconds: float) -> None:
        loop = deadlines.loop
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("a Deadline must be built inside a task")
        self._task = task
        self._cancelling = task.cancelling()  # cancellations already asked for are not ours to undo
        self.expired = False
        self.when = loop.time() + seconds
        # Joins the queue of deadlines of this length (made on first use), which one timer serves
        queue = self._queue = deadlines.queues.get(seconds) or deadlines.queue(seconds)
        queue.live[self] = None
        if not queue.timed:
            queue.time(self)

    def __enter__(self) -> Deadline:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._queue.live.pop(self, None)
        # As asyncio.Timeout: our cancel is taken back whatever happened; only when nobody else
        # asked for one does the CancelledError it caused become the TimeoutError.
        if self.expired and self._task.uncancel() <= self._cancelling and kind is asyncio.CancelledError:
            raise TimeoutError from exc

    def expire(self) -> None:
        """The time is up: the task is cancelled (its queue's timer calls this)."""
        self.expired = True
        self._task.cancel()


class IdleDeadline:
    """How long an upstream may stay silent: one timer for a whole stream, not one per read.

    Around each wait for the upstream, `since` holds the loop time the wait began (None between
    waits): a store per read, where moving an `asyncio.timeout` cost a timer handle and a
    getpid() per read. The timer looks at `since` when it fires: a wait `idle` old cancels the
    relaying task, and `expired()` tells that cancellation from any other; a younger wait, or
    none, sets the timer again for when the wait could turn `idle`.
    """

    __slots__ = ("_cancelling", "_fired", "_idle", "_loop", "_task", "_timer", "since")

    def __init__(self, loop: asyncio.AbstractEventLoop, idle: float) -> None:
        task = asyncio.current_task(loop)
        assert task is not None
        self.since: float | None = None
        self._loop, self._idle, self._task = loop, idle, task
        self._cancelling = task.cancelling()  # cancellations already asked for, not ours
        self._fired = False
        self._timer = loop.call_at(loop.time() + idle, self._check)

    def _check(self) -> None:
        now, since = self._loop.time(), self.since
        due = (now if since is None else since) + self._idle
        if since is not None and now >= due - _SLACK:
            self._fired = True
            self._task.cancel()
        else:
            self._timer = self._loop.call_at(due, self._check)

    def expired(self) -> bool:
        """Whether the task's cancellation is this deadline's (and then undo it): call once, on CancelledError."""
        return self._fired and self._task.uncancel() <= self._cancelling

    def close(self) -> None:
        self._timer.cancel()
