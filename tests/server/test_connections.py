"""server.maxConnections: a gateway short of file descriptors keeps serving (gateway.server.connections).

The gateway runs as a real process under a low RLIMIT_NOFILE, with real client sockets.
"""

from __future__ import annotations

import asyncio
import random
import re
import resource
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import openai
import orjson
import pytest
from aiohttp.test_utils import TestServer

from gateway.config import parse_config
from gateway.server import connections
from gateway.server.app import create_app
from gateway.server.connections import OVER_LIMIT_ROOM, connection_limit
from tests.support.processes import running_gateway

FDS = 256
LIMIT = connection_limit(0, nofile=FDS)
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


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


def slow_chat() -> bytes:
    body = orjson.dumps({"model": "slow", "messages": [{"role": "user", "content": "hold on"}]})
    return b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


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
    monkeypatch.setattr(connections, "_CONNECTION_PARTS", (*connections._CONNECTION_PARTS, "_not_in_this_aiohttp"))
    assert not connections.supported()
    config = parse_config("server: {maxConnections: 1}\nroutes:\n  quick: {provider: mock}\n")
    server = await aiohttp_server(create_app(config, rng=random.Random(1)))
    assert "server.maxConnections is not enforced" in caplog.text
    async with aiohttp.ClientSession() as one, aiohttp.ClientSession() as two:  # two connections: past a limit of 1
        for session in (one, two):
            async with session.get(server.make_url("/v1/models")) as response:
                assert response.status == 200
