"""A gateway's conversations migrated from its SQLite file to Redis read the same on a gateway over Redis.

Turns through the openai SDK's Chat Completions with a memoryId, a conversation made by the SDK's
Conversations API with items and metadata; the migrate is the real CLI; both gateways are read by
GET /v1/memory/{id} and `client.conversations.items.list`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.memory_transfer import run_memory
from tests.support.plain_http import AUTH, call
from tests.support.servers import flush_redis


def config(upstream: FakeUpstream, memory: str) -> str:
    return f"""
auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}
memory: {memory}
routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}
"""


async def test_memory_and_conversations_read_the_same_after_a_migrate(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, redis_url: str
) -> None:
    await flush_redis(redis_url)
    database = tmp_path / "memory.db"
    before = await gateway(config(upstream, f'{{store: sqlite, path: "{database}"}}'))
    for text in ("q1", "q2"):
        upstream.then(Step(body=chat_completion(f"re {text}")))
        await before.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": text}], extra_headers={"memoryId": "chat-1"}
        )
    made = await before.conversations.create(
        items=[{"type": "message", "role": "user", "content": "remember the blue door"}], metadata={"project": "door"}
    )

    migrated = await asyncio.to_thread(run_memory, "migrate", "--from", f"sqlite:{database}", "--to", redis_url)
    assert migrated.returncode == 0, migrated.stderr
    assert b"read 2 conversations (5 messages); written 2" in migrated.stderr

    after = await gateway(config(upstream, f'{{store: redis, url: "{redis_url}"}}'))

    async def seen(client: Any) -> tuple[Any, ...]:
        _, _, memory = await call(client, "GET", "/v1/memory/chat-1", headers=AUTH)
        conversation = await client.conversations.retrieve(made.id)
        items = await client.conversations.items.list(made.id)
        return memory, conversation.model_dump(), [item.model_dump() for item in items.data]

    old, new = await seen(before), await seen(after)
    assert new == old
    assert [m["content"] for m in new[0]["messages"]] == ["q1", "re q1", "q2", "re q2"] and all("createdAt" in m for m in new[0]["messages"])
    assert new[1]["metadata"] == {"project": "door"} and len(new[2]) == 1
