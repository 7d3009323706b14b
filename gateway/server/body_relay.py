"""Relay a 2xx answer's body that is not JSON (speech audio) to the client as it arrives."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from aiohttp import web

from gateway.core.errors import OverloadedError
from gateway.observe.trace import Trace
from gateway.server.aiohttp_internals import request_state
from gateway.server.keys import STREAM_STARTED
from gateway.server.limit_headers import add_quota_headers
from gateway.upstream.deadline import IdleDeadline
from gateway.upstream.dispatch import Result
from gateway.upstream.providers.base import TransportError
from gateway.upstream.redaction import redact

log = logging.getLogger("gateway")


async def relay_body(request: web.Request, result: Result, headers: Mapping[str, str], *, trace: Trace) -> web.StreamResponse:
    """A 2xx answer's unread body (speech audio) relayed as it arrives, nothing buffered.

    Silence past the target's streamIdleTimeout, an upstream that cuts the body off, or the
    gateway's own shortage or failure mid-body drops the client's connection before the body's
    end: the client sees a cut-off answer, never a short one that looks whole.
    """
    reply, target = result.reply, result.target
    assert reply is not None and reply.unread is not None
    body = reply.unread
    response = web.StreamResponse(status=reply.status, headers={**headers, "Content-Type": reply.content_type})
    loop = asyncio.get_running_loop()
    idle = target.stream_idle_timeout
    deadline = IdleDeadline(loop, idle)
    try:
        add_quota_headers(request_state(request), response.headers)  # a limited key's (see relay.relay_stream)
        await response.prepare(request)
        request[STREAM_STARTED] = response
        while True:
            deadline.since = loop.time()
            piece = await body.next_piece()
            deadline.since = None
            if not piece:
                break
            await response.write(piece)
        await response.write_eof()
        return response
    except asyncio.CancelledError:
        if not deadline.expired():
            raise
        detail = f"{target.name}: no bytes for {idle:g}s"
        return _cut_off(request, response, trace, detail=detail, status=504, code="upstream_timeout")
    except TransportError as exc:
        detail = f"{target.name}: {redact(exc.detail, target)}"
        return _cut_off(request, response, trace, detail=detail, status=502, code="upstream_stream_error")
    except OverloadedError as exc:  # the gateway's own shortage: the upstream did nothing wrong
        trace.overloaded(target, exc.reason)
        detail = f"{target.name}: the gateway ran short ({exc.reason})"
        return _cut_off(request, response, trace, detail=detail, status=exc.status, code=exc.code or "gateway_overloaded")
    except ConnectionResetError:  # the client left
        return response
    except Exception:
        if not response.prepared:
            raise
        # The gateway itself failed: once the status is out, only a cut-off body says so.
        detail = f"the gateway failed while relaying the body of {target.name}"
        return _cut_off(request, response, trace, detail=detail, status=500, code="internal_error", failed=True)
    finally:
        deadline.close()
        await body.close()


def _cut_off(
    request: web.Request,
    response: web.StreamResponse,
    trace: Trace,
    *,
    detail: str,
    status: int,
    code: str,
    failed: bool = False,
) -> web.StreamResponse:
    """End a body under way without its end (no final chunk): the only error a binary answer can carry.

    `failed`: the gateway's own fault, logged with the exception being handled.
    """
    if failed:
        log.exception("the answer body was cut off: %s", detail)
    else:
        log.warning("the answer body was cut off: %s", detail)
    trace.failed(status, code)
    if request.transport is not None:
        request.transport.abort()
    return response
