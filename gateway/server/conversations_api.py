"""OpenAI's Conversations API, served from the gateway's memory: a conversation is a memory conversation of the caller.

Its id works as a memoryId on Chat Completions and /v1/messages, and GET /v1/memory/{id} shows
the same history: the items are kept as the memory's chat messages and shown as Responses items
(core.memory.items). Any memoryId of the caller's is a conversation id here, and the ids this
API makes (`conv_` and 48 hex digits) are memoryIds. Someone else's conversation is a 404, like
one that never was.

An item shows the message it was stored as: deleting an item of a message that stands for
several (an assistant's text and its function calls) deletes the message, every item of it.
"""

from __future__ import annotations

import os
from typing import Any

import orjson
from aiohttp import web

from gateway.core.errors import InvalidRequestError, NotFoundError
from gateway.core.memory.about import About, checked_metadata
from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.item_pages import ItemListing, ItemPage, page_of
from gateway.core.memory.items import entry_of_item, items_of_entries, messages_of_items
from gateway.memory.errors import store_errors
from gateway.memory.headers import MEMORY_ID
from gateway.memory.store import ItemStore, Key, MemoryStore, new_item_id
from gateway.server.bodies import read_payload
from gateway.server.keys import MEMORY, tenant_of


def new_conversation_id() -> str:
    """A new conversation's id: random, as OpenAI's `conv_` ids are."""
    return "conv_" + os.urandom(24).hex()


def _store(request: web.Request) -> ItemStore:
    store: MemoryStore = request.app[MEMORY].store
    assert isinstance(store, ItemStore)  # each of the three stores is one
    return store


def _key(request: web.Request) -> Key:
    """The caller's conversation the path names; a 400 for an id no conversation can have."""
    conversation_id = request.match_info["conversation_id"]
    if not MEMORY_ID.fullmatch(conversation_id):
        raise InvalidRequestError(
            "Invalid 'conversation_id': it must be 1-256 characters of letters, digits and ._:@-.",
            param="conversation_id",
            code="invalid_value",
        )
    return tenant_of(request), conversation_id


def _not_found(key: Key) -> NotFoundError:
    return NotFoundError(f"Conversation with id '{key[1]}' not found.", param="conversation_id", code="conversation_not_found")


def _json(body: Any) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def _conversation(key: Key, about: About) -> dict[str, Any]:
    return {"id": key[1], "object": "conversation", "created_at": int(about.created_at), "metadata": dict(about.metadata)}


def _entries(messages: list[Message]) -> list[Entry]:
    """Messages to store, each with its item id now: the answer shows them as stored."""
    return [Entry(message, item_id=new_item_id()) for message in messages]


async def create_conversation(request: web.Request) -> web.Response:
    """POST /v1/conversations: a new conversation of the caller's, with its first items and metadata."""
    _, body = await read_payload(request)
    metadata = checked_metadata(body.get("metadata"))
    items = body.get("items")
    messages = [] if items is None else messages_of_items(items)
    key = (tenant_of(request), new_conversation_id())
    memory, store = request.app[MEMORY], _store(request)
    async with memory.hold(key):
        with store_errors():
            await store.start(key, metadata)
            if messages:
                await memory.store.append(key, _entries(messages), system=None)
            about = await store.about(key)
    if about is None:  # expired at once (a TTL under a second)
        raise _not_found(key)
    return _json(_conversation(key, about))


async def get_conversation(request: web.Request) -> web.Response:
    key = _key(request)
    with store_errors():
        about = await _store(request).about(key)
    if about is None:
        raise _not_found(key)
    return _json(_conversation(key, about))


