"""Responses answered through translation, kept by the gateway so that `previous_response_id` continues them on any route.

A route with no target that serves the Responses API has no upstream to keep its responses: the
gateway keeps them. Each response it answers there (unless `store: false`) is recorded in the
memory store's key-value part for the store's TTL, under its id: the tenant it was answered to,
the response it continued, its time and model, and its turn (the input's messages and the reply,
as chat messages with their token counts). `GET /v1/responses/{id}` reads a record back as a
Response (`stored_response`), `DELETE` erases it, and the chain then ends before it. A request continuing a response reads the chain back from that record,
newest first and a record per turn, only as far as the route's memory window reaches: what a
long chain costs is its window, never its length. Records are written once and never changed,
so two requests may continue the same response (a fork), each its own way.

The turn is a memory turn (gateway.memory.turns.Turn) over `ResponseChain`, a store made for
the one request: the same windows, counting, and storing only a complete answer (a stream once
it reached its end). A record that cannot be written costs only its continuation (logged): it is
bookkeeping, which an answer waits for a second at most, skipped a few seconds after the store
failed (`bookkeeping`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
from collections.abc import Awaitable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson
from aiohttp import web

from gateway.core.errors import NotFoundError
from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message, dump_entry
from gateway.core.memory.listing import Listing, Page
from gateway.core.memory.reach import Reach
from gateway.core.translate.reshape import ResponsesReshape
from gateway.core.tree import Route
from gateway.memory.errors import UnstorableReplyError, store_errors
from gateway.memory.store import Key, MemoryStore
from gateway.memory.turns import Memory, Turn
from gateway.observe.trace import Trace
from gateway.server import bookkeeping
from gateway.server.handlers import forward
from gateway.server.keys import MEMORY, TRACE, tenant_of
from gateway.tokens import encoding_name
from gateway.upstream.dispatch import Request

log = logging.getLogger("gateway")


def _key(response_id: str) -> str:
    return f"chain:{response_id}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One recorded response: its turn's entries, the response it continued, and the chain's length through it."""

    response_id: str = dataclasses.field(kw_only=False)
    entries: list[Entry] = dataclasses.field(kw_only=False)
    previous: str | None
    length: int  # messages in the chain up to and including this response's
    created_at: int = 0  # records written before the time was kept: 0
    model: str = ""  # the route the client named; "" in records written before it was kept


async def read_link(store: MemoryStore, tenant: str, response_id: str) -> Link | None:
    """The record of `response_id` answered to `tenant`; None when unknown, expired or another tenant's.

    Raises StoreUnavailable when the store cannot say.
    """
    value = await bookkeeping.of(store).read(_key(response_id))
    if value is None:
        return None
    try:
        record = orjson.loads(value)
        if record["tenant"] != tenant:
            return None
        entries = [Entry(entry["m"], entry.get("t") or {}) for entry in record["entries"]]
        created_at, model = record.get("created_at", 0), record.get("model", "")
        if not isinstance(created_at, int) or not isinstance(model, str):
            raise TypeError("created_at or model")
        return Link(response_id, entries, previous=record["previous"], length=int(record["length"]),
                    created_at=created_at, model=model)
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError, KeyError):
        log.warning("response %s: its record is not one this gateway writes; taken as unknown", response_id)
        return None


