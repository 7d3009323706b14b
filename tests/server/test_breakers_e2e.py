"""Circuit breakers end to end: a real gateway, fake upstreams on loopback, the openai SDK.

A target trips, is skipped without a call, half-opens, lets exactly one trial through and
recovers; the gauge, the fallback reason and /v1/gateway/health say so at each step.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
import openai
import pytest

from tests.support.breakers import PATIENT
from tests.support.fakes import FakeUpstream, Step, error_body, stream_of
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.metrics import root_url, scrape, value
from tests.support.servers import RedisProcess, flush_redis
from tests.support.waiting import eventually

MESSAGES = [{"role": "user", "content": "hi"}]


def fallback(first: FakeUpstream, second: FakeUpstream, *, breaker: str = "{failures: 2, cooldownSeconds: 0.3}",
             codes: str = "", extra: str = "", first_extra: str = "") -> str:  # fmt: skip
    strategy = f"{{mode: fallback{', onStatusCodes: ' + codes if codes else ''}}}"
    return f"""
    auth: {{keys: [{{name: team, key: {GATEWAY_KEY}}}]}}
    {extra}
    routes:
      chat:
        strategy: {strategy}
        breaker: {breaker}
        targets:
          - {{name: primary, provider: openai, baseUrl: "{first.url}", apiKey: k{first_extra}}}
          - {{name: secondary, provider: openai, baseUrl: "{second.url}", apiKey: k}}
    """


async def health(client: openai.AsyncOpenAI, *, key: str | None = GATEWAY_KEY) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with aiohttp.ClientSession() as session, session.get(root_url(client) + "/v1/gateway/health", headers=headers) as response:
        return response.status, await response.json()


async def target_health(client: openai.AsyncOpenAI, name: str, route: str = "chat") -> dict[str, Any]:
    status, body = await health(client)
    assert status == 200, body
    return next(t for t in body["routes"][route]["targets"] if t["name"] == name)


async def ask(client: openai.AsyncOpenAI, *, stream: bool = False) -> Any:
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES, stream=stream)
    if stream:
        async for _ in raw.parse():
            pass
    return raw.headers


async def gauge(client: openai.AsyncOpenAI, target: str) -> float:
    return value(await scrape(client), "gateway_breaker_state", route="chat", target=target)


async def gauge_is(client: openai.AsyncOpenAI, target: str, state: float) -> bool:
    """Whether the breaker state gauge of `target` reads `state` (0 closed, 1 half-open, 2 open)."""
    return await gauge(client, target) == state


async def half_open(client: openai.AsyncOpenAI, target: str) -> bool:
    """Whether the health page says `target`'s cooldown is over (half-open)."""
    return (await target_health(client, target))["state"] == "half_open"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_target_trips_is_skipped_half_opens_and_recovers(gateway: Gateway, make_upstream: Any, stream: bool) -> None:
    primary, secondary = await make_upstream(), await make_upstream()
    # a cooldown long enough that the checks below run inside it on a loaded machine
    client = await gateway(fallback(primary, secondary, breaker="{failures: 2, cooldownSeconds: 2}"))
    primary.then(Step(503, error_body(503)), Step(503, error_body(503)))
    for _ in range(2):
        headers = await ask(client, stream=stream)
        assert headers["x-gateway-target"] == "secondary"
    assert await gauge(client, "primary") == 2  # open
    opened = await target_health(client, "primary")
    assert opened["state"] == "open" and opened["failureRate"] == 1.0 and opened["requests"] == 2
    assert 0 < opened["cooldownSeconds"] <= 2 and opened["cooldownEndsAt"].endswith("+00:00")

    headers = await ask(client, stream=stream)  # skipped: no call
    assert primary.calls == 2 and headers["x-gateway-target"] == "secondary" and headers["x-gateway-attempts"] == "2"
    samples = await scrape(client)
    assert value(samples, "gateway_fallbacks_total", route="chat", from_target="primary", reason="circuit_open") == 1
    assert sum(v for (n, labels), v in samples.items() if n == "gateway_upstream_requests_total" and ("target", "primary") in labels) == 2

    await eventually(lambda: gauge_is(client, "primary", 1))  # half-open, reported when the cooldown ended
    assert (await target_health(client, "primary"))["state"] == "half_open"
    headers = await ask(client, stream=stream)  # the trial: primary answers again
    assert primary.calls == 3 and headers["x-gateway-target"] == "primary" and headers["x-gateway-attempts"] == "1"
    assert await gauge(client, "primary") == 0
    closed = await target_health(client, "primary")
    assert closed["state"] == "closed" and closed["cooldownEndsAt"] is None and closed["requests"] == 0


