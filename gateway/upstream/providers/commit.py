"""Where a Responses or Messages stream commits: at its first output, so a failure before it fails the attempt.

Both APIs open a stream with events that say nothing yet (`response.created`, `message_start`,
`ping`), and report a failure in-band (`error`, `response.failed`) rather than with a status. A
CommitPoint holds the opening events back until one that is neither opening nor failure arrives;
a failure before it raises TransportError with the status it stands for, so the route's retries
and fallbacks apply as to a chat stream's first-event error, and a stream that ends before it is
a stream that ended before its first event.
"""

from __future__ import annotations

from gateway.core.sse import Event
from gateway.observe.trace import STREAM_ERROR
from gateway.upstream.providers.apis import Api, data_of, event_type, failure
from gateway.upstream.providers.base import EventStream, TransportError


class CommitPoint(EventStream):
    """`stream` as it is, its first event delayed until the answer's first output."""

    def __init__(self, stream: EventStream, api: Api) -> None:
        super().__init__(stream.status, stream.headers)
        self._stream = stream
        self._api = api
        self._looked = False

    async def _read(self) -> list[Event]:
        if self._looked:
            return await self._stream.next_batch()
        self._looked = True
        return await self._look_ahead()

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
