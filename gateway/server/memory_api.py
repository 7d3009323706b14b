"""The memory management API, scoped to the caller: someone else's memoryId is a 404."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from gateway.core.errors import NotFoundError
from gateway.core.memory.conversation import Conversation
from gateway.memory.errors import store_errors
from gateway.memory.headers import check_memory_id
from gateway.memory.store import Key
from gateway.server.keys import MEMORY, tenant_of


def _key(request: web.Request) -> Key:
    return tenant_of(request), check_memory_id(request.match_info["memory_id"], "memoryId")


def _not_found(key: Key) -> NotFoundError:
    return NotFoundError(f"No memory '{key[1]}' for this API key.", param="memoryId", code="memory_not_found")


def _render(key: Key, conversation: Conversation) -> web.Response:
    messages = conversation.messages
    body: dict[str, Any] = {
        "memoryId": key[1],
        "system": conversation.system,
        "messages": messages,
        "turns": sum(1 for m in messages if m.get("role") == "user"),
        "updatedAt": int(conversation.updated_at),
    }
    return web.Response(body=orjson.dumps(body), content_type="application/json")


async def get_memory(request: web.Request) -> web.Response:
    key = _key(request)
    with store_errors():
        conversation = await request.app[MEMORY].store.load(key)
    if conversation is None:
        raise _not_found(key)
    return _render(key, conversation)


async def delete_memory(request: web.Request) -> web.Response:
    key = _key(request)
    memory = request.app[MEMORY]
    async with memory.hold(key):
        if not await memory.store.delete(key):
            raise _not_found(key)
    return web.Response(status=204)


async def undo_memory(request: web.Request) -> web.Response:
    """Remove the last turn: the last user message and everything after it."""
    key = _key(request)
    memory = request.app[MEMORY]
    async with memory.hold(key):
        if not await memory.store.undo(key):
            raise _not_found(key)
        conversation = await memory.store.load(key)
    return _render(key, conversation or Conversation([], [], 0.0))
