"""Per-key limits end to end (issue 25 item 2): the openai and anthropic SDKs against a gateway counting limits locally.

A key at its limit gets OpenAI's 429 (rate_limit_exceeded, or insufficient_quota for a budget)
with retry-after and the x-ratelimit-* headers, and neither the upstream nor memory sees the
request; tokens are the estimate reserved at admission, reconciled with the upstream's usage
when the answer ends (streams too); a key's `routes` bound where it may go.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import orjson
import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion, stream_of, usage_chunk
from tests.support.gateway import GATEWAY_KEY, Gateway, requests_ended
from tests.support.openai_errors import error_object
from tests.support.scrape import get, samples

HELLO = [{"role": "user", "content": "hello there"}]  # 11 characters: 3 tokens estimated
UPSTREAM_LIMITS = {"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999"}


def limited(upstream: FakeUpstream, tmp_path: Path, limits: str, *, model: str = "up-model", more: str = "") -> str:
    """team-a (GATEWAY_KEY) with `limits` on route `chat` (and `second`), a SQLite memory, limits counted locally."""
    return f"""
auth:
  keys:
    - {{name: team-a, key: {GATEWAY_KEY}, {limits}}}
    - {{name: team-b, key: other-key}}
limits: {{store: local}}
memory: {{store: sqlite, path: "{tmp_path / 'memory.db'}"}}
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: up-key, overrideParams: {{model: {model}}}}}
  second: {{provider: openai, baseUrl: "{upstream.url}", apiKey: up-key}}
{more}
"""


def usage_of(prompt: int, completion: int) -> dict[str, Any]:
    return {**chat_completion(), "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


async def get_metrics(client: openai.AsyncOpenAI) -> str:
    status, text = await get(client, "/metrics", Authorization=f"Bearer {GATEWAY_KEY}")
    assert status == 200, text
    return text


async def memory_status(client: openai.AsyncOpenAI, memory_id: str) -> int:
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    async with aiohttp.ClientSession(headers=headers) as session, session.get(f"{client.base_url}memory/{memory_id}") as answer:
        return answer.status


async def test_a_key_at_its_requests_per_minute_gets_a_429_that_reaches_nothing(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.default = Step(body=chat_completion(), headers=UPSTREAM_LIMITS)
    client = await gateway(limited(upstream, tmp_path, "limits: {requestsPerMinute: 2}"))
    first = await client.chat.completions.with_raw_response.create(model="chat", messages=HELLO)
    assert (first.headers["x-ratelimit-limit-requests"], first.headers["x-ratelimit-remaining-requests"]) == ("2", "1")
    assert first.headers["x-ratelimit-reset-requests"].endswith("s")
    assert first.headers["x-upstream-ratelimit-limit-requests"] == "10000"  # the upstream's own, renamed
    await client.chat.completions.create(model="chat", messages=HELLO)
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="chat", messages=HELLO, extra_headers={"x-memory-id": "conv-1"})
    error = error_object(caught.value)
    assert (error["code"], error["type"]) == ("rate_limit_exceeded", "requests")
    headers = caught.value.response.headers
    assert int(headers["retry-after"]) >= 1 and int(headers["retry-after-ms"]) >= 1
    assert (headers["x-ratelimit-limit-requests"], headers["x-ratelimit-remaining-requests"]) == ("2", "0")
    assert upstream.calls == 2
    assert await memory_status(client, "conv-1") == 404  # the refused turn never touched memory
    other = openai.AsyncOpenAI(base_url=str(client.base_url), api_key="other-key", max_retries=0)
    async with other:
        plain = await other.chat.completions.with_raw_response.create(model="chat", messages=HELLO)
    assert plain.headers["x-ratelimit-limit-requests"] == "10000"  # a key nothing limits: the upstream's, as they came
    assert "x-upstream-ratelimit-limit-requests" not in plain.headers


async def test_tokens_are_reserved_from_the_estimate_and_reconciled_with_the_usage(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """60 tokens a minute (one a second back): 3 estimated + 50 asked leave 7; the 5 used give 48 back, so a second fits.

    The second uses all it reserved: nothing comes back, and a third is refused.
    """
    upstream.then(Step(body=usage_of(3, 2)), Step(body=usage_of(3, 50)))
    client = await gateway(limited(upstream, tmp_path, "limits: {tokensPerMinute: 60}"))
    first = await client.chat.completions.with_raw_response.create(model="chat", messages=HELLO, max_tokens=50)
    assert (first.headers["x-ratelimit-limit-tokens"], first.headers["x-ratelimit-remaining-tokens"]) == ("60", "7")
    second = await client.chat.completions.with_raw_response.create(model="chat", messages=HELLO, max_tokens=50)
    assert int(second.headers["x-ratelimit-remaining-tokens"]) >= 2
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="chat", messages=HELLO, max_tokens=50)
    error = error_object(caught.value)
    assert (error["code"], error["type"]) == ("rate_limit_exceeded", "tokens")
    assert caught.value.response.headers["x-ratelimit-limit-tokens"] == "60"
    assert upstream.calls == 2


async def test_a_stream_s_tokens_are_reconciled_with_its_final_usage(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """Metrics off: the gateway asks the stream for its usage itself, and the client does not see it."""
    upstream.default = Step(events=[*stream_of("Hi", done=False), usage_chunk(3, 2), b"data: [DONE]\n\n"])
    client = await gateway(limited(upstream, tmp_path, "limits: {tokensPerMinute: 60}", more="metrics: {enabled: false}"))
    for _ in range(2):  # without the usage the first's 53 would stand, and the second would be refused
        stream = await client.chat.completions.create(model="chat", messages=HELLO, max_tokens=50, stream=True)
        assert all([chunk.usage is None async for chunk in stream])
    assert upstream.calls == 2


async def test_a_key_s_concurrent_requests_are_bounded_while_the_upstream_is_slow(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    upstream.then(Step(body=chat_completion(), gate=gate))
    client = await gateway(limited(upstream, tmp_path, "limits: {concurrentRequests: 1}"))
    held = asyncio.create_task(client.chat.completions.create(model="chat", messages=HELLO))
    await upstream.arrived.wait()
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="chat", messages=HELLO)
    assert error_object(caught.value)["code"] == "rate_limit_exceeded"
    gate.set()
    await held
    await client.chat.completions.create(model="chat", messages=HELLO)  # the slot is free again
    assert upstream.calls == 2


async def test_a_slot_held_by_a_client_that_left_mid_stream_is_freed(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    hold = asyncio.Event()
    upstream.then(Step(events=[*stream_of("Hi", done=False)[:2], hold]))
    client = await gateway(limited(upstream, tmp_path, "limits: {concurrentRequests: 1}"))
    stream = await client.chat.completions.create(model="chat", messages=HELLO, stream=True)
    async for _ in stream:
        break
    await stream.close()
    await requests_ended(client)
    hold.set()
    await client.chat.completions.create(model="chat", messages=HELLO)


async def test_a_spent_budget_of_a_priced_model_gets_insufficient_quota(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """gpt-4o-mini's list price: 5 + 3 tokens cost $2.55e-06, past a $0.000001 budget."""
    client = await gateway(limited(upstream, tmp_path, "limits: {budget: {usd: 0.000001, period: day}}", model="gpt-4o-mini"))
    await client.chat.completions.create(model="chat", messages=HELLO)
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="chat", messages=HELLO)
    error = error_object(caught.value)
    assert (error["code"], error["type"]) == ("insufficient_quota", "insufficient_quota")
    assert int(caught.value.response.headers["retry-after"]) >= 1
    assert upstream.calls == 1
    found = samples(await get_metrics(client))  # the process's metrics are the governor's listener
    assert found["gateway_rate_limited_total", frozenset({("key", "team-a"), ("route", "chat"), ("limit", "budget")})] == 1
    assert found["gateway_budget_spent_usd", frozenset({("key", "team-a")})] == pytest.approx(5 * 1.5e-07 + 3 * 6e-07)
    assert found["gateway_budget_remaining_usd", frozenset({("key", "team-a")})] == 0


