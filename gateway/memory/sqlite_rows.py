"""The SQLite store's message rows: their shapes, written and read, newest first.

A message row holds a whole turn of up to MOST_IN_A_ROW messages: one row a turn costs a write
about a fifth less than a row a message (one B-tree insert and eight parameters fewer). Each
message keeps its token counts, so a read can size a token window from them as it goes, and its
item id:

- a turn: `body` a JSON array of [message, counts, item id] (counts by encoding, as
  `Entry.tokens`), `encoding` '', `tokens` how many messages it holds. A turn of more than
  MOST_IN_A_ROW messages is a row a message, each of this shape;
- rows written before item ids: [message, counts] pairs, or one message a row (`body` the
  message's JSON, `encoding` and `tokens` its count, '' and NULL: uncounted; `encoding` NULL and
  the body `{"m": message, "t": counts}` before the token columns). Their messages' ids follow
  from their numbers (`read_row`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import orjson

from gateway.core.memory.entries import Entry, load_entry
from gateway.memory.store import new_item_id

MOST_IN_A_ROW: Final = 16  # messages a row holds at most; turns of up to this many are inserted by one statement


def message_rows(entries: Sequence[Entry]) -> tuple[int, list[Any]]:
    """A turn's message rows: how many, and each one's (role, body, encoding, tokens), one after another.

    Each message is stored with its item id (a new one when the entry has none: `new_item_id`).
    Bodies are JSON text: the sqlite3 module binds a str directly, bytes (and None) only after an
    adapter lookup.
    """
    if 0 < len(entries) <= MOST_IN_A_ROW:  # the common case: the turn is one row
        return 1, [entries[0].message.get("role") or "", _turn_body(entries), "", len(entries)]
    params: list[Any] = []
    for entry in entries:
        params += (entry.message.get("role") or "", _turn_body((entry,)), "", 1)
    return len(entries), params


def _turn_body(entries: Sequence[Entry]) -> str:
    # default=dict: counts are a Mapping, which orjson takes only as a dict
    return orjson.dumps([(entry.message, entry.tokens, entry.item_id or new_item_id()) for entry in entries], default=dict).decode()


class MalformedRow(sqlite3.DatabaseError):
    """A row no version of the store writes (the file was changed by hand or damaged): the store is unavailable."""


def read_row(
    body: bytes | str, encoding: str | None, tokens: int | None, *, written_at: float | None = None, seq: int = 0
) -> list[Entry]:
    """The entries of a message row, oldest first: of this version's shapes or the older ones; MalformedRow otherwise.

    Only the shapes are checked, which a read costs a little: planning takes any message object,
    but not a message that is no object or counts that are not numbers. Each entry was created
    when its row was written (`written_at`: None for rows older gateways wrote); a message
    stored without an item id has one from its number (the row's `seq` on), as fixed as it is.
    """
    try:
        if encoding is None:  # written before the token columns (and before written_at)
            old = load_entry(body)
            entries = [Entry(old.message, old.tokens, item_id=_numbered(seq))]
        else:
            data: Any = orjson.loads(body)
            if type(data) is list:  # a turn's [message, counts, item id]
                entries = [
                    Entry(stored[0], stored[1], written_at, item_id=stored[2] if len(stored) > 2 else _numbered(seq + index))
                    for index, stored in enumerate(data)
                ]
            else:
                counts = {encoding: tokens} if encoding and tokens is not None else {}
                entries = [Entry(data, counts, written_at, item_id=_numbered(seq))]
        for entry in entries:
            if type(entry.message) is not dict or type(entry.tokens) is not dict or type(entry.item_id) is not str:
                raise TypeError("not a message, its counts and its id")
            for count in entry.tokens.values():
                if type(count) is not int:
                    raise TypeError("a count that is not an integer")
    except (ValueError, TypeError, KeyError, IndexError) as exc:  # orjson.JSONDecodeError is a ValueError
        raise MalformedRow(f"a message row that cannot be read ({exc})") from None
    return entries


def _numbered(number: int) -> str:
    """The item id of message `number` of a conversation, stored before item ids."""
    return f"msg_n{number}"


def read_system(text: str) -> list[Any]:
    """A conversation row's system messages; MalformedRow when they are not a list of objects."""
    try:
        system: Any = orjson.loads(text)
    except ValueError:
        system = None
    if type(system) is not list or any(type(message) is not dict for message in system):
        raise MalformedRow("a conversation row whose system messages cannot be read")
    return system


def row_floor(first: int) -> int:
    """The lowest `seq` a row holding message number `first` can have."""
    return first - MOST_IN_A_ROW + 1


MessageRow = tuple[int, bytes | str, str | None, int | None, float | None]  # (seq, body, encoding, tokens, written_at)


def newest_first(rows: Iterable[MessageRow], first: int) -> Iterator[tuple[int, Entry]]:
    """(number, entry) of each message from number `first` on, newest first; `rows` are MessageRows, newest first."""
    for seq, body, encoding, tokens, written_at in rows:
        row = read_row(body, encoding, tokens, written_at=written_at, seq=seq)
        for index in range(len(row) - 1, max(first - seq, 0) - 1, -1):
            yield seq + index, row[index]
        if seq <= first:  # rows do not overlap: every row after this one ends below `first`
            return
