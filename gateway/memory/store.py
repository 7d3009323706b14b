"""The MemoryStore protocol, per-conversation locks, and the in-process store.

A conversation is keyed by (tenant, memoryId). Stores keep the system messages and up to
`maxStoredMessages` history entries, forget a conversation untouched for `ttlSeconds`, and
append a whole turn atomically. Trimming happens on read, in `policies`, never here. A turn reads
only the newest part of the history (`load_tail`, how far: `reach`), so its cost follows the
window, not the length of what is stored.

An undo keeps the turn it removed on the conversation's redo stack, which a redo takes from
and any new turn empties; each stored message keeps when it was stored (`Entry.created_at`,
given by `load`). `list_conversations` pages through a tenant's conversations by id.

What the Conversations API needs besides is an `ItemStore`, which every store also is. Each
stored message has an item id (`Entry.item_id`: the caller's, else one the store gives it as it
writes it, `new_item_id`), kept through trims, undos and redos; `delete_item` forgets one
message by it. A conversation has an `About`: when it was created and its metadata, which
`start` sets for a conversation made empty and `set_metadata` replaces (not a write of the
conversation: its updated_at and TTL stay).

Beside conversations a store keeps small values by key for the same TTL (which target answered
a Responses API response id): `put_value`, `get_value`, `delete_value`.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from gateway.core.memory.about import About
from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message, last_turn_start
from gateway.core.memory.listing import Listed, Listing, Page, count_turns
from gateway.core.memory.plain import PlainHistory
from gateway.core.memory.reach import Reach
from gateway.core.memory.settings import StoreKind

Key = tuple[str, str]  # (tenant, memoryId)


class _ItemIds:
    """Item ids: this process's random prefix, drawn again in a forked child, and a count.

    Unique across the processes sharing a store, at about a third of a random draw's cost per
    message (two on every turn).
    """

    def __init__(self) -> None:
        self.draw()

    def draw(self) -> None:
        self._prefix = "msg_" + os.urandom(8).hex()
        self._count = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._count):x}"


_ITEM_IDS = _ItemIds()
os.register_at_fork(after_in_child=_ITEM_IDS.draw)
new_item_id: Final = _ITEM_IDS.next  # a new message's item id


class LockTimeout(Exception):
    """Another request held the conversation for longer than the lock timeout."""


class StoreUnavailable(Exception):
    """The store's backend failed (Redis unreachable, SQLite file unwritable); each store maps its own errors."""


class Unconfirmed(StoreUnavailable):
    """A write's reply did not come in time: the store may still have taken it (a Redis that hangs runs it when it resumes)."""


class LockLost(StoreUnavailable):
    """The conversation's lock expired or passed to another holder before the write; nothing was written."""


class MemoryStore(Protocol):
    async def load(self, key: Key) -> Conversation | None:
        """The whole stored conversation, or None when there is none (or it expired)."""
        ...

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        """The conversation with at least its newest entries that cover `reach` (all, when they do not).

        A store that holds the history in memory may give all of it: planning reads only the
        newest entries it needs. The Conversation, its lists and their message dicts may be the
        store's own (its cache), good until the next write to the conversation: a caller reads
        them, never changes them, and keeps no reference.
        """
        ...

    def append(self, key: Key, entries: Sequence[Entry], *, system: Sequence[Message] | None) -> Awaitable[None]:
        """Append one turn atomically; `system` replaces the stored system messages unless None.

        A caller cancelled while it awaits this does not cut the write: the turn is written whole
        or not at all, and before the conversation's next holder (after the lock is let go) can
        see the conversation.
        """
        ...

    async def delete(self, key: Key) -> bool: ...

    async def undo(self, key: Key) -> bool:
        """Remove the last turn (the last user message and everything after) onto the redo stack; False if empty."""
        ...

    async def redo(self, key: Key) -> bool:
        """Put back the turn the last undo removed, as it was stored; False when the redo stack is empty.

        The stack is emptied by any turn appended after the undo, and goes with the conversation.
        """
        ...

    async def list_conversations(self, tenant: str, listing: Listing) -> Page:
        """A page of `tenant`'s live conversations, by memoryId (see core.memory.listing)."""
        ...

    def lock(self, key: Key) -> AbstractAsyncContextManager[None]:
        """Hold the conversation; raises LockTimeout after the configured wait."""
        ...

    async def put_value(self, key: str, value: str) -> None:
        """Keep `value` under `key` for the store's TTL, replacing what was there."""
        ...

    async def get_value(self, key: str) -> str | None:
        """The value under `key`, or None when there is none (or it expired)."""
        ...

    async def delete_value(self, key: str) -> bool:
        """Forget the value under `key`; False when there was none."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class ItemStore(Protocol):
    """What the Conversations API needs of a store besides MemoryStore (each of the three stores has it)."""

    async def start(self, key: Key, metadata: Mapping[str, str]) -> None:
        """Store an empty conversation created now with `metadata`, replacing any conversation under `key`."""
        ...

    async def about(self, key: Key) -> About | None:
        """When the conversation was created and its metadata; None when there is none."""
        ...

    async def set_metadata(self, key: Key, metadata: Mapping[str, str]) -> bool:
        """Replace the conversation's metadata; False when there is none."""
        ...

    async def delete_item(self, key: Key, item_id: str) -> bool:
        """Forget the stored message with this item id; False when the conversation has none."""
        ...


