"""What a limited key's request counts when it ends (issue 25 review): the openai SDK against a gateway counting limits locally.

A client that closes its stream before the usage chunk (at the finish reason, or mid-way) is
charged what it was relayed: the prompt's estimate and the answer's text / 4, priced. A request
is priced by the model sent upstream (a default route's, a target without a model of its own:
the client's), in its budget and in gateway_cost_usd_total alike. A request that generated
nothing (the upstream refused it, could not be reached) gives its whole reservation back.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest

from tests.support.anthropic_clients import fake_claude  # noqa: F401  (the `claude` fixture)
from tests.support.fakes import FakeUpstream, Step, chat_completion, chunk, error_body, usage_chunk
from tests.support.fakes_anthropic import Answer, FakeAnthropic, message_events
from tests.support.fakes_responses import Answer as ResponsesAnswer
from tests.support.fakes_responses import response_events, start_responses
from tests.support.gateway import GATEWAY_KEY, Gateway, requests_ended
from tests.support.openai_errors import error_object
from tests.support.scrape import Samples, get, samples

HELLO = [{"role": "user", "content": "hello there"}]  # 11 characters: 3 tokens estimated
MINI = (1.5e-07, 6e-07)  # gpt-4o-mini's list prices, prompt and completion, USD a token
TEXT = "x" * 400  # 100 tokens by the estimate's four characters a token


def config(base_url: str, tmp_path: Path, limits: str, *, route: str = "overrideParams: {model: gpt-4o-mini}", more: str = "") -> str:
    """team-a (GATEWAY_KEY) with `limits` on route `chat` (at `base_url`), counted locally."""
    return f"""
auth:
  keys:
    - {{name: team-a, key: {GATEWAY_KEY}, limits: {limits}}}
limits: {{store: local}}
memory: {{store: sqlite, path: "{tmp_path / 'memory.db'}"}}
routes:
  chat: {{provider: openai, baseUrl: "{base_url}", apiKey: up-key, {route}}}
{more}
"""


async def metrics(client: openai.AsyncOpenAI) -> Samples:
    status, text = await get(client, "/metrics", Authorization=f"Bearer {GATEWAY_KEY}")
    assert status == 200, text
    return samples(text)


async def spent(client: openai.AsyncOpenAI) -> float:
    """team-a's spend today, as gateway_budget_spent_usd has it (/v1/gateway/usage rounds it to the millionth)."""
    return (await metrics(client)).get(("gateway_budget_spent_usd", frozenset({("key", "team-a")})), 0.0)


async def usage(client: openai.AsyncOpenAI) -> dict[str, Any]:
    status, text = await get(client, "/v1/gateway/usage", Authorization=f"Bearer {GATEWAY_KEY}")
    assert status == 200, text
    limits: dict[str, Any] = orjson.loads(text)["limits"]
    return limits


def tool_call(arguments: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": arguments}}]}


@pytest.mark.parametrize(
    ("delta", "finished"),
    [({"content": TEXT}, True), ({"content": TEXT}, False), (tool_call(TEXT), True)],
    ids=["content-left-at-finish", "content-left-mid-stream", "tool-arguments-left-at-finish"],
)
async def test_a_client_that_leaves_a_stream_early_is_charged_what_it_was_relayed(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, delta: dict[str, Any], finished: bool
) -> None:
    """120 tokens a minute: the 3 estimated + 100 relayed are taken, so a request asking 53 more is refused.

    Without the count the 3 reserved stood, nothing was spent, and the second request went through.
    """
    hold = asyncio.Event()  # the upstream's usage (1,000 tokens) comes only once the client has gone
    events: list[bytes | float | asyncio.Event] = [chunk({"role": "assistant", "content": ""}), chunk(delta)]
    if finished:
        events.append(chunk({}, "stop"))
    upstream.then(Step(events=[*events, hold, usage_chunk(3, 1000), b"data: [DONE]\n\n"]))
    client = await gateway(config(upstream.url, tmp_path, "{tokensPerMinute: 120, budget: {usd: 1, period: day}}"))
    stream = await client.chat.completions.create(model="chat", messages=HELLO, stream=True)
    async for part in stream:
        choice = part.choices[0]
        if choice.finish_reason if finished else (choice.delta.content or choice.delta.tool_calls):
            break  # the text is in (and, at the finish, the whole answer): the client leaves before the usage
    await stream.close()
    await requests_ended(client)
    hold.set()
    assert await spent(client) == pytest.approx(3 * MINI[0] + 100 * MINI[1])
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="chat", messages=HELLO, max_tokens=50)
    assert error_object(caught.value)["type"] == "tokens"
    assert upstream.calls == 1


