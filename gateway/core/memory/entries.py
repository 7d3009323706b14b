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

    Neither it nor its counts are changed once made.
    """

    message: Message
    tokens: Mapping[str, int] = field(default_factory=dict)  # none counted


def last_turn_start(entries: Sequence[Entry]) -> int:
    """Index of the last user message (0 when there is none: the whole history is one turn)."""
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].message.get("role") == "user":
            return index
    return 0


def dump_entry(entry: Entry) -> bytes:
    return orjson.dumps({"m": entry.message, "t": entry.tokens}, default=dict)  # counts may be a mapping proxy (windows.py's uncounted entries)


def load_entry(raw: bytes | str) -> Entry:
    data: dict[str, Any] = orjson.loads(raw)
    return Entry(data["m"], data.get("t") or {})

