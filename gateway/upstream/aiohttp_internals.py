"""The aiohttp client internals the upstream side relies on: here and nowhere else, checked at import.

Two fast paths, each with the public API as its fallback:

- `take_arrived(content)`: every byte of a response body that has arrived, in one join. The
  public `readany()` hands aiohttp's buffer over an HTTP chunk at a time and asks the
  connection to resume reading after each, and an upstream that streams writes every event as
  a chunk of its own. Fallback: `await content.readany()` (`DRAINABLE` is None).
- `is_closed(response)`: whether aiohttp gave the connection back itself at the body's end,
  read from the response's field, without the `closed` property's Python call. Fallback: the
  property.

The fast paths are taken only with an aiohttp release whose internals were read against them
(gateway.core.aiohttp_releases, shared with the server side) that has every name they use, and
unless the environment says GATEWAY_AIOHTTP_INTERNALS=off (read once, at import; the server
side's `gateway.server.aiohttp_internals` reads the same variable, and says when the release
keeps both sides to the public API). gateway.core.internals makes that choice. The benchmarks
in bench/ measure what they save; the tests run both ways.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from operator import attrgetter
from typing import Final

import aiohttp
from aiohttp.base_protocol import BaseProtocol
from aiohttp.client_reqrep import ClientResponse
from aiohttp.streams import StreamReader

from gateway.core.aiohttp_releases import SWITCH, internals_for

# What the fast paths read, by owner
_READER_NAMES: Final = (
    "_buffer", "_buffer_offset", "_cursor", "_eof", "_exception", "_http_chunk_splits", "_protocol", "_size",
    "_timer", "_wait",
)  # fmt: skip
_PROTOCOL_NAMES: Final = ("_reading_paused",)
_RESPONSE_NAMES: Final = ("_closed",)


def _has_names() -> bool:
    """Whether the installed aiohttp still has every private name the fast paths use."""
    return (
        all(hasattr(StreamReader, name) for name in _READER_NAMES)
        and all(hasattr(BaseProtocol, name) for name in _PROTOCOL_NAMES)
        and all(hasattr(ClientResponse, name) for name in _RESPONSE_NAMES)
    )


FAST: Final = internals_for(aiohttp.__version__, os.environ.get(SWITCH)).private and _has_names()

# The reader take_arrived drains: StreamReader itself, not a subclass (EMPTY_PAYLOAD is one, with no
# buffer); None when the fast paths are off, and every reader is read with readany().
DRAINABLE: Final[type[StreamReader] | None] = StreamReader if FAST else None

# The response's own field when FAST, else the public property (which returns that field)
is_closed: Final[Callable[[ClientResponse], bool]] = attrgetter("_closed" if FAST else "closed")


def take_arrived(content: StreamReader) -> bytes | None:
    """All the body's bytes that have arrived, at once; b"" at its end; None when none are there.

    After None, await `arrival(content)` and ask again. readany() would return the same bytes a
    chunk at a time. Here the buffer is emptied with one join, and reading resumed only when
    flow control paused it (as readany() would after its last chunk; a decompression in
    progress waits only while paused, too). `content` is a DRAINABLE reader.
    """
    if content._exception is not None:
        raise content._exception
    buffer = content._buffer
    if not buffer:
        return b"" if content._eof else None
    if len(buffer) == 1 or content._buffer_offset:  # one chunk costs readany() no more; an offset is its to handle
        return content.read_nowait()
    content._timer.assert_timeout()
    data = b"".join(buffer)
    buffer.clear()
    content._size = 0
    cursor = content._cursor = content._cursor + len(data)
    splits = content._http_chunk_splits
    if splits:  # as readany(): the chunk ends behind the cursor go, one at it stays (a chunk end that
        last = splits[-1]  # brings no bytes must not wake the reader up for nothing)
        splits.clear()
        if last == cursor:
            splits.append(last)
    protocol = content._protocol
    if protocol._reading_paused:
        protocol.resume_reading()
    return data


def arrival(content: StreamReader) -> Awaitable[None]:
    """Wait until bytes (or the end, or an error) arrive for a DRAINABLE reader, as readany() waits."""
    return content._wait("readany")
