"""gateway.upstream.aiohttp_internals: the fast paths, the version check and switch that choose them, and the fallback.

take_arrived is driven through aiohttp's own response parser and reader, fed a chunked answer by
hand (a transport that records what flow control asks of it), so that the reader's buffer holds
many HTTP chunks, and flow control pauses the connection, at a known point. The provider's
stream is read both ways from a real upstream on loopback.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from operator import attrgetter
from typing import Any

import aiohttp
import pytest
from aiohttp.client_proto import ResponseHandler
from aiohttp.streams import StreamReader

from gateway.config.loader import parse_config
from gateway.core.aiohttp_releases import SWITCH, internals_for
from gateway.core.sse import Event
from gateway.upstream import aiohttp_internals
from gateway.upstream.aiohttp_internals import arrival, is_closed, take_arrived
from gateway.upstream.providers import openai
from gateway.upstream.providers.base import Call
from gateway.upstream.providers.openai import OpenAIProvider
from tests.support.fakes import FakeUpstream, Step, chunk

EVENTS = [b"data: %d %s\n\n" % (i, b"x" * 200) for i in range(40)]
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
CHUNKS = b"".join(b"%x\r\n%s\r\n" % (len(event), event) for event in EVENTS)  # an HTTP chunk an event
END = b"0\r\n\r\n"

needs_the_internals = pytest.mark.skipif(
    not aiohttp_internals._has_names(), reason=f"aiohttp {aiohttp.__version__} lacks the internals take_arrived reads"
)


# ---------------------------------------------------------------- which path: version and switch


@pytest.mark.parametrize(
    ("version", "setting", "fast"),
    [
        ("3.14.5", None, True),
        ("3.14.0", "", True),
        ("3.14.5", "on", True),
        ("3.14.5", "off", False),
        ("3.14.5", " OFF ", False),
        ("3.14.6", None, False),  # not read against its internals yet
        ("3.15.0", None, False),
        ("3.13.2", None, False),
        ("3.14.5rc1", None, False),
        ("4.0.0a1", None, False),
        ("not-a-version", None, False),
    ],
)
def test_the_fast_paths_run_only_on_a_verified_version_unless_switched_off(version: str, setting: str | None, fast: bool) -> None:
    assert internals_for(version, setting).private is fast


def _chosen_at_import(setting: str | None) -> str:
    """What a fresh interpreter's aiohttp_internals chose, with the switch at `setting` (None: unset)."""
    env = {key: value for key, value in os.environ.items() if key != SWITCH}
    if setting is not None:
        env[SWITCH] = setting
    code = "from gateway.upstream import aiohttp_internals as m; print(m.FAST, m.DRAINABLE is not None, m.is_closed)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()


@needs_the_internals
def test_the_switch_is_read_at_import() -> None:
    assert _chosen_at_import(None) == "True True operator.attrgetter('_closed')"
    assert _chosen_at_import("off") == "False False operator.attrgetter('closed')"


# ---------------------------------------------------------------- take_arrived


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


async def _next_bytes(body: StreamReader, *, fast: bool) -> bytes:
    """A read's bytes, as the provider's stream takes them: by take_arrived, or by readany()."""
    if not fast:
        return await body.readany()
    while (data := take_arrived(body)) is None:
        await arrival(body)
    return data


async def _read_all(body: StreamReader, protocol: ResponseHandler, *, fast: bool, done: int = 0) -> list[bytes]:
    """Every read of `body` up to its end (`done` bytes read before), the end fed once the events are all read."""
    reads: list[bytes] = []
    while done < len(b"".join(EVENTS)):
        reads.append(await _next_bytes(body, fast=fast))
        done += len(reads[-1])
    protocol.data_received(END)
    reads.append(await _next_bytes(body, fast=fast))
    return reads


@needs_the_internals
async def test_every_chunk_that_has_arrived_comes_in_one_read() -> None:
    protocol, transport, body = await _answer(read_bufsize=2**16)  # room for all: no flow control
    reads = await _read_all(body, protocol, fast=True)
    assert reads == [b"".join(EVENTS), b""]
    assert "pause" not in transport.asked


@pytest.mark.parametrize("read_bufsize", [2**16, 1024])
async def test_the_public_fallback_reads_the_same_bytes(read_bufsize: int) -> None:
    protocol, _, body = await _answer(read_bufsize)
    reads = await _read_all(body, protocol, fast=False)
    assert b"".join(reads) == b"".join(EVENTS) and reads[-1] == b""


@needs_the_internals
async def test_a_connection_paused_by_flow_control_is_resumed_once_its_bytes_are_taken() -> None:
    # A small buffer: aiohttp pauses the connection part way through the events it holds.
    protocol, transport, body = await _answer(read_bufsize=1024)
    assert transport.asked == ["pause"]
    first = await _next_bytes(body, fast=True)
    assert EVENTS[0] + EVENTS[1] in first
    more = body.read_nowait()  # what the parser went on to read once resumed: never, unless it is
    assert more
    reads = [first, more, *await _read_all(body, protocol, fast=True, done=len(first) + len(more))]
    assert b"".join(reads) == b"".join(EVENTS) and reads[-1] == b""


@needs_the_internals
async def test_an_error_on_the_connection_is_raised_by_the_next_take() -> None:
    protocol, _, body = await _answer(read_bufsize=2**16)
    protocol.connection_lost(ConnectionResetError("reset by peer"))
    with pytest.raises(aiohttp.ClientPayloadError):
        take_arrived(body)


# ---------------------------------------------------------------- both paths, from a real upstream

STREAM = [chunk({"role": "assistant", "content": ""}), *(chunk({"content": f"p{i}"}) for i in range(30)), b"data: [DONE]\n\n"]


@pytest.fixture(params=["fast", "public"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The provider reading with the fast paths (when this aiohttp has them) or with the public API alone."""
    if request.param == "public":
        monkeypatch.setattr(openai, "DRAINABLE", None)
        monkeypatch.setattr(openai, "is_closed", attrgetter("closed"))
    elif not aiohttp_internals.FAST:
        pytest.skip("the fast paths are off here (GATEWAY_AIOHTTP_INTERNALS=off, or an aiohttp not verified)")
    return str(request.param)


async def test_a_stream_reads_the_same_events_either_way(path: str, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=[*STREAM[:10], 0.01, *STREAM[10:]]))
    target = parse_config(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}').routes["chat"].first_target
    async with aiohttp.ClientSession() as session:
        provider = OpenAIProvider(session)
        opened: Any = await provider.stream(Call(target, "chat/completions", {"model": "m", "stream": True}))
        events: list[Event] = []
        while batch := await opened.next_batch():
            events += batch
        response = opened._response
        assert is_closed(response) and response.closed  # read to its end: aiohttp gave the connection back
        await opened.close()
        upstream.then(Step(events=[STREAM[0], asyncio.Event()]))  # a stream that never ends
        unfinished: Any = await provider.stream(Call(target, "chat/completions", {"model": "m", "stream": True}))
        assert not is_closed(unfinished._response)
        await unfinished.close()  # its connection cannot go back to the pool: dropped
        assert is_closed(unfinished._response)
    assert [event.raw for event in events] == STREAM