@runtime_checkable
class Writability(Protocol):
    """A store that can say whether its writes go through: the gateway is not ready while they fail or stall."""

    async def unwritable(self) -> str | None:
        """Why writes fail now (no path or secret in it: /readyz shows it), or None while they go through."""
        ...

    def write_pending(self) -> float:
        """Seconds the oldest write still in flight has been going (0.0: none); cheap, and never waits on the store."""
        ...


class KeyLocks:
    """Per-conversation locks: a key held has an entry, its waiters queued in it oldest first.

    Lighter than an asyncio.Lock per key: taking a free conversation is a dict insert, and a
    release hands the conversation straight to its oldest waiter.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._held: dict[Key, list[asyncio.Future[None]]] = {}

    def hold(self, key: Key) -> Held:
        return Held(self, key)

    def take(self, key: Key) -> bool:
        """Take `key` if it is free (the common case), without an await."""
        if key in self._held:
            return False
        self._held[key] = []
        return True

    async def acquire(self, key: Key) -> None:
        """Take `key`, waiting behind its earlier waiters up to `timeout` (LockTimeout)."""
        if self.take(key):
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._held[key]
        waiters.append(turn)
        try:
            async with asyncio.timeout(self.timeout):  # only a wait needs a deadline
                await turn
        except BaseException as exc:
            if turn.done() and not turn.cancelled():  # handed over just as the wait ended: pass it on
                self.release(key)
            elif turn in waiters:  # not yet passed over by a release
                waiters.remove(turn)
            if isinstance(exc, TimeoutError):
                raise LockTimeout(f"conversation busy for more than {self.timeout:g}s") from None
            raise

    def release(self, key: Key) -> None:
        """Pass `key` to its oldest waiter still waiting, or free it; never waits."""
        waiters = self._held[key]
        while waiters:
            turn = waiters.pop(0)
            if not turn.done():  # a waiter that left cancelled its turn
                turn.set_result(None)
                return
        del self._held[key]


class Held:
    """`async with locks.hold(key)`: a plain class, cheaper per request than a generator-based one.

    A caller that knows the class (a memory turn's Hold) takes and releases `key` from `locks`
    itself, without an await in the common case: a conversation that is free.
    """

    __slots__ = ("key", "locks")

    def __init__(self, locks: KeyLocks, key: Key) -> None:
        self.locks = locks
        self.key = key

    async def __aenter__(self) -> None:
        await self.locks.acquire(self.key)

    async def __aexit__(self, *exc: object) -> None:
        self.locks.release(self.key)


_SWEEP_SECONDS = 600.0


@dataclass(slots=True)
class _Record:
    system: list[Message]
    entries: list[Entry] = field(default_factory=list)
    updated_at: float = 0.0
    plain: PlainHistory | None = field(default_factory=PlainHistory)  # None once a tool message was stored
    redo: list[list[Entry]] = field(default_factory=list)  # turns undone, the last undone last
    created_at: float | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    def extend(self, entries: Sequence[Entry], cap: int) -> None:
        """Add `entries` after the others, the oldest dropped past `cap`."""
        self.entries.extend(entries)
        over = max(len(self.entries) - cap, 0)
        del self.entries[:over]
        if self.plain is not None and not self.plain.extend(entries, over):
            self.plain = None


class InProcessStore:
    """Conversations in a dict: for tests and throwaway setups; same TTL and cap as the others."""

    kind = StoreKind.MEMORY  # the `store` label of its metrics

    def __init__(
        self, *, ttl_seconds: float, max_messages: int, lock_timeout: float, clock: Callable[[], float] = time.time
    ) -> None:
        self._ttl = ttl_seconds
        self._cap = max_messages
        self._clock = clock
        self._records: dict[Key, _Record] = {}
        self._values: dict[str, tuple[str, float]] = {}  # key -> (value, written at)
        self._swept_at = clock()
        self._locks = KeyLocks(lock_timeout)

    def _live(self, key: Key) -> _Record | None:
        record = self._records.get(key)
        if record is not None and self._clock() - record.updated_at > self._ttl:
            del self._records[key]
            return None
        return record

    async def load(self, key: Key) -> Conversation | None:
        record = self._live(key)
        if record is None:
            return None
        return Conversation(list(record.system), list(record.entries), record.updated_at)

    async def load_tail(self, key: Key, reach: Reach) -> Conversation | None:
        """The whole conversation, not copied: held in memory, it costs less than finding the part `reach` covers."""
        record = self._live(key)
        if record is None:
            return None
        return Conversation(record.system, record.entries, record.updated_at, plain=record.plain)

    async def append(self, key: Key, entries: Sequence[Entry], *, system: Sequence[Message] | None) -> None:
        """Written at once: there is no await in here to be cancelled at."""
        now = self._clock()
        record = self._live(key) or self._records.setdefault(key, _Record(system=[], created_at=now))
        if system is not None:
            record.system = list(system)
        stored = [Entry(entry.message, entry.tokens, now, item_id=entry.item_id or new_item_id()) for entry in entries]
        record.extend(stored, self._cap)
        if record.redo and entries:
            record.redo = []
        record.updated_at = now

    async def delete(self, key: Key) -> bool:
        return self._live(key) is not None and self._records.pop(key, None) is not None

    async def undo(self, key: Key) -> bool:
        record = self._live(key)
        if record is None or not record.entries:
            return False
        start = last_turn_start(record.entries)
        record.redo.append(record.entries[start:])
        del record.entries[start:]
        record.plain = PlainHistory.of(record.entries)
        record.updated_at = self._clock()
        return True

    async def redo(self, key: Key) -> bool:
        record = self._live(key)
        if record is None or not record.redo:
            return False
        record.extend(record.redo.pop(), self._cap)
        record.updated_at = self._clock()
        return True

    async def list_conversations(self, tenant: str, listing: Listing) -> Page:
        live = [key for key in list(self._records) if key[0] == tenant and self._live(key) is not None]
        found = []
        for memory_id in listing.first_ids(memory_id for _, memory_id in live):
            record = self._records[tenant, memory_id]
            found.append(Listed(memory_id, count_turns(entry.message for entry in record.entries), record.updated_at))
        return Page.of(found, listing)

    async def start(self, key: Key, metadata: Mapping[str, str]) -> None:
        now = self._clock()
        self._records[key] = _Record(system=[], updated_at=now, created_at=now, metadata=dict(metadata))

    async def about(self, key: Key) -> About | None:
        record = self._live(key)
        if record is None:
            return None
        return About(record.created_at or record.updated_at, dict(record.metadata))

    async def set_metadata(self, key: Key, metadata: Mapping[str, str]) -> bool:
        record = self._live(key)
        if record is not None:
            record.metadata = dict(metadata)
        return record is not None

    async def delete_item(self, key: Key, item_id: str) -> bool:
        record = self._live(key)
        found = [index for index, entry in enumerate(record.entries) if entry.item_id == item_id] if record else []
        if record is None or not found:
            return False
        del record.entries[found[0]]
        record.plain = PlainHistory.of(record.entries)
        return True

    def lock(self, key: Key) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(key)

    async def put_value(self, key: str, value: str) -> None:
        now = self._clock()
        if now - self._swept_at > min(self._ttl, _SWEEP_SECONDS):  # values nobody reads again expire here
            self._swept_at = now
            self._values = {k: kept for k, kept in self._values.items() if now - kept[1] <= self._ttl}
        self._values[key] = (value, now)

    async def get_value(self, key: str) -> str | None:
        kept = self._values.get(key)
        if kept is None:
            return None
        if self._clock() - kept[1] > self._ttl:
            del self._values[key]
            return None
        return kept[0]

    async def delete_value(self, key: str) -> bool:
        return await self.get_value(key) is not None and self._values.pop(key, None) is not None

    async def close(self) -> None:
        self._records.clear()
        self._values.clear()
