"""Where a Responses or Messages stream commits: at its first output, so a failure before it fails the attempt.

Both APIs open a stream with events that say nothing yet (`response.created`, `message_start`,
`ping`), and report a failure in-band (`error`, `response.failed`) rather than with a status. A
CommitPoint holds the opening events back until one that is neither opening nor failure arrives;
a failure before it raises TransportError with the status it stands for, so the route's retries
and fallbacks apply as to a chat stream's first-event error, and a stream that ends before it is
a stream that ended before its first event.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.core.sse import Event
from gateway.observe.trace import STREAM_ERROR
from gateway.upstream.providers.apis import Api, data_of, event_type, failure
from gateway.upstream.providers.base import EventStream, TransportError


class CommitPoint:
    """`stream` as it is, its first event delayed until the answer's first output."""

    def __init__(self, stream: EventStream, api: Api) -> None:
        self._stream = stream
        self._api = api
        self._held: list[Event] | None = None  # None until looked ahead
        self.status = stream.status
        self.headers: Mapping[str, str] = stream.headers

    async def next_event(self) -> Event | None:
        if self._held is None:
            self._held = await self._look_ahead()
        if self._held:
            return self._held.pop(0)
        return await self._stream.next_event()

    async def next_batch(self) -> list[Event]:
        if self._held is None:
            self._held = await self._look_ahead()
        if self._held:
            batch, self._held = self._held, []
            return batch
        return await self._stream.next_batch()

    def ready(self) -> list[Event]:
        if self._held is None:  # not looked ahead yet: nothing is ready without a read
            return []
        if self._held:
            batch, self._held = self._held, []
            return batch
        return self._stream.ready()

    async def _look_ahead(self) -> list[Event]:
        """The events up to and with the first output; none when the stream ended before it."""
        api = self._api
        held: list[Event] = []
        while batch := await self._stream.next_batch():
            held += batch
            for event in batch:
                if event.data is None:
                    continue
                kind = event_type(event)
                if kind in api.failures:
                    message, _, status = failure(api, data_of(event))
                    raise TransportError(f"error event: {message}", status=status, kind=STREAM_ERROR)
                if kind not in api.preamble:
                    return held
        return []

    async def close(self) -> None:
        await self._stream.close()
