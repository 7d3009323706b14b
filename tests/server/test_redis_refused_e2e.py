"""A Redis URL the client refuses (at build or at first use) is Redis unavailable, never a 500.

The loader refuses such URLs (tests/config/test_redis_urls.py); these build the stores and the
gateway around them anyway, so the runtime holds on its own: memory turns are 503
memory_unavailable, breakers decide per process, `/v1/gateway/health` answers 200, a fallback runs.
"""

from __future__ import annotations

import dataclasses
import logging
import textwrap

import aiohttp
import openai
import pytest
import redis.asyncio as aioredis

from gateway.config.loader import parse_config
from gateway.core.memory.reach import Reach
from gateway.core.routing import Outcome
from gateway.core.settings import Config
from gateway.memory.redis import RedisStore, key_prefix
from gateway.memory.store import StoreUnavailable
from gateway.upstream.breakers.redis import RedisBreakers
from tests.support.fakes import FakeUpstream, Step, chat_completion, error_body
from tests.support.gateway import Gateway

QUESTION = [{"role": "user", "content": "q"}]


def refused_urls(redis_url: str) -> list[str]:
    """A live Redis named with an option its connection does not take, and URLs the client refuses outright."""
    return [
        f"{redis_url}?cluster=true",  # TypeError at the first command
        f"{redis_url}?protocol=4",  # refused when a connection is made
        "redis://:s3cret-pw@127.0.0.1:99999/0",  # refused by from_url
        "redis://127.0.0.1:6379/0?db=zero",
    ]


@pytest.fixture(params=range(4), ids=["unknown-option", "bad-protocol", "bad-port", "bad-db"])
def refused_url(request: pytest.FixtureRequest, redis_url: str) -> str:
    return refused_urls(redis_url)[request.param]


async def test_the_memory_store_is_unavailable_not_broken(refused_url: str, caplog: pytest.LogCaptureFixture) -> None:
    store = RedisStore(refused_url, ttl_seconds=60, max_messages=10, lock_timeout=1)
    key = ("t", "m")
    try:
        for attempt in (store.load(key), store.delete(key), store.put_value("k", "v"), store.get_value("k"), store.ping()):
            with pytest.raises(StoreUnavailable):
                await attempt
        with pytest.raises(StoreUnavailable):
            async with store.lock(key):
                pass
    finally:
        await store.close()
    assert "s3cret-pw" not in caplog.text


async def test_breakers_fall_back_to_each_process(refused_url: str, caplog: pytest.LogCaptureFixture) -> None:
    config = parse_config("routes: {m: {provider: mock}}")
    route = config.routes["m"]
    breakers = RedisBreakers(config.routes, refused_url)
    target = route.first_target
    try:
        for _ in range(target.breaker.failures):
            told = breakers.record(target, Outcome(503))
            if told is not None:
                await told
        await breakers.settled()
        snapshot = await breakers.snapshot()
        assert snapshot["m"][0].state_name == "open"  # decided by this process alone
    finally:
        await breakers.close()
    assert "s3cret-pw" not in caplog.text


def fallback_config(upstream: FakeUpstream, backup: FakeUpstream, memory_url: str) -> Config:
    config = parse_config(
        textwrap.dedent(f"""
        memory: {{store: redis}}
        routes:
          chat:
            strategy: {{mode: fallback}}
            targets:
              - {{name: first, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}
              - {{name: second, provider: openai, baseUrl: "{backup.url}", apiKey: k}}
        """)
    )
    # past the loader, which refuses these URLs
    return dataclasses.replace(config, memory=dataclasses.replace(config.memory, url=memory_url))


async def test_the_gateway_answers_without_a_500(
    gateway: Gateway, make_upstream: object, refused_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    upstream: FakeUpstream = await make_upstream(Step(status=503, body=error_body(503)))  # type: ignore[operator]
    backup: FakeUpstream = await make_upstream(Step(body=chat_completion("from the backup")))  # type: ignore[operator]
    client = await gateway(fallback_config(upstream, backup, refused_url))
    for _ in range(3):  # failovers: each failure is told to the (shared, here unusable) breakers
        reply = await client.chat.completions.create(model="chat", messages=QUESTION)  # type: ignore[arg-type]
        assert reply.choices[0].message.content == "from the backup"
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(
            model="chat", messages=QUESTION, extra_headers={"memoryId": "conv-1"}  # type: ignore[arg-type]
        )
    assert caught.value.status_code == 503
    assert caught.value.body["code"] == "memory_unavailable"  # type: ignore[index]
    base = str(client.base_url).rstrip("/")
    async with aiohttp.ClientSession() as session, session.get(f"{base}/gateway/health") as health:
        assert health.status == 200
    assert "s3cret-pw" not in caplog.text


async def test_response_pins_on_such_a_store_are_never_a_500(
    gateway: Gateway, make_upstream: object, refused_url: str
) -> None:
    upstream: FakeUpstream = await make_upstream(Step(body={"id": "resp_1", "object": "response", "output": []}))  # type: ignore[operator]
    client = await gateway(fallback_config(upstream, upstream, refused_url))
    base = str(client.base_url).rstrip("/")
    auth = {"Authorization": "Bearer k"}
    async with aiohttp.ClientSession(headers=auth) as session:
        # answered, though which target answered cannot be recorded
        body = {"model": "chat", "input": "q", "previous_response_id": "resp_0"}
        async with session.post(f"{base}/responses", json=body) as answered:
            assert answered.status == 200, await answered.text()
        for method in ("GET", "DELETE"):  # the store cannot say where resp_1 lives
            async with session.request(method, f"{base}/responses/resp_1") as stored:
                assert stored.status == 503, await stored.text()
                assert (await stored.json())["error"]["code"] == "memory_unavailable"


async def test_a_conversation_stored_unreadable_is_the_store_unavailable(redis_url: str) -> None:
    """Keys another program wrote where a conversation lives: a 503 for its turns, not a 500."""
    client = aioredis.Redis.from_url(redis_url)
    store = RedisStore(redis_url, ttl_seconds=60, max_messages=10, lock_timeout=5)
    key = ("t", "garbled")
    prefix = key_prefix(key)
    try:
        await client.hset(f"{prefix}:meta", mapping={"system": "{not json"})  # and no updated_at
        await client.rpush(f"{prefix}:msgs", b"\xff not an entry")
        await client.set("gw:value:response:resp_garbled", b"\xff\xfe")  # a pinned response's record
        for read in (store.load(key), store.load_tail(key, Reach(messages=5)), store.get_value("response:resp_garbled")):
            with pytest.raises(StoreUnavailable):
                await read
    finally:
        await client.delete(f"{prefix}:meta", f"{prefix}:msgs", "gw:value:response:resp_garbled")
        await client.aclose()
        await store.close()
