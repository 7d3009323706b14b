"""The governance endpoints (/v1/gateway/keys, /v1/gateway/usage)."""

from __future__ import annotations

from aiohttp import web

from gateway.server import governance_api


def test_the_endpoints_are_added_to_a_router() -> None:
    app = web.Application()
    governance_api.add_routes(app.router)
