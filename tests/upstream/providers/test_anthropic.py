"""gateway.upstream.providers.anthropic: a Messages call goes out with the target's key, one version and every beta once."""

from __future__ import annotations

import aiohttp

from gateway.core.tree import Target
from gateway.upstream.providers.anthropic import (
    DEFAULT_VERSION,
    AnthropicMessages,
    client_headers,
    joined_betas,
)
from gateway.upstream.providers.apis import COUNT_TOKENS, MESSAGES
from gateway.upstream.providers.base import Call
from tests.support.fakes import FakeUpstream

BODY = {"model": "claude", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


def claude(upstream: FakeUpstream, **headers: str) -> Target:
    """An anthropic target on the fake upstream (its baseUrl is the host root), with these headers."""
    return Target(name="claude", provider="anthropic", base_url=upstream.url.removesuffix("/v1"),
                  api_key="sk-ant-test", headers=headers)  # fmt: skip


async def sent(upstream: FakeUpstream, target: Target, client: dict[str, str], endpoint: str = MESSAGES) -> dict[str, str]:
    """The headers the upstream received for one call, names in lower case."""
    async with aiohttp.ClientSession() as session:
        call = Call(target=target, endpoint=endpoint, payload=BODY, client_headers=client)
        reply = await AnthropicMessages(session).complete(call)
    assert reply.status == 200
    return {name.lower(): value for name, value in upstream.requests[-1].headers.items()}


def test_betas_are_joined_each_once() -> None:
    assert joined_betas("a, b", None, "b,c", "") == "a,b,c"
    assert joined_betas(None, None) == ""


def test_of_the_clients_headers_only_its_version_and_betas_are_passed_on() -> None:
    headers = {"anthropic-version": "2024-10-22", "anthropic-beta": "files", "x-api-key": "client", "authorization": "Bearer k"}
    assert client_headers(headers) == {"anthropic-version": "2024-10-22", "anthropic-beta": "files"}
    assert client_headers({"x-api-key": "client"}) == {}


async def test_a_call_carries_the_targets_key_and_the_default_version(upstream: FakeUpstream) -> None:
    headers = await sent(upstream, claude(upstream), {})
    assert headers["x-api-key"] == "sk-ant-test" and headers["anthropic-version"] == DEFAULT_VERSION
    assert "authorization" not in headers and "anthropic-beta" not in headers
    assert upstream.requests[-1].path == "/v1/messages" and upstream.requests[-1].body == BODY


async def test_count_tokens_goes_to_its_own_path(upstream: FakeUpstream) -> None:
    await sent(upstream, claude(upstream), {}, endpoint=COUNT_TOKENS)
    assert upstream.requests[-1].path == "/v1/messages/count_tokens"


async def test_the_targets_version_stands_and_its_betas_go_each_once(upstream: FakeUpstream) -> None:
    target = claude(upstream, **{"anthropic-version": "2023-01-01", "anthropic-beta": " tools ,tools,"})
    headers = await sent(upstream, target, {})
    assert (headers["anthropic-version"], headers["anthropic-beta"]) == ("2023-01-01", "tools")


async def test_the_clients_version_wins_and_its_betas_join_the_targets(upstream: FakeUpstream) -> None:
    target = claude(upstream, **{"anthropic-version": "2023-01-01", "anthropic-beta": "tools, cache"})
    headers = await sent(upstream, target, {"anthropic-version": "2024-10-22", "anthropic-beta": "cache,files"})
    assert (headers["anthropic-version"], headers["anthropic-beta"]) == ("2024-10-22", "tools,cache,files")
