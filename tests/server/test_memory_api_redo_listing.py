"""gateway.server.memory_api: redo, message times and listing at /v1/memory, on a real gateway over each store.

Turns come from the official openai SDK, listing pages are walked by the SDK's own cursor
pagination (AsyncCursorPage: `after` = the last item's id while `has_more`), the rest is plain HTTP.
"""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest
from openai.pagination import AsyncCursorPage

from tests.support.conversations import OTHER_KEY, memory_block, two_keys
from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.memory_turns import a, received, u
from tests.support.plain_http import AUTH, call

__all__ = ["memory_block"]  # the fixture: each test runs on SQLite, the in-process store and Redis


class Memory(openai.BaseModel):
    """An item of GET /v1/memory, as the SDK's pagination reads it."""

    id: str
    object: str
    turns: int
    updatedAt: int


async def turn(client: openai.AsyncOpenAI, upstream: FakeUpstream, memory_id: str, text: str) -> None:
    upstream.then(Step(body=chat_completion(f"re {text}")))
    await client.chat.completions.create(model="chat", messages=[u(text)], extra_headers={"memoryId": memory_id})  # type: ignore[list-item]


def plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without their createdAt."""
    return [{k: v for k, v in m.items() if k != "createdAt"} for m in messages]


async def test_redo_puts_back_what_undo_took_until_a_new_turn(gateway: Gateway, upstream: FakeUpstream, memory_block: str) -> None:
    client = await gateway(two_keys(upstream.url, memory_block))
    await turn(client, upstream, "r", "q1")
    await turn(client, upstream, "r", "q2")
    _, _, before = await call(client, "GET", "/v1/memory/r", headers=AUTH)
    status, _, undone = await call(client, "POST", "/v1/memory/r/undo", headers=AUTH)
    assert status == 200 and plain(undone["messages"]) == [u("q1"), a("re q1")]

    status, _, redone = await call(client, "POST", "/v1/memory/r/redo", headers=AUTH)
    assert status == 200 and redone["messages"] == before["messages"] and redone["turns"] == 2  # times too
    status, _, body = await call(client, "POST", "/v1/memory/r/redo", headers=AUTH)
    assert status == 404 and body["error"]["code"] == "nothing_to_redo" and body["error"]["type"] == "invalid_request_error"

    await call(client, "POST", "/v1/memory/r/undo", headers=AUTH)
    await turn(client, upstream, "r", "q3")  # a new turn: what was undone is gone for good
    status, _, body = await call(client, "POST", "/v1/memory/r/redo", headers=AUTH)
    assert status == 404 and body["error"]["code"] == "nothing_to_redo"
    assert received(upstream)[-1] == [u("q1"), a("re q1"), u("q3")]

    status, _, body = await call(client, "POST", "/v1/memory/never/redo", headers=AUTH)
    assert status == 404 and body["error"]["code"] == "memory_not_found" and body["error"]["param"] == "memoryId"
    await call(client, "POST", "/v1/memory/r/undo", headers=AUTH)  # team-a's undo is not team-b's to redo
    status, _, body = await call(client, "POST", "/v1/memory/r/redo", headers={"Authorization": f"Bearer {OTHER_KEY}"})
    assert status == 404 and body["error"]["code"] == "memory_not_found"


async def test_each_message_shows_when_it_was_stored_and_is_forwarded_without_it(
    gateway: Gateway, upstream: FakeUpstream, memory_block: str
) -> None:
    client = await gateway(two_keys(upstream.url, memory_block))
    started = int(time.time())
    await turn(client, upstream, "t", "q1")
    await turn(client, upstream, "t", "q2")
    status, _, body = await call(client, "GET", "/v1/memory/t", headers=AUTH)
    assert status == 200
    times = [m["createdAt"] for m in body["messages"]]
    assert all(isinstance(t, int) and started - 1 <= t <= time.time() + 1 for t in times), times
    assert times == sorted(times) and body["updatedAt"] >= times[-1]
    assert plain(body["messages"]) == [u("q1"), a("re q1"), u("q2"), a("re q2")]
    assert received(upstream)[-1] == [u("q1"), a("re q1"), u("q2")]  # the history sent on: no createdAt


async def test_listing_pages_through_the_callers_conversations_only(
    gateway: Gateway, upstream: FakeUpstream, memory_block: str
) -> None:
    client = await gateway(two_keys(upstream.url, memory_block))
    names = ["chat-3", "chat-1", "notes", "chat-2", "chat-0"]
    for name in names:
        await turn(client, upstream, name, "q")
    await turn(client, upstream, "chat-1", "again")
    other = openai.AsyncOpenAI(base_url=client.base_url, api_key=OTHER_KEY, max_retries=0)
    await turn(other, upstream, "chat-secret", "q")

    pages = client.get_api_list(
        "/memory", model=Memory, page=AsyncCursorPage[Memory], options={"params": {"prefix": "chat-", "limit": 2}}
    )
    listed = [item async for item in pages]
    assert [m.id for m in listed] == ["chat-0", "chat-1", "chat-2", "chat-3"]
    assert [m.turns for m in listed] == [1, 2, 1, 1] and {m.object for m in listed} == {"memory"}

    status, _, first = await call(client, "GET", "/v1/memory?limit=2", headers=AUTH)
    assert status == 200 and first["object"] == "list" and first["has_more"] is True
    assert (first["first_id"], first["last_id"]) == ("chat-0", "chat-1")
    status, _, last = await call(client, "GET", "/v1/memory?after=chat-3", headers=AUTH)
    assert [m["id"] for m in last["data"]] == ["notes"] and last["has_more"] is False

    status, _, theirs = await call(client, "GET", "/v1/memory", headers={"Authorization": f"Bearer {OTHER_KEY}"})
    assert [m["id"] for m in theirs["data"]] == ["chat-secret"]
    status, _, none = await call(client, "GET", "/v1/memory?prefix=zzz", headers=AUTH)
    assert none == {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}
    await other.close()


@pytest.mark.parametrize(
    ("query", "param", "code"),
    [
        ("limit=0", "limit", "invalid_value"),
        ("limit=101", "limit", "invalid_value"),
        ("limit=ten", "limit", "invalid_type"),
        ("limit=-1", "limit", "invalid_type"),
        ("limit=", "limit", "invalid_type"),
        ("prefix=a%20b", "prefix", "invalid_value"),
        ("after=a%7Bb", "after", "invalid_value"),
    ],
)
async def test_bad_listing_parameters_are_400s(gateway: Gateway, query: str, param: str, code: str) -> None:
    client = await gateway(f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}\nmemory: {{store: memory}}\nroutes: {{m: {{provider: mock}}}}")
    status, _, body = await call(client, "GET", f"/v1/memory?{query}", headers=AUTH)
    assert status == 400, body
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["param"] == param and body["error"]["code"] == code
