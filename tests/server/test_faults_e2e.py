"""Fault injection with real sockets: every way an upstream fails, on a fallback and a single route.

Each fault runs against a route `fb` (faulty target, then a healthy one) and a route `one` (the
faulty target alone), streamed and not, with memory on. For each, the test checks what the openai
SDK client sees, which targets were called, what the metrics counted and what memory stored:
nothing, unless the fallback answered (then that answer alone). Then: many concurrent streams half
of whose clients leave, and a bounded soak, leave no upstream connection, task or memory behind.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import os
import resource
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion, chunk, error_body, stream_of, trickle
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.metrics import root_url, scrape, value

FIRST = chunk({"role": "assistant", "content": "Par"})  # the event a stream commits on
JSON_HEAD = b'{"id": "chatcmpl-up", "object": "chat.completion", "cho'  # a JSON answer broken off


@dataclass(frozen=True)
class Fault:
    """One fault: the faulty target's script, and what every party must see."""

    name: str
    stream: bool
    script: Callable[[asyncio.Event], list[Step]]  # given an event nobody sets (a hang)
    outcomes: dict[str, int]  # gateway_upstream_requests_total{target=faulty} by outcome
    status: int  # what a client is told when the faulty target's answer is the last word
    says: str  # in the client's error message
    settings: str = ""  # the faulty target's settings
    committed: bool = False  # fails after the stream's first event reached the client: no fallback

    @property
    def id(self) -> str:
        return f"{self.name}-{'stream' if self.stream else 'json'}"

    @property
    def reason(self) -> str:  # the last attempt's outcome, which the route moves on from
        return list(self.outcomes)[-1]


def both(name: str, script: Callable[[asyncio.Event], list[Step]], outcomes: dict[str, int], status: int, says: str,
         settings: str = "", stream_says: str | None = None) -> list[Fault]:  # fmt: skip
    """The same fault before any byte of the answer: identical for a stream and a JSON request."""
    return [
        Fault(name, False, script, outcomes, status, says, settings),
        Fault(name, True, script, outcomes, status, stream_says or says, settings),
    ]


TIMEOUT = ", timeout: 0.3"  # the faulty target gives up this soon
IDLE = ", streamIdleTimeout: 0.3"
FAULTS = [
    *both("429-retry-after", lambda _: [Step(429, error_body(429), headers={"retry-after": "1"})], {"429": 1}, 429, "upstream failure 429"),
    *both("5xx-burst", lambda _: [Step(s, error_body(s)) for s in (500, 502, 503)], {"500": 1, "502": 1, "503": 1}, 503,
          "upstream failure 503", settings=", retry: {attempts: 2, backoffSeconds: 0}"),
    *both("hang-before-headers", lambda never: [Step(gate=never)], {"timeout": 1}, 504, "timed out after 0.3s", TIMEOUT,
          stream_says="no stream event within 0.3s"),
    *both("reset-before-headers", lambda _: [Step(reset=True)], {"connect_error": 1}, 502, "closed the connection"),
    *both("malformed-json", lambda _: [Step(200, b'{"choices": [')], {"invalid_response": 1}, 502, "not JSON"),
    *both("html-200", lambda _: [Step(200, b"<html><body>Bad gateway</body></html>", content_type="text/html")],
          {"invalid_response": 1}, 502, "not JSON"),
    *both("error-body-in-200", lambda _: [Step(200, error_body(500, "overloaded"))], {"invalid_response": 1}, 502, "overloaded"),
    Fault("hang-mid-answer", False, lambda never: [Step(events=[JSON_HEAD, never], events_type="application/json")],
          {"timeout": 1}, 504, "timed out after 0.3s", TIMEOUT),
    Fault("reset-mid-answer", False, lambda _: [Step(events=[JSON_HEAD], reset=True, events_type="application/json")],
          {"stream_error": 1}, 502, "cut off"),
    Fault("trickle", False, lambda _: [Step(events=trickle(orjson.dumps(chat_completion()), 0.05), events_type="application/json")],
          {"timeout": 1}, 504, "timed out after 0.3s", TIMEOUT),
    Fault("reset-before-first-event", True, lambda _: [Step(events=[], reset=True)], {"stream_error": 1}, 502, "cut off"),
    Fault("error-event-first", True, lambda _: [Step(events=[b"data: " + orjson.dumps(error_body(503, "overloaded")) + b"\n\n"])],
          {"stream_error": 1}, 502, "overloaded"),
    Fault("malformed-first-event", True, lambda _: [Step(events=[b'data: {"choices": [\n\n'])], {"stream_error": 1}, 502, "not JSON"),
    Fault("hang-mid-stream", True, lambda never: [Step(events=[FIRST, never])], {"timeout": 1}, 504, "no stream event for 0.3s", IDLE, True),
    Fault("reset-after-first-event", True, lambda _: [Step(events=[FIRST], reset=True)], {"stream_error": 1}, 502, "cut off", "", True),
    Fault("error-event-mid-stream", True, lambda _: [Step(events=[FIRST, b"data: " + orjson.dumps(error_body(500, "exploded")) + b"\n\n"])],
          {"stream_error": 1}, 502, "exploded", "", True),
    Fault("no-done", True, lambda _: [Step(events=[FIRST, *stream_of("is")[1:-1]])], {"stream_error": 1}, 502, "without [DONE]", "", True),
    Fault("trickle", True, lambda _: [Step(events=[FIRST, *trickle(chunk({"content": "is"}), 0.05)])], {"timeout": 1}, 504,
          "no stream event for 0.3s", IDLE, True),
]


