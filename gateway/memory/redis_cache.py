"""The Redis store's per-process cache: the newest part read of each conversation, with its version.

Redis stays the truth. Each turn's first script says whether the conversation is still at the
version cached here (see `redis_scripts`); only then is the cached part served, so several
replicas writing one conversation stay correct, each reading rows again after another's write.
A write of this process brings its cached part up to date when it followed the version cached.
Bounded by the entries it holds, the least recently used conversation forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.reach import Reach
from gateway.memory.store import Key


@dataclass(slots=True)
class Cached:
    """A conversation's newest part (`older` entries before it were not read) at `version`."""

    conversation: Conversation
    version: bytes


class TailCache:
    """Up to `limit` entries of conversations; `cap` is the store's, by which a write drops the oldest messages."""

    def __init__(self, limit: int, *, cap: int) -> None:
        self._cached: OrderedDict[Key, Cached] = OrderedDict()
        self.limit = limit
        self.entries = 0  # cached in all
        self._cap = cap

    def serving(self, key: Key, reach: Reach) -> Cached | None:
        """What is cached of `key` when it can serve `reach`, if its version is still the stored one.

        A part too short for the reach's count of messages does not serve; when its other bounds
        are not met, the planner says so and a wider read comes.
        """
        cached = self._cached.get(key)
        if cached is None:
            return None
        conversation = cached.conversation
        if conversation.older and len(conversation.entries) < reach.messages:
            return None
        self._cached.move_to_end(key)
        return cached

    def remember(self, key: Key, conversation: Conversation, version: bytes) -> None:
        """Keep `conversation` as read at `version` (the caller's own: it is not copied)."""
        self.forget(key)
        if self.limit <= 0:
            return
        self._cached[key] = Cached(conversation, version)
        self.entries += len(conversation.entries)
        self._evict()

    def forget(self, key: Key) -> None:
        cached = self._cached.pop(key, None)
        if cached is not None:
            self.entries -= len(cached.conversation.entries)

    def written(
        self, key: Key, *, before: bytes, version: bytes, entries: Sequence[Entry], system: Sequence[Message] | None,
        updated_at: float,
    ) -> None:  # fmt: skip
        """A write of `entries` took the conversation from version `before` to `version`: follow it, or forget it.

        Followed only when `before` is the version cached: else another write came between, which
        this process has not read.
        """
        cached = self._cached.pop(key, None)
        if cached is None:
            return
        conversation = cached.conversation
        self.entries -= len(conversation.entries)
        if cached.version != before:
            return
        # Changed in place: what was served is good until the next write (MemoryStore.load_tail)
        conversation.append(entries, cap=self._cap, system=system, updated_at=updated_at)
        self._cached[key] = Cached(conversation, version)
        self.entries += len(conversation.entries)
        if self.entries > self.limit:
            self._evict()

    def _evict(self) -> None:
        while self.entries > self.limit and self._cached:
            _, evicted = self._cached.popitem(last=False)
            self.entries -= len(evicted.conversation.entries)
