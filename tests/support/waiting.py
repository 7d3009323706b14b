"""Waiting for what a test cannot await: a condition polled until it holds, with a deadline."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

POLL_SECONDS = 0.02


async def eventually(condition: Callable[[], bool | Awaitable[bool]], *, seconds: float = 10, what: str = "") -> None:
    """Return once `condition()` (a function or a coroutine function) holds; fail after `seconds`.

    For a state with no event to wait on from outside the gateway, such as a breaker's cooldown
    ending on a timer of its own.
    """
    deadline = time.monotonic() + seconds
    while True:
        held = condition()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what or condition}")
        await asyncio.sleep(POLL_SECONDS)
