"""One memory-backed chat request: lock the conversation, plan what to forward, store on success."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import orjson

from gateway.errors import ConflictError, GatewayError
from gateway.memory.headers import MemoryAsk
from gateway.memory.policies import Entry, Message, Plan, TokenCounter, plan_turn
from gateway.memory.replies import ReplyAssembler, reply_message
from gateway.memory.store import Key, LockTimeout, MemoryStore, StoreUnavailable
from gateway.memory.tokens import count_message, encoding_name, get_encoding
from gateway.sse import Event

log = logging.getLogger("gateway.memory")


class MemoryUnavailableError(GatewayError):
    status = 503
    type = "server_error"
    code = "memory_unavailable"


class Turn:
    """The forwarded messages of one request, and the write that follows its success."""

    def __init__(self, store: MemoryStore, key: Key, plan: Plan, encoding: str, count: TokenCounter) -> None:
        self._store = store
        self._key = key
        self.plan = plan
        self._encoding = encoding
        self._count = count
        self._assembler = ReplyAssembler()
        self._unreadable = False
        self._write: asyncio.Task[None] | None = None
        self.headers = {
            "x-memory-id": key[1],
            "x-memory-history": str(plan.history_kept),
            "x-memory-evicted": str(plan.evicted),
        }

    def on_event(self, event: Event) -> None:
        """Feed a relayed stream event to the reply being assembled."""
        if event.data is None or event.is_done or self._unreadable:
            return
        try:
            self._assembler.feed(orjson.loads(event.data))
        except Exception:  # the client still gets the stream; memory just won't store a reply it could not read
            log.warning("unreadable stream event; memory %s will not store this turn", self._key[1], exc_info=True)
            self._unreadable = True

    async def commit_answer(self, answer: Any) -> None:
        message = reply_message(answer)
        if message is None:
            log.warning("answer without choices[0].message; memory %s left unchanged", self._key[1])
            return
        await self._commit(message)

    async def commit_stream(self) -> None:
        """Store the assembled reply, if the stream reached its finish_reason."""
        if self._assembler.finished and not self._unreadable:
            await self._commit(self._assembler.message())

    async def _commit(self, reply: Message) -> None:
        entries = [Entry(m, {self._encoding: self._count(m)}) for m in (*self.plan.new_turn, reply)]
        system = self.plan.system if self.plan.system_changed else None
        # Shielded: a client that leaves now must not cut the write (or the lock) in half.
        self._write = asyncio.ensure_future(self._store.append(self._key, entries, system=system))
        await asyncio.shield(self._write)

    async def settle(self) -> None:
        """Wait for a write still under way, so the lock outlives it."""
        if self._write is not None and not self._write.done():
            await asyncio.wait([self._write])


def _memo_counter(encoding: str) -> TokenCounter:
    """count_message for `encoding`, computed at most once per message object of this request."""
    codec = get_encoding(encoding)
    seen: dict[int, tuple[Message, int]] = {}

    def count(message: Message) -> int:
        hit = seen.get(id(message))
        if hit is None or hit[0] is not message:
            hit = seen[id(message)] = (message, count_message(message, codec))
        return hit[1]

    return count


class Memory:
    """Per-request memory over one store."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    @asynccontextmanager
    async def turn(
        self, tenant: str, ask: MemoryAsk, messages: Sequence[Mapping[str, Any]], model: str | None
    ) -> AsyncIterator[Turn]:
        key = (tenant, ask.memory_id)
        encoding = encoding_name(model)
        count = _memo_counter(encoding)
        async with self.hold(key):
            conversation = await self.store.load(key)
            plan = plan_turn(
                conversation.system if conversation else [],
                conversation.entries if conversation else [],
                messages,
                ask.settings,
                count=count,
                encoding=encoding,
            )
            turn = Turn(self.store, key, plan, encoding, count)
            try:
                yield turn
            finally:
                await turn.settle()

    @asynccontextmanager
    async def hold(self, key: Key) -> AsyncIterator[None]:
        """The conversation's lock, with store failures as the client sees them (409, 503)."""
        with store_errors():
            try:
                async with self.store.lock(key):
                    yield
            except LockTimeout as exc:
                raise ConflictError(
                    f"Memory '{key[1]}' is busy with another request: {exc}.",
                    code="memory_busy",
                    headers={"x-should-retry": "false"},
                ) from None


@contextmanager
def store_errors() -> Iterator[None]:
    """A failing store backend is a 503 for the client, never a 500."""
    try:
        yield
    except StoreUnavailable as exc:
        log.error("memory store unavailable: %s", exc)
        raise MemoryUnavailableError("The memory store is unavailable; try again later.") from None
