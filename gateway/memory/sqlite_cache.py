"""The SQLite store's write-through cache: conversations this process read or wrote, on the event loop.

A hop to the store's thread costs more than the query itself, so the newest part read of each
conversation is kept here, updated by each write, and served from here. That is right while this
process is the file's only writer; a store sharing its file with other processes serves a
conversation only once it `check`ed it against the file under the conversation's lease. Bounded
by the entries it holds, the least recently used conversation forgotten first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.reach import Reach
from gateway.memory.sqlite_writes import Write
from gateway.memory.store import Key


class ConversationCache:
    """Up to `limit` entries of conversations, each as its newest part (`older` entries before it were not read).

    A conversation untouched for `ttl` seconds (by `clock`) has expired and is not served;
    `cap` is the store's, by which a write drops the oldest messages.
    """

    def __init__(self, limit: int, *, ttl: float, cap: int, clock: Callable[[], float] = time.time) -> None:
        self._conversations: OrderedDict[Key, Conversation] = OrderedDict()
        self.limit = limit
        self.entries = 0  # cached in all
        self.generation = 0  # the store's file generation the cache was filled in
        self._ttl = ttl
        self._cap = cap
        self._clock = clock

    def whole(self, key: Key) -> Conversation | None:
        """The cached conversation when it is all of it and has not expired (to read, not to change)."""
        cached = self._conversations.get(key)
        if cached is not None and self._clock() - cached.updated_at > self._ttl:
            self.remember(key, None)
            return None
        if cached is None or cached.older:
            return None
        self._conversations.move_to_end(key)
        return cached

    def tail(self, key: Key, reach: Reach) -> Conversation | None:
        """The cached conversation when it serves `reach` (to read, not to change); None: read the file.

        What is cached serves unless it expired (the read replaces it) or it is a part too short
        for the reach's count of messages: when its other bounds are not met, the planner says so
        and a wider read comes.
        """
        cached = self._conversations.get(key)
        if (
            cached is not None
            and self._clock() - cached.updated_at <= self._ttl
            and (cached.older == 0 or len(cached.entries) >= reach.messages)
        ):
            self._conversations.move_to_end(key)
            return cached
        return None

    def take(self, key: Key) -> Conversation | None:
        """Take the conversation out until a write is done (a read meanwhile goes to the file, after the write); None if expired."""
        cached = self._conversations.pop(key, None)
        if cached is None:
            return None
        self.entries -= len(cached.entries)
        return None if self._clock() - cached.updated_at > self._ttl else cached

    def remember(self, key: Key, conversation: Conversation | None) -> None:
        """Keep a copy of `conversation` as read from the file, or forget the key (None)."""
        old = self._conversations.pop(key, None)
        if old is not None:
            self.entries -= len(old.entries)
        if conversation is None or self.limit <= 0:
            return
        entries = list(conversation.entries)
        self._conversations[key] = Conversation(
            list(conversation.system), entries, conversation.updated_at, older=conversation.older, plain=conversation.plain
        )
        self.entries += len(entries)
        self._evict()

    def check(self, key: Key, updated_at: float | None) -> None:
        """Forget the conversation unless the file's copy was last written when the cached one was (`updated_at`; None: no copy).

        Every write sets a conversation's time of last write, so another process's write since
        this copy was cached shows as another time.
        """
        cached = self._conversations.get(key)
        if cached is not None and cached.updated_at != updated_at:
            self.remember(key, None)

    def forget(self, key: Key, _: object = None) -> None:
        """After a delete or an undo: a read served before it may have been cached meanwhile."""
        self.remember(key, None)

    def start_over(self, generation: int) -> None:
        """Forget everything cached from another file generation than `generation` (the store moved on to a new file)."""
        if generation != self.generation:
            self.generation = generation
            self._conversations.clear()
            self.entries = 0

    def written(self, write: Write) -> None:
        """Bring the cached conversation up to date with a write, or forget it when the write failed."""
        key = write.key
        if write.error is not None:
            self.remember(key, None)  # the file is the truth: the next turn reads it
            return
        cached = self._conversations.pop(key, None)  # read while the write was queued: before it
        if cached is not None:
            self.entries -= len(cached.entries)
        else:
            cached = write.cached
            if cached is None:
                return
        cached.append(write.entries, cap=self._cap, system=write.new_system, updated_at=write.updated_at)
        self._conversations[key] = cached
        self.entries += len(cached.entries)
        if self.entries > self.limit:
            self._evict()

    def _evict(self) -> None:
        while self.entries > self.limit and self._conversations:
            _, evicted = self._conversations.popitem(last=False)
            self.entries -= len(evicted.entries)
