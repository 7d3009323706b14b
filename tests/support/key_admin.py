"""Gateways whose keys are managed through /v1/gateway/keys: an admin key, and the key store each replica refreshes from.

`start_replica` starts a gateway (create_app) on loopback; several started on one config are
replicas sharing its key store (limits.path, or the limits' Redis).
"""

from __future__ import annotations

import random
from typing import Any

import aiohttp
import openai
from aiohttp.test_utils import TestServer

from gateway.config.loader import parse_config
from gateway.core.settings import Config
from gateway.server.app import create_app
from tests.support.gateway import GATEWAY_KEY

ADMIN_KEY = "gw-admin-key"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
TEAM_A = {"Authorization": f"Bearer {GATEWAY_KEY}"}
AUTH = f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}], adminKeys: [{{name: ops, key: {ADMIN_KEY}}}]}}\n"
ROUTES = "routes: {m: {provider: mock}, n: {provider: mock}}\n"


def admin_config(limits: str, *, more: str = "") -> Config:
    """team-a's key, the admin key `ops`, the routes m and n, and `limits` (the key store's place)."""
    return parse_config(f"{AUTH}limits: {limits}\n{more}{ROUTES}", env={})


async def start_replica(aiohttp_server: Any, config: Config) -> str:
    """A gateway on `config` (its key store and refresher as create_app opens them); its base URL (no /v1)."""
    server: TestServer = await aiohttp_server(create_app(config, rng=random.Random(7)))
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
