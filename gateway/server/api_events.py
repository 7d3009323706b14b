"""The reader of a stream already in the client's API (Responses or Anthropic Messages events)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Protocol

import orjson
from orjson import JSONDecodeError, loads

from gateway.core.errors import GatewayError
from gateway.core.sse import DONE, Event
from gateway.core.translate import messages as anthropic_api
from gateway.core.tree import Target
from gateway.server.stream_reader import StreamFailure, gateway_failure, upstream_failure
from gateway.upstream.providers.apis import MESSAGES, RESPONSES, Api, chat_usage, failure

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


_NOT_JSON: Final = object()  # what an event's data that does not parse reads as

# Given the JSON of the event that ends an answer (not a failed one), before the client gets that
# event: a memory turn stored there. A GatewayError it raises ends the stream with that error instead.
Keep = Callable[[dict[str, Any]], Awaitable[None]]


class ApiEvents:
    """A stream already in the client's API (Responses or Anthropic events), relayed as the upstream's bytes.

    Every data event is parsed once (orjson, as the chat relay parses its chunks): one that is not
    a JSON object ends the stream with the gateway's error instead of reaching the client's SDK,
    whose parser would raise. The parse serves what a guarantee needs to see: the event's type
    (its `event:` name, else its data's), failures and the end, the events that carry the
    answer's usage, and the text deltas a sink counts.
    """

    def __init__(self, target: Target, api: Api, *, sink: TextSink | None = None, keep: Keep | None = None) -> None:
        self.target = target
        self.api = api
        self.sink = sink
        self.keep = keep
        self.usage: Any = None
        self.failed: tuple[int, str] | None = None
        self.cut_off = api.cut_off
        self._counts: dict[str, Any] = {}  # Anthropic's usage: message_start's, updated by message_delta's
        self._last: dict[str, Any] | None = None  # the last relayed event's JSON
        self._end: dict[str, Any] = {}  # the JSON of the event that ended the answer

    def relay(self, batch: Sequence[Event], out: list[bytes]) -> Event | None:
        for event in batch:
            if event.data is None:  # a comment (keep-alive): passed on
                out.append(event.raw)
            elif self._ends(event, self._read(event), out):
                return event
        return None

    def opening(self, first: Event, chunk: Any, rest: Sequence[Event], *, out: list[bytes]) -> Event | None:
        if type(chunk) is not dict:  # not read by the commit (a replayed answer): read as any event
            return self.relay([first, *rest], out)
        return first if self._ends(first, chunk, out) else self.relay(rest, out)  # not parsed twice

    async def finish(self, event: Event) -> bytes:
        data, kind = self._end, _type_of(event, self._end)
        if self.api.name == MESSAGES:
            self.usage = chat_usage(MESSAGES, self._counts)
        else:
            response = data.get("response")
            self.usage = chat_usage(RESPONSES, response.get("usage") if isinstance(response, dict) else None)
            if kind == b"response.failed":  # the upstream's own end of a failed answer, relayed as such
                self.failed = (failure(self.api, data)[2], "upstream_stream_error")
        if self.keep is not None and kind not in self.api.failures:
            try:
                await self.keep(data)
            except GatewayError as exc:
                raise gateway_failure(exc) from None
        return event.raw

    def _read(self, event: Event) -> dict[str, Any]:
        """The event's JSON object; raises StreamFailure when its data is not one (an error event's then reads as empty)."""
        text = event.data or b""  # data events only
        try:
            data = loads(text)
        except JSONDecodeError:
            data = _NOT_JSON
        if type(data) is dict:
            return data
        if event.name in self.api.failures:  # the upstream's error all the same: its name says so
            return {}
        if text == DONE:  # chat's end, where this API's own end event was due
            raise upstream_failure(self.target, f"upstream stream ended without {self.cut_off}")
        what = "JSON" if data is _NOT_JSON else "a JSON object"
        raise upstream_failure(self.target, f"upstream sent a stream event that is not {what}: {text[:80]!r}")

    def _ends(self, event: Event, data: dict[str, Any], out: list[bytes]) -> bool:
        """Whether `event` (its JSON `data`) ends the answer; else its bytes go to `out`, its usage noted.

        Raises StreamFailure for a failure event.
        """
        kind = _type_of(event, data)
        if kind in self.api.ends:
            self._end = data
            return True
        if kind in self.api.failures:
            text, _, _ = failure(self.api, data)
            raise upstream_failure(self.target, text)
        if kind == b"message_start":
            message = data.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            self._counts.update(usage if isinstance(usage, dict) else {})
        elif kind == b"message_delta":
            usage = data.get("usage")
            self._counts.update(usage if isinstance(usage, dict) else {})
        elif self.sink is not None and kind in TEXT_DELTAS:
            self.sink.feed(data)
        self._last = data
        out.append(event.raw)
        return False

    def error(self, failure: StreamFailure) -> bytes:
        if self.api.name == MESSAGES:
            return anthropic_api.error_event(failure.message, anthropic_api.error_type(failure.status))
        last = self._last.get("sequence_number") if self._last is not None else None
        sequence = last + 1 if isinstance(last, int) else 0
        error = {"type": "error", "code": failure.code, "message": failure.message, "param": None,
                 "sequence_number": sequence}
        return b"event: error\ndata: " + orjson.dumps(error) + b"\n\n"


def _type_of(event: Event, data: dict[str, Any]) -> bytes | None:
    """The event's type: its `event:` name, else the `type` its JSON `data` names (event_type, its data read already)."""
    if event.name is not None:
        return event.name
    kind = data.get("type")
    return kind.encode() if type(kind) is str else None
