"""The SQLite store's write-through cache: conversations this process read or wrote, on the event loop.

A hop to the store's thread costs more than the query itself, so the newest part read of each
conversation is kept here, updated by each write, and served from here. That is right while this
process is the file's only writer; a store sharing its file with other processes keeps each
conversation's `Mark` beside it (see sqlite_moved), and serves it only while its version slot
still holds the mark's version (see sqlite_locks); a copy another process only appended to since
is taken out to be brought up to date (`out_of_date`). Bounded by the entries it holds, the
least recently used conversation forgotten first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.reach import Reach
from gateway.memory.sqlite_moved import Copy, Mark
from gateway.memory.sqlite_writes import Write
from gateway.memory.store import Key


class ConversationCache:
    """Up to `limit` entries of conversations, each as its newest part (`older` entries before it were not read).

    A conversation untouched for `ttl` seconds (by `clock`) has expired and is not served;
    `cap` is the store's, by which a write drops the oldest messages. `versions`: keep each
    conversation's mark (a store sharing its file).
    """

    def __init__(
        self, limit: int, *, ttl: float, cap: int, clock: Callable[[], float] = time.time, versions: bool = False
    ) -> None:
        self._conversations: OrderedDict[Key, Conversation] = OrderedDict()
        self._versions: dict[Key, Mark] | None = {} if versions else None
        self.limit = limit
        self.entries = 0  # cached in all
        self.generation = 0  # the store's file generation the cache was filled in
        self._ttl = ttl
        self._cap = cap
        self._clock = clock

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

    def version(self, key: Key) -> int | None:
        """The version the cached conversation was recorded with (None: none recorded)."""
        mark = None if self._versions is None else self._versions.get(key)
        return None if mark is None else mark.version

    def out_of_date(self, key: Key, reach: Reach, *, changes: int) -> Copy | None:
        """Take out the copy of a conversation that only appends may have changed since (its change slot holds `changes`).

        To be brought up to date with them (see sqlite_moved), if it serves `reach` as `tail`
        does; None: read the file.
        """
        mark = None if self._versions is None else self._versions.get(key)
        if mark is None or mark.changes != changes or self.tail(key, reach) is None:
            return None
        conversation = self._conversations.pop(key)
        self.entries -= len(conversation.entries)
        return Copy(conversation, mark)

    def remember(self, key: Key, conversation: Conversation | None, *, mark: Mark | None = None) -> None:
        """Keep a copy of `conversation` as read from the file, with `mark` when the file is shared, or forget the key (None)."""
        old = self._conversations.pop(key, None)
        if old is not None:
            self.entries -= len(old.entries)
        versions = self._versions
        if conversation is None or self.limit <= 0 or (versions is not None and mark is None):
            if versions is not None:
                versions.pop(key, None)
            return
        if versions is not None and mark is not None:
            versions[key] = mark
        entries = list(conversation.entries)
        self._conversations[key] = Conversation(
            list(conversation.system), entries, conversation.updated_at, older=conversation.older, plain=conversation.plain
        )
        self.entries += len(entries)
        self._evict()

    def forget(self, key: Key, _: object = None) -> None:
        """After a delete or an undo: a read served before it may have been cached meanwhile."""
        self.remember(key, None)

    def start_over(self, generation: int) -> None:
        """Forget everything cached from another file generation than `generation` (the store moved on to a new file)."""
        if generation != self.generation:
            self.generation = generation
            self._conversations.clear()
            self.entries = 0
            if self._versions is not None:
                self._versions.clear()

    def written(self, write: Write) -> None:
        """Bring the cached conversation up to date with a write, or forget it when the write failed.

        Shared, only a copy at the version the write found in its slot (`Write.seen`): another
        process may have written the conversation after the copy was cached.
        """
        key = write.key
        versions = self._versions
        mark = None if versions is None else versions.get(key)
        if write.error is not None or (versions is not None and (mark is None or mark.version != write.seen)):
            self.remember(key, None)  # the file is the truth: the next turn reads it
            return
        cached = self._conversations.pop(key, None)  # read while the write was queued: before it
        if cached is not None:
            self.entries -= len(cached.entries)
        else:
            cached = write.cached
            if cached is None:
                if versions is not None:
                    versions.pop(key, None)
                return
        cached.append(write.entries, cap=self._cap, system=write.new_system, updated_at=write.updated_at)
        self._conversations[key] = cached
        self.entries += len(cached.entries)
        if versions is not None:
            versions[key] = Mark(write.version, write.changes, write.numbered_last())
        if self.entries > self.limit:
            self._evict()

    def _evict(self) -> None:
        while self.entries > self.limit and self._conversations:
            key, evicted = self._conversations.popitem(last=False)
            self.entries -= len(evicted.entries)
            if self._versions is not None:
                self._versions.pop(key, None)
