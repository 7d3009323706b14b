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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, TypeVar

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.policies import Plan, TokenCounter, plan_common_turn, plan_turn
from gateway.core.memory.reach import Reach, first_reach, wider_reach
from gateway.core.memory.settings import MemorySettings
from gateway.core.memory.summary import summary_key
from gateway.memory.counting import (
    OFF_LOOP_CHARS,
    CountOffLoop,
    Counts,
    budgeted,
    counted_entries,
    counted_on_loop,
)
from gateway.memory.errors import UnstorableReplyError, unavailable
from gateway.memory.hold import Hold
from gateway.memory.replies import (
    MalformedReply,
    ReplyAssembler,
    ReplyTooLarge,
    malformed_reply,
    reply_message,
    without_reasoning,
)
from gateway.memory.store import Key, MemoryStore, StoreUnavailable
from gateway.memory.summaries import Summaries
from gateway.observe.trace import Observer, Trace
from gateway.tokens import encoding_name, get_encoding, text_size

T = TypeVar("T")
log = logging.getLogger("gateway.memory")
# Closing the store waits this long at most: a store that hangs must not keep the gateway from stopping.
CLOSE_SECONDS: Final = 10.0

# A request of more messages is planned on a thread: planning normalizes and compares each one.
PLAN_ON_LOOP_MESSAGES: Final = 256
_NO_CONVERSATION: Final = Conversation([], [], 0.0)


