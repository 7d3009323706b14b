"""The gateway's own faults are not the upstream's: out of file descriptors, it answers 503 gateway_overloaded.

The exhaustion is real (tests/support/descriptors.py): the process's limit lowered and every
descriptor under it taken, so the gateway's socket() for an upstream connection fails with EMFILE
from the kernel, while the client's keep-alive connection, open before, carries the request and
its answer. The route is a fallback whose targets' breakers open at the first failure: the answer
must be the 503 (type and code gateway_overloaded, Retry-After), counted in
gateway_overloaded_total{reason="emfile"}, with no attempt in the upstream series, no fallback to
the second target (its call would need a descriptor too), and every breaker closed. Once
descriptors are free again, the same route answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import openai
import orjson
import pytest
from aiohttp import web

from gateway.config.loader import parse_config
from gateway.core.errors import OverloadedError
from gateway.observe.metrics import MULTIPROC_ENV, Metrics
from gateway.observe.trace import Trace
from gateway.server.relay import relay_stream
from gateway.upstream.providers.base import shortage
from tests.support.committed import ScriptedStream, committed
from tests.support.descriptors import exhausted_descriptors
from tests.support.fakes import FakeUpstream, chunk
from tests.support.gateway import Gateway
from tests.support.scrape import health, metrics_text, samples, total

QUESTION = [{"role": "user", "content": "hi"}]
FIRST = chunk({"role": "assistant", "content": "Hi"})


def fallback(primary: FakeUpstream, secondary: FakeUpstream) -> str:
    return f"""
    routes:
      warm: {{provider: mock}}
      chat:
        strategy: {{mode: fallback}}
        breaker: {{failures: 1, cooldownSeconds: 60}}
        targets:
          - {{name: primary, provider: openai, baseUrl: "{primary.url}", apiKey: k}}
          - {{name: secondary, provider: openai, baseUrl: "{secondary.url}", apiKey: k}}
    """


async def ask(client: openai.AsyncOpenAI, *, stream: bool) -> str:
    if not stream:
        answer = await client.chat.completions.create(model="chat", messages=QUESTION)  # type: ignore[arg-type]
        return answer.choices[0].message.content or ""
    chunks = await client.chat.completions.create(model="chat", messages=QUESTION, stream=True)  # type: ignore[arg-type]
    return "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])  # type: ignore[union-attr]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_out_of_descriptors_is_a_503_of_the_gateway_not_the_upstreams(
    gateway: Gateway, make_upstream: Any, stream: bool
) -> None:
    primary, secondary = await make_upstream(), await make_upstream()
    client = await gateway(fallback(primary, secondary))
    await client.chat.completions.create(model="warm", messages=QUESTION)  # type: ignore[arg-type]  # the client's connection, kept open
    with exhausted_descriptors(), pytest.raises(openai.APIStatusError) as caught:
        await ask(client, stream=stream)
    error = caught.value
    assert error.status_code == 503, error.response.text
    body = error.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["type"] == body["error"]["code"] == "gateway_overloaded"
    assert error.response.headers["retry-after"] == "1"
    assert (primary.calls, secondary.calls) == (0, 0)  # no fallback: the second call needs a descriptor too

    found = samples(await metrics_text(client))
    assert total(found, "gateway_overloaded_total", reason="emfile") == 1
    assert total(found, "gateway_upstream_requests_total", route="chat") == 0
    assert total(found, "gateway_fallbacks_total", route="chat") == 0
    assert total(found, "gateway_requests_total", route="chat", status_code="503") == 1
    targets = (await health(client))["routes"]["chat"]["targets"]
    assert [(t["name"], t["state"], t["requests"], t["failures"]) for t in targets] == [
        ("primary", "closed", 0, 0), ("secondary", "closed", 0, 0)
    ]

    assert await ask(client, stream=stream) == "Hello from upstream"  # descriptors are back: the route answers
    assert (primary.calls, secondary.calls) == (1, 0)


@pytest.mark.parametrize(
    ("error", "reason"),
    [(OSError(24, "Too many open files"), "emfile"), (OSError(23, "Too many open files in system"), "enfile"),
     (OSError(105, "No buffer space available"), "enobufs"), (OSError(12, "Cannot allocate memory"), "enomem")],
)
def test_each_shortage_is_found_behind_the_transports_errors(error: OSError, reason: str) -> None:
    """As aiohttp and httpx wrap it: the OS error is the cause (or context) of theirs."""
    import aiohttp

    wrapped = aiohttp.ClientConnectorError(aiohttp.client_reqrep.ConnectionKey("h", 80, False, True, None, None, None), error)
    try:
        try:
            raise error
        except OSError as inner:
            raise RuntimeError("transport") from inner
    except RuntimeError as outer:
        chained = outer
    for exc in (error, wrapped, chained):
        found = shortage(exc)
        assert isinstance(found, OverloadedError) and found.reason == reason
    assert shortage(ConnectionRefusedError(111, "Connection refused")) is None
    assert shortage(OSError(None, "Multiple exceptions")) is None


def test_litellm_targets_tell_the_shortage_too() -> None:
    import httpx

    from gateway.upstream.providers.litellm import map_failure

    target = parse_config("routes: {chat: {provider: groq, apiKey: k}}").routes["chat"].first_target
    try:
        try:
            raise OSError(24, "Too many open files")
        except OSError as inner:
            raise httpx.ConnectError("connect failed") from inner
    except httpx.ConnectError as outer:
        failure = map_failure(outer, target)
    assert isinstance(failure, OverloadedError) and failure.reason == "emfile"


SCRIPT = """
from gateway.config.loader import parse_config
from gateway.observe.metrics import Metrics
from gateway.observe.trace import Trace

