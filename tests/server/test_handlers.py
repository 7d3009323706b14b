"""gateway.server.handlers on a real gateway: the model list, and the usage a stream is asked for on the metrics' behalf.

The chat, completions and embeddings handlers are the subject of most end to end files
(test_routing_e2e.py, test_streaming_e2e.py, test_memory_e2e.py); the option added to a body
that has no stream_options is in tests/observe/metrics/test_observer_e2e.py.
"""

from __future__ import annotations

import time

import aiohttp
import openai
import orjson
import pytest

from tests.support.fakes import FakeUpstream, Step, stream_of
from tests.support.gateway import GATEWAY_KEY, Gateway

USAGE = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}


async def test_models_list_and_get(gateway: Gateway) -> None:
    client = await gateway("routes: {a: {provider: mock}, b: {provider: mock}}")
    models = await client.models.list()
    assert [m.id for m in models.data] == ["a", "b"]
    assert (await client.models.retrieve("b")).id == "b"
    with pytest.raises(openai.NotFoundError) as caught:
        await client.models.retrieve("zzz")
    assert caught.value.code == "model_not_found"


async def test_a_model_card_is_the_gateways_and_dated_from_its_start(gateway: Gateway) -> None:
    before = int(time.time())
    client = await gateway("routes: {a: {provider: mock}}")
    listed = (await client.models.list()).data[0]
    card = await client.models.retrieve("a")
    assert listed == card
    assert (card.object, card.owned_by) == ("model", "gateway") and before <= card.created <= int(time.time())


async def post_stream(client: openai.AsyncOpenAI, body: bytes) -> bytes:
    """`body` posted to /v1/chat/completions as bytes; the answer's bytes."""
    url = str(client.base_url).rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}", "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=headers) as response:
        assert response.status == 200
        return await response.read()


def usage_chunk() -> bytes:
    return b"data: " + orjson.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [], "usage": USAGE}) + b"\n\n"


async def test_a_clients_own_stream_options_gain_include_usage_and_keep_the_rest(gateway: Gateway, upstream: FakeUpstream) -> None:
    events = stream_of("hi", done=False)
    upstream.then(Step(events=[*events, usage_chunk(), b"data: [DONE]\n\n"]))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    body = {"model": "chat", "stream": True, "stream_options": {"include_obfuscation": False},
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    wire = await post_stream(client, orjson.dumps(body))
    assert upstream.requests[0].body["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    assert b'"usage"' not in wire and wire.endswith(b"data: [DONE]\n\n")  # asked by the gateway: kept from the client


async def test_a_client_that_asked_for_usage_gets_it_and_its_bytes_go_as_sent(gateway: Gateway, upstream: FakeUpstream) -> None:
    events = stream_of("hi", done=False)
    upstream.then(Step(events=[*events, usage_chunk(), b"data: [DONE]\n\n"]))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    sent = b'{"model": "chat", "stream": true, "stream_options": {"include_usage": true}, "temperature": 1.50,\n "messages": [{"role": "user", "content": "hi"}]}'
    wire = await post_stream(client, sent)
    assert upstream.requests[0].raw == sent
    assert usage_chunk() in wire
