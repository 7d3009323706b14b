"""The memory management API, scoped to the caller: someone else's memoryId is a 404, and never listed.

A conversation's messages show when each was stored (`createdAt`, unix seconds, as its
`updatedAt` and OpenAI's `created_at`; null for messages stored before the gateway kept it): the
store's record beside the message, never forwarded with it.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson
from aiohttp import web

from gateway.core.errors import InvalidRequestError, NotFoundError
from gateway.core.memory.conversation import Conversation
from gateway.core.memory.listing import Listing, Page, count_turns, page_limit
from gateway.memory.errors import store_errors
from gateway.memory.headers import MEMORY_ID, check_memory_id
from gateway.memory.store import Key
from gateway.server.keys import MEMORY, tenant_of

_PREFIX: Final = re.compile(r"[A-Za-z0-9._:@-]{0,256}")  # what a memoryId may start with


def _key(request: web.Request) -> Key:
    return tenant_of(request), check_memory_id(request.match_info["memory_id"], "memoryId")


def _not_found(key: Key) -> NotFoundError:
    return NotFoundError(f"No memory '{key[1]}' for this API key.", param="memoryId", code="memory_not_found")


def _json(body: dict[str, Any]) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def _render(key: Key, conversation: Conversation) -> web.Response:
    shown = [
        {**entry.message, "createdAt": None if entry.created_at is None else int(entry.created_at)}
        for entry in conversation.entries
    ]
    body: dict[str, Any] = {
        "memoryId": key[1],
        "system": conversation.system,
        "messages": shown,
        "turns": count_turns(conversation.messages),
        "updatedAt": int(conversation.updated_at),
    }
    return _json(body)


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
        with store_errors():
            deleted = await memory.delete(key)
        if not deleted:
            raise _not_found(key)
    return web.Response(status=204)


async def undo_memory(request: web.Request) -> web.Response:
    """Remove the last turn: the last user message and everything after it (a redo puts it back)."""
    key = _key(request)
    memory = request.app[MEMORY]
    async with memory.hold(key):
        if not await memory.store.undo(key):
            raise _not_found(key)
        conversation = await memory.store.load(key)
    return _render(key, conversation or Conversation([], [], 0.0))


async def redo_memory(request: web.Request) -> web.Response:
    """Put back the turn the last undo removed, unless a turn came since; 404 when there is none to redo."""
    key = _key(request)
    memory = request.app[MEMORY]
    async with memory.hold(key):
        redone = await memory.store.redo(key)
        conversation = await memory.store.load(key)
    if conversation is None:
        raise _not_found(key)
    if not redone:
        raise NotFoundError(
            f"Memory '{key[1]}' has no undone turn to redo (a turn after an undo clears them).",
            param="memoryId",
            code="nothing_to_redo",
        )
    return _render(key, conversation)


async def list_memory(request: web.Request) -> web.Response:
    """The caller's conversations by memoryId, a page at a time (`after` the last id seen), as an OpenAI list."""
    listing = _listing(request.query)
    with store_errors():
        page = await request.app[MEMORY].store.list_conversations(tenant_of(request), listing)
    return _json(_list_object(page))


def _listing(query: Any) -> Listing:
    """The page a query asks for; a 400 names a parameter that is not what it must be."""
    limit = page_limit(query)
    prefix = query.get("prefix", "")
    if not _PREFIX.fullmatch(prefix):
        raise InvalidRequestError(
            "'prefix' must be up to 256 characters of letters, digits and ._:@-.", param="prefix", code="invalid_value"
        )
    after = query.get("after", "")
    if after and not MEMORY_ID.fullmatch(after):
        raise InvalidRequestError("'after' must be a memoryId: 1-256 of letters, digits and ._:@-.", param="after", code="invalid_value")
    return Listing(prefix=prefix, after=after, limit=limit)


def _list_object(page: Page) -> dict[str, Any]:
    data = [
        {"id": listed.memory_id, "object": "memory", "turns": listed.turns, "updatedAt": int(listed.updated_at)}
        for listed in page.conversations
    ]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": page.has_more,
    }
