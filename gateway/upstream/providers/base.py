"""The provider seam: one attempt against one target, non-stream or stream."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from gateway.core.errors import SHORTAGES, OverloadedError
from gateway.core.failures import Failure
from gateway.core.sse import Event
from gateway.core.tree import Target


class TransportError(Exception):
    """The upstream could not be reached or answered garbage (502), or timed out (504).

    `kind` names the failure for metrics: TIMEOUT, CONNECT_ERROR or STREAM_ERROR (a response or
    stream that broke off or could not be read).
    """

    def __init__(self, detail: str, *, status: int = 502, kind: Failure | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.kind = kind or (Failure.TIMEOUT if status == 504 else Failure.CONNECT_ERROR)


class OwnWords:
    """Marks an exception whose text the gateway wrote itself (a refusal): shown as it is.

    Any other exception of a transport is described by its type and OS error alone: their
    texts carry the URL (whose path may hold a secret) and the request's headers.
    """


def shortage(exc: BaseException) -> OverloadedError | None:
    """The gateway's own shortage behind `exc` (an OSError in its cause chain: EMFILE, ENOBUFS, ...), if any."""
    current: BaseException | None = exc
    for _ in range(8):  # a transport wraps an OS error once or twice
        if current is None:
            return None
        if isinstance(current, OSError) and (reason := SHORTAGES.get(current.errno or 0)) is not None:
            return OverloadedError(reason)
        current = current.__cause__ or current.__context__
    return None


JSON = "application/json"


@dataclass(slots=True)
class Call:
    """One request to send to one target: the body is serialized at most once, and only if changed."""

    target: Target
    endpoint: str  # "chat/completions", "embeddings", "audio/speech", ...
    payload: dict[str, Any]
    raw: bytes | None = None  # the client's bytes, valid while nothing changed the payload
    content_type: str = JSON  # of `raw`; a body the gateway serializes is always JSON
    # Client headers a provider passes on (Anthropic's anthropic-version and anthropic-beta)
    client_headers: Mapping[str, str] = field(default_factory=dict)
    _body: bytes | None = field(default=None, repr=False)  # last: every field before it can be passed by position

    @property
    def body(self) -> bytes:
        if self.raw is not None:
            return self.raw
        if self._body is None:
            self._body = orjson.dumps(self.payload)
        return self._body


class UnreadBody(Protocol):
    """A 2xx answer's body not read yet (speech audio): passed on as it arrives, never buffered."""

    async def next_piece(self) -> bytes:
        """The next bytes of the body; b"" at its end. Raises TransportError if it is cut off."""
        ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class Reply:
    """An upstream answer (any status) with the headers worth relaying: read whole, or `unread`."""

    status: int
    body: bytes
    content_type: str = "application/json"  # the whole header value, to relay: a charset stays
    headers: Mapping[str, str] = field(default_factory=dict)
    data: Any = None  # the parsed JSON body of a 2xx answer, once the dispatcher checked it
    unread: UnreadBody | None = None  # a 2xx body to relay as it comes (then `body` is empty)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class EventStream(ABC):
    """A 2xx upstream SSE stream, read a batch of events at a time: `next_batch`, the one read method.

    A subclass says how one read goes (`_read`). Events in hand before a read (a look-ahead, a
    first event read early, an answer replayed) are held here and handed out first.
    """

    def __init__(self, status: int, headers: Mapping[str, str]) -> None:
        self.status = status
        self.headers = headers
        self._held: list[Event] = []

    def next_batch(self) -> Awaitable[list[Event]]:
        """The events held, else those of the next read that brings some; empty at the end of the stream.

        The read's own coroutine is handed back: no frame more for every read of a stream.
        """
        if self._held:
            held, self._held = self._held, []
            return _given(held)
        return self._read()

    def hold(self, events: Iterable[Event]) -> None:
        """Hand `events` out at the next read, before anything read after them."""
        self._held += events

    @abstractmethod
    async def _read(self) -> list[Event]:
        """The events of the next read that completes any, in order; none at the end of the stream."""

    @abstractmethod
    async def close(self) -> None:
        """Done with the stream, read to its end or not: what it holds (a connection, an iterator) is let go."""


async def _given(events: list[Event]) -> list[Event]:
    return events


class ReplayedStream(EventStream):
    """A stream of events already in hand (a JSON answer replayed as a stream)."""

    def __init__(self, events: Iterable[Event], headers: Mapping[str, str]) -> None:
        super().__init__(200, headers)
        self.hold(events)

    async def _read(self) -> list[Event]:
        return []

    async def close(self) -> None:
        self._held.clear()


class Provider(Protocol):
    async def complete(self, call: Call) -> Reply:
        """Send a non-stream request; raise TransportError when no HTTP answer came back."""
        ...

    async def stream(self, call: Call) -> Reply | EventStream:
        """Open a stream request: a Reply when the upstream did not answer with SSE."""
        ...
