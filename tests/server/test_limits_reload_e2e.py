"""Limits across a reload (SIGHUP): counted locally, a key's counts carry over to the new configuration, whose limits apply to new requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.reloading import reloadable

HI = [{"role": "user", "content": "hi"}]


def config(requests_per_minute: int) -> str:
    return (
        f"auth: {{keys: [{{name: a, key: key-one, limits: {{requestsPerMinute: {requests_per_minute}}}}}]}}\n"
        "limits: {store: local}\nroutes: {chat: {provider: mock}}\n"
    )


async def test_a_reload_keeps_a_key_s_counts_and_applies_its_new_limits(tmp_path: Path, aiohttp_server: Any) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(config(2))
    reloader, url = await reloadable(aiohttp_server, path)
    async with openai.AsyncOpenAI(base_url=url + "v1", api_key="key-one", max_retries=0) as client:
        for _ in range(2):
            await client.chat.completions.create(model="chat", messages=HI)  # type: ignore[arg-type]
        for _ in range(2):  # each reload's governor takes over from the one served last: no fresh minute
            assert await reloader.reload()
            with pytest.raises(openai.RateLimitError) as caught:
                await client.chat.completions.create(model="chat", messages=HI)  # type: ignore[arg-type]
            assert caught.value.response.headers["x-ratelimit-limit-requests"] == "2"
        path.write_text(config(1))
        assert await reloader.reload()
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(model="chat", messages=HI)  # type: ignore[arg-type]
        assert caught.value.response.headers["x-ratelimit-limit-requests"] == "1"  # the new limit, on the old count
