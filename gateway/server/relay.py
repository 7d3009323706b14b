"""Relay a committed upstream stream to the client, a network read at a time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from aiohttp import web
from orjson import JSONDecodeError
from orjson import loads as _loads

from gateway.core.chunks import MalformedEvent, read_chunk
from gateway.core.errors import GatewayError, OverloadedError
from gateway.core.sse import DONE, Event, encode
from gateway.core.translate import MalformedAnswer
from gateway.core.translate.reshape import StreamReshape
from gateway.core.tree import Target
from gateway.observe.trace import STREAM_ERROR, TIMEOUT, Trace
from gateway.server.aiohttp_internals import EventStreamResponse, request_state
from gateway.server.api_events import ApiEvents, Keep
from gateway.server.keys import STREAM_STARTED
from gateway.server.limit_headers import add_quota_headers
from gateway.server.stream_reader import (
    EventReader,
    StreamFailure,
    error_event,
    gateway_failure,
    upstream_failure,
)
from gateway.upstream.deadline import IdleDeadline
from gateway.upstream.dispatch import Result
from gateway.upstream.providers.apis import Api
from gateway.upstream.providers.base import TransportError
from gateway.upstream.redaction import redact

log = logging.getLogger("gateway")


class StreamSink(Protocol):
    """What a memory turn needs from a stream: every chunk, then the last word before `[DONE]` goes out."""

    def feed(self, chunk: Any) -> None: ...

    async def finish(self) -> None:
        """Called at the upstream's `[DONE]`, before the client sees it; a GatewayError replaces it."""
        ...


Translator = StreamReshape  # turns the upstream's chat chunks into another API's stream


_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_SHORTAGE = "gateway_overloaded"  # a stream the gateway's own shortage ended: no outcome of the upstream's


_NULL_USAGE = b',"usage":null}'  # how OpenAI ends every chunk once include_usage is on
_ABSENT: Any = object()  # a chunk without a usage member, told from one whose usage is null
_NULL_USAGE_SPELLINGS = (b',"usage":null', b', "usage": null', b'"usage":null,', b'"usage": null, ')


def _without_usage(data: bytes, chunk: dict[str, Any]) -> bytes:
    """The event for `data` (parsed as `chunk`) without its top-level `usage`, as one `data:` line.

    A null usage spelled otherwise than OpenAI's is cut from the bytes where that is exact: when
    `"usage"` occurs once in them (a quote inside a JSON string is always escaped, so that is a
    key, if maybe a nested object's) and the cut parses as the chunk without its usage. Else
    the chunk is encoded again.
    """
    rest = {key: value for key, value in chunk.items() if key != "usage"}
    if data.count(b'"usage"') == 1 and data.find(b"\n") < 0:
        for spelling in _NULL_USAGE_SPELLINGS:
            if spelling in data:
                cut = data.replace(spelling, b"", 1)
                with contextlib.suppress(JSONDecodeError):
                    if _loads(cut) == rest:
                        return b"data: " + cut + b"\n\n"
                break
    return encode(rest)


def _other_lines(raw: bytes) -> bytes:
    """The id:, event: and retry: lines of the event `raw`, each with its end (not its data, not comments)."""
    return b"".join(line + b"\n" for line in raw.split(b"\n") if line.startswith((b"id", b"event", b"retry")))


