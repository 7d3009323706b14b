"""Keys issued through /v1/gateway/keys are governed like configured ones: their limits and routes hold from the first request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from tests.support.gateway import Gateway
from tests.support.waiting import eventually

HI = [{"role": "user", "content": "hi"}]
ADMIN_KEY = "admin-key-0123"


def config(tmp_path: Path) -> str:
    return f"""
auth: {{adminKeys: [{{name: ops, key: {ADMIN_KEY}}}]}}
limits: {{store: local, path: "{tmp_path / 'keys.db'}"}}
routes:
  chat: {{provider: mock}}
  second: {{provider: mock}}
"""


async def issue(client: openai.AsyncOpenAI, body: dict[str, Any]) -> str:
    """POST /v1/gateway/keys as the admin: the new key."""
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with aiohttp.ClientSession(headers=headers) as session, session.post(f"{client.base_url}gateway/keys", json=body) as answer:
        assert answer.status == 201, await answer.text()
        key: str = (await answer.json())["key"]
        return key


async def admitted(client: openai.AsyncOpenAI) -> bool:
    """Whether `client`'s key is known to the gateway yet (its refresher has read it)."""
    try:
        await client.models.list()
    except openai.AuthenticationError:
        return False
    return True


async def test_an_issued_key_is_held_to_its_limits_and_routes(gateway: Gateway, tmp_path: Path) -> None:
    admin = (await gateway(config(tmp_path))).with_options(api_key=ADMIN_KEY)
    key = await issue(admin, {"name": "team-c", "routes": ["chat"], "limits": {"requestsPerMinute": 1}})
    async with openai.AsyncOpenAI(base_url=str(admin.base_url), api_key=key, max_retries=0) as client:
        await eventually(lambda: admitted(client), what="the issued key known")
        first = await client.chat.completions.with_raw_response.create(model="chat", messages=HI)  # type: ignore[arg-type]
        assert (first.headers["x-ratelimit-limit-requests"], first.headers["x-ratelimit-remaining-requests"]) == ("1", "0")
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(model="chat", messages=HI)  # type: ignore[arg-type]
        with pytest.raises(openai.PermissionDeniedError) as caught:
            await client.chat.completions.create(model="second", messages=HI)  # type: ignore[arg-type]
        assert caught.value.code == "route_not_allowed"
    raw = await admin.chat.completions.with_raw_response.create(model="second", messages=HI)  # type: ignore[arg-type]
    assert "x-ratelimit-limit-requests" not in raw.headers  # an admin key: every route, no limit
