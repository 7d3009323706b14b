"""Keys issued and revoked at run time (/v1/gateway/keys, admin keys only), and a key's usage (/v1/gateway/usage)."""

from __future__ import annotations

from aiohttp import web


def add_routes(router: web.UrlDispatcher) -> None:
    """Add the governance endpoints to `router`."""
