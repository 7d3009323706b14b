"""Upstreams that break HTTP itself: a raw asyncio TCP server on loopback writing bytes it is given.

aiohttp's own server cannot send what these tests need (a 100 KB header line, a body cut off
inside a chunk), so each request is answered with `answer` as it is, and the connection closed.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

OVERSIZED_HEADER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Big: " + b"a" * 100_000 + b"\r\nContent-Length: 2\r\n\r\n{}"
CUT_OFF_JSON = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"id": "chatcmpl-up", "obj'
# a chunked SSE answer broken off inside its first chunk
CUT_OFF_STREAM = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n40\r\ndata: {\"id\""


class RawUpstream:
    """Answers every request with `answer` and closes the connection; counts the requests."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.calls = 0
        self.url = ""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
            await reader.readexactly(length)
            self.calls += 1
            writer.write(self.answer)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def raw_upstream(answer: bytes) -> AsyncIterator[RawUpstream]:
    """A RawUpstream on a free loopback port; `url` is its `/v1`, with the port."""
    upstream = RawUpstream(answer)
    server = await asyncio.start_server(upstream.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    upstream.url = f"http://127.0.0.1:{port}/v1"
    try:
        yield upstream
    finally:
        server.close()
        await server.wait_closed()


def closed_port() -> int:
    """A loopback port nothing listens on (taken from the kernel, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
