"""The reader of a stream already in the client's API (Responses or Anthropic Messages events)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

import orjson

from gateway.core.sse import Event
from gateway.core.translate import messages as anthropic_api
from gateway.core.tree import Target
from gateway.server.stream_reader import StreamFailure, upstream_failure
from gateway.upstream.providers.apis import MESSAGES, RESPONSES, Api, chat_usage, data_of, event_type, failure

# The events whose `delta` is answer text (an audio delta is not): what a sink is fed.
TEXT_DELTAS: Final = frozenset({
    b"content_block_delta",
    b"response.output_text.delta",
    b"response.refusal.delta",
    b"response.function_call_arguments.delta",
    b"response.custom_tool_call_input.delta",
    b"response.reasoning_text.delta",
    b"response.reasoning_summary_text.delta",
})  # fmt: skip


class TextSink(Protocol):
    """What counts the answer text of a stream in the client's API: fed each text delta event's payload."""

    def feed(self, chunk: Any) -> None: ...


class ApiEvents:
    """A stream already in the client's API (Responses or Anthropic events), relayed as the upstream's bytes.

    An event is looked inside only where a guarantee needs it: its type (named by its `event:`
    line) for failures and the end, and the few events that carry the answer's usage.
    """

    def __init__(self, target: Target, api: Api, *, sink: TextSink | None = None) -> None:
        self.target = target
        self.api = api
        self.sink = sink
        self.usage: Any = None
        self.failed: tuple[int, str] | None = None
        self.cut_off = api.cut_off
        self._counts: dict[str, Any] = {}  # Anthropic's usage: message_start's, updated by message_delta's
        self._last: Event | None = None

    def relay(self, batch: Sequence[Event], out: list[bytes]) -> Event | None:
        for event in batch:
            if event.data is None:
                out.append(event.raw)
                continue
            kind = event_type(event)
            if kind in self.api.ends:
                return event
            out.append(self.relayed(event, kind))
        return None

    def opening(self, first: Event, chunk: Any, rest: Sequence[Event], *, out: list[bytes]) -> Event | None:
        return self.relay([first, *rest], out)

    async def finish(self, event: Event) -> bytes:
        data = data_of(event)
        if self.api.name == MESSAGES:
            self.usage = chat_usage(MESSAGES, self._counts)
            return event.raw
        response = data.get("response")
        self.usage = chat_usage(RESPONSES, response.get("usage") if isinstance(response, dict) else None)
        if event_type(event) == b"response.failed":  # the upstream's own end of a failed answer, relayed as such
            self.failed = (failure(self.api, data)[2], "upstream_stream_error")
        return event.raw

    def relayed(self, event: Event, kind: bytes | None) -> bytes:
        """The event's bytes, its usage noted; raises StreamFailure for a failure event (its type is `kind`)."""
        if kind in self.api.failures:
            text, _, _ = failure(self.api, data_of(event))
            raise upstream_failure(self.target, text)
        if kind == b"message_start":
            message = data_of(event).get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            self._counts.update(usage if isinstance(usage, dict) else {})
        elif kind == b"message_delta":
            usage = data_of(event).get("usage")
            self._counts.update(usage if isinstance(usage, dict) else {})
        elif self.sink is not None and kind in TEXT_DELTAS:
            self.sink.feed(data_of(event))
        self._last = event
        return event.raw

    def error(self, failure: StreamFailure) -> bytes:
        if self.api.name == MESSAGES:
            return anthropic_api.error_event(failure.message, anthropic_api.error_type(failure.status))
        last = data_of(self._last).get("sequence_number") if self._last is not None else None
        sequence = last + 1 if isinstance(last, int) else 0
        error = {"type": "error", "code": failure.code, "message": failure.message, "param": None,
                 "sequence_number": sequence}
        return b"event: error\ndata: " + orjson.dumps(error) + b"\n\n"
