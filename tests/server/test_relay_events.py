"""What the relay does with each event after the commit, seen on the wire (not through an SDK that
would raise on an error chunk by itself): an error ends the stream with the gateway's own error
event and no `[DONE]`, whatever the upstream sends after it."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
import pytest
from aiohttp import web

from tests.support.fakes import FakeUpstream, Step, chunk, error_body, stream_of
from tests.support.gateway import GATEWAY_KEY, Gateway

FIRST = chunk({"role": "assistant", "content": "Hi"})
AFTER = stream_of(" there")[1:]  # a chunk, the finish chunk and [DONE]: what must never reach the client


async def raw_stream(gateway: Gateway, upstream: FakeUpstream, events: list[bytes]) -> list[bytes]:
    """The gateway's answer to a chat stream, as its SSE events' bytes."""
    upstream.then(Step(events=[*events]))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    base = str(client.base_url).rstrip("/")
    body = {"model": "chat", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    async with aiohttp.ClientSession() as session, session.post(f"{base}/chat/completions", json=body, headers=headers) as response:
        assert response.status == 200
        answer = await response.read()
    return [event + b"\n\n" for event in answer.split(b"\n\n") if event]


@pytest.mark.parametrize(
    ("event", "says"),
    [
        (b"data: " + orjson.dumps(error_body(500, "exploded")) + b"\n\n", "exploded"),  # an object with an error
        (b'event: error\ndata: {"message": "named and failed"}\n\n', "named and failed"),  # named, no error key
        (b"event: error\ndata: overloaded, try later\n\n", "overloaded, try later"),  # named, not JSON
        (b'data: {"choices": [{"delta": {"content": "x"\n\n', "not JSON"),  # broken inside the braces
        (b'data: {"choices": []} trailing\n\n', "not JSON"),
    ],
    ids=["error-object", "named-error", "named-error-text", "broken-json", "json-and-garbage"],
)
async def test_an_error_after_the_commit_ends_the_stream_with_the_gateway_s_error_and_no_done(
    gateway: Gateway, upstream: FakeUpstream, event: bytes, says: str
) -> None:
    events = await raw_stream(gateway, upstream, [FIRST, event, *AFTER])  # type: ignore[list-item]
    assert events[0] == FIRST
    assert len(events) == 2, events  # nothing the upstream sent after the error is relayed
    error = orjson.loads(events[1].removeprefix(b"data: "))["error"]
    assert error["code"] == "upstream_stream_error" and error["message"].startswith("chat: ")
    assert says in error["message"]


async def test_chunks_that_only_mention_an_error_are_relayed_as_they_came(gateway: Gateway, upstream: FakeUpstream) -> None:
    mentions = [
        chunk({"content": '{"error": "not really"}'}),  # the word in the text
        b'data: {"id":"x","object":"chat.completion.chunk","error":null,"choices":[]}\n\n',  # an empty error
        b"data: [1, 2]\n\n",  # JSON, if not an object
    ]
    events = await raw_stream(gateway, upstream, [FIRST, *mentions, *AFTER])  # type: ignore[list-item]
    assert events == [FIRST, *mentions, *AFTER]


async def test_the_first_event_goes_out_with_the_rest_of_its_read(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events that arrived in one network read with the first one are written to the client with it."""
    from gateway.server import relay

    writes: list[bytes] = []
    write = relay.EventStreamResponse.write  # aiohttp's own StreamResponse with the fast paths off

    async def counted(self: web.StreamResponse, data: bytes) -> None:
        writes.append(bytes(data))
        await write(self, data)

    monkeypatch.setattr(relay.EventStreamResponse, "write", counted)
    gate = asyncio.Event()
    upstream.then(Step(events=[FIRST + AFTER[0], gate, *AFTER[1:]]))  # two events in one upstream write
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    stream = await client.chat.completions.create(model="chat", stream=True, messages=[{"role": "user", "content": "hi"}])
    first = await stream.__anext__()
    assert first.choices[0].delta.content == "Hi"
    gate.set()
    assert [part async for part in stream]
    assert writes[0] == FIRST + AFTER[0]
