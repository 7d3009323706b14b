"""Bounds on what one request can make the gateway buffer or compute, and what the client gets past them."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from gateway.core.sse import MAX_EVENT_BYTES
from gateway.memory import counting as counting_module
from gateway.memory.counting import OFF_LOOP_CHARS
from gateway.tokens import text_size
from tests.support.fakes import FakeUpstream, Step, chat_completion, chunk, stream_of
from tests.support.gateway import Gateway
from tests.support.memory_turns import stored

QUESTION = [{"role": "user", "content": "q"}]


def limited(first: FakeUpstream, second: FakeUpstream, tmp_path: Path, *, limit: int = 2000) -> str:
    return f"""
server: {{maxResponseBytes: {limit}}}
memory: {{store: sqlite, path: "{tmp_path / 'memory.db'}"}}
routes:
  chat: {{provider: openai, baseUrl: "{first.url}", apiKey: k}}
  backed:
    strategy: {{mode: fallback}}
    targets:
      - {{name: big, provider: openai, baseUrl: "{first.url}", apiKey: k}}
      - {{name: small, provider: openai, baseUrl: "{second.url}", apiKey: k}}
"""


async def test_an_answer_over_max_response_bytes_is_a_502_naming_the_limit(
    gateway: Gateway, make_upstream, tmp_path: Path
) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.default = Step(body=chat_completion("x" * 5000))
    client = await gateway(limited(first, second, tmp_path))
    for stream in (False, True):  # a stream request answered with JSON is buffered too
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model="chat", messages=QUESTION, stream=stream, extra_headers={"memoryId": "m"})
        assert caught.value.status_code == 502
        assert "larger than server.maxResponseBytes (2000 bytes)" in caught.value.message
    assert (await stored(client, "m"))[0] == 404
    answer = await client.chat.completions.create(model="backed", messages=QUESTION, extra_headers={"memoryId": "f"})
    assert answer.choices[0].message.content == "Hello from upstream"  # the limit is a failure fallback acts on


async def test_a_streamed_reply_too_large_to_store_ends_with_an_error(
    gateway: Gateway, make_upstream, tmp_path: Path
) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(events=stream_of(*["y" * 500] * 6)), Step(events=stream_of(*["y" * 500] * 6)))
    client = await gateway(limited(first, second, tmp_path))
    stream = await client.chat.completions.create(model="chat", messages=QUESTION, stream=True)
    assert len("".join([p.choices[0].delta.content or "" async for p in stream if p.choices])) == 3000  # no memory: no limit
    stream = await client.chat.completions.create(model="chat", messages=QUESTION, stream=True, extra_headers={"memoryId": "s"})
    with pytest.raises(openai.APIError, match=r"larger than server\.maxResponseBytes") as caught:
        async for _ in stream:
            pass
    assert caught.value.code == "response_too_large"
    assert (await stored(client, "s"))[0] == 404


async def test_an_sse_event_over_the_cap_fails_the_stream(gateway: Gateway, make_upstream) -> None:
    huge = b"data: " + orjson.dumps({"pad": "z" * MAX_EVENT_BYTES}) + b"\n\n"
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(events=[huge]), Step(events=[chunk({"role": "assistant", "content": "a"}), huge]))
    second.then(Step(events=stream_of("from second")))
    client = await gateway(f"""
routes:
  chat:
    strategy: {{mode: fallback}}
    targets:
      - {{name: first, provider: openai, baseUrl: "{first.url}", apiKey: k}}
      - {{name: second, provider: openai, baseUrl: "{second.url}", apiKey: k}}
""")
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=QUESTION, stream=True)
    assert raw.headers["x-gateway-target"] == "second"  # before the commit: an attempt that failed
    assert "".join([p.choices[0].delta.content or "" async for p in raw.parse() if p.choices]) == "from second"
    stream = await client.chat.completions.create(model="chat", messages=QUESTION, stream=True)
    with pytest.raises(openai.APIError, match=f"larger than {MAX_EVENT_BYTES} bytes"):
        async for _ in stream:
            pass


async def test_healthz_answers_while_an_8mb_memory_turn_is_processed(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each count of the giant message runs off the loop: held there until /healthz has answered, the turn still ends.

    Counted on the loop, the held count would stall it, /healthz could not answer, and the hold would
    run out (30 s) unreleased: no duration is measured.
    """
    client = await gateway(f"""
memory: {{store: sqlite, path: "{tmp_path / 'memory.db'}"}}
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k, memory: {{memoryType: token_window}}}}
""")
    big = [{"role": "user", "content": "a" * 8 * 1024 * 1024}]  # one giant "word": tiktoken's slowest input
    loop_thread = threading.get_ident()
    counting, release = threading.Event(), threading.Event()
    off_loop: list[bool] = []  # per large count: whether it ran off the loop and was released, not timed out
    original = counting_module.count_message

    def held_count(message: Any, *args: Any, **options: Any) -> int:
        if text_size(message) > OFF_LOOP_CHARS:
            counting.set()
            off_loop.append(threading.get_ident() != loop_thread and release.wait(30))
        return original(message, *args, **options)

    monkeypatch.setattr(counting_module, "count_message", held_count)
    turn = asyncio.ensure_future(
        client.chat.completions.create(model="chat", messages=big, extra_headers={"memoryId": "big"})
    )
    assert await asyncio.to_thread(counting.wait, 30), "the turn never counted the giant message"
    base = str(client.base_url).removesuffix("/").removesuffix("/v1")
    async with aiohttp.ClientSession() as session, session.get(f"{base}/healthz") as health:
        assert health.status == 200  # answered while the count is held
    release.set()
    assert (await turn).choices[0].message.content == "Hello from upstream"
    assert off_loop and all(off_loop), off_loop
    assert len(upstream.requests[-1].body["messages"][0]["content"]) == len(big[0]["content"])
