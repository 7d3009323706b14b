"""server.maxConnections: a gateway short of file descriptors keeps serving (gateway.server.connections).

The gateway runs as a real process under a low RLIMIT_NOFILE, with real client sockets. The
guard needs aiohttp's private server parts: with the fast paths off (GATEWAY_AIOHTTP_INTERNALS=off,
which the gateway processes started here inherit) the limit is not enforced, and only the tests
that say so run.
"""

from __future__ import annotations

import asyncio
import random
import re
import resource
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from aiohttp.test_utils import TestServer

from gateway.config.loader import parse_config
from gateway.server import aiohttp_internals, connections
from gateway.server.app import create_app
from gateway.server.connections import OVER_LIMIT_ROOM, SILENT_SECONDS, QuietConnections, connection_limit
from tests.support.fakes import FakeUpstream, Step, stream_of
from tests.support.processes import running_gateway

FDS = 256
LIMIT = connection_limit(0, nofile=FDS)
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]
needs_guard = pytest.mark.skipif(
    not aiohttp_internals.can_guard_connections(), reason="aiohttp's fast paths are off: maxConnections is not enforced"
)


def test_the_default_limit_leaves_descriptors_for_upstreams_and_the_store() -> None:
    assert connection_limit(0, nofile=256) == 96
    assert connection_limit(0, nofile=1024) == 480
    assert connection_limit(0, nofile=resource.RLIM_INFINITY) == ((1 << 20) - 64) // 2
    assert connection_limit(0, nofile=10) == 8  # never none
    assert connection_limit(40, nofile=256) == 40  # configured: as it is


def fd_limit(count: int) -> Callable[[], None]:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    return lower


