"""A conversation as `gateway memory export` writes it: one JSON line, everything a store keeps of it.

A line holds the conversation's key (tenant, memoryId), its system messages, every stored
message with its token counts, when it was stored (`createdAt`) and its item id, when the
conversation was created and its metadata, its last write (`updatedAt`), its summary (a
summary window's, as the store keeps it: `summary`, null when none) and its redo stack (`redo`:
the turns undone, the last undone last, each a list of messages as `messages` holds them).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import orjson

from gateway.core.memory.about import About
from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry, Message
from gateway.memory.store import Key


class BadLine(ValueError):
    """A line that is no exported conversation; the message names the line and what is wrong."""


@dataclass(frozen=True, slots=True)
class Record:
    """One conversation whole, as a store keeps it."""

    key: Key
    system: list[Message]
    entries: list[Entry]
    _: KW_ONLY
    updated_at: float
    about: About
    summary: str | None = field(default=None)
    redo: list[list[Entry]] = field(default_factory=list)

    @classmethod
    def of(
        cls, key: Key, conversation: Conversation, *, about: About, summary: str | None, redo: list[list[Entry]]
    ) -> Record:
        return cls(
            key, list(conversation.system), list(conversation.entries),
            updated_at=conversation.updated_at, about=about, summary=summary, redo=redo,
        )  # fmt: skip


def dump_line(record: Record) -> bytes:
    """The record as one JSON line (with its newline)."""
    tenant, memory_id = record.key
    data = {
        "tenant": tenant,
        "memoryId": memory_id,
        "system": record.system,
        "messages": _dump_entries(record.entries),
        "createdAt": record.about.created_at,
        "metadata": record.about.metadata,
        "updatedAt": record.updated_at,
        "summary": record.summary,
        "redo": [_dump_entries(turn) for turn in record.redo],
    }
    return orjson.dumps(data, default=dict) + b"\n"  # counts may be a mapping proxy


def load_line(line: bytes | str, number: int) -> Record:
    """The record on line `number` (counted from 1, for the message); BadLine when it is not one."""
    try:
        data: Any = orjson.loads(line)
        if type(data) is not dict:
            raise TypeError("not a JSON object")
        key = (_text(data, "tenant"), _text(data, "memoryId"))
        system = data["system"]
        if type(system) is not list or any(type(m) is not dict for m in system):
            raise TypeError("'system' is not a list of messages")
        entries = [_entry(stored) for stored in data["messages"]]
        metadata = data.get("metadata") or {}
        if type(metadata) is not dict or any(type(v) is not str for v in metadata.values()):
            raise TypeError("'metadata' is not an object of strings")
        summary = data.get("summary")
        if summary is not None and type(summary) is not str:
            raise TypeError("'summary' is not a string")
        redo = data.get("redo") or []
        if type(redo) is not list or any(type(turn) is not list for turn in redo):
            raise TypeError("'redo' is not a list of turns")
        about = About(_time(data, "createdAt"), metadata)
        return Record(
            key, system, entries, updated_at=_time(data, "updatedAt"), about=about, summary=summary,
            redo=[[_entry(stored) for stored in turn] for turn in redo],
        )  # fmt: skip
    except (ValueError, TypeError, KeyError) as exc:  # orjson.JSONDecodeError is a ValueError
        what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise BadLine(f"line {number}: not an exported conversation ({what})") from None


def _dump_entries(entries: list[Entry]) -> list[dict[str, Any]]:
    return [{"message": e.message, "tokens": e.tokens, "createdAt": e.created_at, "itemId": e.item_id} for e in entries]


def _entry(stored: Any) -> Entry:
    if type(stored) is not dict or type(stored.get("message")) is not dict:
        raise TypeError("a message that is not {'message': {...}, ...}")
    tokens = stored.get("tokens") or {}
    if type(tokens) is not dict or any(type(count) is not int for count in tokens.values()):
        raise TypeError("token counts that are not integers")
    created_at = stored.get("createdAt")
    if created_at is not None and type(created_at) not in (int, float):
        raise TypeError("a message's 'createdAt' is not a number")
    item_id = stored.get("itemId")
    if type(item_id) is not str or not item_id:
        raise TypeError("a message without an 'itemId'")
    return Entry(stored["message"], tokens, created_at, item_id=item_id)


def _text(data: dict[str, Any], name: str) -> str:
    value = data[name]
    if type(value) is not str or not value:
        raise TypeError(f"'{name}' is not a non-empty string")
    return value


def _time(data: dict[str, Any], name: str) -> float:
    value = data[name]
    if type(value) not in (int, float):
        raise TypeError(f"'{name}' is not a number")
    return float(value)
