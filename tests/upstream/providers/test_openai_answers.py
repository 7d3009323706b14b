"""How an OpenAI-compatible upstream's answer is read: by its length, in pieces, cut off, too large; its headers."""

from __future__ import annotations

import asyncio
import gc
import gzip
import warnings

import openai
import orjson
import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion, stream_of
from tests.support.gateway import Gateway

QUESTION = [{"role": "user", "content": "q"}]
ANSWER = orjson.dumps(chat_completion("Paris"))
UPGRADE = {"Connection": "Upgrade", "Upgrade": "websocket"}


def single(upstream: FakeUpstream, server: str = "") -> str:
    return f'{server}routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}'


async def test_an_answer_cut_off_before_its_content_length_is_a_502(gateway: Gateway, upstream: FakeUpstream) -> None:
    head = ANSWER[:40]
    upstream.then(Step(events=[head], reset=True, events_type="application/json", headers={"Content-Length": str(len(ANSWER))}))
    client = await gateway(single(upstream))
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="chat", messages=QUESTION)
    assert caught.value.status_code == 502 and "cut off" in caught.value.message


async def test_an_answer_of_no_announced_length_is_read_whole(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=[ANSWER[:40], 0.01, ANSWER[40:]], events_type="application/json"))  # chunked, in two pieces
    client = await gateway(single(upstream))
    answer = await client.chat.completions.create(model="chat", messages=QUESTION)
    assert answer.choices[0].message.content == "Paris"


async def test_an_answer_of_no_announced_length_over_the_limit_is_a_502(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=[b"x" * 1500, b"x" * 1500], events_type="application/json"))
    client = await gateway(single(upstream, "server: {maxResponseBytes: 2000}\n"))
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="chat", messages=QUESTION)
    assert caught.value.status_code == 502 and "larger than server.maxResponseBytes (2000 bytes)" in caught.value.message


async def test_an_empty_answer_is_not_json(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=b""))
    client = await gateway(single(upstream))
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="chat", messages=QUESTION)
    assert caught.value.status_code == 502 and "not JSON" in caught.value.message


async def test_rate_limit_headers_are_relayed_however_spelled_and_whatever_came_before(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    """Names an answer taught the gateway to pass over never hide the rate-limit headers of the next."""
    upstream.then(
        Step(body=chat_completion(), headers={"X-Request-Id": "1", "Openai-Version": "v"}),
        Step(body=chat_completion(), headers={"X-Request-Id": "2", "X-RateLimit-Remaining-Requests": "41", "Retry-After-Ms": "5"}),
        Step(body=chat_completion(), headers={"X-Request-Id": "3", "X-RateLimit-Remaining-Requests": "40"}),
    )
    client = await gateway(single(upstream))
    seen = []
    for _ in range(3):
        raw = await client.chat.completions.with_raw_response.create(model="chat", messages=QUESTION)
        seen.append({k: v for k, v in raw.headers.items() if k.startswith(("x-ratelimit", "retry-after", "openai"))})
    assert seen == [{}, {"x-ratelimit-remaining-requests": "41", "retry-after-ms": "5"}, {"x-ratelimit-remaining-requests": "40"}]


async def test_a_compressed_answer_is_read_whole_whatever_its_content_length_says(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    """Content-Length counts the compressed bytes; the body read is the larger decompressed one."""
    long = orjson.dumps(chat_completion("Paris " * 200))
    upstream.then(Step(body=gzip.compress(long), headers={"Content-Encoding": "gzip"}))
    client = await gateway(single(upstream))
    answer = await client.chat.completions.create(model="chat", messages=QUESTION)
    assert answer.choices[0].message.content == "Paris " * 200


async def test_the_answers_content_type_is_relayed_with_its_charset(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=ANSWER, content_type=None, headers={"Content-Type": "application/json; charset=utf-8"}))  # type: ignore[arg-type]
    client = await gateway(single(upstream))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=QUESTION)
    assert raw.headers["content-type"] == "application/json; charset=utf-8"


@pytest.mark.parametrize("content_type", ["text/event-stream", "Text/Event-Stream; charset=utf-8"])
async def test_a_stream_is_known_by_its_content_type_however_spelled(
    gateway: Gateway, upstream: FakeUpstream, content_type: str
) -> None:
    upstream.then(Step(events=stream_of("Paris"), events_type=content_type))
    client = await gateway(single(upstream))
    stream = await client.chat.completions.create(model="chat", messages=QUESTION, stream=True)
    assert "".join([part.choices[0].delta.content or "" async for part in stream if part.choices]) == "Paris"


async def test_the_upstream_gets_json_typed_bytes_with_the_targets_key_and_accept(gateway: Gateway, upstream: FakeUpstream) -> None:
    """The body's Content-Type travels with the body: the upstream still sees it, once, beside Accept and the key."""
    upstream.then(Step(body=ANSWER))
    client = await gateway(single(upstream))
    await client.chat.completions.create(model="chat", messages=QUESTION)
    headers = {k.lower(): v for k, v in upstream.requests[-1].headers.items()}
    assert headers["content-type"] == "application/json" and headers["accept"] == "application/json"
    assert headers["authorization"] == "Bearer k"


async def test_a_content_type_among_the_targets_headers_wins_over_a_json_body(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=ANSWER))
    target = f'{{provider: openai, baseUrl: "{upstream.url}", apiKey: k, headers: {{Content-Type: "application/json; charset=utf-8"}}}}'
    client = await gateway(f"routes: {{chat: {target}}}")
    await client.chat.completions.create(model="chat", messages=QUESTION)
    assert upstream.requests[-1].headers["Content-Type"] == "application/json; charset=utf-8"


async def test_an_upstream_cookie_is_never_sent_back(gateway: Gateway, upstream: FakeUpstream) -> None:
    """One client's answer sets a cookie: no later request, any client's, carries it upstream."""
    # by name, not by address: aiohttp's default jar keeps no cookies from an IP address
    named = upstream.url.replace("127.0.0.1", "localhost")
    upstream.then(Step(body=chat_completion(), headers={"Set-Cookie": "__cf_bm=session-of-client-a; Path=/"}))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{named}", apiKey: k}}}}')
    for _ in range(2):
        await client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "hi"}])
    assert upstream.calls == 2
    assert "Cookie" not in upstream.requests[1].headers


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_an_informational_answer_is_a_502(gateway: Gateway, upstream: FakeUpstream, stream: bool) -> None:
    """A 1xx is no final answer: relayed, a 101 would switch the client's connection to nothing."""
    client = await gateway(single(upstream))
    upstream.then(Step(status=101, body=b"", headers=UPGRADE))
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="chat", messages=QUESTION, stream=stream)
    assert caught.value.status_code == 502 and "upstream answered 101" in caught.value.message


async def test_an_answer_taken_whole_lets_an_upgraded_connection_go_at_once(gateway: Gateway, upstream: FakeUpstream) -> None:
    """aiohttp keeps an upgraded connection (a 101 with Upgrade: websocket) for its new protocol: the
    fast read lets it go itself, not leaving it to the response's garbage collection."""
    client = await gateway(single(upstream))
    loop = asyncio.get_running_loop()
    loop.set_debug(True)  # a response collected before it was let go then warns ("Unclosed response")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            upstream.then(Step(status=101, body=b"", headers=UPGRADE))
            with pytest.raises(openai.APIStatusError):
                await client.chat.completions.create(model="chat", messages=QUESTION)
            gc.collect()
    finally:
        loop.set_debug(False)
    assert [str(w.message) for w in caught if "Unclosed" in str(w.message)] == []