async def ask(connection: Connection, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `request` on `connection` and read the answer: its status, headers (lower-case names) and body."""
    reader, writer = connection
    writer.write(request)
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    status_line, *lines = head.strip().split("\r\n")
    headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(status_line.split()[1]), headers, body


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: gateway\r\n\r\n".encode()


def chat(model: str) -> bytes:
    body = orjson.dumps({"model": model, "messages": [{"role": "user", "content": "hold on"}]})
    return b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def slow_chat() -> bytes:
    return chat("slow")


PARTIAL_HEADER = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n"  # and never the rest: slowloris


async def connect(port: int) -> Connection:
    return await asyncio.open_connection("127.0.0.1", port)


async def answer_on_new_connections(
    port: int, request: bytes, *, until: int, seconds: float = 30
) -> tuple[int, dict[str, str], bytes]:
    """`request` on a new connection each time, until the answer's status is `until` or `seconds` passed: the last answer."""
    deadline = time.monotonic() + seconds
    while True:
        probe = await connect(port)
        try:
            answer = await ask(probe, request)
        finally:
            probe[1].close()
        if answer[0] == until or time.monotonic() > deadline:
            return answer


async def closed_by_the_gateway(opened: list[Connection], *, at_least: int, seconds: float = 30) -> int:
    """How many of `opened` the gateway closed (each reads to its end), once `at_least` did or `seconds` passed."""
    pending = {asyncio.create_task(reader.read()) for reader, _ in opened}
    closed = 0
    deadline = time.monotonic() + seconds
    try:
        while pending and closed < at_least and (left := deadline - time.monotonic()) > 0:
            done, pending = await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            closed += sum(1 for task in done if task.result() == b"")
    finally:
        for task in pending:
            task.cancel()
    return closed


def close_all(opened: list[Connection]) -> None:
    for _, writer in opened:
        writer.close()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "g.yaml"
    path.write_text("routes:\n  quick: {provider: mock}\n  slow: {provider: mock, mock: {latency: 120}}\n")
    return path


@needs_guard
async def test_idle_keep_alive_connections_make_room_for_new_clients(config: Path) -> None:
    opened: list[Connection] = []
    async with running_gateway(config, preexec_fn=fd_limit(FDS)) as gateway:
        port, logs = gateway.port, gateway.logs
        await logs.wait_for(f"accepting up to {LIMIT} client connections")
        try:
            clients = LIMIT + LIMIT // 2
            for _ in range(clients):  # each asks once, then keeps its connection open and idle
                connection = await connect(port)
                opened.append(connection)
                status, _, _ = await ask(connection, get("/healthz"))
                assert status == 200
            # the gateway closed idle ones to make room: no more than the limit stay open
            assert await closed_by_the_gateway(opened, at_least=clients - LIMIT) >= clients - LIMIT
            async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
                completion = await client.chat.completions.create(model="quick", messages=[{"role": "user", "content": "hi"}])
                assert completion.choices[0].message.content
            async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200
            assert not logs.matching("past server.maxConnections")  # nobody was refused
        finally:
            close_all(opened)


@needs_guard
async def test_past_the_limit_new_connections_get_503_and_health_checks_answer(config: Path) -> None:
    busy: list[Connection] = []
    async with running_gateway(config, preexec_fn=fd_limit(FDS)) as gateway:
        port, logs = gateway.port, gateway.logs
        try:
            for _ in range(LIMIT):  # every connection the gateway keeps, busy with a slow request
                connection = await connect(port)
                connection[1].write(slow_chat())
                busy.append(connection)
            # once the gateway has taken them all in
            status, headers, body = await answer_on_new_connections(port, get("/v1/models"), until=503)
            assert status == 503
            error = orjson.loads(body)["error"]
            assert (error["type"], error["code"]) == ("gateway_overloaded", "gateway_overloaded")
            assert headers["retry-after"] == "1" and headers["connection"] == "close"
            await logs.wait_for("past server.maxConnections", level="warning")
            for path in ("/healthz", "/readyz"):
                probe = await connect(port)
                status, headers, _ = await ask(probe, get(path))
                assert status == 200, path
                assert headers["connection"] == "close"  # the connection past the limit is not kept
                assert await probe[0].read() == b""
                probe[1].close()
            # connections past the limit that send nothing are not kept either (aiohttp would keep them 75 s)
            silent = [await connect(port) for _ in range(OVER_LIMIT_ROOM + 4)]
            busy += silent
            assert await closed_by_the_gateway(silent, at_least=len(silent)) == len(silent)
        finally:
            close_all(busy)
        # once the busy clients left, everyone is served again
        status, _, _ = await answer_on_new_connections(port, get("/v1/models"), until=200)
        assert status == 200
        await logs.wait_for("under server.maxConnections", level="info")
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as response:
            refused = re.search(r'gateway_overloaded_total\{reason="max_connections"\} (\S+)', await response.text())
        assert refused is not None and float(refused[1]) >= 1


async def test_without_the_server_parts_the_limit_is_not_enforced_and_the_gateway_serves(
    monkeypatch: pytest.MonkeyPatch, aiohttp_server: Callable[..., TestServer], caplog: pytest.LogCaptureFixture
) -> None:
    parts = (*aiohttp_internals._CONNECTION_PARTS, "_not_in_this_aiohttp")
    monkeypatch.setattr(aiohttp_internals, "_CONNECTION_PARTS", parts)
    assert not aiohttp_internals.can_guard_connections()
    config = parse_config("server: {maxConnections: 1}\nroutes:\n  quick: {provider: mock}\n")
    server = await aiohttp_server(create_app(config, rng=random.Random(1)))
    assert "server.maxConnections is not enforced" in caplog.text
    async with aiohttp.ClientSession() as one, aiohttp.ClientSession() as two:  # two connections: past a limit of 1
        for session in (one, two):
            async with session.get(server.make_url("/v1/models")) as response:
                assert response.status == 200


async def served_by_sdk(port: int, model: str = "quick", *, seconds: float = 30) -> str:
    """A chat completion from the official SDK, asked again (new connection each time) until it is answered 200; its text."""
    deadline = time.monotonic() + seconds
    async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
        while True:
            try:
                completion = await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
                return completion.choices[0].message.content or ""
            except (openai.APIStatusError, openai.APIConnectionError):
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.2)


@needs_guard
@pytest.mark.parametrize("sent", [b"", PARTIAL_HEADER], ids=["silent", "partial-header"])
async def test_connections_that_never_finish_a_request_make_room_for_new_clients(config: Path, sent: bytes) -> None:
    stalled: list[Connection] = []
    async with running_gateway(config, preexec_fn=fd_limit(FDS)) as gateway:
        port = gateway.port
        await gateway.logs.wait_for(f"accepting up to {LIMIT} client connections")
        try:
            for _ in range(LIMIT + 4):  # every connection the gateway keeps, and more, none finishing a request
                connection = await connect(port)
                connection[1].write(sent)
                stalled.append(connection)
            # aiohttp would keep them for its keep-alive time (75 s); the gateway closes the oldest for new clients
            assert await served_by_sdk(port)
            assert await closed_by_the_gateway(stalled, at_least=1) >= 1
            status, _, _ = await answer_on_new_connections(port, get("/healthz"), until=200)
            assert status == 200
        finally:
            close_all(stalled)


