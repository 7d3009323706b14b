"""A provider made on its first call, on a thread: for one whose import costs seconds (litellm).

An anthropic target answers `/v1/messages` natively and needs litellm only for chat completions;
a gateway that never sends it one never imports litellm.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gateway.upstream.providers.base import Call, EventStream, Provider, Reply


class Deferred:
    """`make()` runs once, off the event loop, when the first call needs the provider it makes."""

    def __init__(self, make: Callable[[], Provider]) -> None:
        self._make = make
        self._made: asyncio.Future[Provider] | None = None

    async def _provider(self) -> Provider:
        if self._made is None:
            self._made = asyncio.ensure_future(asyncio.to_thread(self._make))
        # Shielded: a caller that gives up must not cancel the others' wait for the one import.
        return await asyncio.shield(self._made)

    async def complete(self, call: Call) -> Reply:
        return await (await self._provider()).complete(call)

    async def stream(self, call: Call) -> Reply | EventStream:
        return await (await self._provider()).stream(call)
