"""Conversation turns for the server-side memory tests: messages, a memory config, what was sent and stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import openai

from tests.support.fakes import FakeUpstream
from tests.support.gateway import GATEWAY_KEY

SYSTEM = {"role": "system", "content": "You are terse."}


def u(text: str) -> dict[str, Any]:
    """A user message."""
    return {"role": "user", "content": text}


def a(text: str) -> dict[str, Any]:
    """An assistant message."""
    return {"role": "assistant", "content": text}


def config(upstream: FakeUpstream, tmp_path: Path, *, memory: str = "", route_memory: str = "", extra: str = "") -> str:
    """A sqlite memory in `tmp_path` (with `memory` settings) and route `chat` to `upstream` (with `route_memory`)."""
    route_block = f"\n    memory: {{{route_memory}}}" if route_memory else ""
    return f"""
memory: {{store: sqlite, path: "{tmp_path / 'memory.db'}"{', ' + memory if memory else ''}}}
{extra}
routes:
  chat:
    provider: openai
    baseUrl: "{upstream.url}"
    apiKey: k{route_block}
"""


def received(upstream: FakeUpstream) -> list[list[dict[str, Any]]]:
    """The messages of each request `upstream` received, in order."""
    return [request.body["messages"] for request in upstream.requests]


async def stored(client: openai.AsyncOpenAI, memory_id: str, key: str = GATEWAY_KEY) -> tuple[int, Any]:
    """GET /v1/memory/{memory_id} with `key`: the status and the JSON body, its messages as they were sent.

    Each message's createdAt (when it was stored: an integer, or null) is checked and left out, so
    the messages compare with those a turn sent; the times are tests/server/test_memory_api*.py's subject.
    """
    base = str(client.base_url).rstrip("/")
    async with aiohttp.ClientSession() as session, session.get(
        f"{base}/memory/{memory_id}", headers={"Authorization": f"Bearer {key}"}
    ) as response:
        status, body = response.status, await response.json(content_type=None)
    if status == 200:
        for message in body["messages"]:
            created = message.pop("createdAt")
            assert created is None or type(created) is int, created
    return status, body
