"""The request path's side of governance (gateway.server.admissions), with a recording governor (tests/support/governors).

Every model request is admitted once before memory or an upstream is touched, and settled once
when it ends (answered, failed upstream, refused by its checks, left by its client), with the
tokens and spend the upstream reported; a limited key's answers carry x-ratelimit-*, the
upstream's own renamed x-upstream-ratelimit-*. The limits themselves are tests/governance's.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from aiohttp import web

from gateway.core.errors import PermissionDeniedError, RateLimitedError
from gateway.core.ratelimit_headers import quota_headers, retry_headers
from gateway.governance.admission import Admission
from gateway.observe.trace import Trace
from gateway.server import admissions
from gateway.server.bodies import OFF_LOOP_BYTES
from gateway.server.keys import ADMISSION, GOVERNOR, STREAM_STARTED, TRACE
from gateway.server.metering import METER, Meter
from tests.support.fakes import FakeUpstream, Step, chat_completion, stream_of, usage_chunk
from tests.support.gateway import GATEWAY_KEY, KEYS, Gateway, app_of, requests_ended
from tests.support.governors import REQUESTS, TOKENS, Recorder, recorder

__all__ = ["recorder"]  # the fixture

UPSTREAM_LIMITS = {"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999"}
HELLO = [{"role": "user", "content": "hello there"}]  # 11 characters: 3 tokens estimated


def config(upstream: FakeUpstream, tmp_path: Path, *, model: str = "") -> str:
    override = f", overrideParams: {{model: {model}}}" if model else ""
    target = f'{{provider: openai, baseUrl: "{upstream.url}", apiKey: up-key{override}}}'
    return f"""
{KEYS}
memory: {{store: sqlite, path: "{tmp_path / 'memory.db'}"}}
routes:
  chat: {target}
"""


async def test_an_answer_carries_the_key_s_quotas_and_the_upstream_s_renamed(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path
) -> None:
    upstream.default = Step(body=chat_completion(), headers=UPSTREAM_LIMITS)
    client = await gateway(config(upstream, tmp_path))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=HELLO, max_tokens=50)
    assert raw.parse().choices[0].message.content == "Hello from upstream"
    for name, value in quota_headers(REQUESTS, TOKENS).items():
        assert raw.headers[name] == value
    assert raw.headers["x-upstream-ratelimit-limit-requests"] == "10000"
    assert raw.headers["x-upstream-ratelimit-remaining-requests"] == "9999"
    assert recorder.asked == [("team-a", "chat", 3 + 50)]
    [settled] = recorder.settled
    assert settled.admission is recorder.admitted[0]
    assert (settled.tokens, settled.cost_usd) == (5 + 3, 0.0)  # up-model has no price


async def test_spend_is_priced_as_the_cost_metric_prices_it(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, tmp_path, model="gpt-4o-mini"))
    await client.chat.completions.create(model="chat", messages=HELLO)
    [settled] = recorder.settled
    assert settled.tokens == 8
    assert settled.cost_usd == pytest.approx(5 * 1.5e-07 + 3 * 6e-07)


async def test_a_stream_is_asked_for_its_usage_and_settled_after_its_last_chunk(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path
) -> None:
    """Metrics off: the usage is asked for the governor's sake, and kept from the client who did not ask."""
    upstream.default = Step(events=[*stream_of("Hi", done=False), usage_chunk(40, 2), b"data: [DONE]\n\n"])
    client = await gateway(config(upstream, tmp_path) + "metrics: {enabled: false}\n")
    chunks = [chunk async for chunk in await client.chat.completions.create(model="chat", messages=HELLO, stream=True)]
    assert all(chunk.usage is None for chunk in chunks)
    assert upstream.requests[0].body["stream_options"] == {"include_usage": True}
    [settled] = recorder.settled
    assert settled.tokens == 42


async def test_an_upstream_failure_is_settled_once_giving_everything_back(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path
) -> None:
    upstream.default = Step(status=400, body={"error": {"message": "no", "type": "invalid_request_error"}}, headers=UPSTREAM_LIMITS)
    client = await gateway(config(upstream, tmp_path))
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="chat", messages=HELLO)
    assert caught.value.response.headers["x-ratelimit-limit-requests"] == "60"
    assert caught.value.response.headers["x-upstream-ratelimit-limit-requests"] == "10000"
    assert [(s.tokens, s.cost_usd) for s in recorder.settled] == [(0, 0.0)]  # the upstream generated nothing


