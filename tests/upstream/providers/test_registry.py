"""gateway.upstream.providers.registry: which provider answers each kind's calls, natively or by translation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest

from gateway.core.tree import Target
from gateway.upstream.providers.apis import MESSAGES, RESPONSES
from gateway.upstream.providers.base import Call
from gateway.upstream.providers.registry import Resources, factory_of
from tests.support.fakes import FakeUpstream

QUESTION = {"model": "m", "input": "hi"}


@pytest.fixture
async def resources() -> AsyncIterator[Resources]:
    async with aiohttp.ClientSession() as session:
        yield Resources(session=session, max_response_bytes=1 << 20)


def target(upstream: FakeUpstream, provider: str, **options: str) -> Target:
    base_url = upstream.url if provider == "openai" else upstream.url.removesuffix("/v1")  # anthropic's is the host root
    return Target(name=provider, provider=provider, base_url=base_url, api_key="k", **options)  # type: ignore[arg-type]


async def test_an_openai_target_answers_responses_natively_unless_told_to_translate(
    upstream: FakeUpstream, resources: Resources
) -> None:
    provider = factory_of("openai")(resources)
    await provider.complete(Call(target=target(upstream, "openai"), endpoint=RESPONSES, payload=QUESTION))
    translated = await provider.complete(
        Call(target=target(upstream, "openai", responses_api="translate"), endpoint=RESPONSES, payload=QUESTION)
    )
    assert [request.path for request in upstream.requests] == ["/v1/responses", "/v1/chat/completions"]
    assert orjson.loads(translated.body)["object"] == "response"


async def test_an_anthropic_target_answers_messages_natively(upstream: FakeUpstream, resources: Resources) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    reply = await factory_of("anthropic")(resources).complete(Call(target=target(upstream, "anthropic"), endpoint=MESSAGES, payload=body))
    assert reply.status == 200 and [request.path for request in upstream.requests] == ["/v1/messages"]
    assert upstream.requests[0].headers["x-api-key"] == "k"


async def test_the_mock_answers_without_an_upstream(upstream: FakeUpstream, resources: Resources) -> None:
    mock = Target(name="m", provider="mock", base_url="", api_key="")
    reply = await factory_of("mock")(resources).complete(Call(target=mock, endpoint=RESPONSES, payload=QUESTION))
    assert reply.status == 200 and orjson.loads(reply.body)["object"] == "response" and not upstream.requests


def test_every_other_kind_shares_the_litellm_factory() -> None:
    """Made only when called: the factory itself imports nothing."""
    others = {factory_of(kind) for kind in ("groq", "bedrock", "vertex_ai", "a-kind-litellm-adds-later")}
    assert len(others) == 1 and others.isdisjoint({factory_of("openai"), factory_of("mock"), factory_of("anthropic")})
