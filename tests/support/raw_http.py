"""HTTP/1.1 written by hand over a raw socket: what no SDK sends (raw header bytes, lying encodings).

`request` builds a chat completion request with the header lines given, `exchange` sends it to
the gateway's (host, port) from `address` and reads the answer until the gateway closes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from yarl import URL

from tests.support.gateway import GATEWAY_KEY, Gateway

# keys on, an in-process memory store, and one route `m` to the mock provider
CONFIG = f"""
auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}
memory: {{store: memory}}
routes: {{m: {{provider: mock}}}}
"""
HELLO = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
AUTH = b"Authorization: Bearer " + GATEWAY_KEY.encode() + b"\r\n"


async def address(gateway: Gateway, config: str = CONFIG) -> tuple[str, int]:
    """Start the gateway on `config`: the host and port it listens on."""
    url = URL(str((await gateway(config)).base_url))
    assert url.host is not None and url.port is not None
    return url.host, url.port


def request(headers: bytes, body: bytes = HELLO) -> bytes:
    """A chat completion request with these header lines."""
    length = b"Content-Length: %d\r\n" % len(body)
    return b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n" + headers + length + b"\r\n" + body


def parse_answer(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """An HTTP/1.1 answer's status, headers (names lowered) and body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


async def send(where: tuple[str, int], data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read until the gateway closes; the status, headers and body."""
    reader, writer = await asyncio.open_connection(*where)
    try:
        writer.write(data)
        return parse_answer(await asyncio.wait_for(reader.read(), 10))
    finally:
        writer.close()


async def exchange(where: tuple[str, int], data: bytes) -> tuple[int, dict[str, str], Any]:
    """`send`, with the body read as JSON."""
    status, headers, body = await send(where, data)
    return status, headers, orjson.loads(body)
