"""Concurrent turns on one memoryId: serialized, none lost, none interleaved."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import openai
import pytest

from tests.support.gateway import Gateway
from tests.support.processes import wait_for_listeners
from tests.support.servers import flush_redis as flush
from tests.support.servers import free_port, wait_for_port

TURNS = 50
HEADERS = {"memoryId": "busy", "maxMessages": "200"}


async def run_turns(clients: list[openai.AsyncOpenAI]) -> list[str]:
    """TURNS concurrent requests spread over `clients`; returns the user messages in completion order.

    The mock model reports how many messages it received, so each reply tells exactly where its
    turn completed: the k-th turn to complete saw the k-1 turns before it (2k - 1 messages).
    The order in which responses reach this client may differ when a process is descheduled.
    """
    seen: dict[int, str] = {}

    async def one(i: int) -> None:
        text = f"turn-{i}"
        reply = await clients[i % len(clients)].chat.completions.create(
            model="mock", messages=[{"role": "user", "content": text}], extra_headers=HEADERS
        )
        match = re.search(r"received (\d+) messages", reply.choices[0].message.content or "")
        assert match is not None
        seen[int(match.group(1))] = text

    await asyncio.gather(*(one(i) for i in range(TURNS)))
    # every request saw the whole history before it, never a half-written or interleaved turn
    assert sorted(seen) == [2 * k + 1 for k in range(TURNS)]
    return [seen[count] for count in sorted(seen)]


async def stored_users(base_url: str) -> list[str]:
    async with aiohttp.ClientSession() as session, session.get(f"{base_url}/memory/busy") as response:
        body = await response.json()
    assert body["turns"] == TURNS and len(body["messages"]) == 2 * TURNS
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def mock_config(memory: str) -> str:
    return f"""
memory: {{{memory}, lockTimeoutSeconds: 60}}
routes:
  mock: {{provider: mock, mock: {{latency: 0.005}}}}
"""


async def test_fifty_concurrent_turns_on_sqlite(gateway: Gateway, tmp_path: Path) -> None:
    client = await gateway(mock_config(f'store: sqlite, path: "{tmp_path / "m.db"}"'), timeout=120)
    completed = await run_turns([client])
    assert await stored_users(str(client.base_url).rstrip("/")) == completed


async def test_fifty_concurrent_turns_on_redis(gateway: Gateway, redis_url: str) -> None:
    await flush(redis_url)
    client = await gateway(mock_config(f'store: redis, url: "{redis_url}"'), timeout=120)
    completed = await run_turns([client])
    assert await stored_users(str(client.base_url).rstrip("/")) == completed


@contextmanager
def serving(config: Path, *, workers: int = 1) -> Iterator[str]:
    """`gateway serve` with `workers` processes in a subprocess on a free port; yields its /v1 URL once each listens."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--host", "127.0.0.1",
         "--port", str(port), "--workers", str(workers)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, timeout=60)
        wait_for_listeners(port, workers, process)  # the first to listen is not all of them
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(30)


@pytest.fixture
def two_gateways(redis_url: str, tmp_path: Path) -> Iterator[list[str]]:
    path = tmp_path / "shared.yaml"
    path.write_text(mock_config(f'store: redis, url: "{redis_url}"'))
    with serving(path) as first, serving(path) as second:
        yield [first, second]


async def test_fifty_concurrent_turns_across_two_processes_sharing_redis(two_gateways: list[str], redis_url: str) -> None:
    await flush(redis_url)
    clients = [openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0, timeout=120) for url in two_gateways]
    try:
        completed = await run_turns(clients)
    finally:
        for client in clients:
            await client.close()
    assert await stored_users(two_gateways[0]) == completed
    assert await stored_users(two_gateways[1]) == completed


@pytest.fixture
def two_workers_on_sqlite(tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "workers.yaml"
    path.write_text(mock_config(f'store: sqlite, path: "{tmp_path / "shared.db"}"'))
    with serving(path, workers=2) as url:
        yield url


async def test_fifty_concurrent_turns_across_workers_sharing_sqlite(two_workers_on_sqlite: str) -> None:
    clients = [openai.AsyncOpenAI(base_url=two_workers_on_sqlite, api_key="x", max_retries=0, timeout=120) for _ in range(4)]
    try:
        completed = await run_turns(clients)
    finally:
        for client in clients:
            await client.close()
    assert await stored_users(two_workers_on_sqlite) == completed
