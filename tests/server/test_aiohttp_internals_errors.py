"""gateway.server.aiohttp_internals: aiohttp's own answers (a request it cannot parse) in the API's error shape.

A gateway on loopback gets hand-written bytes over raw sockets. With aiohttp's fast paths off
(GATEWAY_AIOHTTP_INTERNALS=off, CI's second run) aiohttp answers in its own plain text, with the
same status: the end-to-end tests accept that answer there.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import orjson
import pytest
from aiohttp import web
from aiohttp.http_exceptions import (
    BadHttpMessage,
    BadStatusLine,
    ContentEncodingError,
    InvalidHeader,
    LineTooLong,
)
from aiohttp.test_utils import TestClient
from yarl import URL

from gateway.server import aiohttp_internals
from gateway.server.aiohttp_internals import (
    PARSE_ERROR_CODE,
    answer_errors_in_json,
    json_errors_server,
    parse_error_reason,
    server_error,
)
from tests.support.gateway import KEYS, Gateway
from tests.support.raw_http import AUTH, address, parse_answer, send

SECRET: Final = b"sk-SECRET0123"  # in each malformed request: never in a JSON answer
JSON_ERRORS: Final = aiohttp_internals.can_answer_errors_in_json()
HOST: Final = b"Host: gateway\r\n"
CONFIG: Final = f"{KEYS}\nroutes: {{m: {{provider: mock}}}}"
MALFORMED: Final = {
    "request-line-too-long": b"GET /v1/models?" + SECRET * 800 + b" HTTP/1.1\r\n" + HOST + b"\r\n",
    "header-too-long": b"GET /v1/models HTTP/1.1\r\n" + HOST + b"X-A: " + SECRET * 800 + b"\r\n\r\n",
    "too-many-headers": b"GET /v1/models HTTP/1.1\r\n" + b"".join(b"X-%d: %s\r\n" % (i, SECRET) for i in range(200)) + b"\r\n",
    "header-without-colon": b"GET /v1/models HTTP/1.1\r\n" + HOST + SECRET + b" header\r\n\r\n",
    "control-char-in-header": b"GET /v1/models HTTP/1.1\r\n" + HOST + b"X-A: " + SECRET + b"\x01\r\n\r\n",
    "bad-method-token": b"G(T /v1/models HTTP/1.1\r\n" + HOST + b"X-A: " + SECRET + b"\r\n\r\n",
    "bad-http-version": b"GET /v1/" + SECRET + b" HTTP/9.x\r\n" + HOST + b"\r\n",
    "space-in-url": b"GET /v1/" + SECRET + b" x HTTP/1.1\r\n" + HOST + b"\r\n",
    "invalid-content-length": b"POST /v1/chat/completions HTTP/1.1\r\n" + HOST + b"Content-Length: 1" + SECRET + b"\r\n\r\n",
    "two-content-lengths": b"POST /v1/chat/completions HTTP/1.1\r\n" + HOST
    + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}" + SECRET,
    "bad-chunk-size": b"POST /v1/chat/completions HTTP/1.1\r\n" + HOST + AUTH
    + b"Transfer-Encoding: chunked\r\n\r\n" + SECRET + b"\r\nabc\r\n0\r\n\r\n",
    "chunked-and-content-length": b"POST /v1/chat/completions HTTP/1.1\r\n" + HOST
    + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n" + SECRET,
}  # fmt: skip
REASONS: Final = {
    "request-line-too-long": "a line longer than 8190 bytes (the request line or a header)",
    "header-too-long": "a line longer than 8190 bytes (the request line or a header)",
    "too-many-headers": "Too many headers received",
    "header-without-colon": "Invalid header token",
    "control-char-in-header": "Invalid header value char",
    "bad-method-token": "Invalid method encountered",
    "bad-http-version": "Invalid minor version",
    "space-in-url": "Expected HTTP/, RTSP/ or ICE/",
    "invalid-content-length": "Invalid character in Content-Length",
    "two-content-lengths": "Duplicate Content-Length",
    "bad-chunk-size": "Invalid character in chunk size",
    "chunked-and-content-length": "Content-Length can't be present with Transfer-Encoding",
}


@pytest.mark.parametrize("name", MALFORMED)
async def test_a_request_aiohttp_cannot_parse_is_answered_in_the_openai_error_shape(gateway: Gateway, name: str) -> None:
    client = await gateway(CONFIG)
    url = URL(str(client.base_url))
    assert url.host is not None and url.port is not None
    where = (url.host, url.port)
    status, headers, body = await send(where, MALFORMED[name])  # reads until the gateway closes the connection
    assert status == 400
    assert int(headers["content-length"]) == len(body)  # the whole answer, then the close
    if JSON_ERRORS:
        assert headers["content-type"] == "application/json" and SECRET not in body
        assert orjson.loads(body) == {
            "error": {
                "message": f"Malformed HTTP request: {REASONS[name]}.",
                "type": "invalid_request_error",
                "param": None,
                "code": PARSE_ERROR_CODE,
            }
        }
    else:  # the fast paths are off: aiohttp's own answer, which quotes the client's bytes
        assert headers["content-type"].startswith("text/plain")
    answer = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content  # and the gateway serves the next request


async def test_a_kept_alive_connection_gets_the_error_for_its_next_request_then_closes(gateway: Gateway) -> None:
    """A request answered, then garbage on the same connection: the 400, then the close."""
    where = await address(gateway, CONFIG)
    reader, writer = await asyncio.open_connection(*where)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\n" + HOST + b"\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        _, headers, _ = parse_answer(head)
        await reader.readexactly(int(headers["content-length"]))
        writer.write(MALFORMED["control-char-in-header"])
        status, headers, body = parse_answer(await asyncio.wait_for(reader.read(), 10))  # until the gateway closes
    finally:
        writer.close()
    assert status == 400 and int(headers["content-length"]) == len(body)
    if JSON_ERRORS:
        assert orjson.loads(body)["error"]["message"] == "Malformed HTTP request: Invalid header value char."


@pytest.mark.skipif(not JSON_ERRORS, reason="aiohttp's fast paths are off: its own answers stay plain text")
async def test_a_handler_that_raises_past_the_middlewares_is_a_json_500_without_a_traceback(aiohttp_client: Any) -> None:
    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError(SECRET.decode())

    app = web.Application()
    app.router.add_get("/", broken)
    assert answer_errors_in_json(app)
    client: TestClient[Any, Any] = await aiohttp_client(app)
    response = await client.get("/", headers={"Accept": "text/html"})  # aiohttp would write HTML with a traceback
    assert (response.status, response.content_type) == (500, "application/json")
    body = await response.read()
    assert SECRET not in body and b"Traceback" not in body
    assert orjson.loads(body)["error"] == {
        "message": "The gateway failed to handle this request.",
        "type": "server_error",
        "param": None,
        "code": "internal_error",
    }


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (LineTooLong(SECRET, 8190), "a line longer than 8190 bytes (the request line or a header)"),
        (BadHttpMessage("Invalid header value char:\n\n  b'X: sk-SECRET\\x01'\n       ^"), "Invalid header value char"),
        (BadStatusLine(error="Bad status line:\n  Invalid minor version:\n\n  b'GET / HTTP/9.x'\n    ^"), "Invalid minor version"),
        (BadHttpMessage("Too many headers received"), "Too many headers received"),
        (InvalidHeader(SECRET), "a malformed header"),  # aiohttp's own message quotes the header
        (BadStatusLine(SECRET.decode()), "a malformed request line"),
        (BadHttpMessage("Duplicate 'Host' header found."), "not valid HTTP/1.1"),
        (BadHttpMessage("x" * 101), "not valid HTTP/1.1"),
        (BadHttpMessage(""), "not valid HTTP/1.1"),
    ],
    ids=["line-too-long", "llhttp-reason", "llhttp-status-line", "aiohttp-plain", "quoting-header", "quoting-line",
         "quotes", "too-long", "empty"],
)  # fmt: skip
def test_a_parse_error_is_told_by_its_reason_or_its_kind_never_the_bytes(exc: BadHttpMessage, reason: str) -> None:
    assert parse_error_reason(exc) == reason


def test_aiohttp_s_other_answers_are_the_api_s_errors_by_status() -> None:
    assert server_error(400, BadHttpMessage("Too many headers received")).to_dict()["error"] == {
        "message": "Malformed HTTP request: Too many headers received.",
        "type": "invalid_request_error",
        "param": None,
        "code": PARSE_ERROR_CODE,
    }
    undecodable = server_error(400, ContentEncodingError("Can not decode content-encoding: brotli (br). Please install `Brotli`"))
    assert undecodable.to_dict()["error"] == {
        "message": "The request body could not be read: its Content-Encoding cannot be decoded.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_body",
    }  # as when the gateway itself cannot decode a body, and without what the server lacks
    timed_out = server_error(504, None)
    assert (timed_out.status, timed_out.type, timed_out.code) == (504, "server_error", "internal_error")
    unknown = server_error(431, None)
    assert (unknown.status, unknown.type) == (431, "invalid_request_error")


async def test_only_aiohttp_s_plain_server_is_made_to_answer_in_json() -> None:
    """Another Server (a subclass the internals were not read against) is served as it is: aiohttp's own answers."""

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response()

    class OwnServer(web.Server):
        pass

    own = OwnServer(handler)
    assert json_errors_server(own) is own
    plain = web.Server(handler, request_factory=None, handler_cancellation=True)
    made = json_errors_server(plain)
    assert made is not plain and isinstance(made, web.Server)
    assert (made.request_handler, made.request_factory, made.handler_cancellation) == (
        plain.request_handler, plain.request_factory, True
    )  # fmt: skip