async def test_half_open_lets_exactly_one_trial_through(gateway: Gateway, make_upstream: Any) -> None:
    primary, secondary = await make_upstream(), await make_upstream()
    client = await gateway(fallback(primary, secondary, breaker="{failures: 1, cooldownSeconds: 0.2}"))
    primary.then(Step(503, error_body(503)))
    await ask(client)
    await eventually(lambda: half_open(client, "primary"))
    release = asyncio.Event()
    primary.then(Step(gate=release))  # the trial hangs until released
    tasks = [asyncio.create_task(ask(client)) for _ in range(6)]
    done, pending = set(), set(tasks)
    while len(pending) > 1:  # every request but the trial is answered meanwhile, by secondary
        finished, pending = await asyncio.wait(pending, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        assert finished, "requests other than the trial must not wait for it"
        done |= finished
    assert primary.calls == 2 and secondary.calls == 1 + 5
    assert all(task.result()["x-gateway-target"] == "secondary" for task in done)
    release.set()
    [trial] = pending
    assert (await trial)["x-gateway-target"] == "primary"
    assert (await target_health(client, "primary"))["state"] == "closed"


async def test_a_failed_trial_opens_it_again_for_twice_as_long(gateway: Gateway, make_upstream: Any) -> None:
    primary, secondary = await make_upstream(), await make_upstream()
    # a cooldown long enough that the health page is read inside the doubled one on a loaded machine
    client = await gateway(fallback(primary, secondary, breaker="{failures: 1, cooldownSeconds: 2}"))
    primary.then(Step(503, error_body(503)), Step(502, error_body(502)))
    await ask(client)
    await eventually(lambda: half_open(client, "primary"))
    assert (await ask(client))["x-gateway-attempts"] == "2"  # the trial failed, secondary answered
    reopened = await target_health(client, "primary")
    assert reopened["state"] == "open" and 2 < reopened["cooldownSeconds"] <= 4


async def test_when_every_target_is_open_the_one_whose_cooldown_ends_first_is_tried(gateway: Gateway, make_upstream: Any) -> None:
    primary, secondary = await make_upstream(), await make_upstream()
    config = fallback(primary, secondary, breaker="{failures: 1, cooldownSeconds: 30}", first_extra=", breaker: {cooldownSeconds: 60}")
    client = await gateway(config)
    primary.then(Step(503, error_body(503)))
    secondary.then(Step(503, error_body(503)))
    with pytest.raises(openai.InternalServerError):
        await ask(client)
    assert [(await target_health(client, n))["state"] for n in ("primary", "secondary")] == ["open", "open"]
    headers = await ask(client)  # not a failure without trying: secondary reopens first, and answers
    assert (primary.calls, secondary.calls) == (1, 2) and headers["x-gateway-attempts"] == "1"
    assert (await target_health(client, "secondary"))["state"] == "closed"  # a forced call that succeeds closes it


async def test_a_single_target_route_still_calls_its_open_target(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(f"""
    routes:
      chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k, breaker: {{failures: 1, cooldownSeconds: 30}}}}
    """)
    upstream.then(Step(503, error_body(503)), Step(500, error_body(500)))
    for status in (503, 500):
        with pytest.raises(openai.InternalServerError) as caught:
            await ask(client)
        assert caught.value.status_code == status  # the upstream's own answer, never a bare "circuit open"
    await ask(client)
    assert upstream.calls == 3


async def test_loadbalance_picks_among_closed_targets_only(gateway: Gateway, make_upstream: Any) -> None:
    a, b = await make_upstream(), await make_upstream()
    client = await gateway(f"""
    routes:
      chat:
        strategy: {{mode: loadbalance}}
        breaker: {{failures: 1, cooldownSeconds: 30}}
        targets:
          - {{name: a, provider: openai, baseUrl: "{a.url}", apiKey: k, weight: 0.9}}
          - {{name: b, provider: openai, baseUrl: "{b.url}", apiKey: k, weight: 0.1}}
    """)
    a.then(Step(503, error_body(503)))
    while not a.calls:  # a's first pick fails (a plain loadbalance does not re-pick) and opens it
        with contextlib.suppress(openai.InternalServerError):
            await ask(client)
    before = b.calls
    for _ in range(20):
        assert (await ask(client))["x-gateway-target"] == "b"
    assert a.calls == 1 and b.calls == before + 20


async def test_a_400_never_opens_a_breaker(gateway: Gateway, make_upstream: Any) -> None:
    primary, secondary = await make_upstream(Step(400, error_body(400))), await make_upstream()
    client = await gateway(fallback(primary, secondary, breaker="{failures: 1}"))  # no codes: a 400 moves on
    for _ in range(5):
        assert (await ask(client))["x-gateway-target"] == "secondary"
    assert primary.calls == 5 and await gauge(client, "primary") == 0


async def test_a_retry_after_longer_than_the_cooldown_extends_it(gateway: Gateway, make_upstream: Any) -> None:
    primary, secondary = await make_upstream(), await make_upstream()
    client = await gateway(fallback(primary, secondary, breaker="{failures: 1, cooldownSeconds: 1}"))
    primary.then(Step(429, error_body(429), headers={"retry-after": "120"}))
    await ask(client)
    assert 110 < (await target_health(client, "primary"))["cooldownSeconds"] <= 120


async def test_retries_stop_once_the_breaker_opens(gateway: Gateway, make_upstream: Any) -> None:
    primary, secondary = await make_upstream(Step(503, error_body(503))), await make_upstream()
    client = await gateway(fallback(primary, secondary, breaker="{failures: 2, cooldownSeconds: 30}",
                                    first_extra=", retry: {attempts: 5, backoffSeconds: 0}"))  # fmt: skip
    headers = await ask(client)
    assert primary.calls == 2 and headers["x-gateway-target"] == "secondary"


async def test_the_health_page_needs_the_gateway_key_and_lists_every_route(gateway: Gateway, make_upstream: Any) -> None:
    primary, secondary = await make_upstream(), await make_upstream()
    client = await gateway(fallback(primary, secondary) + "  quiet: {provider: mock, breaker: {enabled: false}}\n")
    status, body = await health(client, key=None)
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
    status, body = await health(client)
    assert status == 200 and body["status"] == "ok" and body["breakers"] == "local"
    assert [t["name"] for t in body["routes"]["chat"]["targets"]] == ["primary", "secondary"]
    assert body["routes"]["quiet"]["targets"][0]["state"] == "disabled"
    assert set(body["routes"]["chat"]["targets"][0]) == {
        "name", "state", "failureRate", "requests", "failures", "consecutiveFailures", "cooldownEndsAt", "cooldownSeconds",
    }  # fmt: skip


async def test_redis_shares_the_breakers_between_gateways(
    gateway: Gateway, make_upstream: Any, redis_url: str
) -> None:
    await flush_redis(redis_url)
    primary, secondary = await make_upstream(), await make_upstream()
    config = fallback(primary, secondary, breaker="{failures: 2, cooldownSeconds: 30}", extra=f"breakers: {{store: redis, url: '{redis_url}', timeoutSeconds: {PATIENT}}}")
    one, two = await gateway(config), await gateway(config)
    primary.then(Step(503, error_body(503)), Step(503, error_body(503)))
    await ask(one)
    await ask(two)  # the second failure in a row, seen by another gateway
    _, body = await health(one)  # read fresh from Redis
    assert body["breakers"] == "redis" and body["status"] == "degraded"
    assert [(await target_health(c, "primary"))["state"] for c in (one, two)] == ["open", "open"]
    for client in (one, two):
        assert (await ask(client))["x-gateway-target"] == "secondary"
    assert primary.calls == 2


async def test_an_unreachable_redis_never_fails_a_request(
    gateway: Gateway, make_upstream: Any, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    dead = RedisProcess(tmp_path)  # a free port, nothing listening
    primary, secondary = await make_upstream(Step(503, error_body(503))), await make_upstream()
    client = await gateway(fallback(primary, secondary, breaker="{failures: 2, cooldownSeconds: 30}",
                                    extra=f"breakers: {{store: redis, url: '{dead.url}'}}"))  # fmt: skip
    for _ in range(5):
        assert (await ask(client))["x-gateway-target"] == "secondary"
    assert primary.calls == 2  # the breaker acted on this process's view
    assert (await target_health(client, "primary"))["state"] == "open"
    assert len([r for r in caplog.records if "redis unreachable" in r.getMessage()]) == 1


async def test_a_stream_trial_is_decided_at_its_first_event(gateway: Gateway, make_upstream: Any) -> None:
    primary, secondary = await make_upstream(), await make_upstream()
    client = await gateway(fallback(primary, secondary, breaker="{failures: 1, cooldownSeconds: 0.2}"))
    primary.then(Step(503, error_body(503)))
    await ask(client, stream=True)
    await eventually(lambda: half_open(client, "primary"))
    release = asyncio.Event()
    primary.then(Step(events=[*stream_of("trial")[:2], release, *stream_of("trial")[2:]]))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    first = await stream.__anext__()  # committed: the breaker has its verdict, the stream goes on
    assert first.choices[0].delta.role == "assistant"
    assert (await target_health(client, "primary"))["state"] == "closed"
    release.set()
    async for _ in stream:
        pass


async def test_a_trial_whose_client_leaves_is_given_back(gateway: Gateway, make_upstream: Any) -> None:
    primary, secondary = await make_upstream(), await make_upstream()
    client = await gateway(fallback(primary, secondary, breaker="{failures: 1, cooldownSeconds: 0.2}"))
    primary.then(Step(503, error_body(503)))
    await ask(client)
    await eventually(lambda: half_open(client, "primary"))
    primary.then(Step(gate=asyncio.Event()))  # the trial hangs; its timeout is the default 600 s
    primary.arrived.clear()
    trial = asyncio.ensure_future(ask(client))
    await primary.arrived.wait()
    trial.cancel()  # the client leaves
    await asyncio.wait_for(primary.idle(), 5)  # the gateway dropped the upstream call
    headers = await ask(client)  # the next request takes the trial at once, not 600 s later
    assert headers["x-gateway-target"] == "primary" and primary.calls == 3
