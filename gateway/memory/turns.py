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
from types import TracebackType
from typing import Any, TypeVar

from gateway.core.errors import ConflictError, GatewayError
from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.messages import SYSTEM_ROLES
from gateway.core.memory.policies import CommonTurn, Plan, TokenCounter, plan_common_turn, plan_turn
from gateway.core.memory.reach import Reach, first_reach, wider_reach
from gateway.core.memory.settings import MemorySettings
from gateway.memory.replies import ReplyAssembler, ReplyTooLarge, reply_message
from gateway.memory.store import Held, Key, LockLost, LockTimeout, MemoryStore, StoreUnavailable
from gateway.observe.trace import Observer, Trace
from gateway.tokens import Encoding, count_message, encoding_name, get_encoding, text_size

log = logging.getLogger("gateway.memory")
T = TypeVar("T")

OFF_LOOP_CHARS = 16_384  # texts to tokenize beyond this many characters are counted on a thread
# A request of more messages is planned on a thread: planning normalizes and compares each one.
PLAN_ON_LOOP_MESSAGES = 256
_NO_CONVERSATION = Conversation([], [], 0.0)


class MemoryUnavailableError(GatewayError):
    status = 503
    type = "server_error"
    code = "memory_unavailable"


class UnstorableReplyError(GatewayError):
    """The upstream answered, but not with a reply memory can keep; nothing was stored."""

    status = 502
    type = "upstream_error"
    code = "unstorable_reply"


class _Hold:
    """`Memory.hold`: a plain class, cheaper per request than a generator-based context manager."""

    __slots__ = ("_key", "_lock", "_observer", "_store_kind", "_waited")

    def __init__(self, memory: Memory, key: Key, observer: Observer | None) -> None:
        self._key = key
        self._lock = memory.store.lock(key)
        self._observer = observer
        self._store_kind = memory.store_kind

    async def __aenter__(self) -> None:
        if not self._take_now():
            await self._wait()

    def _take_now(self) -> bool:
        """Take a free in-process lock (a Held: the common case) without an await; False: `_wait` for it."""
        lock = self._lock
        if type(lock) is Held and lock.take_now():
            self._waited = 0.0  # reported when the lock is let go
            return True
        return False

    async def _wait(self) -> None:
        """Take the lock by its `async with`, waiting as long as the store lets it."""
        started = time.monotonic()
        try:
            await self._lock.__aenter__()
        except BaseException as exc:
            raise self._not_held(exc, started) from None
        self._waited = time.monotonic() - started  # reported when the lock is let go

    def _not_held(self, exc: BaseException, started: float) -> BaseException:
        """What a wait for the lock that failed raises (LockTimeout: a 409); its wait is reported now."""
        self._waited = time.monotonic() - started
        self._report()
        if isinstance(exc, StoreUnavailable):
            return _unavailable(exc)
        if isinstance(exc, LockTimeout):
            return _busy(self._key, exc)
        return exc

    def _report(self) -> None:
        """Tell the observer what the hold did: how long it waited for the lock."""
        if self._observer is not None:
            self._observer.lock_waited(self._store_kind, self._waited)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:  # never swallows the exception
        self._report()
        lock = self._lock
        try:
            if type(lock) is Held:  # in-process: let go without an await
                lock.let_go()
            else:
                await lock.__aexit__(kind, exc, traceback)
        except StoreUnavailable as failure:
            if kind is not None:
                raise _unavailable(failure) from None
            log.warning("memory %s: releasing the conversation's lock failed (%s); its lease will end it", self._key[1], failure)
        if isinstance(exc, StoreUnavailable):
            raise _unavailable(exc) from None
        if isinstance(exc, LockTimeout):
            raise _busy(self._key, exc) from None


