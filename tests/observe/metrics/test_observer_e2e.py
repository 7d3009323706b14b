"""Prometheus metrics end to end: what each kind of request counts, and what never becomes a label."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from gateway.config.loader import ConfigError, parse_config
from gateway.observe.metrics import MULTIPROC_ENV
from tests.support.fakes import FakeUpstream, Step, chat_completion, chunk, error_body, stream_of
from tests.support.gateway import GATEWAY_KEY, Gateway, app_of
from tests.support.metrics import parse, root_url, scrape, scrape_text, total, value

MESSAGES = [{"role": "user", "content": "hello"}]


def routes(*targets: str, mode: str = "fallback", extra: str = "") -> str:
    lines = "\n".join(f"          - {t}" for t in targets)
    return f"""
    routes:
      chat:
        strategy: {{mode: {mode}}}
        {extra}
        targets:
{lines}
    """


async def test_a_success_counts_request_attempt_tokens_and_cost(gateway: Gateway, upstream: FakeUpstream) -> None:
    config = f"""
    routes:
      gpt-4o-mini: {{name: main, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}
    """
    client = await gateway(config)
    await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    samples = await scrape(client)
    route = "gpt-4o-mini"
    assert value(samples, "gateway_requests_total", route=route, status_code="200", stream="false") == 1
    assert value(samples, "gateway_request_duration_seconds_count", route=route, stream="false") == 1
    upstream_labels = {"route": route, "target": "main", "provider": "openai"}
    assert value(samples, "gateway_upstream_requests_total", **upstream_labels, outcome="200") == 1
    assert value(samples, "gateway_upstream_duration_seconds_count", **upstream_labels) == 1
    assert value(samples, "gateway_tokens_total", **upstream_labels, kind="prompt") == 5
    assert value(samples, "gateway_tokens_total", **upstream_labels, kind="completion") == 3
    # gpt-4o-mini at litellm's list price: $0.15 / 1M prompt tokens, $0.60 / 1M completion tokens
    assert value(samples, "gateway_cost_usd_total", route=route, target="main") == pytest.approx(5 * 0.15e-6 + 3 * 0.6e-6)
    assert value(samples, "gateway_inflight_requests", route=route) == 0
    assert value(samples, "gateway_config_routes") == 1
    assert total(samples, "gateway_build_info") == 1
    assert not any(name.endswith("_created") for name, _ in samples)


async def test_a_model_not_in_the_price_table_costs_nothing(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    await client.chat.completions.create(model="chat", messages=MESSAGES)
    samples = await scrape(client)
    assert total(samples, "gateway_tokens_total") == 8
    assert total(samples, "gateway_cost_usd_total") == 0


async def test_fallback_and_retry_are_counted_with_their_reasons(
    gateway: Gateway, make_upstream: Any
) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(429, error_body(429)), Step(503, error_body(503)))
    config = routes(
        f'{{name: first, provider: openai, baseUrl: "{first.url}", apiKey: k, retry: {{attempts: 1, backoffSeconds: 0}}}}',
        f'{{name: second, provider: openai, baseUrl: "{second.url}", apiKey: k}}',
    )
    client = await gateway(config)
    await client.chat.completions.create(model="chat", messages=MESSAGES)
    samples = await scrape(client)
    first_labels = {"route": "chat", "target": "first", "provider": "openai"}
    assert value(samples, "gateway_upstream_requests_total", **first_labels, outcome="429") == 1
    assert value(samples, "gateway_upstream_requests_total", **first_labels, outcome="503") == 1
    assert value(samples, "gateway_retries_total", route="chat", target="first", reason="429") == 1
    assert value(samples, "gateway_fallbacks_total", route="chat", from_target="first", reason="503") == 1
    assert value(samples, "gateway_upstream_requests_total", route="chat", target="second", provider="openai", outcome="200") == 1
    assert value(samples, "gateway_requests_total", route="chat", status_code="200", stream="false") == 1


async def test_transport_failures_are_named(gateway: Gateway, make_upstream: Any, unused_tcp_port: int) -> None:
    slow = await make_upstream(Step(body={}, delay=5))
    last = await make_upstream()
    config = routes(
        f'{{name: closed, provider: openai, baseUrl: "http://127.0.0.1:{unused_tcp_port}/v1", apiKey: k}}',
        f'{{name: slow, provider: openai, baseUrl: "{slow.url}", apiKey: k, timeout: 0.2}}',
        f'{{name: bad, provider: openai, baseUrl: "{last.url}", apiKey: k}}',
    )
    last.then(Step(200, b"not json"))
    client = await gateway(config)
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    samples = await scrape(client)
    outcomes = {
        dict(labels)["target"]: dict(labels)["outcome"]
        for (name, labels), v in samples.items()
        if name == "gateway_upstream_requests_total" and v
    }
    assert outcomes == {"closed": "connect_error", "slow": "timeout", "bad": "invalid_response"}
    status = str(caught.value.status_code)
    assert value(samples, "gateway_requests_total", route="chat", status_code=status, stream="false") == 1


async def test_a_stream_reports_first_token_and_usage_without_showing_the_usage_chunk(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    usage = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    events = [
        chunk({"role": "assistant", "content": "Hi"}),
        chunk({}, "stop"),
        b"data: " + orjson.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [], "usage": usage}) + b"\n\n",
        b"data: [DONE]\n\n",
    ]
    upstream.then(Step(events=events), Step(events=list(events)))
    client = await gateway(f'routes: {{chat: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    async with aiohttp.ClientSession() as session:
        body = {"model": "chat", "messages": MESSAGES, "stream": True}
        url = root_url(client) + "/v1/chat/completions"
        async with session.post(url, json=body, headers={"Authorization": f"Bearer {GATEWAY_KEY}"}) as response:
            wire = await response.read()
    assert upstream.requests[0].body["stream_options"] == {"include_usage": True}  # asked for metrics
    assert b"usage" not in wire and wire.endswith(b"data: [DONE]\n\n")  # and kept from the client
    # A client that asks for usage gets it, and it is counted once.
    stream = await client.chat.completions.create(
        model="chat", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    parts = [part async for part in stream]
    assert parts[-1].usage is not None and parts[-1].usage.total_tokens == 9
    samples = await scrape(client)
    labels = {"route": "chat", "target": "up", "provider": "openai"}
    assert value(samples, "gateway_tokens_total", **labels, kind="prompt") == 14
    assert value(samples, "gateway_tokens_total", **labels, kind="completion") == 4
    assert value(samples, "gateway_time_to_first_token_seconds_count", route="chat", target="up") == 2
    assert value(samples, "gateway_requests_total", route="chat", status_code="200", stream="true") == 2
    assert value(samples, "gateway_upstream_requests_total", **labels, outcome="200") == 2


async def test_asking_a_stream_for_usage_keeps_the_client_s_bytes(gateway: Gateway, upstream: FakeUpstream) -> None:
    """The option is added to the body as sent (spacing, key order, numbers as written), not re-serialized."""
    upstream.then(Step(events=stream_of("x")))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    sent = b'{ "model": "chat",\n  "stream": true, "temperature": 1.50, "messages": [{"role": "user", "content": "hi"}] }\n'
    async with aiohttp.ClientSession() as session:
        url = root_url(client) + "/v1/chat/completions"
        headers = {"Authorization": f"Bearer {GATEWAY_KEY}", "Content-Type": "application/json"}
        async with session.post(url, data=sent, headers=headers) as response:
            assert response.status == 200
            await response.read()
    assert upstream.requests[0].raw == sent.rstrip()[:-1] + b',"stream_options":{"include_usage":true}}'


async def test_null_usage_fields_the_gateway_caused_are_removed(gateway: Gateway, upstream: FakeUpstream) -> None:
    """OpenAI adds `"usage": null` to every chunk once include_usage is on; the client did not ask."""
    piece = b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a \\",\\"usage\\":null"},"finish_reason":null}],"usage":null}\n\n'
    end = b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}], "usage": null}\n\n'
    upstream.then(Step(events=[piece, end, b"data: [DONE]\n\n"]))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    parts = [part async for part in stream]
    assert parts[0].choices[0].delta.content == 'a ","usage":null'  # text that looks like the key survives
    assert all("usage" not in part.model_dump(exclude_unset=True) for part in parts)


async def test_stream_usage_can_be_turned_off(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=stream_of("x")))
    client = await gateway(
        f'metrics: {{streamUsage: false}}\nroutes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}'
    )
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    _ = [part async for part in stream]
    assert "stream_options" not in upstream.requests[0].body


async def test_with_metrics_off_streams_are_not_asked_for_usage(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=stream_of("x")))
    client = await gateway(
        f'metrics: {{enabled: false}}\nroutes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}'
    )
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    _ = [part async for part in stream]
    assert "stream_options" not in upstream.requests[0].body


async def test_a_stream_cut_off_counts_as_a_stream_error(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=stream_of("a", "b", done=False)))
    client = await gateway(f'routes: {{chat: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError):
        _ = [part async for part in stream]
    samples = await scrape(client)
    labels = {"route": "chat", "target": "up", "provider": "openai"}
    assert value(samples, "gateway_upstream_requests_total", **labels, outcome="stream_error") == 1
    assert value(samples, "gateway_upstream_requests_total", **labels, outcome="200") == 0
    # the client got a 200 and then an in-band error: counted as the failure it was
    assert value(samples, "gateway_requests_total", route="chat", status_code="502", stream="true") == 1
    assert value(samples, "gateway_requests_total", route="chat", status_code="200", stream="true") == 0


async def test_series_for_failures_exist_before_the_first_one(gateway: Gateway, make_upstream: Any) -> None:
    """A counter first seen at 1 shows no increase: the first 5xx, retry or fallback would be lost."""
    first, second = await make_upstream(), await make_upstream()
    config = routes(
        f'{{name: first, provider: openai, baseUrl: "{first.url}", apiKey: k, retry: {{attempts: 1}}}}',
        f'{{name: second, provider: openai, baseUrl: "{second.url}", apiKey: k}}',
        extra="strategy: {mode: fallback, onStatusCodes: [429, 529]}",
    ).replace("        strategy: {mode: fallback}\n", "")
    client = await gateway(config)
    samples = await scrape(client)
    for status in ("500", "502", "503", "504", "401", "429", "499"):
        for stream in ("true", "false"):
            assert ("gateway_requests_total", frozenset({("route", "chat"), ("status_code", status), ("stream", stream)})) in samples
    first_labels = frozenset({("route", "chat"), ("target", "first"), ("provider", "openai")})
    for outcome in ("200", "429", "529", "503", "timeout", "connect_error", "stream_error"):
        assert ("gateway_upstream_requests_total", first_labels | {("outcome", outcome)}) in samples, outcome
    for reason in ("429", "503", "timeout"):
        assert ("gateway_retries_total", frozenset({("route", "chat"), ("target", "first"), ("reason", reason)})) in samples
    for reason in ("429", "529", "connect_error"):
        assert ("gateway_fallbacks_total", frozenset({("route", "chat"), ("from_target", "first"), ("reason", reason)})) in samples
    # the last target has nowhere to fall back to
    assert not [k for k in samples if k[0] == "gateway_fallbacks_total" and ("from_target", "second") in k[1]]
    assert ("gateway_memory_requests_total", frozenset({("memory_type", "token_window")})) in samples
    buckets = {float(dict(lbls)["le"]) for (n, lbls) in samples if n == "gateway_request_duration_seconds_bucket"}
    assert max(b for b in buckets if b != float("inf")) == 600


async def test_usage_in_any_form_is_kept_from_a_client_that_did_not_ask(gateway: Gateway, upstream: FakeUpstream) -> None:
    usage = {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5}
    first = b'data: {"usage":null,"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"a"},"finish_reason":null}]}\n\n'
    last = {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}
    upstream.then(Step(events=[first, b"data: " + orjson.dumps(last) + b"\n\n", b"data: [DONE]\n\n"]))
    client = await gateway(f'routes: {{chat: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    async with aiohttp.ClientSession() as session:
        body = {"model": "chat", "messages": MESSAGES, "stream": True}
        async with session.post(root_url(client) + "/v1/chat/completions", json=body) as response:
            wire = await response.read()
    assert b"usage" not in wire and wire.count(b"data: ") == 3 and wire.endswith(b"data: [DONE]\n\n")
    samples = await scrape(client)
    assert value(samples, "gateway_tokens_total", route="chat", target="up", provider="openai", kind="prompt") == 4


async def test_a_wrong_key_on_a_model_endpoint_is_counted(gateway: Gateway) -> None:
    client = await gateway(f"auth: {{keys: [{{name: ops, key: {GATEWAY_KEY}}}]}}\nroutes: {{chat: {{provider: mock}}}}")
    async with aiohttp.ClientSession() as session:
        body = {"model": "chat", "messages": MESSAGES}
        async with session.post(root_url(client) + "/v1/chat/completions", json=body) as response:
            assert response.status == 401
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="other", status_code="401", stream="false") == 1


async def test_a_client_that_leaves_ends_the_attempt_as_499(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=chat_completion(), delay=5))
    client = await gateway(f'routes: {{chat: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    pending = asyncio.ensure_future(client.chat.completions.create(model="chat", messages=MESSAGES))
    await upstream.arrived.wait()
    pending.cancel()
    labels = {"route": "chat", "target": "up", "provider": "openai", "outcome": "499"}
    for _ in range(100):
        samples = await scrape(client)
        if value(samples, "gateway_requests_total", route="chat", status_code="499", stream="false"):
            break
        await asyncio.sleep(0.05)
    assert value(samples, "gateway_requests_total", route="chat", status_code="499", stream="false") == 1
    assert value(samples, "gateway_upstream_requests_total", **labels) == 1
    assert value(samples, "gateway_inflight_requests", route="chat") == 0


async def test_a_memory_write_that_fails_mid_stream_counts_as_503(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Any
) -> None:
    from gateway.memory.store import StoreUnavailable
    from gateway.server.keys import MEMORY

    upstream.then(Step(events=stream_of("x")))
    client = await gateway(
        f'routes: {{chat: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}\nmemory: {{store: memory}}'
    )
    store = app_of(client)[MEMORY].store

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise StoreUnavailable("disk on fire")

    store.append = broken
    stream = await client.chat.completions.create(
        model="chat", messages=MESSAGES, stream=True, extra_headers={"memoryId": "m"}
    )
    with pytest.raises(openai.APIError):
        _ = [part async for part in stream]
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="chat", status_code="503", stream="true") == 1
    assert value(samples, "gateway_upstream_requests_total", route="chat", target="up", provider="openai", outcome="200") == 1
    assert value(samples, "gateway_memory_store_duration_seconds_count", store="memory", operation="append") == 1


async def test_a_lock_wait_that_times_out_is_observed(gateway: Gateway, upstream: FakeUpstream) -> None:
    release = asyncio.Event()
    upstream.then(Step(body=chat_completion(), gate=release))
    client = await gateway(
        f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}\n'
        "memory: {store: memory, lockTimeoutSeconds: 0.2}"
    )
    headers = {"memoryId": "busy"}
    holder = asyncio.ensure_future(client.chat.completions.create(model="chat", messages=MESSAGES, extra_headers=headers))
    await upstream.arrived.wait()
    with pytest.raises(openai.ConflictError):
        await client.chat.completions.create(model="chat", messages=MESSAGES, extra_headers=headers)
    release.set()
    await holder
    samples = await scrape(client)
    assert value(samples, "gateway_memory_lock_wait_seconds_count") == 2
    assert value(samples, "gateway_memory_lock_wait_seconds_sum") >= 0.2


def test_a_route_may_not_be_called_other() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config("routes: {other: {provider: mock}}")
    assert caught.value.errors[0].startswith("routes.other: the name 'other' is reserved")


async def test_client_chosen_strings_never_become_labels(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(
        f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}\n'
        'memory: {store: memory}'
    )
    marker = "zz-client-chosen"
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model=f"{marker}-model", messages=MESSAGES)
    await client.chat.completions.create(
        model="chat",
        messages=MESSAGES,
        user=f"{marker}-user",
        extra_headers={"memoryId": f"{marker}-memory", "x-request-id": f"{marker}-request"},
    )
    async with aiohttp.ClientSession() as session:
        await session.post(root_url(client) + "/v1/chat/completions", data=b"{not json")
    status, text = await scrape_text(client)
    assert status == 200
    assert marker not in text and GATEWAY_KEY not in text
    samples = parse(text)
    assert value(samples, "gateway_requests_total", route="other", status_code="404", stream="false") == 1
    assert value(samples, "gateway_requests_total", route="other", status_code="400", stream="false") == 1
    assert {dict(labels)["route"] for (name, labels) in samples if name == "gateway_requests_total"} == {"chat", "other"}


async def test_only_model_requests_are_counted(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    await client.models.list()
    await scrape_text(client, "/healthz")
    samples = await scrape(client)
    assert total(samples, "gateway_requests_total") == 0


async def test_memory_requests_evictions_and_store_timings(gateway: Gateway, upstream: FakeUpstream, tmp_path: Any) -> None:
    client = await gateway(
        f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}\n'
        f'memory: {{store: sqlite, path: "{tmp_path / "memory.db"}", defaults: {{memoryType: message_window, maxMessages: 2}}}}'
    )
    for turn in range(3):
        await client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": f"turn {turn}"}], extra_headers={"memoryId": "m1"}
        )
    samples = await scrape(client)
    assert value(samples, "gateway_memory_requests_total", memory_type="message_window") == 3
    # a window of 2 holds the new message and one stored: turn 2 leaves out 1 of 2, turn 3 3 of 4
    assert value(samples, "gateway_memory_evicted_messages_total", memory_type="message_window") == 4
    for operation in ("load", "append", "lock"):
        assert value(samples, "gateway_memory_store_duration_seconds_count", store="sqlite", operation=operation) == 3
    assert value(samples, "gateway_memory_lock_wait_seconds_count") == 3


async def test_a_memory_turn_whose_upstream_fails_is_counted_without_a_write(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Any
) -> None:
    """A turn reports once, when it lets go: planned and read, but nothing written when the upstream failed."""
    upstream.then(Step(status=400, body=error_body(400)))
    client = await gateway(
        f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}\n'
        f'memory: {{store: sqlite, path: "{tmp_path / "memory.db"}"}}'
    )
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="chat", messages=MESSAGES, extra_headers={"memoryId": "m1"})
    await client.chat.completions.create(model="chat", messages=MESSAGES, extra_headers={"memoryId": "m1"})
    samples = await scrape(client)
    assert value(samples, "gateway_memory_requests_total", memory_type="message_window") == 2
    for operation, count in (("lock", 2), ("load", 2), ("append", 1)):
        assert value(samples, "gateway_memory_store_duration_seconds_count", store="sqlite", operation=operation) == count
    assert value(samples, "gateway_memory_lock_wait_seconds_count") == 2


async def test_inflight_counts_a_request_while_it_runs(gateway: Gateway, upstream: FakeUpstream) -> None:
    release = asyncio.Event()
    upstream.then(Step(body=chat_completion(), gate=release))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    pending = asyncio.ensure_future(client.chat.completions.create(model="chat", messages=MESSAGES))
    await upstream.arrived.wait()
    assert value(await scrape(client), "gateway_inflight_requests", route="chat") == 1
    release.set()
    await pending
    assert value(await scrape(client), "gateway_inflight_requests", route="chat") == 0


async def test_require_auth_guards_the_scrape(gateway: Gateway) -> None:
    client = await gateway(
        f"""
        auth: {{keys: [{{name: ops, key: {GATEWAY_KEY}}}]}}
        metrics: {{requireAuth: true, path: /internal/metrics}}
        routes: {{chat: {{provider: mock}}}}
        """
    )
    status, text = await scrape_text(client, "/internal/metrics")
    assert status == 401 and orjson.loads(text)["error"]["type"] == "invalid_request_error"
    status, _ = await scrape_text(client, "/internal/metrics", Authorization="Bearer wrong")
    assert status == 401
    status, text = await scrape_text(client, "/internal/metrics", Authorization=f"Bearer {GATEWAY_KEY}")
    assert status == 200 and "gateway_build_info" in text
    status, _ = await scrape_text(client, "/metrics")
    assert status == 404


async def test_the_scrape_is_open_by_default_even_with_keys(gateway: Gateway) -> None:
    client = await gateway(f"auth: {{keys: [{{name: ops, key: {GATEWAY_KEY}}}]}}\nroutes: {{chat: {{provider: mock}}}}")
    status, _ = await scrape_text(client)
    assert status == 200


async def test_metrics_can_be_turned_off(gateway: Gateway) -> None:
    client = await gateway("metrics: {enabled: false}\nroutes: {chat: {provider: mock}}")
    await client.chat.completions.create(model="chat", messages=MESSAGES)
    status, _ = await scrape_text(client)
    assert status == 404


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ("{path: metrics}", "metrics.path: must be an absolute path"),
        ("{path: /v1/metrics}", "metrics.path: must be an absolute path"),
        ("{requireAuth: yes-please}", "metrics.requireAuth: must be true or false"),
        ("{enabled: 1}", "metrics.enabled: must be true or false"),
        ("{scrape: true}", "metrics.scrape: unknown key"),
    ],
)
def test_bad_metrics_config_is_refused_with_its_path(section: str, error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"metrics: {section}\nroutes: {{chat: {{provider: mock}}}}")
    assert any(e.startswith(error) for e in caught.value.errors), caught.value.errors


def test_metrics_flags_come_from_the_environment() -> None:
    config = parse_config(
        "metrics: {enabled: '${METRICS:-true}', requireAuth: '${AUTH}'}\nroutes: {chat: {provider: mock}}",
        env={"AUTH": "True"},
    )
    assert config.metrics.enabled and config.metrics.require_auth


def test_only_the_metrics_package_knows_prometheus() -> None:
    """Routing, dispatch, memory and providers report to the observer seam and nothing else."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[3] / "gateway"
    reporters = [package / "core" / "routing.py", package / "upstream" / "dispatch.py", package / "observe" / "trace.py"]
    reporters += [*(package / "memory").glob("*.py"), *(package / "upstream" / "providers").glob("*.py")]
    for path in reporters:
        tree = ast.parse(path.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not {m for m in imported if m.startswith(("prometheus_client", "gateway.observe.metrics", "gateway.observe.logs"))}, path
    users = [p.relative_to(package) for p in package.rglob("*.py") if "prometheus_client" in p.read_text()]
    assert users and all(p.parts[:2] == ("observe", "metrics") for p in users), users


async def test_one_process_never_takes_prometheus_client_s_locked_values(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request costs plain additions; prometheus-client only formats the scrape."""
    from prometheus_client import values

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a prometheus-client value was touched on the hot path")

    client = await gateway(f'routes: {{chat: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    for name in ("inc", "set"):
        monkeypatch.setattr(values.MutexValue, name, refuse)
    await client.chat.completions.create(model="chat", messages=MESSAGES)
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    _ = [part async for part in stream]
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="chat", status_code="200", stream="true") == 1
    assert value(samples, "gateway_upstream_duration_seconds_count", route="chat", target="up", provider="openai") == 2


async def test_breaker_series_exist_from_the_start(gateway: Gateway, make_upstream: Any) -> None:
    first, second = await make_upstream(), await make_upstream()
    config = routes(
        f'{{name: first, provider: openai, baseUrl: "{first.url}", apiKey: k}}',
        f'{{name: second, provider: openai, baseUrl: "{second.url}", apiKey: k}}',
        '{name: quiet, provider: mock, breaker: {enabled: false}}',
    )
    samples = await scrape(await gateway(config))
    states = {dict(labels)["target"]: v for (name, labels), v in samples.items() if name == "gateway_breaker_state"}
    assert states == {"first": 0, "second": 0}  # closed; a target without a breaker has no series
    skipped = {dict(labels)["from_target"] for (name, labels), _ in samples.items()
               if name == "gateway_fallbacks_total" and ("reason", "circuit_open") in labels}  # fmt: skip
    assert skipped == {"first", "second"}  # the last target has nowhere to move on to


def test_with_workers_the_breaker_gauge_shows_the_latest_state(tmp_path: Any) -> None:
    """In a worker (its values published to the workers' directory) a state change reaches the scrape."""
    import subprocess
    import sys

    script = (
        "from gateway.config.loader import parse_config\n"
        "from gateway.observe.metrics import Metrics\n"
        "config = parse_config('routes: {chat: {name: up, provider: mock}}')\n"
        "metrics = Metrics(config, prices={})\n"
        "metrics.breaker_changed(config.routes['chat'].first_target, 1)\n"
        "metrics.breaker_changed(config.routes['chat'].first_target, 2)\n"
        "print(metrics.exposition().decode())\n"
    )
    env = {**os.environ, MULTIPROC_ENV: str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert value(parse(done.stdout), "gateway_breaker_state", route="chat", target="up") == 2
