"""litellm-backed targets end to end: the openai SDK as client, a fake Anthropic Messages API on loopback."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import openai
import orjson
import pytest

from gateway.config.loader import parse_config
from gateway.upstream.providers import litellm as provider
from gateway.upstream.providers import litellm_internals
from gateway.upstream.providers.base import Reply, TransportError
from gateway.upstream.providers.litellm import (
    LOGGERS,
    ChunkEvents,
    map_failure,
)
from tests.support.fakes import FakeUpstream, Step, error_body
from tests.support.fakes_anthropic import (
    MODEL,
    Answer,
    FakeAnthropic,
    anthropic_error,
    message,
    message_events,
    overloaded,
    rate_limited,
    sse,
    start_anthropic,
)
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.processes import HOSTS_AUDIT

# litellm's pydantic types warn once per process when first built; litellm itself hides it, pytest shows it
pytestmark = pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning")

KEY = "sk-ant-operator-secret-0123456789"
MESSAGES = [{"role": "user", "content": "hello"}]
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
async def claude(aiohttp_server: Any) -> FakeAnthropic:
    return await start_anthropic(aiohttp_server)


def claude_target(fake: FakeAnthropic | str, *, name: str = "claude", extra: str = "") -> str:
    url = fake if isinstance(fake, str) else fake.url
    return f'{{name: {name}, provider: anthropic, baseUrl: "{url}", apiKey: {KEY}, overrideParams: {{model: {MODEL}}}{extra}}}'


def single(fake: FakeAnthropic, extra: str = "") -> str:
    return f"routes: {{chat: {claude_target(fake, extra=extra)}}}"


def fallback(first: str, second: FakeUpstream, *, codes: str = "429") -> str:
    return f"""
    routes:
      chat:
        strategy: {{mode: fallback, onStatusCodes: [{codes}]}}
        targets:
          - {first}
          - {{name: openai, provider: openai, baseUrl: "{second.url}", apiKey: sk-second}}
    """


def root(client: openai.AsyncOpenAI) -> str:
    return str(client.base_url).rstrip("/")


async def post_raw(
    client: openai.AsyncOpenAI, body: dict[str, Any], *, path: str = "/chat/completions"
) -> tuple[int, bytes]:
    """The gateway's answer as bytes (an SSE body exactly as sent)."""
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(root(client) + path, json=body, headers=headers) as response,
    ):
        return response.status, await response.read()


async def scrape_text(client: openai.AsyncOpenAI) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(root(client).removesuffix("/v1") + "/metrics") as response,
    ):
        return response.status, await response.text()


def data_events(body: bytes) -> list[bytes]:
    return [block.removeprefix(b"data: ") for block in body.split(b"\n\n") if block.startswith(b"data: ")]


# ---------------------------------------------------------------- answers


async def test_an_answer_is_openai_shaped_with_usage(gateway: Gateway, claude: FakeAnthropic) -> None:
    limits = {"anthropic-ratelimit-requests-remaining": "41", "request-id": "req_1"}
    claude.then(Answer(body=message("Hello from Claude"), headers=limits))
    client = await gateway(single(claude))
    raw = await client.chat.completions.with_raw_response.create(
        model="chat", messages=MESSAGES, temperature=0.5
    )
    completion = raw.parse()
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == "Hello from Claude"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (
        completion.usage.prompt_tokens,
        completion.usage.completion_tokens,
        completion.usage.total_tokens,
    ) == (11, 7, 18)
    assert raw.headers["x-gateway-target"] == "claude"
    assert (
        raw.headers["x-ratelimit-remaining-requests"] == "41"
    )  # litellm's OpenAI name for Anthropic's header
    sent = claude.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.body["model"] == MODEL
    assert sent.body["temperature"] == 0.5
    assert sent.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]