class Turn(_Hold):
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
        settings: MemorySettings,
        messages: Sequence[Mapping[str, Any]],
        model: str | None,
        trace: Trace,
    ) -> None:
        _Hold.__init__(self, memory, key, trace.observer)
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

    async def __aenter__(self) -> Turn:  # type: ignore[override]  # _Hold's gives nothing; a turn gives itself
        memory, trace, settings, messages = self._memory, self._trace, self._settings, self._messages
        self._encoding = encoding = encoding_name(self._model)
        self._counts = counts = memory._counts_by_encoding.get(encoding) or await memory._counts(encoding)
        common = counts.common_turn(messages, settings)
        if not self._take_now():  # _Hold.__aenter__, without its await in the common case
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
                plan = await memory._plan(conversation, self._key, settings, messages, counts.count, counts.count_on_loop, encoding, trace)
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
            _Hold._report(self)
            return
        trace = self._trace
        trace.observer.memory_turn(trace, self._store_kind, self._waited, self._loaded, self._appended, self._stored)

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
        if "tool_calls" in reply:  # only tool calls can be malformed
            problem = malformed_reply(reply)
            if problem is not None:
                raise UnstorableReplyError(f"The upstream's reply is malformed ({problem}); the turn was not stored.")
        plan, encoding = self.plan, self._encoding
        turn, counts = plan.new_turn, plan.turn_tokens
        entries = None
        if counts is not None:  # the window counted the turn: the reply is left, counted here when small
            try:
                reply_tokens = self._counts.count_on_loop(reply)
            except _CountOffLoop:
                pass  # a large reply: counted with the turn, on a thread
            else:
                if len(turn) == 1:  # a one-question turn (the common one): its two entries made here (a loop costs ~4k instructions more)
                    entries = [tuple.__new__(Entry, (turn[0], {encoding: counts[0]})), tuple.__new__(Entry, (reply, {encoding: reply_tokens}))]
                else:
                    entries = _entries([*turn, reply], [*counts, reply_tokens], encoding)
        if entries is None:
            messages = [*turn, reply]
            count = self._counts.count
            entries = _entries(messages, await self._memory.offload(lambda: [count(m) for m in messages], messages), encoding)
        started = time.monotonic()
        try:
            # A client that leaves now cannot cut the write in half: stores finish it on their own,
            # before the conversation passes to its next holder (see MemoryStore.append).
            await self._memory.store.append(self._key, entries, system=plan.system if plan.system_changed else None)
        except StoreUnavailable as exc:
            raise _unavailable(exc) from None
        finally:
            self._appended = time.monotonic() - started
        self._stored = len(entries)


def _entries(messages: Sequence[Message], counts: Sequence[int], encoding: str) -> list[Entry]:
    """The entries to store: each message with its count in `encoding`."""
    # tuple.__new__: Entry(...) without its __new__, a Python function called from C
    return [tuple.__new__(Entry, (message, {encoding: tokens})) for message, tokens in zip(messages, counts, strict=True)]


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


class _CountOffLoop(Exception):
    """Planning met a text too large to count on the event loop: plan again on a thread."""


def _counted_on_loop(count: TokenCounter) -> TokenCounter:
    """`count`, refusing (with _CountOffLoop) a message too large to count without blocking the loop."""

    def guarded(message: Message) -> int:
        if text_size(message) > OFF_LOOP_CHARS:
            raise _CountOffLoop
        return count(message)

    return guarded


def _budgeted(count: TokenCounter) -> TokenCounter:
    """`count` for one plan on the loop, refusing (_CountOffLoop) once its texts pass OFF_LOOP_CHARS in all.

    A message at a time, each under the limit, a long request or an uncounted history would
    otherwise all be counted on the loop.
    """
    left = OFF_LOOP_CHARS

    def counted(message: Message) -> int:
        nonlocal left
        left -= text_size(message)
        if left < 0:
            raise _CountOffLoop
        return count(message)

    return counted


SHORT_COUNTS = 8192  # short {role, content} messages whose counts a process remembers, per encoding


