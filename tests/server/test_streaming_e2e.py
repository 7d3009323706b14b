"""Streaming end to end: commit point, failures after it, client disconnects."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from tests.support.fakes import FakeUpstream, Step, chunk, error_body, stream_of
from tests.support.gateway import Gateway

MESSAGES = [{"role": "user", "content": "stream please"}]


def single(upstream: FakeUpstream, extra: str = "") -> str:
    return f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k{extra}}}}}'


def fallback(first: FakeUpstream, second: FakeUpstream, extra: str = "") -> str:
    return f"""
    routes:
      chat:
        strategy: {{mode: fallback, onStatusCodes: [429]}}
        targets:
          - {{name: first, provider: openai, baseUrl: "{first.url}", apiKey: k{extra}}}
          - {{name: second, provider: openai, baseUrl: "{second.url}", apiKey: k}}
    """


async def collect(stream: openai.AsyncStream) -> str:
    text = ""
    async for part in stream:
        if part.choices and part.choices[0].delta.content:
            text += part.choices[0].delta.content
    return text


async def test_stream_is_relayed_with_usage(gateway: Gateway, upstream: FakeUpstream) -> None:
    usage = b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}\n\n'
    events = stream_of("Hel", "lo")
    events.insert(-1, usage)
    upstream.then(Step(events=events))
    client = await gateway(single(upstream))
    stream = await client.chat.completions.create(
        model="chat", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    parts = [part async for part in stream]
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == "Hello"
    assert parts[-1].usage is not None and parts[-1].usage.total_tokens == 5
    assert upstream.requests[0].body["stream_options"] == {"include_usage": True}


async def test_events_are_relayed_without_buffering(gateway: Gateway, upstream: FakeUpstream) -> None:
    release = asyncio.Event()
    upstream.then(Step(events=[chunk({"role": "assistant", "content": "first"}), release, *stream_of("second")[1:]]))
    client = await gateway(single(upstream))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    iterator = stream.__aiter__()
    first = await asyncio.wait_for(iterator.__anext__(), 5)  # arrives while the upstream still holds back
    assert first.choices[0].delta.content == "first"
    release.set()
    rest = [part async for part in iterator]
    assert any(p.choices[0].delta.content == "second" for p in rest)


async def test_stream_fallback_on_status_before_commit(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(status=429, body=error_body(429)))
    second.then(Step(events=stream_of("from second")))
    client = await gateway(fallback(first, second))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES, stream=True)
    assert raw.headers["x-gateway-target"] == "second"
    assert await collect(raw.parse()) == "from second"


async def test_error_event_before_first_chunk_falls_back(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(events=[b": keep-alive\n\n", b"data: " + orjson.dumps(error_body(500, "model crashed")) + b"\n\n"]))
    second.then(Step(events=stream_of("rescued")))
    client = await gateway(fallback(first, second))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES, stream=True)
    assert raw.headers["x-gateway-attempts"] == "2"
    assert await collect(raw.parse()) == "rescued"


async def test_first_event_timeout_falls_back(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(events=[3.0, *stream_of("late")]))
    second.then(Step(events=stream_of("on time")))
    client = await gateway(fallback(first, second, extra=", timeout: 0.3"))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    assert await collect(stream) == "on time"
    await asyncio.wait_for(first.disconnected.wait(), 5)


async def test_all_stream_attempts_failing_is_a_plain_error(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(status=503, body=error_body(503, "busy")))
    client = await gateway(single(upstream))
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    assert caught.value.status_code == 503 and "chat: 503 busy" in caught.value.message


@pytest.mark.parametrize(
    ("tail", "extra", "expected"),
    [
        ([chunk({"content": "partial"})], "", "cut off"),  # then a reset
        ([chunk({"content": "partial"}), 3.0], ", streamIdleTimeout: 0.3", "no stream event for 0.3s"),
        ([b"data: " + orjson.dumps(error_body(500, "exploded")) + b"\n\n"], "", "exploded"),
    ],
    ids=["reset", "idle-timeout", "error-event"],
)
async def test_failure_after_commit_raises_in_the_sdk(
    gateway: Gateway, upstream: FakeUpstream, tail: list, extra: str, expected: str
) -> None:
    upstream.then(Step(events=[chunk({"role": "assistant", "content": "Hi"}), *tail], reset=True))
    client = await gateway(single(upstream, extra))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    received = []
    with pytest.raises(openai.APIError) as caught:
        async for part in stream:
            received.append(part)
    assert received, "the committed part must reach the client before the error"
    assert expected in caught.value.message or expected in str(caught.value.body)


async def test_stream_without_done_is_not_a_clean_end(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=stream_of("cut", done=False)))
    client = await gateway(single(upstream))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError, match="without \\[DONE\\]"):
        await collect(stream)


async def test_client_disconnect_closes_the_upstream(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=[chunk({"role": "assistant", "content": "Hi"}), 0.2, chunk({"content": "a"}), 30.0, *stream_of("b")]))
    client = await gateway(single(upstream))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    iterator = stream.__aiter__()
    await iterator.__anext__()
    await stream.close()
    await asyncio.wait_for(upstream.disconnected.wait(), 5)


async def test_upstream_answering_json_to_a_stream_request_is_replayed_as_a_stream(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    client = await gateway(single(upstream))
    raw = await client.chat.completions.with_raw_response.create(
        model="chat", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    assert raw.http_response.headers["content-type"].startswith("text/event-stream")
    parts = [part async for part in raw.parse()]
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == "Hello from upstream"
    assert [p.choices[0].finish_reason for p in parts if p.choices][-1] == "stop"
    assert parts[-1].usage is not None and parts[-1].usage.total_tokens == 8


@pytest.mark.parametrize("answer", [{"object": "list", "data": []}, {"choices": []}], ids=["not-a-completion", "no-choices"])
async def test_json_answer_that_is_no_completion_falls_back(gateway: Gateway, make_upstream, answer: dict) -> None:
    first, second = await make_upstream(Step(body=answer)), await make_upstream()
    second.then(Step(events=stream_of("from second")))
    client = await gateway(fallback(first, second))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES, stream=True)
    assert raw.headers["x-gateway-attempts"] == "2"
    assert await collect(raw.parse()) == "from second"


async def test_an_event_that_is_not_json_ends_the_stream_with_an_error(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=[chunk({"role": "assistant", "content": "a"}), b"data: {not json\n\n", *stream_of("b")]))
    client = await gateway(single(upstream))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError, match="not JSON"):
        await collect(stream)


async def test_a_first_event_that_is_not_json_falls_back(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(events=[b"data: <html>oops</html>\n\n", *stream_of("x")]))
    second.then(Step(events=stream_of("from second")))
    client = await gateway(fallback(first, second))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    assert await collect(stream) == "from second"


async def test_mock_provider_streams(gateway: Gateway) -> None:
    client = await gateway("routes: {m: {provider: mock, mock: {chunkSize: 4}}}")
    stream = await client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    parts = [part async for part in stream]
    text = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
    assert text == 'Mock reply: received 1 messages; last user message: "stream please"'
    assert parts[-1].usage is not None


async def test_an_internal_failure_mid_stream_ends_with_an_error_event(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.server import relay

    upstream.then(Step(events=stream_of("a", "b")))
    client = await gateway(single(upstream))
    calls = 0
    original = relay._loads

    def failing(data: bytes) -> Any:  # the relay's parse of each event after the first
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("bug")
        return original(data)

    monkeypatch.setattr(relay, "_loads", failing)
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError, match="failed while relaying"):
        await collect(stream)


async def test_stream_retries_on_the_same_target(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(status=503, body=error_body(503)))
    upstream.then(Step(events=stream_of("second try")))
    client = await gateway(single(upstream, ", retry: {attempts: 1, backoffSeconds: 0.01}"))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES, stream=True)
    assert raw.headers["x-gateway-attempts"] == "2"
    assert await collect(raw.parse()) == "second try"


async def test_completions_stream_is_relayed(gateway: Gateway, upstream: FakeUpstream) -> None:
    piece = b'data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"hi","finish_reason":null,"logprobs":null}]}\n\n'
    upstream.then(Step(events=[piece, b"data: [DONE]\n\n"]))
    client = await gateway(single(upstream))
    stream = await client.completions.create(model="chat", prompt="say hi", stream=True)
    assert [part.choices[0].text async for part in stream] == ["hi"]
    assert upstream.requests[0].path == "/v1/completions"


async def test_nothing_is_written_after_a_stream_finished(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure once the answer is under way never becomes a second HTTP status line in its body."""
    from gateway.server import handlers

    relay = handlers.relay_stream

    async def then_fail(*args: Any, **kwargs: Any) -> Any:
        await relay(*args, **kwargs)
        raise RuntimeError("a bug after the stream")

    monkeypatch.setattr(handlers, "relay_stream", then_fail)
    upstream.then(Step(events=stream_of("whole")))
    client = await gateway(single(upstream))
    base = str(client.base_url).rstrip("/")
    async with aiohttp.ClientSession() as session, session.post(
        f"{base}/chat/completions", json={"model": "chat", "stream": True, "messages": MESSAGES}
    ) as response:
        body = await response.read()
    assert body.endswith(b"data: [DONE]\n\n") and b"HTTP/1.1" not in body


async def test_a_timeout_that_is_not_the_upstream_s_silence_is_not_reported_as_one(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the stream's own idle deadline means "the upstream went quiet"; any other timeout is the gateway's."""
    from gateway.server import relay

    upstream.then(Step(events=stream_of("a", "b")))
    client = await gateway(single(upstream))
    original = relay._loads
    calls = 0

    def timing_out(data: bytes) -> Any:  # the relay's parse of each event after the first
        nonlocal calls
        calls += 1
        if calls == 2:
            raise TimeoutError
        return original(data)

    monkeypatch.setattr(relay, "_loads", timing_out)
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError, match="failed while relaying"):
        await collect(stream)