class Turn(Hold):
    """One memory-backed request: `async with Turn(...)` holds the conversation and plans what to
    forward (`plan`, `headers`); the write that follows its success; leaving waits for it, then
    lets go.

    One object for the request's whole turn (the lock it holds included): each object and frame
    fewer is paid on every memory request.
    """

    __slots__ = (
        "_appended", "_assembler", "_counts", "_encoding", "_loaded", "_memory", "_messages", "_model", "_settings",
        "_stored", "_trace", "headers", "plan",
    )  # fmt: skip

    plan: Plan  # set on entering
    headers: dict[str, str]

    def __init__(
        self,
        memory: Memory,
        key: Key,
        *,
        settings: MemorySettings,
        messages: Sequence[Mapping[str, Any]],
        model: str | None,
        trace: Trace,
    ) -> None:
        Hold.__init__(self, memory.store, key, observer=trace.observer, store_kind=memory.store_kind)
        self._memory = memory
        self._settings = settings
        self._messages = messages
        self._model = model
        self._trace = trace
        self._assembler: ReplyAssembler | None = None  # only a stream needs one
        # What the turn did, told to the observer once, when it lets the conversation go (_report)
        self._loaded: float | None = None  # None until planned
        self._appended: float | None = None  # None unless a write was tried
        self._stored = 0

    async def __aenter__(self) -> Turn:  # type: ignore[override]  # Hold's gives nothing; a turn gives itself
        memory, trace, settings, messages = self._memory, self._trace, self._settings, self._messages
        self._encoding = encoding = encoding_name(self._model)
        self._counts = counts = memory.counts_by_encoding.get(encoding) or await memory.counts(encoding)
        common = counts.common_turn(messages, settings)
        if not self._take_now():  # Hold.__aenter__, without its await in the common case
            await self._wait()
        try:
            # Memory._read's read, written out (a coroutine layer less): a StoreUnavailable is a 503 by __aexit__
            started = time.monotonic()
            conversation = await memory.store.load_tail(self._key, first_reach(settings, messages))
            loaded = time.monotonic() - started
            # The common turn (see plan_common_turn) is planned in one pass; any other by plan_turn
            plan = None
            if common is not None:
                plan = plan_common_turn(common, conversation, max_tokens=settings.max_tokens, encoding=encoding)
            if plan is None:
                plan = await memory.plan_read(
                    conversation, self._key, settings=settings, messages=messages, count=counts.count,
                    on_loop=counts.count_on_loop, encoding=encoding, trace=trace,
                )  # fmt: skip
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        # what Trace.memory_planned sets: the observer is told with the rest when the turn ends (_report)
        trace.memory_type, trace.evicted = settings.memory_type, plan.evicted
        self._loaded = loaded  # planned: a turn that failed before this reports its lock's wait alone
        self.plan = plan
        self.headers = {
            "x-memory-id": self._key[1],
            "x-memory-history": str(plan.history_kept),
            "x-memory-evicted": str(plan.evicted),
        }
        return self

    def _report(self) -> None:
        """Tell the observer what the turn did, in one event (a turn that did not plan: its lock's wait)."""
        if self._loaded is None:
            super()._report()
            return
        trace = self._trace
        trace.observer.memory_turn(
            trace, self._store_kind, waited=self._waited, loaded=self._loaded, appended=self._appended, stored=self._stored
        )

    @property
    def assembler(self) -> ReplyAssembler:
        if self._assembler is None:
            self._assembler = ReplyAssembler(max_bytes=self._memory.max_reply_bytes)
        return self._assembler

    def feed(self, chunk: Any) -> None:
        """Take one relayed stream chunk (parsed JSON) into the reply being assembled."""
        self.assembler.feed(chunk)

    async def finish(self) -> None:
        """The stream reached `[DONE]`: store the assembled reply, or raise what the client should see."""
        if not self.assembler.finished:
            raise UnstorableReplyError("The upstream stream ended without a finish_reason; the turn was not stored.")
        try:
            message = self.assembler.message()
        except ReplyTooLarge as exc:
            raise UnstorableReplyError(f"{exc}; the turn was not stored.", code="response_too_large") from None
        except MalformedReply as exc:
            raise UnstorableReplyError(f"The upstream's reply is malformed ({exc}); the turn was not stored.") from None
        await self._commit(message)

    def commit_answer(self, answer: Any) -> Awaitable[None]:
        """Store a complete JSON answer's reply, or raise what the client should see instead.

        Not a coroutine: it hands back the write's own, one awaited layer less.
        """
        message = reply_message(answer)
        if message is None:
            raise UnstorableReplyError("The upstream's answer has no choices[0].message; the turn was not stored.")
        return self._commit(message)

    async def _commit(self, reply: Message) -> None:
        reply = without_reasoning(reply)
        problem = malformed_reply(reply)
        if problem is not None:
            raise UnstorableReplyError(f"The upstream's reply is malformed ({problem}); the turn was not stored.")
        plan, encoding = self.plan, self._encoding
        turn, counts = plan.new_turn, plan.turn_tokens
        entries = None
        if counts is not None:  # the window counted the turn: the reply is left, counted here when small
            try:
                reply_tokens = self._counts.count_on_loop(reply)
            except CountOffLoop:
                pass  # a large reply: counted with the turn, on a thread
            else:
                if len(turn) == 1:  # a one-question turn, the common one: its two entries without counted_entries' loop
                    entries = [Entry(turn[0], {encoding: counts[0]}), Entry(reply, {encoding: reply_tokens})]
                else:
                    entries = counted_entries([*turn, reply], [*counts, reply_tokens], encoding)
        if entries is None:
            messages = [*turn, reply]
            count = self._counts.count
            entries = counted_entries(messages, await self._memory.offload(lambda: [count(m) for m in messages], messages), encoding)
        started = time.monotonic()
        try:
            # A client that leaves now cannot cut the write in half: stores finish it on their own,
            # before the conversation passes to its next holder (see MemoryStore.append).
            await self._memory.store.append(self._key, entries, system=plan.system if plan.system_changed else None)
        except StoreUnavailable as exc:
            raise unavailable(exc) from None
        finally:
            self._appended = time.monotonic() - started
        self._stored = len(entries)


