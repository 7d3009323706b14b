"""Server-sent events: split an upstream byte stream into events and write our own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

DONE: bytes = b"[DONE]"
MAX_EVENT_BYTES: int = 8 * 1024 * 1024


@dataclass(slots=True)
class Event:
    """One SSE event: `raw` is its bytes (line ends made `\\n`, blank line included), `data` its data lines joined.

    A slotted dataclass, not a named tuple: made for every event of every stream, it is made and
    its fields read faster (a named tuple's constructor is a Python function, and its fields are
    read through descriptors the interpreter does not specialise).
    """

    raw: bytes
    data: bytes | None
    name: bytes | None = None

    @property
    def is_done(self) -> bool:
        return self.data == DONE


class EventTooLarge(Exception):
    """An event (its normalised bytes, blank line included) grew past the parser's `max_event_bytes`."""


class EventParser:
    """Incremental SSE parser: feed bytes as they arrive, get whole events back.

    Work is linear in the bytes fed: each chunk is normalised and searched once. The bytes of an
    unterminated event are kept as the chunks they arrived in and joined once, when it completes.

    An event's size is its `raw` length. One past `max_event_bytes` raises EventTooLarge however
    the stream is chunked: when it completes, or as soon as its unterminated bytes (a prefix of
    `raw` one byte short at least) pass the limit.
    """

    def __init__(self, *, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._max_event_bytes = max_event_bytes
        # Normalised chunks of the unterminated event; none holds b"\n\n", nor does any seam.
        self._parts: list[bytes] = []
        self._size = 0
        # The last chunk ended in b"\r": a b"\n" opening the next one belongs to that line end.
        self._after_cr = False

    def feed(self, chunk: bytes) -> list[Event]:
        """The events `chunk` completes, in order; raises EventTooLarge past `max_event_bytes`."""
        if self._after_cr or chunk.find(b"\r") >= 0:  # (`in` on bytes costs twice a find in 3.11)
            chunk = self._normalise(chunk)
        events: list[Event] = []
        new = chunk
        if self._parts and (start := self._complete_pending(chunk, events)):
            new = chunk[start:]
        blocks = new.split(b"\n\n")
        rest = blocks.pop()
        limit = self._max_event_bytes
        if len(new) > limit and max(map(len, blocks), default=0) + 2 > limit:
            raise self._too_large()
        if new.count(b"\n") == 2 * len(blocks):
            # No line end but the events' own: each event is one line, most often one `data: ` field.
            # Every event is one when as many events (the unterminated one too) start with the field
            # as there are: counted by C, each event's start being the chunk's or a blank line's end.
            starts = new.startswith(b"data: ") + new.count(b"\n\ndata: ") - rest.startswith(b"data: ")
            if starts == len(blocks):
                events += [Event(line + b"\n\n", line[6:]) for line in blocks]
            else:
                events += [Event(line + b"\n\n", line[6:]) if line[:6] == b"data: " else parse_event(line) for line in blocks if line]
        else:
            events += [parse_event(block) for block in blocks if block]
        if rest:
            if len(rest) > limit:
                raise self._too_large()
            self._parts, self._size = [rest], len(rest)
        return events

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet terminated (what a cut-off stream left behind)."""
        return b"".join(self._parts)

    def _normalise(self, chunk: bytes) -> bytes:
        """`chunk` with every line end as b"\\n", a b"\\r\\n" split across chunks counted once."""
        if not chunk:
            return chunk
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        # A trailing b"\r" ends its line now (a b"\r"-only stream must not wait for the next chunk).
        self._after_cr = chunk.endswith(b"\r")
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def _complete_pending(self, chunk: bytes, events: list[Event]) -> int:
        """Add `chunk` to the pending event, completing it if `chunk` ends it; where the rest starts."""
        if not chunk:
            return 0
        parts = self._parts
        if chunk.startswith(b"\n") and parts[-1].endswith(b"\n"):
            parts[-1] = parts[-1][:-1]
            end, start = 0, 1
        elif (end := chunk.find(b"\n\n")) >= 0:
            start = end + 2
        else:
            self._size += len(chunk)
            if self._size > self._max_event_bytes:
                raise self._too_large()
            parts.append(chunk)
            return len(chunk)
        parts.append(chunk[:end])
        block = b"".join(parts)
        parts.clear()
        self._size = 0
        if len(block) + 2 > self._max_event_bytes:
            raise self._too_large()
        if block:
            events.append(parse_event(block))
        return start

    def _too_large(self) -> EventTooLarge:
        return EventTooLarge(f"SSE event larger than {self._max_event_bytes} bytes")


def parse_event(block: bytes) -> Event:
    """The event whose lines `block` holds (line ends normalised, blank line excluded)."""
    if block[:6] == b"data: " and block.find(b"\n") < 0:  # the common event, one `data: ` line
        return Event(block + b"\n\n", block[6:])
    data: list[bytes] = []
    name: bytes | None = None
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
        elif line.startswith(b"event:"):
            name = line[6:].strip()
    return Event(raw=block + b"\n\n", data=b"\n".join(data) if data else None, name=name)


def encode(payload: Any) -> bytes:
    """A `data:` event carrying `payload` as JSON."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


DONE_EVENT: bytes = b"data: [DONE]\n\n"
