"""Gateways whose keys are managed through /v1/gateway/keys: an admin key, a key store, and each replica's refresher.

`start_replica` starts a gateway (create_app) on loopback with the admin key ADMIN_KEY, its key store
(limits.path or the limits' Redis) at KEY_STORE and a KeyRefresher keeping STORED_KEYS: several
started on one config are replicas sharing that store. Until create_app wires the key store and the
authenticator itself (helper D1), this does it in its place (the same lines: see the report).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.config.loader import parse_config
from gateway.core.settings import Config
from gateway.governance.key_refresh import KeyRefresher
from gateway.governance.key_store import open_key_store
from gateway.governance.stored_keys import StoredKeys
from gateway.server import app as app_module
from gateway.server.app import create_app
from gateway.server.governance_api import KEY_STORE
from gateway.server.middlewares import Authenticator
from tests.support.gateway import GATEWAY_KEY

ADMIN_KEY = "gw-admin-key"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
TEAM_A = {"Authorization": f"Bearer {GATEWAY_KEY}"}
AUTH = f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}], adminKeys: [{{name: ops, key: {ADMIN_KEY}}}]}}\n"
ROUTES = "routes: {m: {provider: mock}, n: {provider: mock}}\n"


def admin_config(limits: str, *, more: str = "") -> Config:
    """team-a's key, the admin key `ops`, the routes m and n, and `limits` (the key store's place)."""
    return parse_config(f"{AUTH}limits: {limits}\n{more}{ROUTES}", env={})


async def start_replica(aiohttp_server: Any, config: Config, monkeypatch: pytest.MonkeyPatch) -> str:
    """A gateway on `config` with its key store and refresher; its base URL (no /v1)."""
    known = StoredKeys()
    with monkeypatch.context() as patched:
        patched.setattr(app_module, "StoredKeys", lambda: known)
        patched.setattr(
            app_module, "Authenticator",
            lambda keys, **_: Authenticator(keys, admin_keys=config.admin_keys, stored=known),
        )  # fmt: skip
        app = create_app(config, rng=random.Random(7))

    async def issued_keys(app: web.Application) -> AsyncIterator[None]:
        store = open_key_store(config)
        assert store is not None
        refresher = KeyRefresher(store, known)
        app[KEY_STORE] = store
        await refresher.start()
        yield
        await refresher.close()
        await store.close()

    app.cleanup_ctx.append(issued_keys)
    server: TestServer = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


async def call(base: str, method: str, path: str, **options: Any) -> tuple[int, Any]:
    """One plain HTTP call to the gateway at `base`: its status and its JSON."""
    async with aiohttp.ClientSession() as session, session.request(method, base + path, **options) as response:
        return response.status, await response.json(content_type=None)


async def chat(base: str, key: str) -> str:
    """A chat completion asked with the official SDK under `key`: the answer's text."""
    async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=20) as client:
        completion = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    return completion.choices[0].message.content or ""


async def refused(base: str, key: str) -> bool:
    """Whether the gateway at `base` refuses `key` (401) on a chat completion."""
    try:
        await chat(base, key)
    except openai.AuthenticationError:
        return True
    return False
