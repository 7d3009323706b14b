"""Which worker of `gateway serve --workers N` answers: a request on a connection of its own, its owner read with `ss`."""

from __future__ import annotations

import asyncio
import re
import time

from tests.support.serve import ss


async def owner(port: int, writer: asyncio.StreamWriter, *, seconds: float = 30) -> int:
    """The pid of the worker that accepted `writer`'s connection to `port` (once it has: until then, none owns it)."""
    client_port = writer.get_extra_info("sockname")[1]
    deadline = time.monotonic() + seconds
    while True:
        found = await asyncio.to_thread(ss, "state", "established", f"( sport = :{port} and dport = :{client_port} )")
        pid = re.search(r"pid=(\d+)", found)
        if pid:
            return int(pid[1])
        assert time.monotonic() < deadline, f"no worker accepted the connection from port {client_port}"
        await asyncio.sleep(0.05)


async def get_answered_by(port: int, path: str) -> tuple[int, str]:
    """GET `path` on a new connection: the pid of the worker that answered, and the body (a 200's)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: gateway\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = re.search(rb"Content-Length: (\d+)", head, re.IGNORECASE)
        assert length, head
        body = await reader.readexactly(int(length[1]))
        return await owner(port, writer), body.decode()
    finally:
        writer.close()


async def post_held_by(port: int, path: str, body: bytes) -> tuple[int, asyncio.StreamWriter]:
    """POST `body` to `path` on a new connection left open: the pid of the worker that took it, and the connection."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST {path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    await writer.drain()
    return await owner(port, writer), writer


