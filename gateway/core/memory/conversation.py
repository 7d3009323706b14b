"""A stored conversation as a turn reads it."""

from __future__ import annotations

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

    @property
    def messages(self) -> list[Message]:
        return [entry.message for entry in self.entries]
