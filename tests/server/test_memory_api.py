"""gateway.server.memory_api: GET, DELETE, undo and redo of a conversation at /v1/memory/{memoryId}, on a real gateway.

Redo's own ways, message times and listing: test_memory_api_redo_listing.py.

That another key's conversation is a 404 to each of them is in test_memory_e2e.py (two keys, one memoryId).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.memory_turns import SYSTEM, a, config, stored, u
from tests.support.plain_http import AUTH, call
from tests.support.servers import free_port


def sent(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as GET shows them without their createdAt: as they were sent."""
    return [{k: v for k, v in m.items() if k != "createdAt"} for m in messages]


async def turns(client: openai.AsyncOpenAI, upstream: FakeUpstream, memory_id: str, *questions: list[dict[str, Any]]) -> None:
    """One chat turn of conversation `memory_id` per list of messages; the upstream answers r1, r2, ..."""
    for number, messages in enumerate(questions, 1):
        upstream.then(Step(body=chat_completion(f"r{number}")))
        await client.chat.completions.create(model="chat", messages=messages, extra_headers={"memoryId": memory_id})  # type: ignore[arg-type]


async def test_management_api(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(config(upstream, tmp_path))
    await turns(client, upstream, "mgmt", [SYSTEM, u("q1")], [u("q2")])
    status, body = await stored(client, "mgmt")
    assert status == 200
    assert body["memoryId"] == "mgmt" and body["system"] == [SYSTEM] and body["turns"] == 2
    assert body["messages"] == [u("q1"), a("r1"), u("q2"), a("r2")] and body["updatedAt"] > 0
    base = str(client.base_url).rstrip("/")
    auth = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    async with aiohttp.ClientSession(headers=auth) as session:
        async with session.post(f"{base}/memory/mgmt/undo") as response:
            assert response.status == 200
            assert sent((await response.json())["messages"]) == [u("q1"), a("r1")]
        async with session.post(f"{base}/memory/mgmt/undo") as response:
            assert (await response.json())["messages"] == []
        async with session.post(f"{base}/memory/mgmt/undo") as response:
            assert response.status == 404
        async with session.delete(f"{base}/memory/mgmt") as response:
            assert response.status == 204
        async with session.get(f"{base}/memory/mgmt") as response:
            assert response.status == 404
            assert (await response.json())["error"]["code"] == "memory_not_found"
        async with session.get(f"{base}/memory/bad%20id") as response:
            assert response.status == 400
            assert (await response.json())["error"]["param"] == "memoryId"


async def test_undo_takes_the_last_user_message_and_all_after_it_and_keeps_the_count_of_turns(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, tmp_path))
    await turns(client, upstream, "undo", [u("q1")], [u("q2")], [u("q3")])
    status, _, body = await call(client, "POST", "/v1/memory/undo/undo", headers=AUTH)
    assert status == 200
    body["messages"] = sent(body["messages"])
    assert body["messages"] == [u("q1"), a("r1"), u("q2"), a("r2")] and body["turns"] == 2
    assert (await stored(client, "undo"))[1] == body


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/memory/c"), ("DELETE", "/v1/memory/c"), ("POST", "/v1/memory/c/undo"), ("POST", "/v1/memory/c/redo")],
)
async def test_unknown_or_malformed_ids_are_openai_shaped_errors(gateway: Gateway, method: str, path: str) -> None:
    client = await gateway("memory: {store: memory}\nroutes: {m: {provider: mock}}")
    status, _, body = await call(client, method, path, headers=AUTH)
    assert status == 404 and body["error"]["code"] == "memory_not_found" and body["error"]["param"] == "memoryId"
    assert "'c'" in body["error"]["message"]
    status, _, body = await call(client, method, path.replace("/c", "/" + "x" * 257), headers=AUTH)
    assert status == 400 and body["error"]["param"] == "memoryId"


async def test_a_store_that_cannot_be_reached_is_a_503_not_a_500(gateway: Gateway) -> None:
    client = await gateway(f'memory: {{store: redis, url: "redis://127.0.0.1:{free_port()}/0"}}\nroutes: {{m: {{provider: mock}}}}')
    paths = [("GET", "/v1/memory/c"), ("DELETE", "/v1/memory/c"), ("POST", "/v1/memory/c/undo"), ("POST", "/v1/memory/c/redo")]
    for method, path in [*paths, ("GET", "/v1/memory")]:
        status, _, body = await call(client, method, path, headers=AUTH)
        assert status == 503 and body["error"]["code"] == "memory_unavailable", (method, body)