async def test_a_request_its_checks_refuse_after_admission_used_nothing(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, tmp_path))
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="chat", messages=[{"role": "user", "content": 7}])  # type: ignore[misc, list-item]
    assert upstream.calls == 0
    assert [s.tokens for s in recorder.settled] == [0]


async def test_a_client_gone_mid_stream_is_settled_once_with_what_it_was_relayed(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path
) -> None:
    """The prompt's 3 estimated tokens and the 10 characters relayed (3 tokens), priced as gpt-4o-mini."""
    hold = asyncio.Event()
    upstream.default = Step(events=[*stream_of("Hello, you", done=False)[:2], hold])
    client = await gateway(config(upstream, tmp_path, model="gpt-4o-mini"))
    stream = await client.chat.completions.create(model="chat", messages=HELLO, max_tokens=50, stream=True)
    async for part in stream:
        if part.choices[0].delta.content:
            break
    await stream.close()
    await requests_ended(client)
    hold.set()
    assert [(s.tokens, s.cost_usd) for s in recorder.settled] == [(3 + 3, pytest.approx(3 * 1.5e-07 + 3 * 6e-07))]


@pytest.mark.parametrize("refusal", [
    RateLimitedError("Rate limit reached for requests.", headers={**retry_headers(2.5), **quota_headers(REQUESTS, None)}),
    PermissionDeniedError("This key may not use route 'chat'.", code="route_not_allowed"),
])  # fmt: skip
async def test_a_refused_request_never_reaches_memory_or_the_upstream(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path, refusal: Exception
) -> None:
    recorder.refusal = refusal  # type: ignore[assignment]
    client = await gateway(config(upstream, tmp_path))
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="chat", messages=HELLO, extra_headers={"x-memory-id": "conv-1"})
    error = caught.value
    assert error.status_code in (403, 429)
    if error.status_code == 429:
        assert isinstance(error, openai.RateLimitError)
        assert error.code == "rate_limit_exceeded"
        assert (error.response.headers["retry-after"], error.response.headers["retry-after-ms"]) == ("3", "2500")
        assert error.response.headers["x-ratelimit-remaining-requests"] == "59"
    else:
        assert error.code == "route_not_allowed"
    assert upstream.calls == 0
    assert recorder.settled == []
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    async with aiohttp.ClientSession(headers=headers) as session, session.get(f"{client.base_url}memory/conv-1") as answer:
        assert answer.status == 404  # the turn never started: nothing stored


async def test_a_refusal_on_the_messages_api_takes_anthropic_s_shape(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path
) -> None:
    recorder.refusal = RateLimitedError("Rate limit reached for tokens.", headers=retry_headers(1.2))
    client = await gateway(config(upstream, tmp_path))
    root = str(client.base_url).rstrip("/").removesuffix("/v1")
    async with anthropic.AsyncAnthropic(base_url=root, api_key=GATEWAY_KEY, max_retries=0) as claude:
        with pytest.raises(anthropic.RateLimitError) as caught:
            await claude.messages.create(model="chat", max_tokens=64, messages=HELLO)  # type: ignore[arg-type]
    assert caught.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    assert caught.value.response.headers["retry-after"] == "2"
    assert upstream.calls == 0


