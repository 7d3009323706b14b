"""Reading a client's request body: encoding and size first, then a bounded read, then one parse."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from gateway.core.errors import (
    InvalidRequestError,
    PayloadTooLargeError,
    RequestTimeoutError,
    UnsupportedEncodingError,
)
from gateway.core.settings import ServerConfig
from gateway.server.aiohttp_internals import body_and_limit
from gateway.server.keys import CONFIG
from gateway.server.parsing import check_json_cost, drop_redirect_fields, parse_object

T = TypeVar("T")

# What aiohttp's HTTP parser decodes before the handler reads (br and zstd only with their
# packages installed; without them the parser itself answers 400), plus the no-op coding.
_DECODED: Final = frozenset({"gzip", "deflate", "br", "zstd", "identity"})
# Advertised in Accept-Encoding with a 415: the codings zlib always decodes.
ACCEPTED_ENCODINGS: Final = "gzip, deflate"
# Bodies larger than this are parsed and checked on a body thread (see off_loop). Below it the
# costliest JSON (256 KiB of `[],`) parses in ~10 ms, and a usual body is read without a hop.
OFF_LOOP_BYTES: Final = 256 * 1024
BODY_THREADS: Final = 2  # big bodies parse two at a time; more wait their turn, unparsed


def is_large(raw: bytes) -> bool:
    """Whether the work on a body of `raw` (its parse, checks, translation) is done off the loop."""
    return len(raw) > OFF_LOOP_BYTES


@functools.cache
def _body_threads() -> ThreadPoolExecutor:
    """The process's body threads, started at the first large body (so after a worker forks)."""
    return ThreadPoolExecutor(max_workers=BODY_THREADS, thread_name_prefix="gateway-bodies")


def off_loop(work: Callable[[], T]) -> asyncio.Future[T]:
    """`work` run on a body thread: the loop serves other requests meanwhile.

    Python code on a thread gives the loop its turn every few milliseconds; one C call that keeps
    the GIL (orjson's parse) does not, which is why a body's JSON is bounded (check_json_cost).
    """
    return asyncio.get_running_loop().run_in_executor(_body_threads(), work)


def check_content_encoding(values: Sequence[str]) -> None:
    """A 415 unless the body arrives decoded: no Content-Encoding, or one coding aiohttp decodes.

    415 rather than 400, as RFC 9110 (15.5.16) asks for a content coding the server does not
    accept, with Accept-Encoding naming those it does. A list of codings, or two headers, is
    refused: aiohttp decodes a single coding only, and its two parsers read different headers.
    """
    if not values or (len(values) == 1 and values[0].lower() in _DECODED):
        return
    given = ", ".join(values)
    raise UnsupportedEncodingError(
        f"Content-Encoding {given[:60]!r} is not supported; send the body as it is or in one of: {ACCEPTED_ENCODINGS}.",
        param="Content-Encoding",
        headers={"Accept-Encoding": ACCEPTED_ENCODINGS},
    )


def received_body(request: web.Request) -> bytes | None:
    """The body's bytes when all of it came with the headers, as a small request's does; else None.

    Taken from the buffer as it is (read() would loop on awaits meant for a body still arriving),
    bounded as read() bounds it, by aiohttp's client_max_size (maxBodyBytes).
    """
    content, limit = body_and_limit(request)
    try:
        if not content.is_eof():
            return None
        raw = content.read_nowait()
    except web.RequestPayloadError as exc:
        raise _unreadable(exc) from None
    if limit and len(raw) > limit:
        raise _too_large(request.app[CONFIG].server)
    return raw


async def read_body(request: web.Request) -> bytes:
    """The body's bytes, read once within the size and time limits; a clear 4xx for anything else."""
    if "Content-Encoding" in request.headers:
        check_content_encoding(request.headers.getall("Content-Encoding"))
    raw = received_body(request)
    if raw is not None:
        return raw
    try:
        return await _read_arriving(request, request.app[CONFIG].server)
    except web.HTTPRequestEntityTooLarge:  # over client_max_size, as read (or decompressed)
        raise _too_large(request.app[CONFIG].server) from None
    except web.RequestPayloadError as exc:
        raise _unreadable(exc) from None


def _unreadable(exc: web.RequestPayloadError) -> InvalidRequestError:
    cause = exc.__cause__
    reason = cause.message if isinstance(cause, HttpProcessingError) else str(exc)
    return InvalidRequestError(
        f"The request body could not be read: {reason}.", code="invalid_body", headers={"Connection": "close"}
    )


async def read_payload(request: web.Request) -> tuple[bytes, dict[str, Any]]:
    """The body's bytes and the JSON object they hold; a clear 4xx for anything else.

    Fields that would redirect the upstream or carry credentials are dropped (the bytes then
    re-encoded); a body without them stays the client's bytes.
    """
    # The usual body, whole and not encoded, is taken here: read_body's coroutine is not needed
    raw = None if "Content-Encoding" in request.headers else received_body(request)
    if raw is None:
        raw = await read_body(request)
    if len(raw) > OFF_LOOP_BYTES:
        return await off_loop(functools.partial(_parsed_large, raw))
    return _parsed(raw)


def _parsed_large(raw: bytes) -> tuple[bytes, dict[str, Any]]:
    """_parsed for a large body, on a body thread: its JSON's cost bounded first."""
    check_json_cost(raw)
    return _parsed(raw)


def _parsed(raw: bytes) -> tuple[bytes, dict[str, Any]]:
    """The body's bytes (re-encoded when fields were dropped) and the JSON object they hold."""
    payload = parse_object(raw)
    kept = drop_redirect_fields(payload)
    if kept is None:
        return raw, payload
    return orjson.dumps(kept), kept


async def _read_arriving(request: web.Request, server: ServerConfig) -> bytes:
    """A body still arriving: refused at once if its Content-Length is over the limit, else read in time."""
    length = request.content_length
    if length is not None and length > server.max_body_bytes:
        raise _too_large(server)
    try:
        # The whole read is bounded, not each chunk: a client trickling a byte at a time would
        # otherwise hold its connection for as long as it likes.
        async with asyncio.timeout(server.body_read_timeout_seconds):
            return await request.read()
    except TimeoutError:
        raise RequestTimeoutError(
            f"The request body did not arrive within {server.body_read_timeout_seconds:g} seconds.",
            headers={"Connection": "close"},
        ) from None


def _too_large(server: ServerConfig) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"The request body is larger than the limit of {server.max_body_bytes} bytes.")
