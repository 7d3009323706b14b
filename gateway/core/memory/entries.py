"""What memory stores: messages as entries with their token counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

Message = dict[str, Any]


@dataclass(slots=True)  # not frozen, nor a NamedTuple: made for each message stored, and either is slower to make
class Entry:
    """A stored message with its token counts, computed once when it was stored.

    Neither it nor its counts are changed once made. `created_at`: when the store wrote it (unix
    seconds), as a store's whole read (`MemoryStore.load`) gives it; None for messages stored
    before stores kept it, and on the entries a turn makes and reads. It is the store's record of
    the message, never part of the message: what is forwarded is `message` alone.
    """

    message: Message
    tokens: Mapping[str, int] = field(default_factory=dict)  # none counted
    created_at: float | None = field(default=None, compare=False)


def last_turn_start(entries: Sequence[Entry]) -> int:
    """Index of the last user message (0 when there is none: the whole history is one turn)."""
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].message.get("role") == "user":
            return index
    return 0


def dump_entry(entry: Entry) -> bytes:
    return orjson.dumps({"m": entry.message, "t": entry.tokens}, default=dict)  # counts may be a mapping proxy (windows.py's uncounted entries)


def load_entry(raw: bytes | str) -> Entry:
    """An entry as `dump_entry` wrote it; `"c"`, when there, is when the store wrote it (the Redis store's append adds it)."""
    data: dict[str, Any] = orjson.loads(raw)
    return Entry(data["m"], data.get("t") or {}, data.get("c"))

