"""What memory stores: messages as entries with their token counts, when each was stored and its item id."""

from __future__ import annotations

import hashlib
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

    `item_id`: the message's id in the Conversations API, given by the store that wrote it (or
    by the caller) and kept with it through trims, undos and redos; a store reading a message
    written before ids gives it one that follows from what is stored (`fallback_item_id`).
    """

    message: Message
    tokens: Mapping[str, int] = field(default_factory=dict)  # none counted
    created_at: float | None = field(default=None, compare=False)
    item_id: str | None = field(default=None, compare=False, kw_only=True)


def last_turn_start(entries: Sequence[Entry]) -> int:
    """Index of the last user message (0 when there is none: the whole history is one turn)."""
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].message.get("role") == "user":
            return index
    return 0


def dump_entry(entry: Entry, *, item_id: str | None = None) -> bytes:
    """The entry as JSON: its message, counts and item id (`item_id`, else the entry's own; none when neither)."""
    item_id = item_id or entry.item_id
    if item_id is None:
        return orjson.dumps({"m": entry.message, "t": entry.tokens}, default=dict)  # counts may be a mapping proxy (windows.py's uncounted entries)
    return orjson.dumps({"m": entry.message, "t": entry.tokens, "i": item_id}, default=dict)


def load_entry(raw: bytes | str) -> Entry:
    """An entry as `dump_entry` wrote it; `"c"`, when there, is when the store wrote it (the Redis store's append adds it).

    A row written before item ids gets `fallback_item_id` of its bytes.
    """
    data: dict[str, Any] = orjson.loads(raw)
    return Entry(data["m"], data.get("t") or {}, data.get("c"), item_id=data.get("i") or fallback_item_id(raw))


def fallback_item_id(stored: bytes | str) -> str:
    """The item id of a message stored before ids, from its stored form: the same for each read of it."""
    raw = stored.encode() if isinstance(stored, str) else stored
    return "msg_" + hashlib.blake2b(raw, digest_size=12).hexdigest()