async def test_a_stream_is_openai_chunks_with_usage_then_done(
    gateway: Gateway, claude: FakeAnthropic
) -> None:
    client = await gateway(single(claude))
    stream = await client.chat.completions.create(
        model="chat", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    parts = [part async for part in stream]
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == "Hello from Claude"
    assert [p.choices[0].finish_reason for p in parts if p.choices and p.choices[0].finish_reason] == ["stop"]
    assert parts[-1].choices == [] and parts[-1].usage is not None and parts[-1].usage.total_tokens == 18
    assert all(p.usage is None for p in parts[:-1])
    assert claude.requests[0].body["stream"] is True

    status, body = await post_raw(
        client,
        {"model": "chat", "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}},
    )
    assert status == 200 and body.endswith(b"data: [DONE]\n\n")
    assert orjson.loads(data_events(body)[-2])["choices"] == []  # the usage-only chunk, as OpenAI sends it


async def test_usage_the_gateway_asked_for_is_counted_but_not_shown(
    gateway: Gateway, claude: FakeAnthropic
) -> None:
    client = await gateway(single(claude))
    status, body = await post_raw(client, {"model": "chat", "messages": MESSAGES, "stream": True})
    assert status == 200 and body.endswith(b"data: [DONE]\n\n")
    assert b'"usage"' not in body
    _, text = await scrape_text(client)
    assert (
        'gateway_tokens_total{kind="completion",provider="anthropic",route="chat",target="claude"} 7.0'
        in text
    )


async def test_tool_calls_are_translated_both_ways(gateway: Gateway, claude: FakeAnthropic) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    claude.then(Answer(body={**message(""), "content": [use], "stop_reason": "tool_use"}))
    client = await gateway(single(claude))
    parameters = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": parameters}}
    answer = await client.chat.completions.create(model="chat", messages=MESSAGES, tools=[tool])  # type: ignore[list-item]
    call = answer.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert (answer.choices[0].finish_reason, call.id, call.function.name) == (
        "tool_calls",
        "toolu_1",
        "get_weather",
    )
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert claude.requests[0].body["tools"][0]["name"] == "get_weather"


async def test_streamed_tool_calls_are_openai_deltas(gateway: Gateway, claude: FakeAnthropic) -> None:
    start = message_events()[0]
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    claude.then(Answer(events=[
        start,
        sse("content_block_start", {"index": 0, "content_block": block}),
        sse("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"city": '}}),
        sse("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta", "partial_json": '"Paris"}'}}),
        sse("content_block_stop", {"index": 0}),
        sse("message_delta", {"delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 9}}),
        sse("message_stop", {}),
    ]))  # fmt: skip
    client = await gateway(single(claude))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    parts = [p async for p in stream if p.choices]
    calls = [call for p in parts for call in p.choices[0].delta.tool_calls or []]
    assert (calls[0].id, calls[0].function.name) == ("toolu_1", "get_weather")  # type: ignore[union-attr]
    assert json.loads("".join(c.function.arguments or "" for c in calls)) == {"city": "Paris"}  # type: ignore[union-attr]
    assert parts[-1].choices[0].finish_reason == "tool_calls"


async def test_text_completions_go_through_litellm(gateway: Gateway, claude: FakeAnthropic) -> None:
    client = await gateway(single(claude))
    completion = await client.completions.create(model="chat", prompt="Say hello")
    assert completion.choices[0].text == "Hello from Claude"
    assert completion.usage is not None and completion.usage.total_tokens == 18
    stream = await client.completions.create(model="chat", prompt="Say hello", stream=True)
    assert (
        "".join([part.choices[0].text or "" async for part in stream if part.choices]) == "Hello from Claude"
    )


async def test_embeddings_go_through_litellm(gateway: Gateway, upstream: FakeUpstream) -> None:
    vector = {"object": "embedding", "index": 0, "embedding": [0.25, 0.5]}
    upstream.then(
        Step(
            body={
                "object": "list",
                "data": [vector],
                "model": "mistral-embed",
                "usage": {"prompt_tokens": 3, "total_tokens": 3},
            }
        )
    )
    client = await gateway(
        f'routes: {{emb: {{provider: mistral, baseUrl: "{upstream.url}", apiKey: {KEY}, overrideParams: {{model: mistral-embed}}}}}}'
    )
    answer = await client.embeddings.create(model="emb", input="hello", encoding_format="float")
    assert answer.data[0].embedding == [0.25, 0.5]
    assert upstream.requests[0].path == "/v1/embeddings"
    assert upstream.requests[0].body["model"] == "mistral-embed"
    assert upstream.requests[0].headers["Authorization"] == f"Bearer {KEY}"


# ---------------------------------------------------------------- errors: retries, fallback, transport


async def test_a_429_is_retried_after_its_retry_after(gateway: Gateway, claude: FakeAnthropic) -> None:
    claude.then(rate_limited(retry_after="0"))
    client = await gateway(single(claude, extra=", retry: {attempts: 1}"))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
    assert raw.parse().choices[0].message.content == "Hello from Claude"
    assert raw.headers["x-gateway-attempts"] == "2"
    assert claude.calls == 2
    _, text = await scrape_text(client)
    for outcome in ("429", "200"):
        labels = f'outcome="{outcome}",provider="anthropic",route="chat",target="claude"'
        assert f"gateway_upstream_requests_total{{{labels}}} 1.0" in text


async def test_a_429_keeps_its_retry_after_and_anthropic_error(
    gateway: Gateway, claude: FakeAnthropic
) -> None:
    claude.then(rate_limited(retry_after="120"))
    client = await gateway(single(claude, extra=", retry: {attempts: 2, maxRetryAfterSeconds: 5}"))
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert claude.calls == 1  # the wait asked for is longer than the policy allows: no retry
    assert caught.value.response.headers["retry-after"] == "120"
    assert caught.value.body == {
        "message": "Upstream request failed: claude: 429 Number of requests has exceeded your rate limit",
        "type": "rate_limit_error",
        "param": None,
        "code": None,
    }


async def test_a_529_overload_falls_back_on_529(
    gateway: Gateway, claude: FakeAnthropic, upstream: FakeUpstream
) -> None:
    claude.then(overloaded(), overloaded())
    client = await gateway(fallback(claude_target(claude), upstream, codes="529"))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
    assert raw.parse().choices[0].message.content == "Hello from upstream"
    assert (raw.headers["x-gateway-target"], raw.headers["x-gateway-attempts"]) == ("openai", "2")
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    assert (
        "".join([p.choices[0].delta.content or "" async for p in stream if p.choices])
        == "Hello from upstream"
    )
    assert claude.calls == 2 and upstream.calls == 2
    _, text = await scrape_text(client)
    assert (
        'gateway_upstream_requests_total{outcome="529",provider="anthropic",route="chat",target="claude"} 2.0'
        in text
    )


# A conversation with every kind of message memory keeps: content parts, a name, a tool call and its result
KEPT = [
    {"role": "system", "content": "Be terse."},
    {"role": "user", "content": [{"type": "text", "text": "q1"}, {"type": "text", "text": "more"}], "name": "bob"},
    {"role": "assistant", "content": "calling", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "42"},
    {"role": "user", "content": "q2"},
]


@pytest.mark.parametrize("claude_answers", [True, False])
async def test_memory_through_litellm_and_a_fallback_keeps_messages_as_sent(
    gateway: Gateway, claude: FakeAnthropic, upstream: FakeUpstream, tmp_path: Path, claude_answers: bool
) -> None:
    """Memory stores and resends the client's own message objects (no copies): no provider may change them in place."""
    if not claude_answers:
        claude.then(overloaded(), overloaded(), overloaded(), overloaded())
    routes = textwrap.dedent(fallback(claude_target(claude), upstream, codes="529"))
    client = await gateway(f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}\n' + routes)
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}", "memoryId": "conv"}
    async with aiohttp.ClientSession() as session:
        for turn in (copy.deepcopy(KEPT), [{"role": "user", "content": "q3"}]):
            async with session.post(root(client) + "/chat/completions", json={"model": "chat", "messages": turn}, headers=headers) as r:
                assert r.status == 200, await r.text()
        async with session.get(f"{root(client)}/memory/conv", headers=headers) as r:
            stored = (await r.json())["messages"]  # from the store's cache: what later turns resend
    assert [{k: v for k, v in m.items() if k != "createdAt"} for m in stored[:4]] == KEPT[1:5]  # as sent, and when stored
    if not claude_answers:  # the second target got the messages exactly as the client sent them
        assert upstream.requests[0].body["messages"] == KEPT
        assert upstream.requests[1].body["messages"][:5] == KEPT


async def test_a_529_does_not_fall_back_on_429_only(
    gateway: Gateway, claude: FakeAnthropic, upstream: FakeUpstream
) -> None:
    claude.then(overloaded())
    client = await gateway(fallback(claude_target(claude), upstream, codes="429"))
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert caught.value.status_code == 529
    assert caught.value.body["type"] == "overloaded_error"  # type: ignore[index]
    assert upstream.calls == 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_an_unreachable_target_falls_back(
    gateway: Gateway, upstream: FakeUpstream, stream: bool
) -> None:
    client = await gateway(fallback(claude_target("http://127.0.0.1:1"), upstream))
    raw = await client.chat.completions.with_raw_response.create(
        model="chat", messages=MESSAGES, stream=stream
    )
    assert raw.headers["x-gateway-target"] == "openai"
    _, text = await scrape_text(client)
    assert (
        'gateway_upstream_requests_total{outcome="connect_error",provider="anthropic",route="chat",target="claude"} 1.0'
        in text
    )


async def test_an_unreachable_target_alone_is_a_502(gateway: Gateway) -> None:
    client = await gateway(f"routes: {{chat: {claude_target('http://127.0.0.1:1')}}}")
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert caught.value.status_code == 502
    assert "claude: 502 cannot connect to upstream" in caught.value.message
    assert caught.value.code == "upstream_unavailable"


@pytest.mark.parametrize("cut", [False, True], ids=["clean-end", "connection-dropped"])
async def test_a_stream_that_breaks_off_ends_with_an_error_and_no_done(
    gateway: Gateway, claude: FakeAnthropic, cut: bool
) -> None:
    claude.then(Answer(events=message_events("Hel", "lo", complete=False), cut=cut))
    client = await gateway(single(claude))
    status, body = await post_raw(client, {"model": "chat", "messages": MESSAGES, "stream": True})
    assert status == 200
    events = data_events(body)
    assert b"[DONE]" not in body
    assert "".join(orjson.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1]) == "Hello"
    error = orjson.loads(events[-1])["error"]
    assert error["code"] == "upstream_stream_error" and error["message"].startswith("claude: ")

    claude.then(Answer(events=message_events("Hel", "lo", complete=False), cut=cut))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError):
        async for _ in stream:
            pass
    _, text = await scrape_text(client)
    assert (
        'gateway_upstream_requests_total{outcome="stream_error",provider="anthropic",route="chat",target="claude"} 2.0'
        in text
    )


