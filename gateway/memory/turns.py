"""One memory-backed chat request: lock the conversation, plan what to forward, store on success.

The rule for the answer: when a turn's answer cannot be stored, the client learns it. A JSON
answer becomes a 503 (or a 502 when the upstream's reply is not storable); a stream holds back
the upstream's `[DONE]` until the turn is stored and ends with an in-band error otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from gateway.errors import ConflictError, GatewayError
from gateway.memory.headers import MemoryAsk
from gateway.memory.policies import Entry, Message, Plan, TokenCounter, plan_turn
from gateway.memory.replies import ReplyAssembler, ReplyTooLarge, reply_message
from gateway.memory.store import Key, LockLost, LockTimeout, MemoryStore, StoreUnavailable
from gateway.memory.tokens import Encoding, count_message, encoding_name, get_encoding, text_size
from gateway.observe import Observer, Trace

log = logging.getLogger("gateway.memory")
T = TypeVar("T")

OFF_LOOP_CHARS = 16_384  # texts to tokenize beyond this many characters are counted on a thread


class MemoryUnavailableError(GatewayError):
    status = 503
    type = "server_error"
    code = "memory_unavailable"


class UnstorableReplyError(GatewayError):
    """The upstream answered, but not with a reply memory can keep; nothing was stored."""

    status = 502
    type = "upstream_error"
    code = "unstorable_reply"


class Turn:
    """The forwarded messages of one request, and the write that follows its success."""

    def __init__(
        self, memory: Memory, key: Key, plan: Plan, encoding: str, count: TokenCounter, trace: Trace | None = None
    ) -> None:
        self._memory = memory
        self._trace = trace or Trace()
        self._key = key
        self.plan = plan
        self._encoding = encoding
        self._count = count
        self._assembler = ReplyAssembler(max_bytes=memory.max_reply_bytes)
        self._write: asyncio.Task[None] | None = None
        self.headers = {
            "x-memory-id": key[1],
            "x-memory-history": str(plan.history_kept),
            "x-memory-evicted": str(plan.evicted),
        }

    def feed(self, chunk: Any) -> None:
        """Take one relayed stream chunk (parsed JSON) into the reply being assembled."""
        self._assembler.feed(chunk)

    async def finish(self) -> None:
        """The stream reached `[DONE]`: store the assembled reply, or raise what the client should see."""
        if not self._assembler.finished:
            raise UnstorableReplyError("The upstream stream ended without a finish_reason; the turn was not stored.")
        try:
            message = self._assembler.message()
        except ReplyTooLarge as exc:
            raise UnstorableReplyError(f"{exc}; the turn was not stored.", code="response_too_large") from None
        await self._commit(message)

    async def commit_answer(self, answer: Any) -> None:
        """Store a complete JSON answer's reply, or raise what the client should see instead."""
        message = reply_message(answer)
        if message is None:
            raise UnstorableReplyError("The upstream's answer has no choices[0].message; the turn was not stored.")
        await self._commit(message)

    async def _commit(self, reply: Message) -> None:
        problem = malformed_reply(reply)
        if problem is not None:
            raise UnstorableReplyError(f"The upstream's reply is malformed ({problem}); the turn was not stored.")
        messages = (*self.plan.new_turn, reply)
        counts = await self._memory.offload(lambda: [self._count(m) for m in messages], messages)
        entries = [Entry(m, {self._encoding: n}) for m, n in zip(messages, counts, strict=True)]
        system = self.plan.system if self.plan.system_changed else None
        # Shielded: a client that leaves now must not cut the write (or the lock) in half.
        self._write = asyncio.ensure_future(self._memory.store.append(self._key, entries, system=system))
        started = time.monotonic()
        try:
            with store_errors():
                await asyncio.shield(self._write)
        finally:
            self._trace.observer.store_timed(self._memory.store_kind, "append", time.monotonic() - started)
        self._trace.memory_stored(len(entries))

    async def settle(self) -> None:
        """Wait for a write still under way, so the lock outlives it."""
        if self._write is not None and not self._write.done():
            await asyncio.wait([self._write])


def malformed_reply(message: Message) -> str | None:
    """What makes an assistant reply unfit to store (and to resend on later turns), if anything."""
    calls = message.get("tool_calls")
    if calls is None:
        return None
    if not isinstance(calls, list):
        return "tool_calls is not an array"
    for i, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
            return f"tool_calls[{i}].id is not a non-empty string"
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            return f"tool_calls[{i}].function.name is not a non-empty string"
        if not isinstance(function.get("arguments"), str):
            return f"tool_calls[{i}].function.arguments is not a string"
    return None


