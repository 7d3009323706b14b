"""gateway.server.malformed_http: a request aiohttp cannot parse is refused with one warning, never a traceback."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from gateway.config.loader import parse_config
from gateway.server.app import create_app
from tests.support.gateway import KEYS


async def raw_exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /v1/conversations/" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",  # past aiohttp's 8190-byte line
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nBroken header line\r\n\r\n",
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-SECRET0123\x01\r\n\r\n",
    ],
    ids=["long-request-line", "broken-header", "key-in-a-broken-header"],
)
async def test_a_request_aiohttp_cannot_parse_is_a_400_and_one_warning_without_a_traceback(
    aiohttp_server: Any, caplog: pytest.LogCaptureFixture, request_bytes: bytes
) -> None:
    server = await aiohttp_server(create_app(parse_config(f"{KEYS}\nroutes: {{m: {{provider: mock}}}}", env={})))
    with caplog.at_level(logging.WARNING, logger="aiohttp.server"):
        answer = await raw_exchange(server.port, request_bytes)
    assert answer.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request")
    records = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert [(r.levelno, r.exc_info) for r in records] == [(logging.WARNING, None)]
    said = records[0].getMessage()
    assert said.startswith("malformed HTTP request refused with 400: ") and len(said) < 200
    assert b"SECRET" not in request_bytes or "SECRET" not in said  # the client's bytes are never quoted