@needs_guard
async def test_connections_in_a_request_or_a_stream_are_never_closed_to_make_room(
    tmp_path: Path, make_upstream: Callable[..., Awaitable[FakeUpstream]]
) -> None:
    resume = asyncio.Event()
    upstream = await make_upstream(Step(events=[*stream_of("first")[:2], resume, *stream_of("second")[1:]]))
    path = tmp_path / "g.yaml"
    path.write_text(f'routes:\n  quick: {{provider: mock}}\n  up: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}\n')
    body = orjson.dumps({"model": "quick", "messages": [{"role": "user", "content": "hi"}]})
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    silent: list[Connection] = []
    async with running_gateway(path, preexec_fn=fd_limit(FDS)) as gateway:
        port = gateway.port
        await gateway.logs.wait_for(f"accepting up to {LIMIT} client connections")
        async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
            stream = await client.chat.completions.create(model="up", messages=[{"role": "user", "content": "hi"}], stream=True)
            pieces = [chunk.choices[0].delta.content async for chunk in _first(stream, 2)]
            assert pieces == ["", "first"]
            sending = await connect(port)  # a request whose body is on its way
            sending[1].write(head + body[:10])
            try:
                silent += [await connect(port) for _ in range(LIMIT)]
                # room was made: silent connections were closed, once silent for long enough
                assert await served_by_sdk(port)
                assert await closed_by_the_gateway(silent, at_least=1) >= 1
                resume.set()
                pieces += [chunk.choices[0].delta.content async for chunk in stream]
                assert "".join(piece or "" for piece in pieces) == "firstsecond"
                sending[1].write(body[10:])
                status, _, answer = await ask(sending, b"")
                assert status == 200 and orjson.loads(answer)["choices"][0]["message"]["content"]
            finally:
                sending[1].close()
                close_all(silent)


async def _first(stream: openai.AsyncStream[Any], count: int) -> AsyncIterator[Any]:
    """The next `count` items of `stream`, leaving it open for the rest."""
    for _ in range(count):
        yield await anext(stream)


def test_quiet_connections_close_the_least_recently_active_first_and_new_ones_after_their_grace() -> None:
    quiet: QuietConnections[str] = QuietConnections(grace=SILENT_SECONDS)
    quiet.opened("silent", 0.0)
    quiet.served("kept", 0.2)
    quiet.opened("new", 0.5)
    assert quiet.first(0.3) == "kept"  # "silent" may yet ask
    assert quiet.first(SILENT_SECONDS + 0.1) == "silent"  # silent since before "kept" was last active
    quiet.remove("silent")  # it asked
    assert quiet.first(SILENT_SECONDS + 0.1) == "kept"
    quiet.touch("kept", SILENT_SECONDS + 0.6)
    assert quiet.first(SILENT_SECONDS + 0.6) == "new"
    quiet.remove("new")
    quiet.remove("kept")
    assert quiet.first(100.0) is None and not quiet


@needs_guard
async def test_a_new_connection_near_the_limit_examines_one_connection_not_all(
    monkeypatch: pytest.MonkeyPatch, aiohttp_server: Callable[..., Awaitable[TestServer]]
) -> None:
    examined: list[object] = []
    waits_for_request = connections.waits_for_request

    def counted(connection: Any) -> bool:
        examined.append(connection)
        return waits_for_request(connection)

    monkeypatch.setattr(connections, "waits_for_request", counted)
    limit = 100
    config = parse_config(f"server: {{maxConnections: {limit}}}\nroutes:\n  quick: {{provider: mock}}\n")
    server = await aiohttp_server(create_app(config, rng=random.Random(1)))
    port = server.port
    assert port is not None
    body = orjson.dumps({"model": "quick", "messages": [{"role": "user", "content": "hi"}]})
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Length: %d\r\n\r\n" % len(body)
    busy: list[Connection] = []
    kept: list[Connection] = []
    try:
        for _ in range(40):  # in a request: their bodies are on their way
            connection = await connect(port)
            connection[1].write(head + body[:5])
            busy.append(connection)
        for _ in range(int(limit * connections.NEAR_LIMIT) - 1 - len(busy)):  # keep-alive, between requests
            connection = await connect(port)
            kept.append(connection)
            assert (await ask(connection, get("/healthz")))[0] == 200
        assert not examined
        arrivals = 30
        for _ in range(arrivals):  # each at NEAR_LIMIT: one connection closed, the least recently active
            connection = await connect(port)
            kept.append(connection)
            assert (await ask(connection, get("/healthz")))[0] == 200
        assert len(examined) == arrivals  # the busy ones are not even looked at
        assert await closed_by_the_gateway(kept[:arrivals], at_least=arrivals) == arrivals
        for connection in kept[arrivals:]:
            assert (await ask(connection, get("/healthz")))[0] == 200
        for _, writer in busy:
            writer.write(body[5:])
        for connection in busy:
            assert (await ask(connection, b""))[0] == 200
    finally:
        close_all(busy + kept)