class ResponseChain:
    """One request's chain as a MemoryStore: it reads the responses the request continues and writes the request's own.

    Only what a memory turn uses does anything (`load_tail`, `append`, `lock`); the turn's key
    is (tenant, the new response's id). `keep`: False for `store: false`, which records nothing.
    `created_at`, `model`: the answered response's time and the model its request named, recorded with it.
    """

    def __init__(
        self, store: MemoryStore, *, previous: Link | None, keep: bool, created_at: int = 0, model: str = ""
    ) -> None:
        self.kind = str(getattr(store, "kind", "custom"))  # the `store` label of the turn's metrics
        self._store = store
        self._previous = previous
        self._keep = keep
        self._created_at = created_at
        self._model = model
        self._read: list[Link] = [] if previous is None else [previous]  # newest first, each read once

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        """The chain's newest records until `reach` is covered; a wider reach reads on from where the last stopped."""
        if self._previous is None:
            return None
        read = self._read
        entries = _joined(read)
        more = read[-1].previous
        while more is not None and not reach.covered_by(entries):
            older = await read_link(self._store, key[0], more)
            if older is None:  # expired (older records go first): the chain ends here
                more = None
                break
            read.append(older)
            entries = _joined(read)
            more = older.previous
        unread = 0 if more is None else max(self._previous.length - len(entries), 1)
        return Conversation([], entries, 0.0, older=unread)

    async def load(self, key: Key) -> Conversation | None:
        return await self.load_tail(key, Reach(messages=self._previous.length if self._previous else 0))

    async def append(self, key: Key, entries: Sequence[Entry], *, system: Sequence[Message] | None) -> None:
        """Record the answered response; a store that fails, is late or is skipped costs only its continuation (logged)."""
        if not self._keep:
            return
        previous = self._previous
        record: dict[str, Any] = {
            "tenant": key[0],
            "previous": None if previous is None else previous.response_id,
            "length": (0 if previous is None else previous.length) + len(entries),
            "created_at": self._created_at,
            "model": self._model,
            "entries": [orjson.Fragment(dump_entry(entry)) for entry in entries],
        }
        await bookkeeping.of(self._store).write(_key(key[1]), orjson.dumps(record).decode())

    def lock(self, key: Key) -> AbstractAsyncContextManager[None]:
        """No lock: a record is written once, by the request that answered it, and a fork writes another."""
        return contextlib.nullcontext()

    async def delete(self, key: Key) -> bool:
        return False

    async def undo(self, key: Key) -> bool:
        return False

    async def redo(self, key: Key) -> bool:
        return False

    async def list_conversations(self, tenant: str, listing: Listing) -> Page:
        return Page.of([], listing)

    async def put_value(self, key: str, value: str) -> None:
        await self._store.put_value(key, value)

    async def get_value(self, key: str) -> str | None:
        return await self._store.get_value(key)

    async def delete_value(self, key: str) -> bool:
        return await self._store.delete_value(key)

    async def close(self) -> None:
        """Nothing to close: the store is the app's."""


def _joined(links: Sequence[Link]) -> list[Entry]:
    """The entries of `links` (newest first) in the order they were said."""
    return [entry for link in reversed(links) for entry in link.entries]


def stored_response(link: Link) -> dict[str, Any]:
    """The recorded response as OpenAI's Response object, as far as its record tells.

    The record keeps the turn as chat messages: `output` is its reply (the assistant messages
    after the input) as output items, `usage` is null (the record counts tokens in the memory's
    encoding, not the upstream's), and the request's settings (instructions, tools, temperature)
    are not kept: they read as their defaults.
    """
    reply: list[Message] = []
    for entry in reversed(link.entries):
        if entry.message.get("role") != "assistant":
            break
        reply.insert(0, entry.message)
    return {
        "id": link.response_id, "object": "response", "created_at": link.created_at, "status": "completed",
        "model": link.model, "output": _output_items(link.response_id, reply), "previous_response_id": link.previous,
        "error": None, "incomplete_details": None, "instructions": None, "metadata": {}, "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [], "usage": None, "store": True,
    }