def _memo_counter(codec: Encoding, cap: int) -> TokenCounter:
    """count_message for `codec`, computed at most once per message object of this request."""
    seen: dict[int, tuple[Message, int]] = {}

    def count(message: Message) -> int:
        hit = seen.get(id(message))
        if hit is None or hit[0] is not message:
            hit = seen[id(message)] = (message, count_message(message, codec, cap))
        return hit[1]

    return count


class Memory:
    """Per-request memory over one store.

    `token_cap` bounds every count: a message over the operator's largest token window fits no
    window, so its count stops there. `max_reply_bytes` bounds a streamed reply assembled to store.
    """

    def __init__(
        self, store: MemoryStore, *, token_cap: int = 128_000, max_reply_bytes: int = 32 * 1024 * 1024
    ) -> None:
        self.store = store
        self.store_kind = str(getattr(store, "kind", "custom"))
        self.token_cap = token_cap
        self.max_reply_bytes = max_reply_bytes
        self._pool: ThreadPoolExecutor | None = None
        self._codecs: dict[str, Encoding] = {}

    async def offload(self, work: Callable[[], T], messages: Sequence[Mapping[str, Any]]) -> T:
        """Run `work` here when `messages` are small, else on a thread (tiktoken releases the GIL)."""
        if sum(text_size(m) for m in messages) <= OFF_LOOP_CHARS:
            return work()
        return await self._on_thread(work)

    async def _on_thread(self, work: Callable[[], T]) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="gateway-tokens")
        return await asyncio.get_running_loop().run_in_executor(self._pool, work)

    async def _codec(self, name: str) -> Encoding:
        """The tiktoken encoding; its first load (~0.5 s of building tables) happens on a thread."""
        if name not in self._codecs:
            self._codecs[name] = await self._on_thread(functools.partial(get_encoding, name))
        return self._codecs[name]

    @asynccontextmanager
    async def turn(
        self,
        tenant: str,
        ask: MemoryAsk,
        messages: Sequence[Mapping[str, Any]],
        model: str | None,
        *,
        trace: Trace | None = None,
    ) -> AsyncIterator[Turn]:
        trace = trace or Trace()
        key = (tenant, ask.memory_id)
        encoding = encoding_name(model)
        count = _memo_counter(await self._codec(encoding), self.token_cap)
        async with self.hold(key, trace.observer):
            started = time.monotonic()
            with store_errors():
                conversation = await self.store.load(key)
            trace.observer.store_timed(self.store_kind, "load", time.monotonic() - started)
            system = conversation.system if conversation else []
            entries = conversation.entries if conversation else []
            plan = functools.partial(plan_turn, system, entries, messages, ask.settings, count=count, encoding=encoding)
            uncounted = [*messages, *(e.message for e in entries if encoding not in e.tokens)]
            turn = Turn(self, key, await self.offload(plan, uncounted), encoding, count, trace)
            trace.memory_planned(ask.settings.memory_type, turn.plan.evicted)
            try:
                yield turn
            finally:
                await turn.settle()

    @asynccontextmanager
    async def hold(self, key: Key, observer: Observer | None = None) -> AsyncIterator[None]:
        """The conversation's lock, with store failures as the client sees them (409, 503).

        Once the work under the lock is done (the answer may be on its way to the client), a
        failure to release is logged, never raised: the lock's lease ends it anyway.
        """
        done = False
        started = time.monotonic()
        try:
            async with contextlib.AsyncExitStack() as held:
                try:
                    await held.enter_async_context(self.store.lock(key))
                finally:  # a wait that ends in LockTimeout is reported too
                    if observer is not None:
                        waited = time.monotonic() - started
                        observer.lock_waited(waited)
                        observer.store_timed(self.store_kind, "lock", waited)
                yield
                done = True
        except StoreUnavailable as exc:
            if not done:
                raise _unavailable(exc) from None
            log.warning("memory %s: releasing the conversation's lock failed (%s); its lease will end it", key[1], exc)
        except LockTimeout as exc:
            raise ConflictError(
                f"Memory '{key[1]}' is busy with another request: {exc}.",
                code="memory_busy",
                headers={"x-should-retry": "false"},
            ) from None

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        await self.store.close()


def _unavailable(exc: StoreUnavailable) -> MemoryUnavailableError:
    log.error("memory store unavailable: %s", exc)
    if isinstance(exc, LockLost):
        return MemoryUnavailableError(
            "The conversation's lock was lost while the answer was produced (the memory store was "
            "unreachable for longer than the lock's lease); the turn was not stored.",
            code="memory_lock_lost",
        )
    return MemoryUnavailableError("The memory store is unavailable; nothing was stored. Try again later.")


@contextmanager
def store_errors() -> Iterator[None]:
    """A failing store backend is a 503 for the client, never a 500."""
    try:
        yield
    except StoreUnavailable as exc:
        raise _unavailable(exc) from None
