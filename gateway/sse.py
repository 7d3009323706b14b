"""Server-sent events: split an upstream byte stream into events and write our own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

DONE: bytes = b"[DONE]"


@dataclass(frozen=True, slots=True)
class Event:
    """One SSE event: `raw` is its exact bytes (terminator included), `data` its joined data lines."""

    raw: bytes
    data: bytes | None
    name: bytes | None = None

    @property
    def is_done(self) -> bool:
        return self.data == DONE

    def error(self) -> dict[str, Any] | None:
        """The `error` object of an in-band error event, or None for an ordinary event."""
        if self.data is None:
            return None
        if self.name != b"error" and b'"error"' not in self.data:
            return None
        try:
            payload = orjson.loads(self.data)
        except orjson.JSONDecodeError:
            return {"message": self.data.decode(errors="replace")} if self.name == b"error" else None
        if isinstance(payload, dict) and payload.get("error"):
            error = payload["error"]
            return error if isinstance(error, dict) else {"message": str(error)}
        if self.name == b"error":
            return payload if isinstance(payload, dict) else {"message": str(payload)}
        return None


class EventParser:
    """Incremental SSE parser: feed bytes as they arrive, get whole events back."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Event]:
        buffer = self._buffer + chunk
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events: list[Event] = []
        start = 0
        while (end := buffer.find(b"\n\n", start)) >= 0:
            block = buffer[start:end]
            start = end + 2
            if block:
                events.append(parse_event(block))
        self._buffer = buffer[start:]
        return events

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet terminated (what a cut-off stream left behind)."""
        return self._buffer


def parse_event(block: bytes) -> Event:
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
