"""gateway.server.bodies reading a body off the wire: its Content-Encoding judged, its read bounded in time.

Raw bytes need a raw socket: these tests write HTTP/1.1 by hand over asyncio streams. A body
that arrived whole with its head against one still arriving, and the size limit on both, are in
test_request_fast_paths.py.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from typing import Any

import orjson
import pytest

from tests.support.gateway import Gateway
from tests.support.openai_errors import assert_error
from tests.support.raw_http import AUTH, CONFIG, HELLO, address, exchange, parse_answer, request, send


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "GZip"])
async def test_body_that_is_not_what_content_encoding_says_is_a_400(gateway: Gateway, encoding: str) -> None:
    data = request(AUTH + f"Content-Encoding: {encoding}\r\n".encode())
    status, headers, body = await exchange(await address(gateway), data)
    assert status == 400 and headers["connection"] == "close"  # the undecodable rest is not read
    assert_error(body, code="invalid_body")
    assert encoding.lower() in body["error"]["message"].lower()  # aiohttp spells it as sent, or lowered


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("identity", bytes)],
)
async def test_compressed_body_is_read(gateway: Gateway, encoding: str, compress: Any) -> None:
    data = request(AUTH + f"Content-Encoding: {encoding}\r\n".encode(), compress(HELLO))
    status, _, body = await exchange(await address(gateway), data)
    assert status == 200
    assert body["choices"][0]["message"]["content"].endswith('"hi"')


@pytest.mark.parametrize("encoding", ["br", "zstd"])
async def test_uncompressed_br_or_zstd_body_is_a_400(gateway: Gateway, encoding: str) -> None:
    """aiohttp decodes these only with Brotli / backports.zstd installed; without, its parser says 400."""
    status, headers, body = await send(await address(gateway), request(AUTH + f"Content-Encoding: {encoding}\r\n".encode()))
    assert status == 400
    if headers["content-type"].startswith("application/json"):  # decoded by aiohttp, refused by the gateway
        assert_error(orjson.loads(body), code="invalid_body")


@pytest.mark.parametrize("encoding", ["compress", "x-gzip", "gzip, gzip", "gzip, identity", "é"])
async def test_unsupported_content_encoding_is_a_415(gateway: Gateway, encoding: str) -> None:
    data = request(AUTH + b"Content-Encoding: " + encoding.encode() + b"\r\n")
    status, headers, body = await exchange(await address(gateway), data)
    assert status == 415
    assert_error(body, param="Content-Encoding", code="unsupported_content_encoding")
    assert headers["accept-encoding"] == "gzip, deflate"


async def test_two_content_encoding_headers_are_one_list(gateway: Gateway) -> None:
    """aiohttp's C parser decodes by the last header; the gateway judges them all, so no mix-up."""
    for first, second in (b"compress", b"gzip"), (b"gzip", b"compress"):
        headers = AUTH + b"Content-Encoding: " + first + b"\r\nContent-Encoding: " + second + b"\r\n"
        status, _, body = await exchange(await address(gateway), request(headers, gzip.compress(HELLO)))
        assert status == 415
        assert_error(body, code="unsupported_content_encoding")


async def test_trickled_body_gets_a_408_and_the_connection_closed(gateway: Gateway) -> None:
    """A client sending one byte every 0.2 s is cut off at bodyReadTimeoutSeconds (0.5 s)."""
    where = await address(gateway, CONFIG + "server: {bodyReadTimeoutSeconds: 0.5}\n")
    reader, writer = await asyncio.open_connection(*where)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n" + AUTH + b"Content-Length: 100\r\n\r\n"

    async def trickle() -> None:
        writer.write(head)
        for _ in range(100):
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(0.2)  # the slow client under test, not a wait for anything

    sender = asyncio.create_task(trickle())
    try:
        # returns once the gateway closes: at 0.5 s with a 408; without the deadline at 20 s, with no 408
        raw = await asyncio.wait_for(reader.read(), 30)
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)  # it may also have hit the closed socket
        writer.close()
    status, headers, body = parse_answer(raw)
    assert status == 408
    assert headers["connection"] == "close"
    assert_error(orjson.loads(body), code="request_timeout")
