"""What memory stores: messages as entries with their token counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson

_NO_COUNTS: Mapping[str, int] = MappingProxyType({})

Message = dict[str, Any]


class Entry(NamedTuple):
    """A stored message with its token counts, computed once when it was stored.

    Neither it nor its counts are changed once made.
    """

    message: Message
    tokens: Mapping[str, int] = _NO_COUNTS


def last_turn_start(entries: Sequence[Entry]) -> int:
    """Index of the last user message (0 when there is none: the whole history is one turn)."""
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].message.get("role") == "user":
            return index
    return 0


def dump_entry(entry: Entry) -> bytes:
    return orjson.dumps({"m": entry.message, "t": entry.tokens}, default=dict)  # an Entry's default counts: a mapping proxy


def load_entry(raw: bytes | str) -> Entry:
    data: dict[str, Any] = orjson.loads(raw)
    return Entry(data["m"], data.get("t") or {})

