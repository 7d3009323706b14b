"""Requests to the gateway over plain aiohttp, beside the SDK: any method, path, headers and body."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
from multidict import CIMultiDict

from tests.support.gateway import GATEWAY_KEY

# keys on, a 2,000-byte body limit, and one route `m` to the mock provider
CONFIG = f"""
server: {{maxBodyBytes: 2000}}
auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}
routes: {{m: {{provider: mock}}}}
"""
AUTH = {"Authorization": f"Bearer {GATEWAY_KEY}"}


async def call(client: openai.AsyncOpenAI, method: str, path: str, **kwargs: Any) -> tuple[int, CIMultiDict[str], Any]:
    """`method` `path` (from the root, e.g. /v1/chat/completions) on `client`'s gateway: status, headers, JSON body."""
    base = str(client.base_url).rstrip("/").removesuffix("/v1")
    async with aiohttp.ClientSession() as session, session.request(method, base + path, **kwargs) as response:
        return response.status, CIMultiDict(response.headers), await response.json(content_type=None)
