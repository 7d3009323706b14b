"""Gateways whose worker processes share one SQLite file: each turn sees every turn before it, whichever process served it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from gateway.memory.sqlite_lockfile import lock_path, place
from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.file_locks import lock_holders
from tests.support.memory_turns import stored
from tests.support.processes import spawn_gateway, stopped_at_exit, wait_for_listeners
from tests.support.servers import free_port, wait_for_port

HEADERS = {"memoryId": "shared", "maxMessages": "200"}


@contextlib.contextmanager
def two_gateways(config: Path, *extra: str, output: int = subprocess.DEVNULL) -> Iterator[list[str]]:
    """Two `gateway serve --workers 2` on `config` (and `extra` options): four processes on its SQLite file; their /v1 URLs."""
    with stopped_at_exit() as started:
        urls = []
        for _ in range(2):
            port = free_port()
            process = spawn_gateway(config, port, "--workers", "2", *extra, output=output)
            started.append(process)
            wait_for_port(port, process, timeout=60)
            wait_for_listeners(port, 2, process)
            urls.append(f"http://127.0.0.1:{port}/v1")
        yield urls


async def ask(url: str, text: str) -> str:
    """One turn on a connection of its own (so any of the gateway's workers may take it); the reply's text."""
    async with openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0, timeout=60) as client:
        reply = await client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": text}], extra_headers=HEADERS
        )
    return reply.choices[0].message.content or ""


async def test_turns_taken_in_turn_by_two_gateways_each_see_all_before(tmp_path: Path) -> None:
    """A process's cached copy goes stale whenever another one writes: never is a turn planned on it."""
    config = tmp_path / "gateway.yaml"
    config.write_text(
        f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}", lockTimeoutSeconds: 30}}\n'
        "routes:\n  chat: {provider: mock}\n"
    )
    with two_gateways(config) as urls:
        for index in range(16):
            answer = await ask(urls[index % 2], f"turn {index}")
            match = re.search(r"received (\d+) messages", answer)
            assert match is not None and int(match.group(1)) == 2 * index + 1, (index, answer)


async def test_turns_moving_between_workers_read_what_the_others_appended_and_store_each_turn_once(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    """Turns alternating between two gateways (four processes), through the openai SDK, past the cap.

    Each turn sends the whole window, stored once and in order; the workers' log says turns that
    moved read only the rows the other processes appended.
    """
    config = tmp_path / "gateway.yaml"
    config.write_text(
        f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}", lockTimeoutSeconds: 30, maxStoredMessages: 16}}\n'
        f'routes:\n  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}\n'
    )
    turns = 14
    log = tmp_path / "gateway.log"
    with log.open("wb") as output, two_gateways(config, "--log-level", "debug", output=output.fileno()) as urls:
        for index in range(turns):
            await ask(urls[index % 2], f"turn {index}")
        async with openai.AsyncOpenAI(base_url=urls[1], api_key="x", max_retries=0, timeout=60) as client:
            status, body = await stored(client, "shared")
    history: list[str] = []
    assert len(upstream.requests) == turns
    for index, request in enumerate(upstream.requests):
        assert [m["content"] for m in request.body["messages"]] == [*history[-16:], f"turn {index}"], index
        history += [f"turn {index}", "Hello from upstream"]
    assert status == 200 and [m["content"] for m in body["messages"]] == history[-16:]
    assert "messages another process appended read alone" in log.read_text()


def lock_holder(path: Path) -> int:
    """The process holding the conversation `shared` of tenant "default" on the SQLite file `path`."""
    (pid,) = lock_holders(Path(lock_path(str(path))), place(("default", "shared")).offset)
    return pid


async def test_a_worker_killed_mid_turn_leaves_no_turn_and_its_conversation_is_taken_at_once(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    """The next turn, on the other gateway, goes on at once from the turns before: the kernel let go of the dead worker's lock."""
    config = tmp_path / "gateway.yaml"
    store = tmp_path / "m.db"
    config.write_text(
        f'memory: {{store: sqlite, path: "{store}", lockTimeoutSeconds: 5}}\n'
        f'routes:\n  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}\n'
    )
    with two_gateways(config) as (first, second):
        for text in ("a", "b"):
            await ask(first, text)
        upstream.arrived.clear()
        upstream.then(Step(body=chat_completion(), gate=asyncio.Event()))  # never answered
        killed = asyncio.create_task(ask(first, "lost"))
        await upstream.arrived.wait()
        os.kill(lock_holder(store), signal.SIGKILL)
        with pytest.raises(openai.APIError):
            await killed
        await ask(second, "c")
        await ask(first, "d")
    sent = [[m["content"] for m in r.body["messages"]] for r in upstream.requests]
    assert sent[-2] == ["a", "Hello from upstream", "b", "Hello from upstream", "c"]
    assert sent[-1] == ["a", "Hello from upstream", "b", "Hello from upstream", "c", "Hello from upstream", "d"]


async def test_turns_sent_at_once_to_four_processes_are_taken_one_at_a_time(tmp_path: Path) -> None:
    """Each turn sees every turn stored before it and none half-written: no two turns see the same history."""
    config = tmp_path / "gateway.yaml"
    config.write_text(
        f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}", lockTimeoutSeconds: 60}}\n'
        "routes:\n  chat: {provider: mock}\n"
    )
    turns = 24
    with two_gateways(config) as urls:
        answers = await asyncio.gather(*(ask(urls[index % 2], f"turn {index}") for index in range(turns)))
        async with httpx.AsyncClient() as client:
            stored = (await client.get(urls[0] + "/memory/shared")).json()
    seen = sorted(int(re.search(r"received (\d+) messages", answer).group(1)) for answer in answers)  # type: ignore[union-attr]
    assert seen == [2 * index + 1 for index in range(turns)]
    users = [m["content"] for m in stored["messages"] if m["role"] == "user"]
    assert sorted(users) == sorted(f"turn {index}" for index in range(turns))  # each stored once
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant"] * turns  # whole turns, one after another