config = parse_config("routes: {chat: {name: a, provider: mock}}")
metrics = Metrics(config)
target = config.routes["chat"].first_target
for _ in range(2):
    Trace(metrics, "req", method="POST", path="/v1/chat/completions").overloaded(target, "emfile")
print(metrics.exposition().decode())
"""


def test_the_count_is_kept_alone_and_across_workers(tmp_path: Any) -> None:
    """Counted in one process's numbers, and in a worker's published ones (MULTIPROC_ENV names their directory)."""
    env = {k: v for k, v in os.environ.items() if k != MULTIPROC_ENV}
    for mode in ({}, {MULTIPROC_ENV: str(tmp_path)}):
        done = subprocess.run([sys.executable, "-c", SCRIPT], env={**env, **mode}, capture_output=True, text=True, timeout=60, check=True)
        found = samples(done.stdout)
        assert total(found, "gateway_overloaded_total", reason="emfile") == 2, (mode, done.stdout)
        assert total(found, "gateway_upstream_requests_total") == 0


async def test_a_shortage_after_the_commit_ends_the_stream_with_the_gateways_own_error(aiohttp_client: Any) -> None:
    """Counted as the gateway's shortage, never as the upstream's attempt (its 200, its duration)."""
    config = parse_config("routes: {chat: {name: a, provider: mock}}")
    target, metrics = config.routes["chat"].first_target, Metrics(config)
    trace, stream = Trace(metrics), ScriptedStream([OverloadedError("enobufs")])

    async def relay(request: web.Request) -> web.StreamResponse:
        return await relay_stream(request, committed(target, FIRST, stream), {}, trace=trace)

    app = web.Application()
    app.router.add_get("/", relay)
    client = await aiohttp_client(app)
    response = await client.get("/")
    events = [event for event in (await response.read()).split(b"\n\n") if event]
    assert response.status == 200 and events[0] + b"\n\n" == FIRST
    error = orjson.loads(events[1].removeprefix(b"data: "))["error"]
    assert error["code"] == error["type"] == "gateway_overloaded" and len(events) == 2  # no [DONE]
    assert stream.closed and (trace.failed_status, trace.error_code) == (503, "gateway_overloaded")
    found = samples(metrics.exposition().decode())
    assert total(found, "gateway_overloaded_total", reason="enobufs") == 1
    assert total(found, "gateway_upstream_requests_total") == 0 and trace.attempts == 0
    assert total(found, "gateway_upstream_duration_seconds_count") == 0


def test_an_overloaded_error_of_another_shortage_keeps_retry_after() -> None:
    """Another part of the gateway (its connection limit) can say its own words and add headers."""
    error = OverloadedError("max_connections", "Too many connections.", headers={"Connection": "close"})
    assert error.to_dict()["error"] == {"message": "Too many connections.", "type": "gateway_overloaded", "param": None,
                                        "code": "gateway_overloaded"}  # fmt: skip
    assert (error.status, error.reason, error.headers) == (503, "max_connections", {"Retry-After": "1", "Connection": "close"})
