"""A TCP server on loopback that takes connections and what is sent on them, and never answers: a Redis that hangs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass
class SilentServer:
    """Where it listens, and the connections it accepted so far (a client that retries opens another)."""

    url: str
    connections: int = 0
    _open: list[asyncio.StreamWriter] = field(default_factory=list)


@asynccontextmanager
async def silent_server() -> AsyncIterator[SilentServer]:
    """A server whose clients wait for replies that never come, counting their connections."""
    silent = SilentServer(url="")

    async def take(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        silent.connections += 1
        silent._open.append(writer)
        while await reader.read(65536):  # read and drop, until the client closes
            pass

    server = await asyncio.start_server(take, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    silent.url = f"redis://127.0.0.1:{port}/0"
    try:
        yield silent
    finally:
        server.close()
        for writer in silent._open:
            writer.close()
        await server.wait_closed()