@pytest.mark.parametrize(
    "answer",
    [{"id": "msg_1", "type": "message"}, b"<html>not json</html>"],
    ids=["not-a-message", "not-json"],
)
async def test_a_malformed_answer_falls_back(
    gateway: Gateway, claude: FakeAnthropic, upstream: FakeUpstream, answer: dict[str, Any] | bytes
) -> None:
    claude.then(Answer(body=answer))
    client = await gateway(fallback(claude_target(claude), upstream))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
    assert raw.headers["x-gateway-target"] == "openai"


async def test_a_malformed_answer_alone_is_a_502_without_litellm_s_traceback(
    gateway: Gateway, claude: FakeAnthropic
) -> None:
    claude.then(Answer(body={"id": "msg_1", "type": "message"}))
    client = await gateway(single(claude))
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert caught.value.status_code == 502
    assert "claude: 502 upstream answer could not be read" in caught.value.message
    assert "Traceback" not in caught.value.message


async def test_a_stream_without_any_answer_falls_back(
    gateway: Gateway, claude: FakeAnthropic, upstream: FakeUpstream
) -> None:
    claude.then(Answer(events=[b'event: ping\ndata: {"type": "ping"}\n\n']))
    client = await gateway(fallback(claude_target(claude), upstream))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES, stream=True)
    assert raw.headers["x-gateway-target"] == "openai"


