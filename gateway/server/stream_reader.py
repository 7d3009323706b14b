"""What the stream relay asks of the reader of one kind of upstream stream, and how such a stream fails."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from gateway.core.errors import GatewayError
from gateway.core.sse import Event, encode
from gateway.core.tree import Target
from gateway.upstream.redaction import redact


class StreamFailure(Exception):
    """The stream cannot go on: the client gets this in-band error after what was relayed."""

    def __init__(self, message: str, code: str, *, kind: str = "upstream_error", status: int = 502) -> None:
        super().__init__(message)
        self.message, self.code, self.kind, self.status = message, code, kind, status


class EventReader(Protocol):
    """What the relay does with each upstream data event of one kind of stream."""

    usage: Any  # the answer's usage, chat-shaped, for the trace
    failed: tuple[int, str] | None  # an answer that ended as the upstream's own failure: (status, code)
    cut_off: str  # the event a stream that stopped early lacks

    def relay(self, batch: Sequence[Event], out: list[bytes]) -> Event | None:
        """Add the client's bytes for `batch` to `out` up to the event that ends the answer, returned; raises StreamFailure."""
        ...

    def opening(self, first: Event, chunk: Any, rest: Sequence[Event], *, out: list[bytes]) -> Event | None:
        """relay() for `[first, *rest]`, `first` the committed event, which the commit parsed as `chunk` (None: not)."""
        ...

    async def finish(self, event: Event) -> bytes:
        """The client's last bytes for the event that ends the answer; raises StreamFailure."""
        ...

    def error(self, failure: StreamFailure) -> bytes:
        """The in-band error event that ends an incomplete answer."""
        ...


def upstream_failure(target: Target, message: str) -> StreamFailure:
    """The failure an upstream's error event or malformed event is, its message redacted."""
    return StreamFailure(f"{target.name}: {redact(message, target)}", "upstream_stream_error")


def gateway_failure(exc: GatewayError) -> StreamFailure:
    """The failure a GatewayError of the gateway's own is (a turn memory cannot store): its code, type and status, no target named."""
    return StreamFailure(exc.message, exc.code or "internal_error", kind=exc.type, status=exc.status)


def error_event(message: str, code: str | None, kind: str = "upstream_error") -> bytes:
    """An OpenAI-shaped in-band error event."""
    return encode({"error": {"message": message, "type": kind, "param": None, "code": code}})
