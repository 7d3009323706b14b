"""Reading a client's request body: size limit first, then one parse."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.errors import PayloadTooLargeError
from gateway.server.keys import CONFIG
from gateway.server.parsing import parse_object


async def read_payload(request: web.Request) -> tuple[bytes, dict[str, Any]]:
    """The body's bytes and the JSON object they hold; a clear 4xx for anything else."""
    limit = request.app[CONFIG].server.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLargeError(f"The request body is larger than the limit of {limit} bytes.")
    raw = await request.read()
    return raw, parse_object(raw)