def config(faulty: FakeUpstream, healthy: FakeUpstream, settings: str) -> str:
    target = f'name: faulty, provider: openai, baseUrl: "{faulty.url}", apiKey: k{settings}'
    return f"""
    auth: {{keys: [{{name: team, key: {GATEWAY_KEY}}}]}}
    memory: {{store: memory}}
    routes:
      fb:
        strategy: {{mode: fallback}}
        targets:
          - {{{target}}}
          - {{name: healthy, provider: openai, baseUrl: "{healthy.url}", apiKey: k}}
      one: {{{target}}}
    """


async def stored(client: openai.AsyncOpenAI, memory_id: str) -> list[Any] | None:
    """The conversation's messages, or None when memory holds nothing for it."""
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    async with aiohttp.ClientSession() as session, session.get(f"{root_url(client)}/v1/memory/{memory_id}", headers=headers) as response:
        if response.status == 404:
            return None
        assert response.status == 200
        return [{k: v for k, v in m.items() if k != "createdAt"} for m in (await response.json())["messages"]]


@dataclass
class Seen:
    """What the SDK client saw: the text it got, the error it raised."""

    text: str = ""
    error: openai.APIError | None = None
    headers: dict[str, str] = field(default_factory=dict)


async def call(client: openai.AsyncOpenAI, route: str, *, stream: bool, headers: dict[str, str]) -> Seen:
    seen = Seen()
    messages = [{"role": "user", "content": "say Paris"}]
    try:
        raw = await client.chat.completions.with_raw_response.create(model=route, messages=messages, stream=stream, extra_headers=headers)  # type: ignore[call-overload]
        seen.headers = dict(raw.headers)
        if not stream:
            seen.text = raw.parse().choices[0].message.content or ""
            return seen
        async for part in raw.parse():
            seen.text += part.choices[0].delta.content or "" if part.choices else ""
    except openai.APIError as exc:
        seen.error = exc
    return seen


@pytest.mark.parametrize("route", ["fb", "one"])
@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
async def test_fault(gateway: Gateway, make_upstream: Any, fault: Fault, route: str) -> None:
    faulty, healthy = await make_upstream(), await make_upstream()
    healthy.then(Step(events=stream_of("Paris")) if fault.stream else Step(body=chat_completion("Paris")))
    never = asyncio.Event()
    faulty.then(*fault.script(never))
    client = await gateway(config(faulty, healthy, fault.settings))
    seen = await call(client, route, stream=fault.stream, headers={"memoryId": f"{fault.id}-{route}"})
    rescued = route == "fb" and not fault.committed

    # what the client saw
    if rescued:
        assert seen.error is None and seen.text == "Paris"
        assert seen.headers["x-gateway-target"] == "healthy"
    else:
        assert seen.error is not None, f"the client must not take a failed answer for a complete one (got {seen.text!r})"
        assert fault.says in seen.error.message
        if fault.committed:
            assert seen.text.startswith("Par")  # what was relayed before the failure; then the SDK raised
        else:
            assert isinstance(seen.error, openai.APIStatusError) and seen.error.status_code == fault.status
            assert seen.error.body["code"] is not None  # type: ignore[index]
    # which targets were tried
    assert faulty.calls == sum(fault.outcomes.values())
    assert healthy.calls == (1 if rescued else 0)
    # what the metrics counted
    samples = await scrape(client)
    for outcome, count in fault.outcomes.items():
        assert value(samples, "gateway_upstream_requests_total", route=route, target="faulty", provider="openai", outcome=outcome) == count
    answered = 200 if rescued else fault.status
    assert value(samples, "gateway_requests_total", route=route, status_code=str(answered), stream=str(fault.stream).lower()) == 1
    if rescued:
        assert value(samples, "gateway_fallbacks_total", route=route, from_target="faulty", reason=fault.reason) == 1
    # what memory stored: the rescued answer, or nothing
    kept = await stored(client, f"{fault.id}-{route}")
    assert kept == ([{"role": "user", "content": "say Paris"}, {"role": "assistant", "content": "Paris"}] if rescued else None)
    never.set()


