"""A chat stream as it comes off the wire, read without an SDK (one would raise on an error chunk by itself)."""

from __future__ import annotations

import aiohttp

from tests.support.fakes import FakeUpstream, Step
from tests.support.gateway import GATEWAY_KEY, Gateway


async def raw_stream(gateway: Gateway, upstream: FakeUpstream, events: list[bytes]) -> list[bytes]:
    """The gateway's answer to a chat stream `upstream` answers with `events`, as its SSE events' bytes."""
    upstream.then(Step(events=[*events]))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    base = str(client.base_url).rstrip("/")
    body = {"model": "chat", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    async with aiohttp.ClientSession() as session, session.post(f"{base}/chat/completions", json=body, headers=headers) as response:
        assert response.status == 200
        answer = await response.read()
    return [event + b"\n\n" for event in answer.split(b"\n\n") if event]