class Memory:
    """Per-request memory over one store, and its summary windows' background jobs (`summaries`).

    `token_cap` bounds every count: a message over the operator's largest token window fits no
    window, so its count stops there. `max_reply_bytes` bounds a streamed reply assembled to store.
    """

    def __init__(
        self,
        store: MemoryStore,
        *,
        token_cap: int = 128_000,
        max_reply_bytes: int = 32 * 1024 * 1024,
        close_seconds: float = CLOSE_SECONDS,
    ) -> None:
        self.store = store
        self._close_seconds = close_seconds
        self.store_kind = str(getattr(store, "kind", "custom"))
        self.token_cap = token_cap
        self.max_reply_bytes = max_reply_bytes
        self._pool: ThreadPoolExecutor | None = None
        self.summaries = Summaries(store)  # summary windows' background jobs
        # Counting in each encoding whose tiktoken encoding is loaded (after a first turn: the one in use)
        self.counts_by_encoding: dict[str, Counts] = {}

    async def offload(self, work: Callable[[], T], messages: Sequence[Mapping[str, Any]]) -> T:
        """Run `work` here when `messages` are small, else on a thread (tiktoken releases the GIL)."""
        if sum(text_size(m) for m in messages) <= OFF_LOOP_CHARS:
            return work()
        return await self._on_thread(work)

    async def _on_thread(self, work: Callable[[], T]) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="gateway-tokens")
        return await asyncio.get_running_loop().run_in_executor(self._pool, work)

    async def counts(self, encoding: str) -> Counts:
        """Counting in `encoding`; loading the tiktoken encoding (~0.5 s of building tables) happens on a thread."""
        counts = self.counts_by_encoding.get(encoding)
        if counts is None:
            codec = await self._on_thread(functools.partial(get_encoding, encoding))
            counts = self.counts_by_encoding[encoding] = Counts(codec, self.token_cap)
        return counts

    async def plan(
        self,
        key: Key,
        settings: MemorySettings,
        messages: Sequence[Mapping[str, Any]],
        *,
        count: TokenCounter,
        encoding: str,
        trace: Trace,
        count_on_loop: TokenCounter | None = None,
    ) -> Plan:
        """Read the newest part of the conversation the window needs and plan; read further only when it must.

        Planned on the loop unless a text is too large to count there (`count_on_loop` refuses it;
        by default `count` guarded by the text's size), the texts counted pass OFF_LOOP_CHARS in
        all, or the request holds more than PLAN_ON_LOOP_MESSAGES messages: then on a thread.
        """
        conversation, loaded = await self._read(key, first_reach(settings, messages))
        trace.observer.store_timed(self.store_kind, "load", loaded)
        on_loop = count_on_loop or counted_on_loop(count)
        return await self.plan_read(
            conversation, key, settings=settings, messages=messages, count=count, on_loop=on_loop, encoding=encoding, trace=trace
        )

    async def _read(self, key: Key, reach: Reach) -> tuple[Conversation | None, float]:
        """The conversation's newest part that covers `reach` (None: none is stored), and the seconds the read took."""
        started = time.monotonic()
        try:
            conversation = await self.store.load_tail(key, reach)
        except StoreUnavailable as exc:
            raise unavailable(exc) from None
        return conversation, time.monotonic() - started

    async def plan_read(
        self, conversation: Conversation | None, key: Key, *, settings: MemorySettings, messages: Sequence[Mapping[str, Any]],
        count: TokenCounter, on_loop: TokenCounter, encoding: str, trace: Trace,
    ) -> Plan:  # fmt: skip
        """Plan by plan_turn over `conversation`, the first read; a wider read, when the plan wants one, is reported here."""
        while True:
            if conversation is None:
                conversation = _NO_CONVERSATION
            system, entries, older, plain = conversation.system, conversation.entries, conversation.older, conversation.plain
            work = functools.partial(
                plan_turn, system, entries, messages, settings=settings, encoding=encoding, older=older, plain=plain
            )
            plan = None
            if len(messages) <= PLAN_ON_LOOP_MESSAGES:
                with contextlib.suppress(CountOffLoop):
                    plan = work(count=budgeted(on_loop))
            if plan is None:
                plan = await self._on_thread(functools.partial(work, count=count))
            if not plan.wants_older:
                return plan
            conversation, loaded = await self._read(key, wider_reach(len(entries)))
            trace.observer.store_timed(self.store_kind, "load", loaded)

    def hold(self, key: Key, observer: Observer | None = None) -> AbstractAsyncContextManager[None]:
        """The conversation's lock, with store failures as the client sees them (409, 503).

        Once the work under the lock is done (the answer may be on its way to the client), a
        failure to release is logged, never raised: the lock's lease (Redis) or the process's end (SQLite's kernel locks) ends it anyway.
        """
        return Hold(self.store, key, observer, store_kind=self.store_kind)

    async def delete(self, key: Key) -> bool:
        """Delete the conversation and its summary (summary_window); False when there was no conversation."""
        await self.summaries.forget(key)
        deleted = await self.store.delete(key)
        await self.store.delete_value(summary_key(*key))
        return deleted

    async def close(self) -> None:
        """Close the store, giving up (logged) after `close_seconds`: by then every turn was answered."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        await self.summaries.close()  # before the store: a job reads and writes it
        try:
            await asyncio.wait_for(self.store.close(), self._close_seconds)
        except TimeoutError:
            log.warning("memory: the %s store did not close within %gs; stopping without it", self.store_kind, self._close_seconds)
