"""Relay a committed upstream stream to the client, event by event."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol

from aiohttp import web

from gateway.chunks import MalformedEvent, read_chunk
from gateway.config import Target
from gateway.dispatch import Result, redact
from gateway.errors import GatewayError
from gateway.observe import STREAM_ERROR, TIMEOUT, Trace
from gateway.providers.base import EventStream, TransportError
from gateway.server.keys import STREAM_STARTED
from gateway.sse import Event, encode
from gateway.translate import MalformedAnswer

log = logging.getLogger("gateway")


class StreamSink(Protocol):
    """What a memory turn needs from a stream: every chunk, then the last word before `[DONE]` goes out."""

    def feed(self, chunk: Any) -> None: ...

    async def finish(self) -> None:
        """Called at the upstream's `[DONE]`, before the client sees it; a GatewayError replaces it."""
        ...


class Translator(Protocol):
    """Turns the upstream's chat chunks into another API's stream (Anthropic's, Responses)."""

    def feed(self, chunk: Any) -> list[bytes]:
        """The client's events for one chunk; raises MalformedAnswer for one it cannot translate."""
        ...

    def finish(self, usage: Any) -> list[bytes]:
        """The events that end a complete answer (in place of `[DONE]`)."""
        ...

    def error(self, message: str, code: str, status: int) -> bytes:
        """The in-band error event that ends an incomplete answer."""
        ...


def _error_event(message: str, code: str | None, kind: str = "upstream_error") -> bytes:
    return encode({"error": {"message": message, "type": kind, "param": None, "code": code}})


def _is_usage_only(chunk: Any) -> bool:
    """The final chunk `stream_options.include_usage` adds: usage, and no choices."""
    return isinstance(chunk, dict) and chunk.get("choices") == [] and isinstance(chunk.get("usage"), dict)


_NULL_USAGE_LAST = b',"usage":null}\n\n'


def _without_usage(raw: bytes, chunk: Any) -> bytes:
    """The event without the `usage` the client did not ask for.

    include_usage adds `"usage": null` to every chunk: its usual spellings are cut from the bytes
    (a quote inside a JSON string is always escaped, so an unescaped `,"usage":null` is the
    key); any other `usage` key makes the chunk re-encoded without it.
    """
    if raw.endswith(_NULL_USAGE_LAST):  # OpenAI's own spelling: one check, one copy
        return raw[: -len(_NULL_USAGE_LAST)] + b"}\n\n"
    if b'"usage"' not in raw:
        return raw
    raw = raw.replace(b',"usage":null', b"").replace(b', "usage": null', b"")
    if b'"usage"' not in raw or not isinstance(chunk, dict) or "usage" not in chunk:
        return raw
    return encode({key: value for key, value in chunk.items() if key != "usage"})


async def relay_stream(
    request: web.Request,
    result: Result,
    headers: Mapping[str, str],
    *,
    trace: Trace,
    sink: StreamSink | None = None,
    hide_usage: bool = False,
    translator: Translator | None = None,
) -> web.StreamResponse:
    """Write the stream to the client, ending with `[DONE]` only when the answer is complete.

    A failure after the commit (upstream error, malformed event, silence, a `sink` that cannot
    keep the answer) ends the client's stream with an in-band error event and no `[DONE]`, so
    the client can never mistake a cut-off or unstored answer for a complete one. The last
    `usage` seen goes to the trace when the stream ends; with `hide_usage` the usage-only
    chunk the gateway asked for is not relayed. A `translator` turns the chunks into the
    client's API's events, its own end and its own error event.
    """
    assert result.stream is not None and result.first_event is not None
    stream, target = result.stream, result.target
    response = web.StreamResponse(status=200, headers=headers)
    response.content_type = "text/event-stream"
    response.headers["Cache-Control"] = "no-cache"
    outcome = str(stream.status)
    usage: Any = None

    async def fail(message: str, code: str, kind: str = "upstream_error", status: int = 502) -> web.StreamResponse:
        nonlocal outcome
        if code == "upstream_timeout":
            outcome, status = TIMEOUT, 504
        elif code == "upstream_stream_error":
            outcome = STREAM_ERROR
        trace.failed(status, code)
        if translator is not None:
            await response.write(translator.error(message, code, status))
        else:
            await response.write(_error_event(message, code, kind))
        return response

    try:
        await response.prepare(request)
        request[STREAM_STARTED] = response
        trace.first_token(target)
        event: Event | None = result.first_event
        while event is not None:
            if event.is_done:
                if sink is not None:
                    try:
                        await sink.finish()
                    except GatewayError as exc:
                        return await fail(exc.message, exc.code or "internal_error", exc.type, exc.status)
                await response.write(event.raw if translator is None else b"".join(translator.finish(usage)))
                return response
            if event.data is not None:
                try:
                    chunk, error = read_chunk(event)
                except MalformedEvent as exc:
                    return await fail(f"{target.name}: {redact(str(exc), target)}", "upstream_stream_error")
                if error is not None:
                    message = redact(str(error.get("message") or "upstream sent an error event"), target)
                    return await fail(f"{target.name}: {message}", "upstream_stream_error")
                if isinstance(chunk, dict) and chunk.get("usage"):
                    usage = chunk["usage"]
                    if hide_usage and _is_usage_only(chunk):
                        event = await _next(stream, target)
                        continue
                if sink is not None:
                    sink.feed(chunk)
                if translator is not None:
                    try:
                        translated = b"".join(translator.feed(chunk))
                    except MalformedAnswer as exc:
                        return await fail(f"{target.name}: {redact(str(exc), target)}", "upstream_stream_error")
                    if translated:
                        await response.write(translated)
                    event = await _next(stream, target)
                    continue
                if hide_usage:
                    await response.write(_without_usage(event.raw, chunk))
                    event = await _next(stream, target)
                    continue
            await response.write(event.raw)
            event = await _next(stream, target)
        return await fail(f"{target.name}: upstream stream ended without [DONE]", "upstream_stream_error")
    except _Silent:
        return await fail(f"{target.name}: no stream event for {target.stream_idle_timeout:g}s", "upstream_timeout")
    except TransportError as exc:
        return await fail(f"{target.name}: {exc.detail}", "upstream_stream_error")
    except ConnectionResetError:  # the client left; closing the upstream below is all there is to do
        return response
    except Exception:  # headers are out: the only honest end left is an in-band error
        log.exception("relaying the stream of %s failed", target.name)
        if response.prepared:
            with contextlib.suppress(ConnectionResetError):
                await fail("the gateway failed while relaying the stream", "internal_error", "server_error", 500)
            return response
        raise
    finally:
        await stream.close()
        trace.usage(target, usage)
        trace.attempt_ended(target, outcome, time.monotonic() - result.started)


class _Silent(Exception):
    """The upstream sent nothing for the target's streamIdleTimeout."""


async def _next(stream: EventStream, target: Target) -> Event | None:
    try:
        async with asyncio.timeout(target.stream_idle_timeout):
            return await stream.next_event()
    except TimeoutError:
        raise _Silent from None