async def test_a_client_that_leaves_releases_the_upstream_stream(
    gateway: Gateway, claude: FakeAnthropic
) -> None:
    left, never = asyncio.Event(), asyncio.Event()
    events = message_events("Hel", *["lo"] * 50)  # the gateway notices the client left on a write
    claude.then(Answer(events=[*events[:4], left, *events[4:54], never, *events[54:]]))
    client = await gateway(single(claude))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    await stream.__aiter__().__anext__()
    await stream.close()
    left.set()
    await asyncio.wait_for(claude.disconnected.wait(), 5)


async def test_an_answer_over_max_response_bytes_is_refused(gateway: Gateway, claude: FakeAnthropic) -> None:
    claude.text = "x" * 5000
    client = await gateway("server: {maxResponseBytes: 4096}\n" + single(claude))
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert caught.value.status_code == 502 and "larger than server.maxResponseBytes" in caught.value.message


# ---------------------------------------------------------------- memory


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_memory_through_an_anthropic_target(
    gateway: Gateway, claude: FakeAnthropic, tmp_path: Path, stream: bool
) -> None:
    client = await gateway(f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}\n' + single(claude))
    headers = {"memoryId": "conv"}

    async def ask(text: str) -> str:
        messages = [{"role": "user", "content": text}]
        if not stream:
            answer = await client.chat.completions.create(
                model="chat", messages=messages, extra_headers=headers
            )
            return answer.choices[0].message.content or ""
        parts = await client.chat.completions.create(
            model="chat", messages=messages, extra_headers=headers, stream=True
        )
        return "".join([p.choices[0].delta.content or "" async for p in parts if p.choices])

    assert await ask("q1") == "Hello from Claude"
    assert await ask("q2") == "Hello from Claude"
    assert claude.requests[1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "q1"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello from Claude"}]},
        {"role": "user", "content": [{"type": "text", "text": "q2"}]},
    ]
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{root(client)}/memory/conv", headers={"Authorization": f"Bearer {GATEWAY_KEY}"}
        ) as response,
    ):
        stored = await response.json()
    assert [m["content"] for m in stored["messages"]] == [
        "q1",
        "Hello from Claude",
        "q2",
        "Hello from Claude",
    ]


