"""A deadline for the running task: asyncio.timeout's semantics for the cost of one timer handle.

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
    """`with Deadline(loop, seconds):` raises TimeoutError when the block outlasts `seconds`."""

    __slots__ = ("_cancelling", "_handle", "_loop", "_seconds", "_task", "expired")

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        self._loop = loop
        self._seconds = seconds
        self.expired = False

    def __enter__(self) -> Deadline:
        loop = self._loop
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("a Deadline must be entered inside a task")
        self._task = task
        self._cancelling = task.cancelling()  # cancellations already asked for are not ours to undo
        self._handle = loop.call_at(loop.time() + self._seconds, self._expire)
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