COMMITTED = [fault for fault in FAULTS if fault.committed]


@pytest.mark.parametrize("fault", COMMITTED, ids=[f.id for f in COMMITTED])
async def test_fault_after_the_commit_without_memory(gateway: Gateway, make_upstream: Any, fault: Fault) -> None:
    """Without memory the relay passes most events through unparsed: the failure must still show."""
    faulty, healthy = await make_upstream(), await make_upstream()
    faulty.then(*fault.script(asyncio.Event()))
    client = await gateway(config(faulty, healthy, fault.settings))
    seen = await call(client, "fb", stream=True, headers={})
    assert seen.text.startswith("Par") and seen.error is not None and fault.says in seen.error.message
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="fb", status_code=str(fault.status), stream="true") == 1


async def test_malformed_json_inside_braces_mid_stream_without_memory(gateway: Gateway, make_upstream: Any) -> None:
    faulty, healthy = await make_upstream(), await make_upstream()
    faulty.then(Step(events=[FIRST, b'data: {"id": "chatcmpl-up", "choices": oops}\n\n', *stream_of("is")[1:]]))
    client = await gateway(config(faulty, healthy, ""))
    seen = await call(client, "fb", stream=True, headers={})  # the SDK's own JSONDecodeError, were it relayed
    assert seen.error is not None and "not JSON" in seen.error.message
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="fb", status_code="502", stream="true") == 1


# ---------------------------------------------------------------- many clients, some leaving


