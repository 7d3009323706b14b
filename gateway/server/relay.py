"""Relay a committed upstream stream to the client, event by event."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping

from aiohttp import web

from gateway.dispatch import Result
from gateway.providers.base import TransportError
from gateway.sse import Event, encode

EventHook = Callable[[Event], None]
log = logging.getLogger("gateway")


def _error_event(message: str, code: str) -> bytes:
    return encode({"error": {"message": message, "type": "upstream_error", "param": None, "code": code}})


async def relay_stream(
    request: web.Request, result: Result, headers: Mapping[str, str], *, on_event: EventHook | None = None
) -> tuple[web.StreamResponse, bool]:
    """Write the stream to the client; True when it ended with the upstream's `[DONE]`.

    A failure after the commit ends the client's stream with an in-band error event and no
    `[DONE]`, so the client can never mistake a cut-off answer for a complete one.
    """
    assert result.stream is not None and result.first_event is not None
    stream, target = result.stream, result.target
    response = web.StreamResponse(status=200, headers=headers)
    response.content_type = "text/event-stream"
    response.headers["Cache-Control"] = "no-cache"
    try:
        await response.prepare(request)
        event: Event | None = result.first_event
        while event is not None:
            if event.data is not None:
                error = event.error()
                if error is not None:
                    message = str(error.get("message") or "upstream sent an error event")
                    await response.write(_error_event(f"{target.name}: {message}", "upstream_stream_error"))
                    return response, False
                if on_event is not None:
                    on_event(event)
            await response.write(event.raw)
            if event.is_done:
                return response, True
            try:
                async with asyncio.timeout(target.stream_idle_timeout):
                    event = await stream.next_event()
            except TimeoutError:
                message = f"{target.name}: no stream event for {target.stream_idle_timeout:g}s"
                await response.write(_error_event(message, "upstream_timeout"))
                return response, False
            except TransportError as exc:
                await response.write(_error_event(f"{target.name}: {exc.detail}", "upstream_stream_error"))
                return response, False
        message = f"{target.name}: upstream stream ended without [DONE]"
        await response.write(_error_event(message, "upstream_stream_error"))
        return response, False
    except ConnectionResetError:  # the client left; closing the upstream below is all there is to do
        return response, False
    except Exception:  # headers are out: the only honest end left is an in-band error
        log.exception("relaying the stream of %s failed", target.name)
        if response.prepared:
            with contextlib.suppress(ConnectionResetError):
                await response.write(_error_event("the gateway failed while relaying the stream", "internal_error"))
            return response, False
        raise
    finally:
        await stream.close()

