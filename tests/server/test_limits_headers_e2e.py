"""Whose quota x-ratelimit-* show (issue 25 review 5): the openai SDK against a gateway counting limits locally and in Redis.

An answer shows, for requests and for tokens, the key's own limit, else the route's: a key with
no limits of its own on a limited route gets the route's quota, and the upstream's own headers
renamed x-upstream-ratelimit-*. A 429 shows the same, except that the limit that refused the
request is shown as it stood: a key refused by its route's limit sees the route's quota for it,
not its own, which would say there is room.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.openai_errors import error_object
from tests.support.servers import flush_redis, redis_server

HELLO = [{"role": "user", "content": "hello there"}]
UPSTREAM_LIMITS = {"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999"}


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis-limit-headers")) as server:
        yield server.url


@pytest.fixture(params=["local", "redis"])
async def store(request: pytest.FixtureRequest) -> str:
    """The limits block of a config: counted in this process, or in the module's redis-server (flushed)."""
    if request.param == "local":
        return "limits: {store: local}"
    url: str = request.getfixturevalue("redis_url")
    await flush_redis(url)
    return f'limits: {{store: redis, url: "{url}"}}'


def config(upstream: FakeUpstream, tmp_path: Path, store: str, key_limits: str) -> str:
    """team-a (GATEWAY_KEY, `key_limits`) on route `chat`, which takes one request a minute whoever sends it."""
    return f"""
auth:
  keys:
    - {{name: team-a, key: {GATEWAY_KEY}{key_limits}}}
{store}
memory: {{store: sqlite, path: "{tmp_path / 'memory.db'}"}}
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: up-key, limits: {{requestsPerMinute: 1}}}}
"""


@pytest.mark.parametrize("key_limits", ["", ", limits: {requestsPerMinute: 10}"], ids=["key-unlimited", "key-limited"])
async def test_a_request_the_route_refuses_shows_the_route_s_quota(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, store: str, key_limits: str
) -> None:
    upstream.default = Step(body=chat_completion(), headers=UPSTREAM_LIMITS)
    client = await gateway(config(upstream, tmp_path, store, key_limits))
    first = await client.chat.completions.with_raw_response.create(model="chat", messages=HELLO)
    limit = "10" if key_limits else "1"  # the key's own when it has one, else the route's
    assert (first.headers["x-ratelimit-limit-requests"], first.headers["x-upstream-ratelimit-limit-requests"]) == (limit, "10000")
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="chat", messages=HELLO)
    assert error_object(caught.value)["message"].startswith("Rate limit reached for requests per minute on route 'chat'")
    headers = caught.value.response.headers
    assert (headers["x-ratelimit-limit-requests"], headers["x-ratelimit-remaining-requests"]) == ("1", "0")
    assert int(headers["retry-after"]) >= 1
    assert upstream.calls == 1
