"""`GET /v1/gateway/health`: every route's targets with their circuit-breaker state."""

from __future__ import annotations

from aiohttp import web


async def gateway_health(request: web.Request) -> web.Response:
    return web.json_response({"routes": {}})
