"""CORS on a limited key's answers: its x-ratelimit-* and the upstream's relayed x-upstream-ratelimit-* are readable by a page."""

from __future__ import annotations

from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.gateway import KEYS, Gateway
from tests.support.governors import Recorder, recorder

__all__ = ["recorder"]  # the fixture

ORIGIN = "https://app.example.com"
UPSTREAM_LIMITS = {"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining": "9"}


async def test_a_limited_key_s_headers_and_the_upstream_s_are_exposed(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder
) -> None:
    upstream.then(Step(body=chat_completion(), headers=UPSTREAM_LIMITS))
    config = f"{KEYS}\ncors: {{allowOrigins: ['{ORIGIN}']}}\nroutes: {{m: {{baseUrl: '{upstream.url}', apiKey: k}}}}"
    client = await gateway(config, default_headers={"Origin": ORIGIN})
    raw = await client.chat.completions.with_raw_response.create(model="m", messages=[{"role": "user", "content": "hi"}])
    exposed = [name.strip() for name in raw.headers["access-control-expose-headers"].split(",")]
    assert raw.headers["x-upstream-ratelimit-limit-requests"] == "10000"
    assert raw.headers["x-upstream-ratelimit-remaining"] == "9"
    for name in ("x-ratelimit-limit-requests", "x-ratelimit-reset-tokens", "x-upstream-ratelimit-limit-requests"):
        assert exposed.count(name) == 1, name
    assert "x-upstream-ratelimit-remaining" in exposed  # not a name we list: added because it was relayed
    assert "x-ratelimit-remaining" not in exposed  # renamed: no answer carries it