async def test_a_client_that_leaves_an_anthropic_stream_early_is_charged_what_it_was_relayed(
    gateway: Gateway, claude: FakeAnthropic, tmp_path: Path
) -> None:
    """A native Anthropic stream, left mid-way: its 3 + 100 tokens are taken, so a request asking 53 more is refused."""
    hold = asyncio.Event()
    claude.then(Answer(events=[*message_events(TEXT, complete=False), hold]))
    route = f"provider: anthropic, baseUrl: \"{claude.url}\", apiKey: up-key"
    client = await gateway(config("unused", tmp_path, "{tokensPerMinute: 120}").replace(
        'provider: openai, baseUrl: "unused", apiKey: up-key, overrideParams: {model: gpt-4o-mini}', route
    ))  # fmt: skip
    root = str(client.base_url).rstrip("/").removesuffix("/v1")
    async with anthropic.AsyncAnthropic(base_url=root, api_key=GATEWAY_KEY, max_retries=0) as sdk:
        stream = await sdk.messages.create(model="chat", max_tokens=16, messages=HELLO, stream=True)  # type: ignore[arg-type]
        async for event in stream:
            if event.type == "content_block_delta":
                break
        await stream.close()
        await requests_ended(client)
        hold.set()
        with pytest.raises(anthropic.RateLimitError):
            await sdk.messages.create(model="chat", max_tokens=50, messages=HELLO)  # type: ignore[arg-type]
    assert claude.calls == 1


async def test_a_client_that_leaves_a_responses_conversation_stream_early_is_charged_what_it_was_relayed(
    gateway: Gateway, aiohttp_server: Any, tmp_path: Path
) -> None:
    """A native Responses stream with server-side memory (`conversation`), left mid-way: 3 + 100 tokens taken."""
    native = await start_responses(aiohttp_server)
    hold = asyncio.Event()
    native.then(ResponsesAnswer(events=[*response_events(TEXT, response_id="resp_1", complete=False), hold]))
    client = await gateway(config(native.url, tmp_path, "{tokensPerMinute: 120}"))
    stream = await client.responses.create(model="chat", input="hello there", conversation="c1", stream=True, store=False)
    async for event in stream:
        if event.type == "response.output_text.delta":
            break
    await stream.close()
    await requests_ended(client)
    hold.set()
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(model="chat", messages=HELLO, max_tokens=50)
    assert native.calls == 1


async def test_a_stream_read_to_its_end_is_charged_its_usage_not_its_text(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.then(Step(events=[chunk({"content": TEXT}), chunk({}, "stop"), usage_chunk(3, 2), b"data: [DONE]\n\n"]))
    client = await gateway(config(upstream.url, tmp_path, "{tokensPerMinute: 120, budget: {usd: 1, period: day}}"))
    stream = await client.chat.completions.create(model="chat", messages=HELLO, stream=True)
    assert "".join([part.choices[0].delta.content or "" async for part in stream if part.choices]) == TEXT
    assert await spent(client) == pytest.approx(3 * MINI[0] + 2 * MINI[1])
    await client.chat.completions.create(model="chat", messages=HELLO, max_tokens=50)


async def test_a_default_route_s_request_is_priced_by_the_model_the_client_sent(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """No overrideParams model: the upstream is asked for the client's gpt-4o-mini, then gpt-4o; each is priced as such."""
    upstream.default = Step(body=chat_completion())  # usage: 5 prompt, 3 completion tokens
    client = await gateway(config(upstream.url, tmp_path, "{budget: {usd: 1, period: day}}", route="", more="defaultRoute: chat"))
    await client.chat.completions.create(model="gpt-4o-mini", messages=HELLO)
    await client.chat.completions.create(model="gpt-4o", messages=HELLO)
    assert [request.body["model"] for request in upstream.requests] == ["gpt-4o-mini", "gpt-4o"]
    cost = 5 * MINI[0] + 3 * MINI[1] + 5 * 2.5e-06 + 3 * 1e-05  # gpt-4o's list prices
    assert await spent(client) == pytest.approx(cost)
    assert (await metrics(client))["gateway_cost_usd_total", frozenset({("route", "chat"), ("target", "chat")})] == pytest.approx(cost)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("failure", ["upstream-500", "upstream-400", "connection-refused"])
async def test_a_request_that_generated_nothing_gives_its_tokens_back(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, failure: str
) -> None:
    """120 tokens a minute, 3 estimated + 100 asked: a second such request fits only if the first gave its 103 back."""
    base_url = f"http://127.0.0.1:{closed_port()}/v1" if failure == "connection-refused" else upstream.url
    status = 400 if failure == "upstream-400" else 500
    upstream.default = Step(status=status, body=error_body(status))
    client = await gateway(config(base_url, tmp_path, "{tokensPerMinute: 120, budget: {usd: 1, period: day}}"))
    for _ in range(2):
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model="chat", messages=HELLO, max_tokens=100)
        assert caught.value.status_code != 429
    assert await spent(client) == 0
    assert (await usage(client))["tokens"]["remaining"] == 120