async def update_conversation(request: web.Request) -> web.Response:
    """POST /v1/conversations/{id}: replace its metadata."""
    key = _key(request)
    _, body = await read_payload(request)
    if "metadata" not in body:
        raise InvalidRequestError("Missing required parameter: 'metadata'.", param="metadata", code="missing_required_parameter")
    metadata = checked_metadata(body["metadata"])
    memory, store = request.app[MEMORY], _store(request)
    async with memory.hold(key):
        with store_errors():
            if not await store.set_metadata(key, metadata):
                raise _not_found(key)
            about = await store.about(key)
    if about is None:
        raise _not_found(key)
    return _json(_conversation(key, about))


async def delete_conversation(request: web.Request) -> web.Response:
    key = _key(request)
    memory = request.app[MEMORY]
    async with memory.hold(key):
        with store_errors():
            deleted = await memory.delete(key)
        if not deleted:
            raise _not_found(key)
    return _json({"id": key[1], "object": "conversation.deleted", "deleted": True})


async def list_items(request: web.Request) -> web.Response:
    """GET /v1/conversations/{id}/items: a page of its items, newest first unless `order=asc`."""
    key = _key(request)
    listing = ItemListing.of(request.query)
    with store_errors():
        conversation = await request.app[MEMORY].store.load(key)
    if conversation is None:
        raise _not_found(key)
    return _json(page_of(list(items_of_entries(conversation.entries)), listing).as_list())


async def add_items(request: web.Request) -> web.Response:
    """POST /v1/conversations/{id}/items: append items (up to 20), answered as the list of the items stored."""
    key = _key(request)
    _, body = await read_payload(request)
    if "items" not in body:
        raise InvalidRequestError("Missing required parameter: 'items'.", param="items", code="missing_required_parameter")
    entries = _entries(messages_of_items(body["items"]))
    memory, store = request.app[MEMORY], _store(request)
    async with memory.hold(key):
        with store_errors():
            if await store.about(key) is None:
                raise _not_found(key)
            if entries:
                await memory.store.append(key, entries, system=None)
    return _json(ItemPage(list(items_of_entries(entries)), has_more=False).as_list())


async def get_item(request: web.Request) -> web.Response:
    key = _key(request)
    item_id = request.match_info["item_id"]
    with store_errors():
        conversation = await request.app[MEMORY].store.load(key)
    if conversation is None:
        raise _not_found(key)
    found = entry_of_item(conversation.entries, item_id)
    if found is None:
        raise _item_not_found(item_id)
    return _json(found[1])


async def delete_item(request: web.Request) -> web.Response:
    """DELETE /v1/conversations/{id}/items/{item_id}: forget the message it is of; answered with the conversation."""
    key = _key(request)
    item_id = request.match_info["item_id"]
    memory, store = request.app[MEMORY], _store(request)
    async with memory.hold(key):
        with store_errors():
            conversation = await memory.store.load(key)
            if conversation is None:
                raise _not_found(key)
            found = entry_of_item(conversation.entries, item_id)
            if found is None or not await store.delete_item(key, found[0].item_id or ""):
                raise _item_not_found(item_id)
            about = await store.about(key)
    if about is None:
        raise _not_found(key)
    return _json(_conversation(key, about))


def _item_not_found(item_id: str) -> NotFoundError:
    shown = item_id if len(item_id) <= 256 else item_id[:256] + "..."
    return NotFoundError(f"Item with id '{shown}' not found.", param="item_id", code="item_not_found")


def add_routes(router: web.UrlDispatcher) -> None:
    """The API's routes, as the gateway's app adds them."""
    router.add_post("/v1/conversations", create_conversation)
    router.add_get("/v1/conversations/{conversation_id}", get_conversation)
    router.add_post("/v1/conversations/{conversation_id}", update_conversation)
    router.add_delete("/v1/conversations/{conversation_id}", delete_conversation)
    router.add_get("/v1/conversations/{conversation_id}/items", list_items)
    router.add_post("/v1/conversations/{conversation_id}/items", add_items)
    router.add_get("/v1/conversations/{conversation_id}/items/{item_id}", get_item)
    router.add_delete("/v1/conversations/{conversation_id}/items/{item_id}", delete_item)
