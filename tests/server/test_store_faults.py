"""A memory store that fails while a turn is under way: the client always learns the turn's fate.

Real parts: a redis-server the tests kill and start again on the same port, and a SQLite file
another connection holds an exclusive lock on. The upstream answers only once the fault is in place.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from gateway.memory import redis as redis_store
from gateway.memory.sqlite import SQLiteStore
from gateway.server.keys import MEMORY
from tests.support.fakes import FakeUpstream, Step, chat_completion, chunk
from tests.support.gateway import Gateway, app_of
from tests.support.memory_turns import stored
from tests.support.servers import RedisProcess, redis_server

QUESTION = [{"role": "user", "content": "q"}]


def route(upstream: FakeUpstream, memory: str) -> str:
    return f"""
memory: {{{memory}}}
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}
"""


def gated_stream(gate: asyncio.Event) -> Step:
    events: list[bytes | float | asyncio.Event] = [
        chunk({"role": "assistant", "content": "par"}), gate, chunk({"content": "tial"}), chunk({}, "stop"),
        b"data: [DONE]\n\n",
    ]
    return Step(events=events)


class LogSeen(logging.Handler):
    """Sets `event` when a log record containing `text` is emitted (on the loop's thread)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


async def raw_stream(client: openai.AsyncOpenAI, memory_id: str, gate: asyncio.Event, fault: Any) -> bytes:
    """POST a memory stream; once its first event is in, inject `fault`, open the gate, read all bytes."""
    base = str(client.base_url).rstrip("/")
    body = {"model": "chat", "stream": True, "messages": QUESTION}
    async with aiohttp.ClientSession() as session, session.post(
        f"{base}/chat/completions", json=body, headers={"memoryId": memory_id}
    ) as response:
        assert response.status == 200
        first = await response.content.readuntil(b"\n\n")
        await fault()
        gate.set()
        return first + await response.read()  # a malformed chunked body would raise here


def assert_ends_with_error(body: bytes, code: str) -> None:
    assert b"HTTP/1.1" not in body  # nothing written after the response was finished
    assert b"[DONE]" not in body
    last = body.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
    assert last.startswith(b'data: {"error"') and f'"code":"{code}"'.encode() in last


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    """A redis-server whose data survives a kill (fsynced append-only file)."""
    with redis_server(tmp_path, durable=True) as server:
        yield server


async def test_redis_dying_mid_turn_is_a_503_not_a_500(gateway: Gateway, upstream: FakeUpstream, redis: RedisProcess) -> None:
    client = await gateway(route(upstream, f"store: redis, url: '{redis.url}'"))
    gate = asyncio.Event()
    upstream.then(Step(body=chat_completion("lost"), gate=gate))
    turn = asyncio.create_task(client.chat.completions.create(model="chat", messages=QUESTION, extra_headers={"memoryId": "m"}))
    await asyncio.wait_for(upstream.arrived.wait(), 10)
    redis.kill()
    gate.set()
    with pytest.raises(openai.APIStatusError) as caught:
        await turn
    assert caught.value.status_code == 503 and caught.value.code == "memory_unavailable"
    redis.start()
    assert (await stored(client, "m"))[0] == 404


async def test_redis_dying_mid_stream_ends_it_with_an_error_and_no_done(
    gateway: Gateway, upstream: FakeUpstream, redis: RedisProcess
) -> None:
    client = await gateway(route(upstream, f"store: redis, url: '{redis.url}'"))
    gate = asyncio.Event()
    upstream.then(gated_stream(gate))

    async def kill() -> None:
        redis.kill()

    body = await raw_stream(client, "s", gate, kill)
    assert b"tial" in body  # the answer itself was relayed
    assert_ends_with_error(body, "memory_unavailable")
    redis.start()
    assert (await stored(client, "s"))[0] == 404


async def test_the_sdk_raises_when_a_streamed_turn_cannot_be_stored(
    gateway: Gateway, upstream: FakeUpstream, redis: RedisProcess
) -> None:
    client = await gateway(route(upstream, f"store: redis, url: '{redis.url}'"))
    gate = asyncio.Event()
    upstream.then(gated_stream(gate))
    stream = await client.chat.completions.create(model="chat", messages=QUESTION, stream=True, extra_headers={"memoryId": "sdk"})
    iterator = stream.__aiter__()
    await iterator.__anext__()
    redis.kill()
    gate.set()
    with pytest.raises(openai.APIError, match="memory store is unavailable"):
        async for _ in iterator:
            pass


async def test_a_renewal_blip_that_recovers_does_not_fail_a_stored_turn(
    gateway: Gateway,
    upstream: FakeUpstream,
    redis: RedisProcess,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Redis goes away long enough for a lease renewal to fail, then comes back with its data."""
    # renewed after 5 s, then retried each second until the lease ends: ~10 s for Redis to come back on a loaded machine
    monkeypatch.setattr(redis_store, "LEASE_SECONDS", 15.0)
    client = await gateway(route(upstream, f"store: redis, url: '{redis.url}'"))
    gate = asyncio.Event()
    upstream.then(Step(body=chat_completion("kept"), gate=gate))
    turn = asyncio.create_task(
        client.chat.completions.with_raw_response.create(model="chat", messages=QUESTION, extra_headers={"memoryId": "b"})
    )
    await asyncio.wait_for(upstream.arrived.wait(), 10)
    seen = LogSeen("renewing the redis lock failed")
    logger = logging.getLogger("gateway.memory")
    logger.addHandler(seen)
    try:
        redis.kill()
        await asyncio.wait_for(seen.event.wait(), 30)
    finally:
        logger.removeHandler(seen)
    redis.start()
    gate.set()
    answer = (await asyncio.wait_for(turn, 20)).parse()
    assert answer.choices[0].message.content == "kept"
    status, body = await stored(client, "b")
    assert status == 200 and body["messages"] == [*QUESTION, {"role": "assistant", "content": "kept"}]


async def test_a_lock_truly_lost_is_said_and_nothing_is_stored(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    """Redis comes back empty: the lock is gone, so the turn must not be written as if it were held."""
    with redis_server(tmp_path, durable=False) as redis:
        client = await gateway(route(upstream, f"store: redis, url: '{redis.url}'"))
        gate = asyncio.Event()
        upstream.then(Step(body=chat_completion("orphan"), gate=gate))
        turn = asyncio.create_task(
            client.chat.completions.create(model="chat", messages=QUESTION, extra_headers={"memoryId": "lost"})
        )
        await asyncio.wait_for(upstream.arrived.wait(), 10)
        redis.kill()
        redis.start()
        gate.set()
        with pytest.raises(openai.APIStatusError) as caught:
            await turn
        assert caught.value.status_code == 503 and caught.value.code == "memory_lock_lost"
        assert "lock was lost" in caught.value.message
        assert (await stored(client, "lost"))[0] == 404


@pytest.fixture
def sqlite_gateway(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> Any:
    """A gateway on a SQLite store that gives up on a locked file after 0.2 s instead of 10."""
    path = tmp_path / "memory.db"

    async def start() -> openai.AsyncOpenAI:
        client = await gateway(route(upstream, f"store: sqlite, path: '{path}'"))
        memory = app_of(client)[MEMORY]
        await memory.store.close()
        memory.store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=100, lock_timeout=5, busy_timeout=0.2)
        return client

    return start


def exclusive_lock(path: Path) -> sqlite3.Connection:
    competitor = sqlite3.connect(path, isolation_level=None)
    competitor.execute("BEGIN EXCLUSIVE")
    return competitor


async def test_sqlite_locked_past_its_busy_timeout_is_a_503(
    sqlite_gateway: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await sqlite_gateway()
    gate = asyncio.Event()
    upstream.then(Step(body=chat_completion("lost"), gate=gate))
    turn = asyncio.create_task(client.chat.completions.create(model="chat", messages=QUESTION, extra_headers={"memoryId": "m"}))
    await asyncio.wait_for(upstream.arrived.wait(), 10)
    competitor = exclusive_lock(tmp_path / "memory.db")
    try:
        gate.set()
        with pytest.raises(openai.APIStatusError) as caught:
            await turn
    finally:
        competitor.rollback()
        competitor.close()
    assert caught.value.status_code == 503 and caught.value.code == "memory_unavailable"
    assert (await stored(client, "m"))[0] == 404


async def test_sqlite_locked_mid_stream_ends_it_with_an_error_and_no_done(
    sqlite_gateway: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await sqlite_gateway()
    gate = asyncio.Event()
    upstream.then(gated_stream(gate))
    competitors: list[sqlite3.Connection] = []

    async def lock() -> None:
        competitors.append(exclusive_lock(tmp_path / "memory.db"))

    try:
        body = await raw_stream(client, "s", gate, lock)
    finally:
        for competitor in competitors:
            competitor.rollback()
            competitor.close()
    assert_ends_with_error(body, "memory_unavailable")
    assert (await stored(client, "s"))[0] == 404