def established(port: int) -> int:
    """TCP connections in this network namespace with `port` at either end, still established."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                local, remote, state = fields[1], fields[2], fields[3]
                if state == "01" and port in (int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16)):
                    count += 1
    return count


def port_of(upstream: FakeUpstream) -> int:
    return int(upstream.url.rsplit(":", 1)[1].split("/", 1)[0])


async def test_concurrent_streams_whose_clients_leave_close_their_upstream_connections(gateway: Gateway, make_upstream: Any) -> None:
    hold = asyncio.Event()
    stay = await make_upstream(Step(events=[FIRST, hold, *stream_of("is")[1:]]))
    leave = await make_upstream(Step(events=[FIRST, hold, chunk({"content": "is"}), asyncio.Event(), *stream_of("!")[1:]]))
    client = await gateway(f"""
    routes:
      stay: {{provider: openai, baseUrl: "{stay.url}", apiKey: k}}
      leave: {{provider: openai, baseUrl: "{leave.url}", apiKey: k}}
    """)
    messages = [{"role": "user", "content": "hi"}]
    first_parts = asyncio.Semaphore(0)

    async def stream(route: str) -> str:
        response = await client.chat.completions.create(model=route, messages=messages, stream=True)
        parts = response.__aiter__()
        text = (await parts.__anext__()).choices[0].delta.content or ""
        first_parts.release()
        if route == "leave":
            await response.close()  # the client goes away mid-stream
            return text
        async for part in parts:
            text += part.choices[0].delta.content or "" if part.choices else ""
        return text

    tasks = [asyncio.create_task(stream("stay" if i % 2 else "leave")) for i in range(200)]
    for _ in range(200):  # every stream is under way, with its first event delivered
        await asyncio.wait_for(first_parts.acquire(), 20)
    hold.set()
    texts = await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert texts.count("Paris") == 100 and texts.count("Par") == 100
    await asyncio.wait_for(leave.idle(), 10)  # the gateway noticed each departure and closed its upstream request
    await asyncio.wait_for(stay.idle(), 10)
    assert leave.disconnects == 100 and stay.disconnects == 0
    assert established(port_of(leave)) == 0  # not one abandoned upstream connection left open
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="stay", status_code="200", stream="true") == 100
    assert value(samples, "gateway_requests_total", route="leave", status_code="499", stream="true") == 100
    assert value(samples, "gateway_inflight_requests", route="leave") == 0


# ---------------------------------------------------------------- a bounded soak


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def footprint() -> tuple[int, int, int]:
    """(open file descriptors, asyncio tasks, resident memory) of this process: gateway, upstreams and clients.

    Tasks that serve a kept-alive connection (counted with the descriptors) and the finalizers of
    closed async generators (gone at the next turns of the loop) are not counted.
    """
    gc.collect()
    tasks = [t for t in asyncio.all_tasks() if inspect.iscoroutine(coro := t.get_coro()) and coro.__qualname__ != "RequestHandler.start"]
    return len(os.listdir("/proc/self/fd")), len(tasks), resident_bytes()


async def test_a_soak_of_mixed_requests_leaves_nothing_growing(gateway: Gateway, make_upstream: Any) -> None:
    healthy = await make_upstream(Step(body=chat_completion("Paris")))
    flaky = await make_upstream(Step(503, error_body(503)))
    sse = await make_upstream(Step(events=[FIRST, 0.001, *stream_of("is")[1:]]))
    client = await gateway(f"""
    memory: {{store: memory}}
    routes:
      fb:
        strategy: {{mode: fallback}}
        breaker: {{failures: 5, cooldownSeconds: 0.2}}
        targets:
          - {{name: flaky, provider: openai, baseUrl: "{flaky.url}", apiKey: k}}
          - {{name: healthy, provider: openai, baseUrl: "{healthy.url}", apiKey: k}}
      sse: {{provider: openai, baseUrl: "{sse.url}", apiKey: k}}
      limited: {{provider: openai, baseUrl: "{flaky.url}", apiKey: k, breaker: {{enabled: false}}}}
    """)
    messages = [{"role": "user", "content": "hi"}]
    outcomes: dict[str, int] = {}

    async def one(i: int) -> None:
        kind = ("fallback", "stream", "stream-left", "memory", "failure", "stream", "fallback", "replayed")[i % 8]
        try:
            if kind == "fallback":
                await client.chat.completions.create(model="fb", messages=messages)
            elif kind == "memory":
                await client.chat.completions.create(model="fb", messages=messages, extra_headers={"memoryId": f"soak-{i % 50}"})
            elif kind == "failure":
                await client.chat.completions.create(model="limited", messages=messages)
            elif kind == "replayed":  # a JSON answer to a stream request
                async for _ in await client.chat.completions.create(model="fb", messages=messages, stream=True):
                    pass
            else:
                response = await client.chat.completions.create(model="sse", messages=messages, stream=True)
                async for _ in response:
                    if kind == "stream-left":
                        await response.close()
                        break
            outcomes[kind] = outcomes.get(kind, 0) + 1
        except openai.APIStatusError as exc:
            outcomes[f"{kind}-{exc.status_code}"] = outcomes.get(f"{kind}-{exc.status_code}", 0) + 1

    async def run(count: int, offset: int) -> None:
        queue = iter(range(offset, offset + count))

        async def worker() -> None:
            for i in queue:
                await one(i)

        await asyncio.gather(*(worker() for _ in range(16)))

    await run(400, 0)  # warm-up: pools filled, caches built
    await asyncio.wait_for(sse.idle(), 10)
    before = footprint()
    await run(2000, 400)
    await asyncio.wait_for(sse.idle(), 10)
    after = footprint()
    assert outcomes.get("failure-503") == 300 and outcomes.get("fallback") == 600 and outcomes.get("stream-left") == 300
    assert sum(outcomes.values()) == 2400, outcomes
    fds, tasks, rss = (b - a for b, a in zip(after, before, strict=True))
    # keep-alive pools at each hop may hold a few more idle connections than after the warm-up (16
    # clients at a time); a leak would add one per request of its kind: hundreds
    assert fds <= 32, f"{fds} more file descriptors"
    assert tasks <= 0, f"{tasks} more tasks"
    assert rss < 24 * 1024 * 1024, f"{rss / 2**20:.1f} MiB more resident memory"