class _Counts:
    """Token counts in one encoding: short {role, content} messages (system prompts, common turns) remembered.

    `count` counts any message; `count_on_loop` refuses (_CountOffLoop) one too large to count
    without blocking the loop.
    """

    def __init__(self, codec: Encoding, cap: int) -> None:
        self._short: dict[tuple[str, str], int] = {}
        self.count = self._counter(codec, cap, None)
        self.count_on_loop = self._counter(codec, cap, OFF_LOOP_CHARS)

    def common_turn(self, messages: Sequence[Mapping[str, Any]], settings: MemorySettings) -> CommonTurn | None:
        """The request as a CommonTurn under a token window, its messages counted; None for any other request.

        Counted on the loop: a text too large for it makes the request another one.
        """
        if len(messages) != 2 or settings.memory_type != "token_window":
            return None
        system, question = messages
        if not (
            type(system) is dict and type(question) is dict and len(system) == 2 and len(question) == 2
            and system.get("role") in SYSTEM_ROLES and question.get("role") == "user"
            and type(system.get("content")) is str and type(question.get("content")) is str  # two keys need not be these
        ):  # fmt: skip
            return None
        short, count = self._short, self.count_on_loop
        try:  # counts remembered (a system prompt, a question asked before) are found without a call
            return tuple.__new__(CommonTurn, (
                system,
                question,
                short.get((system["role"], system["content"])) or count(system),
                short.get(("user", question["content"])) or count(question),
            ))  # fmt: skip
        except _CountOffLoop:
            return None

    def _counter(self, codec: Encoding, cap: int, limit: int | None) -> TokenCounter:
        short = self._short

        def count(message: Message) -> int:
            if len(message) == 2:  # {role, content}: a short one is remembered (and needs no size check)
                try:  # a hit is one lookup; only (str, str) keys are stored, and nothing else equals one
                    known = short.get((message["role"], message["content"]))
                except (KeyError, TypeError):  # not {role, content}, or content parts (a list: unhashable)
                    known = None
                if known is not None:
                    return known
                role, content = message.get("role"), message.get("content")
                if type(role) is str and type(content) is str and len(role) + len(content) <= 4096:
                    if len(short) >= SHORT_COUNTS:
                        short.clear()
                    known = short[(role, content)] = count_message(message, codec, cap)
                    return known
            if limit is not None and text_size(message) > limit:
                raise _CountOffLoop
            return count_message(message, codec, cap)

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
        self._counts_by_encoding: dict[str, _Counts] = {}

    async def offload(self, work: Callable[[], T], messages: Sequence[Mapping[str, Any]]) -> T:
        """Run `work` here when `messages` are small, else on a thread (tiktoken releases the GIL)."""
        if sum(text_size(m) for m in messages) <= OFF_LOOP_CHARS:
            return work()
        return await self._on_thread(work)

    async def _on_thread(self, work: Callable[[], T]) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="gateway-tokens")
        return await asyncio.get_running_loop().run_in_executor(self._pool, work)

    async def _counts(self, encoding: str) -> _Counts:
        """Counting in `encoding`; loading the tiktoken encoding (~0.5 s of building tables) happens on a thread."""
        counts = self._counts_by_encoding.get(encoding)
        if counts is None:
            codec = await self._on_thread(functools.partial(get_encoding, encoding))
            counts = self._counts_by_encoding[encoding] = _Counts(codec, self.token_cap)
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
        on_loop = count_on_loop or _counted_on_loop(count)
        return await self._plan(conversation, key, settings, messages, count, on_loop, encoding, trace)

    async def _read(self, key: Key, reach: Reach) -> tuple[Conversation | None, float]:
        """The conversation's newest part that covers `reach` (None: none is stored), and the seconds the read took."""
        started = time.monotonic()
        try:
            conversation = await self.store.load_tail(key, reach)
        except StoreUnavailable as exc:
            raise _unavailable(exc) from None
        return conversation, time.monotonic() - started

    async def _plan(
        self, conversation: Conversation | None, key: Key, settings: MemorySettings, messages: Sequence[Mapping[str, Any]],
        count: TokenCounter, on_loop: TokenCounter, encoding: str, trace: Trace,
    ) -> Plan:  # fmt: skip
        """Plan by plan_turn over `conversation`, the first read; a wider read, when the plan wants one, is reported here."""
        while True:
            if conversation is None:
                conversation = _NO_CONVERSATION
            system, entries, older, plain = conversation.system, conversation.entries, conversation.older, conversation.plain
            work = functools.partial(plan_turn, system, entries, messages, settings, encoding=encoding, older=older, plain=plain)
            plan = None
            if len(messages) <= PLAN_ON_LOOP_MESSAGES:
                with contextlib.suppress(_CountOffLoop):
                    plan = work(count=_budgeted(on_loop))
            if plan is None:
                plan = await self._on_thread(functools.partial(work, count=count))
            if not plan.wants_older:
                return plan
            conversation, loaded = await self._read(key, wider_reach(len(entries)))
            trace.observer.store_timed(self.store_kind, "load", loaded)

    def hold(self, key: Key, observer: Observer | None = None) -> AbstractAsyncContextManager[None]:
        """The conversation's lock, with store failures as the client sees them (409, 503).

        Once the work under the lock is done (the answer may be on its way to the client), a
        failure to release is logged, never raised: the lock's lease ends it anyway.
        """
        return _Hold(self, key, observer)

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        await self.store.close()


def _busy(key: Key, exc: LockTimeout) -> ConflictError:
    return ConflictError(
        f"Memory '{key[1]}' is busy with another request: {exc}.",
        code="memory_busy",
        headers={"x-should-retry": "false"},
    )


def _unavailable(exc: StoreUnavailable) -> MemoryUnavailableError:
    log.error("memory store unavailable: %s", exc)
    if isinstance(exc, LockLost):
        return MemoryUnavailableError(
            "The conversation's lock was lost while the answer was produced (the memory store was "
            "unreachable for longer than the lock's lease); the turn was not stored.",
            code="memory_lock_lost",
        )
    return MemoryUnavailableError("The memory store is unavailable; nothing was stored. Try again later.")


class store_errors:
    """`with store_errors():` a failing store backend is a 503 for the client, never a 500."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        if isinstance(exc, StoreUnavailable):
            raise _unavailable(exc) from None
