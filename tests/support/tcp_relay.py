"""A TCP relay on loopback in front of a real server: requests pass at once, replies only while let through.

So a test can cut a client off after the server ran its command and before the reply arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Relay:
    """Forwards every connection to `host`:`port`; `replies` open lets replies through (open at first).

    `arrived(data)` waits until a request containing `data` has been forwarded to the server.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.replies = asyncio.Event()
        self.replies.set()
        self.url = ""
        self._sent = b""
        self._forwarded = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()

    async def arrived(self, data: bytes) -> None:
        async with self._forwarded:
            await self._forwarded.wait_for(lambda: data in self._sent)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(self.host, self.port)
        requests = asyncio.create_task(self._requests(reader, upstream_writer))
        replies = asyncio.create_task(self._replies(upstream_reader, writer))
        self._tasks |= {requests, replies}
        await asyncio.wait([requests, replies], return_when=asyncio.FIRST_COMPLETED)
        for task in (requests, replies):
            task.cancel()
        for closing in (writer, upstream_writer):
            closing.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
            async with self._forwarded:
                self._sent += data
                self._forwarded.notify_all()

    async def _replies(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            await self.replies.wait()
            writer.write(data)
            await writer.drain()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task


@asynccontextmanager
async def relay_to(url: str) -> AsyncIterator[Relay]:
    """A Relay in front of the redis-server at `url` (redis://host:port/db); its own URL is `relay.url`."""
    address, _, database = url.removeprefix("redis://").partition("/")
    host, _, port = address.rpartition(":")
    relay = Relay(host, int(port))
    server = await asyncio.start_server(relay._serve, "127.0.0.1", 0)
    relay.url = f"redis://127.0.0.1:{server.sockets[0].getsockname()[1]}/{database}"
    try:
        yield relay
    finally:
        server.close()
        await relay.close()
