"""Upstream SSE streams without sockets: events from their bytes, a stream of given reads, its events' names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from gateway.core.sse import Event, parse_event
from gateway.upstream.providers.base import EventStream


def events(*raw: bytes) -> list[Event]:
    """The events of these SSE blocks."""
    return [parse_event(item.rstrip(b"\n")) for item in raw]


def named(kind: str, **fields: Any) -> bytes:
    """An SSE block whose event name is its data's `type`."""
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **fields}) + b"\n\n"


class Batches(EventStream):
    """An EventStream of the given reads."""

    def __init__(self, *reads: Sequence[Event], status: int = 200) -> None:
        super().__init__(status, {})
        self._reads = [list(read) for read in reads]
        self.closed = False

    async def _read(self) -> list[Event]:
        return self._reads.pop(0) if self._reads else []

    async def close(self) -> None:
        self.closed = True


async def read_all(stream: EventStream) -> list[bytes | None]:
    """The names of the events, read as the dispatcher and the relay do: by batch."""
    out: list[bytes | None] = []
    while batch := await stream.next_batch():
        out += [event.name for event in batch]
    return out
