"""_taken: an upstream body's bytes taken all at once, as readany() would hand them over piece by piece.

aiohttp's own response parser and reader are fed a chunked answer by hand (a transport that records
what flow control asks of it), so that the reader's buffer holds many HTTP chunks, and flow control
pauses the connection, at a known point.
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.client_proto import ResponseHandler
from aiohttp.streams import StreamReader

from gateway.upstream.providers import openai
from gateway.upstream.providers.openai import _taken

EVENTS = [b"data: %d %s\n\n" % (i, b"x" * 200) for i in range(40)]
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
CHUNKS = b"".join(b"%x\r\n%s\r\n" % (len(event), event) for event in EVENTS)  # an HTTP chunk an event
END = b"0\r\n\r\n"


class _Transport:
    """The socket's side of flow control: what the protocol asked of it, in order."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def pause_reading(self) -> None:
        self.asked.append("pause")

    def resume_reading(self) -> None:
        self.asked.append("resume")

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def close(self) -> None:
        pass


async def _answer(read_bufsize: int) -> tuple[ResponseHandler, _Transport, StreamReader]:
    """A connection that has received the head and every event (not the end) of a chunked stream."""
    protocol = ResponseHandler(asyncio.get_running_loop())
    transport = _Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    protocol.set_response_params(read_bufsize=read_bufsize)
    protocol.data_received(HEAD + CHUNKS)
    _, body = await protocol.read()
    return protocol, transport, body


async def _next_bytes(body: StreamReader) -> bytes:
    """A read's bytes, as _UpstreamEvents.next_batch takes them (readany() without the internals _taken knows)."""
    if type(body) is not openai._DRAINABLE:
        return await body.readany()
    while (data := _taken(body)) is None:
        await body._wait("readany")
    return data


async def _read_all(body: StreamReader, protocol: ResponseHandler, done: int = 0) -> list[bytes]:
    """Every read of `body` up to its end (`done` bytes read before), the end fed once the events are all read."""
    reads: list[bytes] = []
    while done < len(b"".join(EVENTS)):
        reads.append(await _next_bytes(body))
        done += len(reads[-1])
    protocol.data_received(END)
    reads.append(await _next_bytes(body))
    return reads


async def test_every_chunk_that_has_arrived_comes_in_one_read() -> None:
    protocol, transport, body = await _answer(read_bufsize=2**16)  # room for all: no flow control
    reads = await _read_all(body, protocol)
    assert reads == [b"".join(EVENTS), b""]
    assert "pause" not in transport.asked


async def test_a_connection_paused_by_flow_control_is_resumed_once_its_bytes_are_taken() -> None:
    # A small buffer: aiohttp pauses the connection part way through the events it holds.
    protocol, transport, body = await _answer(read_bufsize=1024)
    assert transport.asked == ["pause"]
    first = await _next_bytes(body)
    assert EVENTS[0] + EVENTS[1] in first
    more = body.read_nowait()  # what the parser went on to read once resumed: never, unless it is
    assert more
    reads = [first, more, *await _read_all(body, protocol, len(first) + len(more))]
    assert b"".join(reads) == b"".join(EVENTS) and reads[-1] == b""


async def test_without_the_internals_it_knows_it_reads_as_readany_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai, "_DRAINABLE", None)  # an aiohttp whose StreamReader is built otherwise
    protocol, _, body = await _answer(read_bufsize=1024)
    reads = await _read_all(body, protocol)
    assert b"".join(reads) == b"".join(EVENTS) and reads[-1] == b""