async def test_a_key_with_routes_gets_a_403_on_another_route(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(limited(upstream, tmp_path, "routes: [chat]"))
    await client.chat.completions.create(model="chat", messages=HELLO)
    with pytest.raises(openai.PermissionDeniedError) as caught:
        await client.chat.completions.create(model="second", messages=HELLO)
    error = error_object(caught.value)
    assert (error["code"], error["type"]) == ("route_not_allowed", "invalid_request_error")
    assert upstream.calls == 1


async def test_a_key_with_routes_may_not_bring_its_own_tree_in_x_gateway_config(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    more = "requestConfig: {enabled: true, allowedHosts: [\"127.0.0.1\"]}\n"
    client = await gateway(limited(upstream, tmp_path, "routes: [chat]", more=more))
    tree = orjson.dumps({"provider": "openai", "baseUrl": upstream.url, "apiKey": "k"}).decode()
    with pytest.raises(openai.PermissionDeniedError) as caught:
        await client.chat.completions.create(model="chat", messages=HELLO, extra_headers={"x-gateway-config": tree})
    assert error_object(caught.value)["code"] == "route_not_allowed"
    assert upstream.calls == 0


async def test_the_messages_api_answers_a_limit_in_anthropic_s_shape(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await gateway(limited(upstream, tmp_path, "limits: {requestsPerMinute: 1}"))
    root = str(client.base_url).rstrip("/").removesuffix("/v1")
    async with anthropic.AsyncAnthropic(base_url=root, api_key=GATEWAY_KEY, max_retries=0) as claude:
        first = await claude.messages.with_raw_response.create(model="chat", max_tokens=16, messages=HELLO)  # type: ignore[arg-type]
        assert first.headers["x-ratelimit-remaining-requests"] == "0"
        with pytest.raises(anthropic.RateLimitError) as caught:
            await claude.messages.create(model="chat", max_tokens=16, messages=HELLO)  # type: ignore[arg-type]
    assert caught.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    assert int(caught.value.response.headers["retry-after"]) >= 1
    assert caught.value.response.headers["x-ratelimit-limit-requests"] == "1"
    assert upstream.calls == 1


async def test_a_route_s_own_limit_counts_every_key(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    config = limited(upstream, tmp_path, "routes: [chat, second]").replace(
        "apiKey: up-key}\n", "apiKey: up-key, limits: {requestsPerMinute: 1}}\n"
    )
    client = await gateway(config)
    await client.chat.completions.create(model="second", messages=HELLO)
    other = openai.AsyncOpenAI(base_url=str(client.base_url), api_key="other-key", max_retries=0)
    async with other:
        with pytest.raises(openai.RateLimitError):
            await other.chat.completions.create(model="second", messages=HELLO)
        await other.chat.completions.create(model="chat", messages=HELLO)
    assert upstream.calls == 2
