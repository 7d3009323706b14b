"""A stored conversation as a turn reads it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.plain import PlainHistory


@dataclass(slots=True)  # not frozen: made on every turn, and a frozen __init__ costs twice as much
class Conversation:
    """A stored conversation, or its newest part: `older` entries before `entries` were not read.

    `plain`: the entries as a PlainHistory, when the store keeps one (no tool messages among them).
    """

    system: list[Message]
    entries: list[Entry]
    updated_at: float
    older: int = 0
    plain: PlainHistory | None = None

    def append(self, entries: Sequence[Entry], *, cap: int, system: Sequence[Message] | None, updated_at: float) -> None:
        """Follow a store's write of `entries` (a cache's copy): past `cap`, the oldest go, those not read first."""
        kept = self.entries
        kept += entries
        over = self.older + len(kept) - cap
        if over > 0:
            dropped = min(over, self.older)
            self.older -= dropped
            over -= dropped
            del kept[:over]
        if self.plain is not None and not self.plain.extend(entries, over):
            self.plain = None
        if system is not None:
            self.system = list(system)
        self.updated_at = updated_at

    @property
    def messages(self) -> list[Message]:
        return [entry.message for entry in self.entries]