# ---------------------------------------------------------------- what a client must not control or see


DECOY = "http://decoy.invalid"  # replaced by the decoy fake's URL


@pytest.mark.parametrize(
    "hostile",
    [
        {"api_base": DECOY},
        {"base_url": DECOY},
        {"api_key": "client-key", "api_base": DECOY},
        {"custom_llm_provider": "openai", "api_base": DECOY},
        {"extra_headers": {"x-api-key": "client-key"}},
        {"mock_response": "pwned"},
    ],
    ids=lambda hostile: ",".join(hostile),
)
async def test_a_body_cannot_choose_where_the_operator_key_goes(
    gateway: Gateway, claude: FakeAnthropic, aiohttp_server: Any, hostile: dict[str, Any]
) -> None:
    decoy = await start_anthropic(aiohttp_server, text="pwned")
    hostile = {k: decoy.url if v == DECOY else v for k, v in hostile.items()}
    client = await gateway(single(claude))
    answer = await client.chat.completions.create(
        model="chat", messages=MESSAGES, extra_body={**hostile, "top_k": 3}
    )
    assert answer.choices[0].message.content == "Hello from Claude"
    assert decoy.calls == 0
    sent = claude.requests[0]
    assert sent.headers["x-api-key"] == KEY
    assert sent.body["top_k"] == 3  # an allowed provider parameter still passes
    assert not set(hostile) & set(sent.body)


