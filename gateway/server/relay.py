"""Relay a committed upstream stream to the client, event by event."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from aiohttp import web

from gateway.chunks import MalformedEvent, read_chunk
from gateway.dispatch import Result, redact
from gateway.errors import GatewayError
from gateway.providers.base import TransportError
from gateway.server.keys import STREAM_STARTED
from gateway.sse import Event, encode

log = logging.getLogger("gateway")


class StreamSink(Protocol):
    """What a memory turn needs from a stream: every chunk, then the last word before `[DONE]` goes out."""

    def feed(self, chunk: Any) -> None: ...

    async def finish(self) -> None:
        """Called at the upstream's `[DONE]`, before the client sees it; a GatewayError replaces it."""
        ...


def _error_event(message: str, code: str | None, kind: str = "upstream_error") -> bytes:
    return encode({"error": {"message": message, "type": kind, "param": None, "code": code}})


async def relay_stream(
    request: web.Request, result: Result, headers: Mapping[str, str], *, sink: StreamSink | None = None
) -> web.StreamResponse:
    """Write the stream to the client, ending with `[DONE]` only when the answer is complete.

    A failure after the commit (upstream error, malformed event, silence, a `sink` that cannot
    keep the answer) ends the client's stream with an in-band error event and no `[DONE]`, so
    the client can never mistake a cut-off or unstored answer for a complete one.
    """
    assert result.stream is not None and result.first_event is not None
    stream, target = result.stream, result.target
    response = web.StreamResponse(status=200, headers=headers)
    response.content_type = "text/event-stream"
    response.headers["Cache-Control"] = "no-cache"
    try:
        await response.prepare(request)
        request[STREAM_STARTED] = response
        event: Event | None = result.first_event
        while event is not None:
            if event.is_done:
                if sink is not None:
                    try:
                        await sink.finish()
                    except GatewayError as exc:
                        await response.write(_error_event(exc.message, exc.code, exc.type))
                        return response
                await response.write(event.raw)
                return response
            if event.data is not None:
                try:
                    chunk, error = read_chunk(event)
                except MalformedEvent as exc:
                    await response.write(_error_event(f"{target.name}: {redact(str(exc), target)}", "upstream_stream_error"))
                    return response
                if error is not None:
                    message = redact(str(error.get("message") or "upstream sent an error event"), target)
                    await response.write(_error_event(f"{target.name}: {message}", "upstream_stream_error"))
                    return response
                if sink is not None:
                    sink.feed(chunk)
            await response.write(event.raw)
            try:
                async with asyncio.timeout(target.stream_idle_timeout):
                    event = await stream.next_event()
            except TimeoutError:
                message = f"{target.name}: no stream event for {target.stream_idle_timeout:g}s"
                await response.write(_error_event(message, "upstream_timeout"))
                return response
            except TransportError as exc:
                await response.write(_error_event(f"{target.name}: {exc.detail}", "upstream_stream_error"))
                return response
        message = f"{target.name}: upstream stream ended without [DONE]"
        await response.write(_error_event(message, "upstream_stream_error"))
        return response
    except ConnectionResetError:  # the client left; closing the upstream below is all there is to do
        return response
    except Exception:  # headers are out: the only honest end left is an in-band error
        log.exception("relaying the stream of %s failed", target.name)
        if response.prepared:
            with contextlib.suppress(ConnectionResetError):
                await response.write(
                    _error_event("the gateway failed while relaying the stream", "internal_error", "server_error")
                )
            return response
        raise
    finally:
        await stream.close()