class _Chunks:
    """What the relay does with each upstream chat event: parsed, checked, relayed as its bytes."""

    usage: Any = None
    failed: tuple[int, str] | None = None
    cut_off = "[DONE]"

    def __init__(self, target: Target, *, sink: StreamSink | None, translator: Translator | None, hide_usage: bool) -> None:
        self.target = target
        self.sink = sink
        self.translator = translator
        self.hide_usage = hide_usage
        self.plain = sink is None and translator is None  # the chunk's bytes are all the client gets

    def relay(self, batch: Sequence[Event], out: list[bytes]) -> Event | None:
        """Every event is parsed (orjson): a corrupted one ends the stream with an in-band error
        instead of reaching the client's JSON parser. An object's keys are taken to be unique
        (RFC 8259), as the parse takes them.

        The common chunk is relayed in this loop, not in a call of its own per event: a JSON
        object, no error, no `event:` name, its usage absent or OpenAI's null one to cut (see
        _parsed); with `hide_usage`, the usage-only chunk the gateway asked for is noted and
        dropped here too. Any other event goes to _parsed.
        """
        hide, plain, add = self.hide_usage, self.plain, out.append
        for event in batch:
            raw, data, name = event.raw, event.data, event.name
            if data is None:  # a comment (keep-alive): passed on
                add(raw)
                continue
            if data == DONE:
                return event
            try:
                chunk = _loads(data)
            except JSONDecodeError:
                chunk = None
            if type(chunk) is not dict or "error" in chunk or name is not None:
                add(self._parsed(event, chunk))
                continue
            usage = chunk.get("usage", _ABSENT)
            if usage is None:  # OpenAI's null usage: with hide_usage, its bytes cut when spelled as OpenAI does
                if hide:
                    if len(raw) != len(data) + 8 or not data.endswith(_NULL_USAGE):
                        add(self._parsed(event, chunk))
                        continue
                    raw = raw[:-16] + b"}\n\n"
            elif usage is not _ABSENT:
                if hide and usage and type(usage) is dict and chunk.get("choices") == []:
                    self.usage = usage  # the usage-only chunk the gateway asked for, not the client
                    continue
                add(self._parsed(event, chunk))
                continue
            add(raw if plain else self._fed(chunk, raw))
        return None

    def opening(self, first: Event, chunk: Any, rest: Sequence[Event], *, out: list[bytes]) -> Event | None:
        if chunk is None:  # not parsed (a replayed answer), or [DONE], or JSON's null: read as any event
            return self.relay([first, *rest], out)
        out.append(self._parsed(first, chunk))  # not parsed twice
        return self.relay(rest, out)

    async def finish(self, event: Event) -> bytes:
        if self.sink is not None:  # before the translator's end, whose events would number an error after them
            try:
                await self.sink.finish()
            except GatewayError as exc:
                raise gateway_failure(exc) from None
        # an answer the translator cannot end (a tool call that never got its name) is the upstream's, as in _fed
        return event.raw if self.translator is None else self._translated(self.translator.finish, self.usage)

    def _read(self, event: Event) -> Any:
        """The event's payload; raises StreamFailure for an error event or one that is not JSON."""
        try:
            chunk, error = read_chunk(event)
        except MalformedEvent as exc:
            raise upstream_failure(self.target, str(exc)) from None
        if error is not None:
            raise upstream_failure(self.target, str(error.get("message") or "upstream sent an error event"))
        return chunk

    def error(self, failure: StreamFailure) -> bytes:
        if self.translator is not None:
            return self.translator.error(failure.message, failure.code, failure.status)
        return error_event(failure.message, failure.code, failure.kind)

    def _parsed(self, event: Event, chunk: Any) -> bytes:
        """The client's bytes for any data event (maybe none), `chunk` its payload as orjson read it (None: not JSON); raises StreamFailure."""
        if type(chunk) is not dict or "error" in chunk or event.name is not None:
            # Not the common chunk: read_chunk, which owns what an event means, reads it again in full.
            chunk = self._read(event)
            if type(chunk) is not dict:  # JSON, if not an object: passed on as it came
                return self._fed(chunk, event.raw)
        data: bytes = event.data  # type: ignore[assignment]  # data events only
        raw = event.raw
        if "usage" in chunk:
            usage = chunk["usage"]
            if usage:
                self.usage = usage
            if self.hide_usage:
                # OpenAI's spelling, on every chunk: the object's last member (its closing brace is
                # the data's last byte), so its bytes are cut; a line break would be whitespace
                # between the JSON's tokens, which one `data:` line cannot carry. (`find`, not `in`:
                # on 3.11 `in` on bytes first fails to read its operand as an int, an exception.)
                if data.endswith(_NULL_USAGE) and data.find(b"\n") < 0:
                    cut = b"data: " + data[:-14] + b"}\n\n"
                elif chunk.get("choices") == [] and isinstance(usage, dict):
                    return b""  # the usage-only chunk the gateway asked for, not the client
                else:
                    cut = _without_usage(data, chunk)
                # the usual event is its one `data: ` line; any other (id:, event:) keeps its lines
                raw = cut if len(raw) == len(data) + 8 else _other_lines(raw) + cut
        if self.plain:
            return raw
        return self._fed(chunk, raw)

    def _fed(self, chunk: Any, raw: bytes) -> bytes:
        """`raw` once the sink has `chunk`; the translator's bytes for it instead, if there is one."""
        if self.sink is not None:
            self.sink.feed(chunk)
        if self.translator is not None:
            return self._translated(self.translator.feed, chunk)
        return raw

    def _translated(self, step: Callable[[Any], list[bytes]], argument: Any) -> bytes:
        """The translator's bytes for `step(argument)`; a chat answer it cannot translate is the upstream's failure."""
        try:
            return b"".join(step(argument))
        except MalformedAnswer as exc:
            raise upstream_failure(self.target, str(exc)) from None