async def test_the_api_key_never_reaches_a_client(gateway: Gateway, claude: FakeAnthropic) -> None:
    echoed = Answer(401, anthropic_error("authentication_error", f"invalid x-api-key {KEY}"))
    claude.then(echoed, echoed)
    client = await gateway(single(claude))
    with pytest.raises(openai.AuthenticationError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert "claude: 401 invalid x-api-key " in caught.value.message
    assert KEY not in caught.value.response.text and KEY not in str(caught.value.response.headers)
    status, body = await post_raw(client, {"model": "chat", "messages": MESSAGES, "stream": True})
    assert status == 401 and b"invalid x-api-key " in body and KEY.encode() not in body


async def test_litellm_logs_no_request_at_debug_level(
    gateway: Gateway, claude: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = await gateway(single(claude))
    await client.chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "prompt-marker-7"}]
    )
    litellm_records = [r for r in caplog.records if r.name in LOGGERS]
    assert not [r for r in litellm_records if "prompt-marker-7" in r.getMessage() or KEY in r.getMessage()]
    assert all(not logging.getLogger(name).handlers for name in LOGGERS)


# ---------------------------------------------------------------- the pure parts


def _target() -> Any:
    return parse_config(f"routes: {{r: {{provider: anthropic, apiKey: {KEY}}}}}").routes["r"].first_target


def _response(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        status, headers=headers, request=httpx.Request("POST", "http://upstream/v1/messages")
    )


def test_rate_limit_maps_to_a_429_reply_with_retry_after() -> None:
    body = '{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'
    exc = provider.litellm.RateLimitError(
        f"AnthropicException - {body}", "anthropic", "claude", response=_response(429)
    )
    exc.litellm_response_headers = httpx.Headers(
        {"retry-after": "7", "x-ratelimit-remaining-requests": "0", "server": "x"}
    )
    failure = map_failure(exc, _target())
    assert isinstance(failure, Reply) and failure.status == 429
    assert failure.headers == {"retry-after": "7", "x-ratelimit-remaining-requests": "0"}
    assert orjson.loads(failure.body) == {
        "error": {"message": "slow down", "type": "rate_limit_error", "param": None, "code": None}
    }


def test_an_overload_reported_as_500_is_a_529() -> None:
    exc = provider.litellm.InternalServerError(
        'AnthropicError - {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
        "anthropic",
        "claude",
    )
    failure = map_failure(exc, _target())
    assert isinstance(failure, Reply) and failure.status == 529