async def test_every_model_endpoint_is_admitted(gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path) -> None:
    """Completions, embeddings, responses, messages, count_tokens and a surface endpoint (moderations)."""
    client = await gateway(config(upstream, tmp_path))
    vector = {"object": "embedding", "index": 0, "embedding": [0.5]}
    upstream.default = Step(body={"object": "list", "data": [vector], "model": "m", "usage": {"prompt_tokens": 2, "total_tokens": 2}})
    await client.embeddings.create(model="chat", input="abcdefgh")
    await client.moderations.create(model="chat", input="abcd")
    upstream.default = Step(body={"id": "c", "object": "text_completion", "created": 1, "model": "m", "choices": []})
    await client.completions.create(model="chat", prompt="abcd", max_tokens=7)
    upstream.default = Step(body=chat_completion())
    await client.responses.create(model="chat", input="abcd", max_output_tokens=20)
    root = str(client.base_url).rstrip("/").removesuffix("/v1")
    async with anthropic.AsyncAnthropic(base_url=root, api_key=GATEWAY_KEY, max_retries=0) as claude:
        await claude.messages.create(model="chat", max_tokens=9, messages=[{"role": "user", "content": "abcd"}])
        await claude.messages.count_tokens(model="chat", messages=[{"role": "user", "content": "abcd"}])
    assert recorder.asked == [
        ("team-a", "chat", 2), ("team-a", "chat", 1), ("team-a", "chat", 1 + 7),
        ("team-a", "chat", 1 + 20), ("team-a", "chat", 1 + 9), ("team-a", "chat", 0),
    ]  # fmt: skip
    assert len(recorder.settled) == 6


async def test_a_large_body_is_estimated_on_a_body_thread(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    estimate = admissions.prompt_tokens

    def prompt_tokens(payload: Any) -> int:
        threads.append(threading.current_thread().name)
        return estimate(payload)

    monkeypatch.setattr(admissions, "prompt_tokens", prompt_tokens)
    client = await gateway(config(upstream, tmp_path))
    await client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "x" * OFF_LOOP_BYTES}])
    await client.chat.completions.create(model="chat", messages=HELLO)
    assert threads[0].startswith("gateway-bodies") and threads[1] == threading.current_thread().name
    assert recorder.asked[0][2] == OFF_LOOP_BYTES // 4


async def test_a_key_the_governor_does_not_limit_keeps_the_upstream_s_headers(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path
) -> None:
    recorder.requests = recorder.tokens = None
    upstream.default = Step(body=chat_completion(), headers=UPSTREAM_LIMITS)
    client = await gateway(config(upstream, tmp_path))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=HELLO)
    assert raw.headers["x-ratelimit-limit-requests"] == "10000"
    assert "x-upstream-ratelimit-limit-requests" not in raw.headers
    assert len(recorder.settled) == 1


async def test_without_limits_nothing_is_wired_in_and_headers_pass_as_they_came(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.default = Step(body=chat_completion(), headers=UPSTREAM_LIMITS)
    client = await gateway(config(upstream, tmp_path))
    app = app_of(client)
    assert not admissions.is_governed(app[GOVERNOR])
    assert not app.on_response_prepare  # nothing awaited as an answer starts
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=HELLO)
    assert raw.headers["x-ratelimit-limit-requests"] == "10000"
    assert not any(name.lower().startswith("x-upstream-") for name in raw.headers)


@pytest.mark.parametrize(("failed", "tokens"), [(False, 5 + 10), (True, 0)])
def test_a_stream_that_raised_after_it_started_is_settled_as_failed(failed: bool, tokens: int) -> None:
    """Without usage, a stream under way is charged what it relayed, unless its handler raised: then nothing."""
    governor = Recorder()
    trace = Trace()
    trace.attempts = 1  # it reached an upstream
    meter = Meter(5)
    meter.characters = 40  # 10 tokens of answer relayed
    state = {ADMISSION: Admission("a", "chat", 20), TRACE: trace, METER: meter, STREAM_STARTED: web.StreamResponse()}
    admissions.settle_ended(governor, state, status=200, failed=failed)
    assert [settled.tokens for settled in governor.settled] == [tokens]


async def test_a_governor_failing_to_settle_fails_neither_the_answer_nor_the_request_s_end(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the governor broke")

    monkeypatch.setattr(recorder, "settle", broken)
    client = await gateway(config(upstream, tmp_path))
    with caplog.at_level(logging.ERROR, logger="gateway"):
        answer = await client.chat.completions.create(model="chat", messages=HELLO)
        await requests_ended(client)  # the request ended: a reload would not wait for it for ever
    assert answer.choices[0].message.content == "Hello from upstream"
    assert "limits: settling a request of key 'team-a' failed" in caplog.text
    assert (await client.chat.completions.create(model="chat", messages=HELLO)).choices  # and the next is served