async def relay_stream(
    request: web.Request,
    result: Result,
    headers: Mapping[str, str],
    *,
    trace: Trace,
    sink: StreamSink | None = None,
    hide_usage: bool = False,
    translator: Translator | None = None,
    api: Api | None = None,
    keep: Keep | None = None,
) -> web.StreamResponse:
    """Write the stream to the client, ending with `[DONE]` only when the answer is complete.

    What one network read brings goes out in one write. A failure after the commit (upstream
    error, malformed event, silence, a `sink` that cannot keep the answer) ends the client's
    stream with an in-band error event and no `[DONE]`, so the client can never mistake a cut-off
    or unstored answer for a complete one. The last `usage` seen goes to the trace when the
    stream ends; with `hide_usage` the usage the gateway asked for is not relayed. A `translator`
    turns the chunks into the client's API's events, its own end and its own error event.

    With `api` the stream is already in that API (Responses, Anthropic Messages): its events are
    relayed as they came, its own last event (`response.completed`, `message_stop`, ...) ends
    it, and a failure after the commit ends with that API's `error` event instead; a `sink` is
    fed the payload of each event that carries answer text (a governed request's count of it),
    and `keep` the JSON of the event that ends an answer (a memory turn's store) before the client
    gets it, as a chat `sink` is finished: not under the upstream's idle deadline, which bounds
    waits for the upstream alone.
    """
    assert result.stream is not None and result.first_event is not None
    stream, target = result.stream, result.target
    # As headers, not through aiohttp's content_type setter, which parses the header it replaces.
    response = EventStreamResponse(status=200, headers={**headers, **_SSE_HEADERS})
    chunks: EventReader = (
        _Chunks(target, sink=sink, translator=translator, hide_usage=hide_usage)
        if api is None
        else ApiEvents(target, api, sink=sink, keep=keep)
    )
    plain = isinstance(chunks, _Chunks) and chunks.plain  # its finish() would give `[DONE]` as it came
    out: list[bytes] = []  # the current read's bytes for the client, written once it is looked at
    outcome: str | None = None  # how the attempt ended, when not as the upstream's status (_SHORTAGE: none of its own)
    idle = target.stream_idle_timeout
    deadline: IdleDeadline | None = None  # set at the first wait: a stream that came in one read has none
    try:
        state = request_state(request)
        add_quota_headers(state, response.headers)  # a limited key's, as the gateway middleware adds them to answers returned
        await response.prepare(request)
        state[STREAM_STARTED] = response
        trace.first_token(target)
        # the first event, and those that came in the same network read: one write for them all
        end = chunks.opening(result.first_event, result.first_chunk, result.rest, out=out)
        while end is None:
            if out:
                await response.write(out[0] if len(out) == 1 else b"".join(out))
                out.clear()
            if deadline is None:
                loop = asyncio.get_running_loop()
                deadline = IdleDeadline(loop, idle)
            deadline.since = loop.time()
            batch = await stream.next_batch()
            deadline.since = None
            if not batch:
                raise StreamFailure(f"{target.name}: upstream stream ended without {chunks.cut_off}", "upstream_stream_error")
            end = chunks.relay(batch, out)
        # a plain chat stream ends with the upstream's own `[DONE]`, as _Chunks.finish gives it: no coroutine to await
        out.append(end.raw if plain else await chunks.finish(end))
        if chunks.failed is not None:
            outcome = STREAM_ERROR
            trace.failed(*chunks.failed)
        await response.write_eof(b"".join(out))  # the stream's last bytes and its end in one send
        return response
    except StreamFailure as failure:
        outcome = await _end_with(response, failure, chunks, out=out, trace=trace)
    except asyncio.CancelledError:
        if deadline is None or not deadline.expired():
            raise
        silence = StreamFailure(f"{target.name}: no stream event for {idle:g}s", "upstream_timeout")
        outcome = await _end_with(response, silence, chunks, out=out, trace=trace)
    except TransportError as exc:
        cut = StreamFailure(f"{target.name}: {redact(exc.detail, target)}", "upstream_stream_error")
        outcome = await _end_with(response, cut, chunks, out=out, trace=trace)
    except OverloadedError as exc:  # the gateway's own shortage: the upstream did nothing wrong
        trace.overloaded(target, exc.reason)
        outcome = _SHORTAGE
        short = StreamFailure(exc.message, exc.code or "gateway_overloaded", kind=exc.type, status=exc.status)
        await _end_with(response, short, chunks, out=out, trace=trace)
    except ConnectionResetError:  # the client left; closing the upstream below is all there is to do
        pass
    except Exception:
        # The gateway itself failed: once headers are out, the only honest end is an in-band error.
        log.exception("relaying the stream of %s failed", target.name)
        if not response.prepared:
            raise
        out.clear()
        broken = StreamFailure("the gateway failed while relaying the stream", "internal_error", kind="server_error", status=500)
        with contextlib.suppress(ConnectionResetError):
            await _end_with(response, broken, chunks, out=out, trace=trace)
    finally:
        if deadline is not None:
            deadline.close()
        await stream.close()
        trace.usage(target, chunks.usage)
        if outcome != _SHORTAGE:  # counted as gateway_overloaded already, never as the upstream's attempt
            trace.attempt_ended(target, outcome or str(stream.status), time.monotonic() - result.started)
    return response


async def _end_with(
    response: web.StreamResponse, failure: StreamFailure, chunks: EventReader, *, out: list[bytes], trace: Trace
) -> str | None:
    """End the client's stream with `failure`, in-band after `out`; the attempt's outcome, when the failure names one."""
    outcome = None
    if failure.code == "upstream_timeout":
        outcome, failure.status = TIMEOUT, 504
    elif failure.code == "upstream_stream_error":
        outcome = STREAM_ERROR
    trace.failed(failure.status, failure.code)
    out.append(chunks.error(failure))
    await response.write_eof(b"".join(out))
    return outcome
