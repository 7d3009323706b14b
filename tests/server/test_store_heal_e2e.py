"""The gateway's SQLite memory heals without a restart, and /readyz says not ready while its writes fail.

Real parts: the OpenAI SDK against the gateway on the mock provider; a file made read-only for
real (immutable: root ignores permission bits); `gateway serve --workers 2` for the shared file.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from gateway.memory.sqlite import SQLiteStore
from tests.support.gateway import Gateway
from tests.support.readonly import immutable
from tests.support.servers import free_port, wait_for_port

QUESTION: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]


def config(path: Path) -> str:
    return f"memory: {{store: sqlite, path: '{path}'}}\nroutes:\n  chat: {{provider: mock}}\n"


async def turn(client: openai.AsyncOpenAI, memory_id: str) -> int:
    """A memory turn's status."""
    try:
        await client.chat.completions.create(model="chat", messages=QUESTION, extra_headers={"memoryId": memory_id})
    except openai.APIStatusError as failed:
        assert failed.code == "memory_unavailable"
        return failed.status_code
    return 200


async def readiness(client: openai.AsyncOpenAI) -> tuple[int, dict[str, Any]]:
    root = str(client.base_url).rstrip("/").removesuffix("/v1")
    async with httpx.AsyncClient() as http:
        answer = await http.get(f"{root}/readyz")
    return answer.status_code, answer.json()


async def stored_messages(client: openai.AsyncOpenAI, memory_id: str) -> int:
    """How many messages the gateway says it keeps for `memory_id` (0: none)."""
    root = str(client.base_url).rstrip("/")
    async with httpx.AsyncClient() as http:
        answer = await http.get(f"{root}/memory/{memory_id}")
    return len(answer.json()["messages"]) if answer.status_code == 200 else 0


async def made(path: Path) -> None:
    """The store's file at `path`, closed: as a gateway that ran before left it."""
    store = SQLiteStore(str(path), ttl_seconds=60, max_messages=10, lock_timeout=5)
    await store.put_value("response:x", "y")
    await store.close()


async def test_a_gateway_started_on_a_read_only_file_is_not_ready_then_heals(gateway: Gateway, tmp_path: Path) -> None:
    """As a volume mounted read-only when the gateway started, and made writable later."""
    path = tmp_path / "memory.db"
    await made(path)
    client = await gateway(config(path))
    with immutable(path) as read_only:
        assert await readiness(client) == (200, {"status": "ready"})  # no write has failed yet
        assert await turn(client, "m") == 503
        status, body = await readiness(client)
        assert status == 503 and body["status"] == "not ready" and "readonly" in body["reason"]
        assert str(tmp_path) not in body["reason"]
        read_only.lift()
        assert await readiness(client) == (200, {"status": "ready"})  # found healed with no turn to write
    assert await turn(client, "m") == 200
    assert await stored_messages(client, "m") == 2


async def test_a_file_read_only_for_a_while_under_a_running_gateway(gateway: Gateway, tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    client = await gateway(config(path))
    assert await turn(client, "m") == 200
    with immutable(path, Path(f"{path}-wal")) as read_only:
        assert await turn(client, "m") == 503
        assert (await readiness(client))[0] == 503
        assert await turn(client, "m") == 503  # on a connection opened while the file was read-only
        read_only.lift()
        assert await turn(client, "m") == 200
        assert await readiness(client) == (200, {"status": "ready"})
    assert await stored_messages(client, "m") == 4


def serve(config_path: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "gateway", "serve", "--config", str(config_path), "--port", str(port), "--workers", "2"]
    with log.open("wb") as sink:
        return subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)


def post_turn(base: str, memory_id: str) -> int:
    """One turn on a new connection: the kernel spreads those over the workers."""
    body = {"model": "chat", "messages": QUESTION}
    with httpx.Client(timeout=30) as http:
        return http.post(f"{base}/v1/chat/completions", json=body, headers={"memoryId": memory_id}).status_code


def memory_ids(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT memory_id FROM messages")}


@pytest.mark.parametrize("change", ["deleted", "replaced"])
async def test_workers_sharing_a_file_deleted_or_replaced_keep_every_turn_they_acknowledge(tmp_path: Path, change: str) -> None:
    """No turn answered 200 is lost at the next start; the workers go on with the file at the path."""
    path = tmp_path / "memory.db"
    config_path = tmp_path / "gateway.yaml"
    config_path.write_text(config(path))
    port, log = free_port(), tmp_path / "gateway.log"
    process = serve(config_path, port, log)
    base = f"http://127.0.0.1:{port}"
    acknowledged: set[str] = set()
    try:
        await asyncio.to_thread(wait_for_port, port, process)
        for index in range(10):
            assert await asyncio.to_thread(post_turn, base, f"before-{index}") == 200
        if change == "deleted":
            os.remove(path)
        else:
            other = tmp_path / "other.db"
            await made(other)
            os.replace(other, path)
        refused = 0
        for index in range(30):
            status = await asyncio.to_thread(post_turn, base, f"after-{index}")
            assert status in (200, 503)
            if status == 200:
                acknowledged.add(f"after-{index}")
            else:
                refused += 1
        assert refused <= 2  # at most the turn each worker served from the old file, before it found out
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{base}/readyz")).status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 30)
    assert acknowledged and acknowledged <= memory_ids(path)  # what a restart finds
    assert not {name for name in memory_ids(path) if name.startswith("before-")}
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert f"was {change}" in log.read_text()
