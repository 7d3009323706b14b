"""Deadlines for the running task, each for the cost of one timer handle.

`Deadline` bounds a block (an attempt); `IdleDeadline` bounds each wait of a stream for its
upstream's next bytes, one timer for the whole stream.

On Python 3.11 `asyncio.timeout()` builds its object through enum-state checks and asks for the
running loop three times per use (each a getpid() syscall there). A caller that already holds its
loop gets the same behaviour from `Deadline(loop, seconds)`: when the time is up the task is
cancelled, and on leaving the block that cancellation becomes TimeoutError; a cancellation from
outside (the client left) stays a CancelledError, even when it arrives together with the expiry.
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class Deadline:
    """`with Deadline(loop, seconds):` raises TimeoutError when the block outlasts `seconds`.

    Armed when built (one frame, not two, on every attempt): build it where the block begins.
    """

    __slots__ = ("_cancelling", "_handle", "_task", "expired")

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("a Deadline must be built inside a task")
        self._task = task
        self._cancelling = task.cancelling()  # cancellations already asked for are not ours to undo
        self.expired = False
        self._handle = loop.call_at(loop.time() + seconds, self._expire)

    def __enter__(self) -> Deadline:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._handle.cancel()
        # As asyncio.Timeout: our cancel is taken back whatever happened; only when nobody else
        # asked for one does the CancelledError it caused become the TimeoutError.
        if self.expired and self._task.uncancel() <= self._cancelling and kind is asyncio.CancelledError:
            raise TimeoutError from exc

    def _expire(self) -> None:
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

    # Timers fire on a millisecond clock (uvloop's), possibly a rounding early: a wait this close
    # to `idle` has lasted it.
    _SLACK = 0.001

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
        if since is not None and now >= due - self._SLACK:
            self._fired = True
            self._task.cancel()
        else:
            self._timer = self._loop.call_at(due, self._check)

    def expired(self) -> bool:
        """Whether the task's cancellation is this deadline's (and then undo it): call once, on CancelledError."""
        return self._fired and self._task.uncancel() <= self._cancelling

    def close(self) -> None:
        self._timer.cancel()