def _output_items(response_id: str, reply: Sequence[Message]) -> list[dict[str, Any]]:
    """Recorded assistant messages as output items: a message (text, refusal), then its function calls."""
    suffix = response_id.removeprefix("resp_")
    items: list[dict[str, Any]] = []
    for message in reply:
        content = message.get("content")
        text = content if isinstance(content, str) else "".join(
            part["text"] for part in content or () if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
        parts: list[dict[str, Any]] = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if text else []
        if isinstance(refusal := message.get("refusal"), str) and refusal:
            parts.append({"type": "refusal", "refusal": refusal})
        if parts or not message.get("tool_calls"):
            items.append({"id": f"msg_{suffix}_{len(items)}", "type": "message", "role": "assistant",
                          "status": "completed", "content": parts})
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            items.append({"id": f"fc_{suffix}_{len(items)}", "type": "function_call", "status": "completed",
                          "call_id": call.get("id"), "name": function.get("name"), "arguments": function.get("arguments")})
    return items


async def forget_link(store: MemoryStore, tenant: str, response_id: str) -> bool:
    """Erase the record of `response_id` answered to `tenant`; False when there is none of this tenant's.

    Raises StoreUnavailable when the store cannot say. A chain through it ends before it from then on.
    """
    if await read_link(store, tenant, response_id) is None:
        return False
    return await store.delete_value(_key(response_id))


def unknown_response(response_id: str) -> NotFoundError:
    """The 404 for a response this tenant cannot continue: unknown, expired, or another key's."""
    return NotFoundError(
        f"No response with id '{response_id[:300]}' was answered to this key through this gateway "
        "(records expire with the memory store's TTL; responses created with store: false are not kept).",
        param="previous_response_id",
    )


async def answer_in_chain(
    request: web.Request,
    route: Route,
    payload: dict[str, Any],
    *,
    previous: str | None,
    keep: bool,
    reshape: ResponsesReshape,
) -> web.StreamResponse:
    """Answer a translated Responses request (as the chat `payload`) after the chain it continues, and record it.

    `previous`: the response continued (a 404 when this tenant has none of that id); `keep`:
    record this one (not for `store: false`). The window is the route's memory window.
    """
    app = request.app
    memory = app[MEMORY]
    trace: Trace = request[TRACE]
    tenant = tenant_of(request)
    link = None
    if previous is not None:
        with store_errors():
            link = await read_link(memory.store, tenant, previous)
        if link is None:
            raise unknown_response(previous)
    model = route.memory_model or payload["model"]
    await memory.counts(encoding_name(model))  # loaded by the app's memory, on its threads, before the copy shares them
    chain = _over(memory, ResponseChain(
        memory.store, previous=link, keep=keep, created_at=reshape.created_at, model=payload["model"]
    ))
    key = (tenant, reshape.response_id)
    async with _ChainTurn(chain, key, settings=route.memory, messages=payload["messages"], model=model, trace=trace) as turn:
        if link is None:  # a chain's first response: the request goes as it came, nothing to tell
            turn.headers = {}
        else:  # what the chain forwarded, told as memory turns tell it (the turn's key is no memoryId)
            payload["messages"] = turn.plan.forwarded
            turn.headers = {name: turn.headers[name] for name in _CHAIN_HEADERS}
        call = Request("chat/completions", payload, None, stream=trace.stream, trace=trace)
        return await forward(request, route, call, turn=turn, reshape=reshape, app=app)


def _over(memory: Memory, chain: ResponseChain) -> Memory:
    """The app's memory over one request's chain instead of its store: its counting, its threads, its store's name.

    A shallow copy that owns nothing: it is never closed (closing is the app's memory's, once).
    Made once the app's memory has counted in the turn's encoding, which started its threads.
    """
    over = copy.copy(memory)
    over.store = chain
    return over


_CHAIN_HEADERS = ("x-memory-history", "x-memory-evicted")


class _ChainTurn(Turn):
    """A memory turn whose record is kept at best: a reply memory cannot keep is not recorded, and the answer stands.

    A memory turn refuses such a reply (the client must learn its turn was not stored); a
    response's record only lets it be continued, which an unknown id then refuses with a 404.
    """

    __slots__ = ()

    async def finish(self) -> None:
        try:
            await super().finish()
        except UnstorableReplyError as exc:
            log.warning("response %s: not recorded for previous_response_id (%s)", self._key[1], exc.message)

    def commit_answer(self, answer: Any) -> Awaitable[None]:
        return self._recorded(answer)

    async def _recorded(self, answer: Any) -> None:
        try:
            await super().commit_answer(answer)
        except UnstorableReplyError as exc:
            log.warning("response %s: not recorded for previous_response_id (%s)", self._key[1], exc.message)
