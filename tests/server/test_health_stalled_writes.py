"""/readyz is not ready while a memory write has been pending past health.STALLED_SECONDS, and ready once it ends.

Real parts: the OpenAI SDK against the gateway on the mock provider, its SQLite memory store, and
a write that stalls for real: another connection holds the file's write lock, so the store's
write waits in SQLite's busy wait (a frozen file system stalls it the same way, in the kernel).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gateway.memory.sqlite import SQLiteStore
from gateway.server import health
from gateway.server.keys import MEMORY
from tests.support.gateway import Gateway, app_of
from tests.support.waiting import eventually

CONFIG = "memory: {{store: sqlite, path: '{path}'}}\nroutes:\n  chat: {{provider: mock}}\n"
PENDING = re.compile(r"memory store: a write has been pending for \d+s")


async def readiness(client: openai.AsyncOpenAI) -> tuple[int, dict[str, Any]]:
    root = str(client.base_url).rstrip("/").removesuffix("/v1")
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.get(f"{root}/readyz")
    return answer.status_code, answer.json()


async def turn(client: openai.AsyncOpenAI) -> None:
    await client.chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "hello"}], extra_headers={"memoryId": "m"}
    )


async def test_a_memory_write_stalled_on_a_locked_file_makes_the_gateway_not_ready_until_it_goes_through(
    gateway: Gateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health, "STALLED_SECONDS", 0.5)  # the test's wait; what it waits for is real
    path = tmp_path / "memory.db"
    client = await gateway(CONFIG.format(path=path), timeout=120)
    memory = app_of(client)[MEMORY]
    await memory.store.close()
    # A busy timeout the test never reaches: the write waits for the lock, it does not fail.
    memory.store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=100, lock_timeout=60, busy_timeout=120)
    await turn(client)  # the file made, in WAL mode, its purge done
    assert await readiness(client) == (200, {"status": "ready"})
    answers: list[tuple[int, dict[str, Any]]] = []

    async def not_ready() -> bool:
        answers.append(await readiness(client))
        return answers[-1][0] == 503

    competitor = sqlite3.connect(path, isolation_level=None)
    competitor.execute("BEGIN IMMEDIATE")  # the file's write lock: the turn's write waits for it
    stalled = asyncio.create_task(turn(client))
    try:
        await eventually(not_ready, seconds=60, what="/readyz says not ready while the write waits")
        assert answers[-1][1]["status"] == "not ready" and PENDING.fullmatch(answers[-1][1]["reason"]), answers[-1]
        assert not stalled.done()
    finally:
        competitor.execute("ROLLBACK")
        competitor.close()
    await stalled  # the write went through: the turn is answered
    await eventually(lambda: ready(client), seconds=30, what="/readyz ready again")
    async with httpx.AsyncClient(timeout=10) as http:
        stored = await http.get(f"{str(client.base_url).rstrip('/')}/memory/m")
    assert len(stored.json()["messages"]) == 4  # both turns kept


async def ready(client: openai.AsyncOpenAI) -> bool:
    return await readiness(client) == (200, {"status": "ready"})