def test_the_provider_s_error_is_read_from_litellm_s_message() -> None:
    text = (
        'AnthropicException - {"type":"error","error":{"type":"invalid_request_error","message":"bad field"}}'
    )
    traceback = '\nTraceback (most recent call last):\n  File "x.py", line 1, in f\n    {"not": json}'
    exc = provider.litellm.BadRequestError(text + traceback, "claude", "anthropic")
    failure = map_failure(exc, _target())
    assert isinstance(failure, Reply) and failure.status == 400
    assert orjson.loads(failure.body)["error"] == {
        "message": "bad field",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


def test_a_timeout_is_a_504_transport_error() -> None:
    failure = map_failure(provider.litellm.Timeout("Connection timed out", "claude", "anthropic"), _target())
    assert isinstance(failure, TransportError) and (failure.status, failure.kind) == (504, "timeout")


def test_a_message_with_the_key_is_masked() -> None:
    exc = provider.litellm.InternalServerError(f"AnthropicException - bad key {KEY}", "anthropic", "claude")
    failure = map_failure(exc, _target())
    assert isinstance(failure, Reply) and KEY.encode() not in failure.body


def test_a_provider_5xx_behind_litellm_s_generic_500_wins() -> None:
    class ProviderError(Exception):
        status_code = 503

    exc = provider.litellm.InternalServerError("GeminiException - unavailable", "gemini", "gemini-pro")
    exc.__cause__ = ProviderError()
    failure = map_failure(exc, _target())
    assert isinstance(failure, Reply) and failure.status == 503


class _Chunk:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def model_dump(self, *, exclude_none: bool) -> dict[str, Any]:
        return dict(self.data)


class _Stream:
    """A litellm-like chunk stream; `finished` mimics litellm's record of the provider's finish reason."""

    def __init__(self, *chunks: dict[str, Any], finished: bool | None = None) -> None:
        self._chunks = [_Chunk(c) for c in chunks]
        self.closed = False
        if finished is not None:
            self.received_finish_reason = "stop" if finished else None

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> _Chunk:
        if not self._chunks:
            raise StopAsyncIteration
        return self._chunks.pop(0)

    async def aclose(self) -> None:
        self.closed = True


class _TextStream:
    """Like litellm's text-completion stream: no aclose of its own, the chat stream inside it."""

    def __init__(self, inner: _Stream) -> None:
        self.completion_stream = inner

    def __aiter__(self) -> _TextStream:
        return self

    async def __anext__(self) -> _Chunk:
        return await self.completion_stream.__anext__()


def _piece(text: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta = {"content": text} if text else {}
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


async def _drain(events: ChunkEvents) -> list[bytes | None]:
    seen: list[bytes | None] = []
    while batch := await events.next_batch():
        seen += [event.data for event in batch]
    return seen


@pytest.mark.parametrize(
    ("chunks", "finished", "done"),
    [
        ([_piece("a"), _piece(finish="stop")], None, True),
        ([_piece("a")], None, False),  # no finish reason at all
        ([_piece("a"), _piece(finish="stop")], True, True),
    ],
    ids=["finished", "no-finish", "finish-the-provider-sent"],
)
async def test_done_follows_only_a_finished_answer(
    chunks: list[dict[str, Any]], finished: bool | None, done: bool
) -> None:
    events = ChunkEvents(_Stream(*chunks, finished=finished), _target(), {})
    seen = await _drain(events)
    assert (seen[-1] == b"[DONE]") is done
    assert orjson.loads(seen[0] or b"")["choices"][0]["delta"] == {"content": "a"}


async def test_a_finish_litellm_made_up_ends_the_stream_with_an_error() -> None:
    """With litellm's record of the provider's finish out of reach (its fallback), the finish is taken at its word."""
    events = ChunkEvents(_Stream(_piece("a"), _piece(finish="stop"), finished=False), _target(), {})
    assert await events.next_batch()
    if not litellm_internals.PRIVATE:
        assert await _drain(events) == [orjson.dumps(_piece(finish="stop")), b"[DONE]"]
        return
    with pytest.raises(TransportError) as caught:
        await events.next_batch()
    assert caught.value.kind == "stream_error"


@pytest.mark.parametrize("nested", [False, True], ids=["chat", "text-completion"])
async def test_closing_the_events_closes_the_litellm_stream(nested: bool) -> None:
    """A text-completion stream is closed by the stream inside it; in litellm_internals' fallback, left open."""
    inner = _Stream(_piece("a"), _piece("b"))
    events = ChunkEvents(_TextStream(inner) if nested else inner, _target(), {})
    await events.next_batch()
    await events.close()
    assert inner.closed is (litellm_internals.PRIVATE or not nested)
    assert await events.next_batch() == []


# ---------------------------------------------------------------- litellm is imported only when needed

_PROBE = HOSTS_AUDIT + """
import asyncio, json, os, sys

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from gateway.config.loader import parse_config
from gateway.server.app import create_app
from tests.support.fakes import FakeUpstream
from tests.support.fakes_anthropic import FakeAnthropic


async def main(provider):
    fake = FakeAnthropic() if provider == "anthropic" else FakeUpstream()
    upstream = TestServer(fake.app())
    await upstream.start_server()
    url = str(upstream.make_url("")).rstrip("/") + ("" if provider == "anthropic" else "/v1")
    beta = "headers: {anthropic-beta: prompt-caching-2024-07-31}"  # litellm looks its beta headers up
    target = f'provider: {provider}, baseUrl: "{url}", apiKey: k, overrideParams: {{model: m}}, {beta}'
    config = parse_config(f"routes: {{chat: {{{target}}}}}")
    gateway = TestServer(create_app(config))
    await gateway.start_server()
    body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}
    async with ClientSession() as session, session.post(gateway.make_url("/v1/chat/completions"), json=body) as answer:
        assert answer.status == 200, await answer.text()
    await gateway.close()
    await upstream.close()


asyncio.run(main(sys.argv[1]))
print(json.dumps({"litellm": "litellm" in sys.modules, "hosts": sorted(hosts), "dotenv": "GATEWAY_DOTENV_PROBE" in os.environ}))
"""


def _probe(provider: str, cwd: Path) -> dict[str, Any]:
    """Run a gateway for one request in a fresh process, in `cwd` (holding a `.env` file)."""
    (cwd / ".env").write_text("GATEWAY_DOTENV_PROBE=1\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, provider],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_an_all_openai_config_never_imports_litellm(tmp_path: Path) -> None:
    assert _probe("openai", tmp_path)["litellm"] is False


def test_an_anthropic_target_imports_litellm_and_talks_only_to_its_upstream(tmp_path: Path) -> None:
    result = _probe("anthropic", tmp_path)
    assert result["litellm"] is True
    assert set(result["hosts"]) <= {"127.0.0.1", "localhost", "::1"}, result["hosts"]
    assert result["dotenv"] is False  # litellm's import did not load the working directory's .env


async def test_litellm_does_not_retry_by_itself(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(
        Step(status=429, body=error_body(429), headers={"retry-after": "0"}),
        Step(status=500, body=error_body(500)),
    )
    target = (
        f'provider: azure, baseUrl: "{upstream.url}", apiKey: k, providerParams: {{apiVersion: "2024-06-01"}}'
    )
    client = await gateway(f"routes: {{chat: {{{target}, overrideParams: {{model: m}}}}}}")
    for status in (429, 500):
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model="chat", messages=MESSAGES)
        assert caught.value.status_code == status
    assert upstream.calls == 2
    assert upstream.requests[0].path == "/v1/openai/deployments/m/chat/completions"


def test_a_python_error_behind_litellm_s_500_is_the_attempt_s_failure_not_an_upstream_500() -> None:
    exc = provider.litellm.InternalServerError("AnthropicException - 'ascii' codec can't encode", "anthropic", "claude")
    exc.__cause__ = UnicodeEncodeError("ascii", "café", 3, 4, "ordinal not in range(128)")
    failure = map_failure(exc, _target())
    assert isinstance(failure, TransportError) and failure.status == 502
    assert "UnicodeEncodeError" in failure.detail and "café" not in failure.detail


async def test_a_litellm_target_whose_call_cannot_be_made_is_a_502_its_fallback_answers(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    """A header value httpx refuses (the loader would refuse it; the runtime must hold alone)."""
    from tests.support.configs import with_targets

    text = f"""
        routes:
          alone: {{provider: anthropic, apiKey: k, baseUrl: "{upstream.url.removesuffix('/v1')}"}}
          backed:
            strategy: {{mode: fallback}}
            targets:
              - {{name: broken, provider: anthropic, apiKey: k, baseUrl: "{upstream.url.removesuffix('/v1')}"}}
              - {{name: steady, provider: openai, apiKey: k, baseUrl: "{upstream.url}"}}
    """
    config = with_targets(parse_config(textwrap.dedent(text)), {"alone": {"headers": {"x-team": "café"}},
                                                                 "broken": {"headers": {"x-team": "café"}}})
    client = await gateway(config)
    messages: Any = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="alone", messages=messages)
    assert caught.value.status_code == 502
    reply = await client.chat.completions.with_raw_response.create(model="backed", messages=messages)
    assert reply.http_response.status_code == 200
