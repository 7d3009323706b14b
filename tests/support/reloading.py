"""A gateway served from a config file on a loopback test server, with the Reloader a SIGHUP would drive."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.cli.reload import Reloader
from gateway.config.loader import parse_config
from gateway.server.app import create_app


async def reloadable(aiohttp_server: Any, path: Path) -> tuple[Reloader, str]:
    """The gateway for the config file at `path` on a loopback test server, with its Reloader; and its URL."""
    app = create_app(parse_config(path.read_text()), rng=random.Random(7))
    reloader = Reloader(app, str(path), rng=random.Random(7))

    async def close_reloaded(app: web.Application) -> None:  # what `listen` does, without taking SIGHUP
        await reloader.close()

    app.on_shutdown.append(close_reloaded)
    server: TestServer = await aiohttp_server(app)
    return reloader, str(server.make_url("/"))
