"""Server-side memory end to end: the openai SDK with memory headers, real fake upstreams."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from gateway.core.memory.windows import NOTICE
from gateway.tokens import count_message, get_encoding
from tests.support.fakes import FakeUpstream, Step, chat_completion, chunk, error_body, stream_of
from tests.support.gateway import GATEWAY_KEY, Gateway, requests_ended
from tests.support.memory_turns import SYSTEM, a, config, received, stored, u


async def ask(
    client: openai.AsyncOpenAI, messages: list[dict[str, Any]], headers: dict[str, str], *, stream: bool = False
) -> tuple[str, Any]:
    """One chat turn; returns the reply text and the response headers."""
    if not stream:
        raw = await client.chat.completions.with_raw_response.create(model="chat", messages=messages, extra_headers=headers)
        return raw.parse().choices[0].message.content or "", raw.headers
    raw = await client.chat.completions.with_raw_response.create(
        model="chat", messages=messages, extra_headers=headers, stream=True
    )
    text = "".join([part.choices[0].delta.content or "" async for part in raw.parse() if part.choices])
    return text, raw.headers


def script_replies(upstream: FakeUpstream, count: int, *, stream: bool, pad: int = 0) -> None:
    for i in range(1, count + 1):
        text = f"r{i}" + "x" * pad
        upstream.then(Step(events=stream_of(text)) if stream else Step(body=chat_completion(text)))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_message_window_conversation(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, stream: bool) -> None:
    client = await gateway(config(upstream, tmp_path))
    script_replies(upstream, 3, stream=stream)
    headers = {"memoryId": "conv-1", "maxMessages": "3"}
    text, first = await ask(client, [SYSTEM, u("q1")], headers, stream=stream)
    assert text == "r1" and first["x-memory-id"] == "conv-1"
    assert (first["x-memory-history"], first["x-memory-evicted"]) == ("0", "0")
    await ask(client, [u("q2")], headers, stream=stream)
    _, third = await ask(client, [u("q3")], headers, stream=stream)
    assert received(upstream) == [
        [SYSTEM, u("q1")],
        [SYSTEM, u("q1"), a("r1"), u("q2")],
        [SYSTEM, u("q2"), a("r2"), u("q3")],
    ]
    assert (third["x-memory-history"], third["x-memory-evicted"]) == ("2", "2")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_token_window_conversation(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, stream: bool) -> None:
    encoding = get_encoding("o200k_base")  # the route sets no model and "chat" is unknown: o200k_base
    cost = {text: count_message(m, encoding) for text, m in
            {"q1": u("q1"), "r1": a("r1"), "q2": u("q2"), "r2": a("r2"), "q3": u("q3")}.items()}
    system_cost = count_message(SYSTEM, encoding)
    # turn 3 has room for r2 and q2 beside the system, q3 and the priming, but not for r1 too
    max_tokens = system_cost + cost["q3"] + 3 + cost["r2"] + cost["q2"] + cost["r1"] - 1
    client = await gateway(config(upstream, tmp_path))
    script_replies(upstream, 3, stream=stream)
    headers = {"x-memory-id": "conv-t", "x-memory-type": "token_window", "x-memory-max-tokens": str(max_tokens)}
    await ask(client, [SYSTEM, u("q1")], headers, stream=stream)
    await ask(client, [u("q2")], headers, stream=stream)
    await ask(client, [u("q3")], headers, stream=stream)
    assert received(upstream)[2] == [SYSTEM, u("q2"), a("r2"), u("q3")]
    assert received(upstream)[1] == [SYSTEM, u("q1"), a("r1"), u("q2")]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_round_window_conversation(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, stream: bool) -> None:
    client = await gateway(config(upstream, tmp_path))
    script_replies(upstream, 4, stream=stream, pad=98)
    r = [f"r{i}" + "x" * 98 for i in range(1, 4)]
    headers = {"memoryId": "conv-r", "memoryType": "round_window", "maxRounds": "2", "maxChars": "1000"}
    for question in ("q1", "q2", "q3"):
        await ask(client, [u(question)], headers, stream=stream)
    assert received(upstream)[2] == [u("q1"), a(r[0]), u("q2"), a(r[1]), u("q3")]
    # now cap the characters too: room for the notice and r3 beside the new turn, not for q3
    budget = len("q4") + len(NOTICE) + len(r[2])
    await ask(client, [u("q4")], {**headers, "maxChars": str(budget)}, stream=stream)
    assert received(upstream)[3] == [a(NOTICE + r[2]), u("q4")]


async def test_route_memory_defaults_apply(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(config(upstream, tmp_path, route_memory="maxMessages: 1"))
    script_replies(upstream, 2, stream=False)
    await ask(client, [u("q1")], {"memoryId": "m"})
    await ask(client, [u("q2")], {"memoryId": "m"})
    assert received(upstream)[1] == [u("q2")]


async def test_resent_history_is_not_doubled(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(config(upstream, tmp_path))
    script_replies(upstream, 2, stream=False)
    await ask(client, [u("q1")], {"memoryId": "m"})
    await ask(client, [u("q1"), a("r1"), u("q2")], {"memoryId": "m"})
    assert received(upstream)[1] == [u("q1"), a("r1"), u("q2")]


async def test_streamed_tool_calls_are_stored_as_one_message(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(config(upstream, tmp_path))
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    upstream.then(
        Step(events=[
            chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
            chunk({}, "tool_calls"),
            b"data: [DONE]\n\n",
        ]),
        Step(body=chat_completion("It is sunny.")),
    )
    stream = await client.chat.completions.create(
        model="chat", messages=[u("weather in Paris?")], stream=True, extra_headers={"memoryId": "tools"}
    )
    _ = [part async for part in stream]
    tool_result = {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
    await ask(client, [tool_result], {"memoryId": "tools"})
    assert received(upstream)[1] == [
        u("weather in Paris?"),
        {"role": "assistant", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ]},
        tool_result,
    ]


# ---------------------------------------------------------------- nothing stored on failure


async def test_nothing_stored_when_every_fallback_fails(gateway: Gateway, make_upstream, tmp_path: Path) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(body=chat_completion("r1")), Step(status=500, body=error_body(500)))
    second.then(Step(status=500, body=error_body(500)))
    client = await gateway(f"""
memory: {{store: sqlite, path: "{tmp_path / 'm.db'}"}}
routes:
  chat:
    strategy: {{mode: fallback}}
    targets:
      - {{provider: openai, baseUrl: "{first.url}", apiKey: k}}
      - {{provider: openai, baseUrl: "{second.url}", apiKey: k}}
""")
    await ask(client, [u("q1")], {"memoryId": "m"})
    before = await stored(client, "m")
    with pytest.raises(openai.InternalServerError):
        await ask(client, [u("q2")], {"memoryId": "m"})
    assert await stored(client, "m") == before
    assert before[1]["messages"] == [u("q1"), a("r1")]


async def test_nothing_stored_when_the_stream_is_cut(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(config(upstream, tmp_path))
    upstream.then(Step(events=[chunk({"role": "assistant", "content": "par"}), chunk({"content": "tial"})], reset=True))
    with pytest.raises(openai.APIError):
        await ask(client, [u("q1")], {"memoryId": "cut"}, stream=True)
    assert (await stored(client, "cut"))[0] == 404
    # a stream that ends without its finish_reason and [DONE] is cut too
    upstream.then(Step(events=stream_of("no end", done=False)))
    with pytest.raises(openai.APIError):
        await ask(client, [u("q1")], {"memoryId": "cut"}, stream=True)
    assert (await stored(client, "cut"))[0] == 404


async def test_nothing_stored_when_the_client_leaves_mid_stream(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, tmp_path))
    upstream.then(Step(events=[chunk({"role": "assistant", "content": "Hi"}), 0.2, chunk({"content": "!"}), 5.0, *stream_of("x")]))
    stream = await client.chat.completions.create(
        model="chat", messages=[u("q1")], stream=True, extra_headers={"memoryId": "left"}
    )
    await stream.__aiter__().__anext__()
    await stream.close()
    await asyncio.wait_for(upstream.disconnected.wait(), 5)
    await asyncio.wait_for(requests_ended(client), 5)  # what the gateway would store, it has stored by now
    assert (await stored(client, "left"))[0] == 404
    # and the conversation is not left locked
    upstream.then(Step(body=chat_completion("r1")))
    assert (await ask(client, [u("q1")], {"memoryId": "left"}))[0] == "r1"


# ---------------------------------------------------------------- isolation, persistence, management


TWO_KEYS = f'auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}, {{name: team-b, key: other-key}}]}}'


async def test_two_keys_same_memory_id_do_not_leak(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client_a = await gateway(config(upstream, tmp_path, extra=TWO_KEYS))
    client_b = openai.AsyncOpenAI(base_url=str(client_a.base_url), api_key="other-key", max_retries=0)
    script_replies(upstream, 2, stream=False)
    await ask(client_a, [u("secret of a")], {"memoryId": "shared"})
    await ask(client_b, [u("hello from b")], {"memoryId": "shared"})
    assert received(upstream)[1] == [u("hello from b")]
    status_a, body_a = await stored(client_a, "shared")
    status_b, body_b = await stored(client_b, "shared", key="other-key")
    assert status_a == status_b == 200
    assert body_a["messages"][0] == u("secret of a") and body_b["messages"][0] == u("hello from b")
    upstream.then(Step(body=chat_completion("y")))
    await ask(client_a, [u("x")], {"memoryId": "only-a"})
    base = str(client_a.base_url).rstrip("/")
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer other-key"}) as session:
        async with session.delete(f"{base}/memory/only-a") as response:
            assert response.status == 404
        async with session.post(f"{base}/memory/only-a/undo") as response:
            assert response.status == 404
    assert (await stored(client_b, "only-a", key="other-key"))[0] == 404
    status, body = await stored(client_a, "only-a")
    assert status == 200 and body["messages"] == [u("x"), a("y")]
    await client_b.close()


async def test_conversation_survives_a_restart(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    first = await gateway(config(upstream, tmp_path))
    script_replies(upstream, 2, stream=False)
    await ask(first, [SYSTEM, u("q1")], {"memoryId": "durable"})
    second = await gateway(config(upstream, tmp_path))  # a new app on the same SQLite file
    await ask(second, [u("q2")], {"memoryId": "durable"})
    assert received(upstream)[1] == [SYSTEM, u("q1"), a("r1"), u("q2")]


@pytest.mark.parametrize(
    ("headers", "param"),
    [
        ({"memoryId": "has space"}, "memoryId"),
        ({"memoryId": "x" * 257}, "memoryId"),
        ({"x-memory-id": "ok", "x-memory-type": "forever"}, "x-memory-type"),
        ({"memoryId": "ok", "maxMessages": "0"}, "maxMessages"),
        ({"memoryId": "ok", "maxMessages": "-3"}, "maxMessages"),
        ({"memoryId": "ok", "maxTokens": "many"}, "maxTokens"),
        ({"memoryId": "ok", "x-memory-max-rounds": "1.5"}, "x-memory-max-rounds"),
        ({"memoryId": "ok", "maxChars": "400001"}, "maxChars"),
        ({"memoryId": "ok", "maxMessages": "201"}, "maxMessages"),
    ],
)
async def test_bad_memory_headers(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, headers: dict[str, str], param: str) -> None:
    client = await gateway(config(upstream, tmp_path))
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="chat", messages=[u("x")], extra_headers=headers)
    assert caught.value.body["param"] == param  # type: ignore[index]
    assert param in caught.value.message
    assert upstream.calls == 0


async def test_memory_headers_are_ignored_outside_chat(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(config(upstream, tmp_path))
    data = [{"object": "embedding", "index": 0, "embedding": [0.1]}]
    upstream.then(Step(body={"object": "list", "model": "m", "data": data, "usage": {"prompt_tokens": 0, "total_tokens": 0}}))
    await client.embeddings.create(model="chat", input="x", extra_headers={"memoryId": "emb"})
    assert (await stored(client, "emb"))[0] == 404


async def test_busy_conversation_times_out_with_409(gateway: Gateway, upstream: FakeUpstream) -> None:
    release = asyncio.Event()
    upstream.then(Step(body=chat_completion("r1"), gate=release))  # the first turn is answered once released
    client = await gateway(f"""
memory: {{store: memory, lockTimeoutSeconds: 0.3}}
routes: {{slow: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}
""")
    first = asyncio.create_task(
        client.chat.completions.create(model="slow", messages=[u("one")], extra_headers={"memoryId": "busy"})
    )
    await asyncio.wait_for(upstream.arrived.wait(), 10)  # sent upstream: it holds the conversation
    with pytest.raises(openai.ConflictError) as caught:
        await client.chat.completions.create(model="slow", messages=[u("two")], extra_headers={"memoryId": "busy"})
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.code == "memory_busy"
    release.set()
    await first
    # the first turn, which held the conversation, was stored
    status, body = await stored(client, "busy")
    assert status == 200 and body["turns"] == 1


async def test_a_later_larger_window_sees_more(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(config(upstream, tmp_path, memory="maxStoredMessages: 5"))
    script_replies(upstream, 4, stream=False)
    for question in ("q1", "q2", "q3"):
        await ask(client, [u(question)], {"memoryId": "grow", "maxMessages": "1"})
    assert received(upstream)[2] == [u("q3")]
    await ask(client, [u("q4")], {"memoryId": "grow", "maxMessages": "10"})
    # six messages were stored, the cap keeps five: the oldest (q1) is gone
    assert received(upstream)[3] == [a("r1"), u("q2"), a("r2"), u("q3"), a("r3"), u("q4")]


async def test_unreachable_memory_store_is_503(gateway: Gateway, upstream: FakeUpstream) -> None:
    from tests.support.servers import free_port

    client = await gateway(f"""
memory: {{store: redis, url: "redis://127.0.0.1:{free_port()}/0"}}
routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}
""")
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model="chat", messages=[u("x")], extra_headers={"memoryId": "m"})
    assert caught.value.status_code == 503 and caught.value.code == "memory_unavailable"
    assert upstream.calls == 0
    # without memory the gateway still answers
    assert (await ask(client, [u("x")], {}))[0] == "Hello from upstream"


async def test_unstorable_stream_replies_end_with_an_error_and_store_nothing(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A reply memory cannot keep (a malformed tool call, an event that is not JSON) is never a clean end."""
    client = await gateway(config(upstream, tmp_path))
    odd = {"index": "x", "id": 5, "function": {"name": None, "arguments": ["not", "text"]}}
    upstream.then(
        Step(events=[chunk({"role": "assistant", "content": "fine", "tool_calls": [odd]}), chunk({}, "stop"),
                     b"data: [DONE]\n\n"]),
        Step(events=[chunk({"role": "assistant", "content": "x"}), b"data: {not json\n\n", chunk({}, "stop"),
                     b"data: [DONE]\n\n"]),
    )
    base = str(client.base_url).rstrip("/")
    body = {"model": "chat", "stream": True, "messages": [u("q")]}
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {GATEWAY_KEY}"}) as session:
        for memory_id, code in [("odd", b'"unstorable_reply"'), ("odd2", b'"upstream_stream_error"')]:
            async with session.post(f"{base}/chat/completions", json=body, headers={"memoryId": memory_id}) as response:
                text = await response.read()
                assert response.status == 200 and b"[DONE]" not in text
                assert text.rsplit(b"\n\n", 2)[-2].startswith(b'data: {"error"') and code in text
            assert (await stored(client, memory_id))[0] == 404


async def test_malformed_tool_call_in_a_json_reply_is_a_502_and_stores_nothing(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, tmp_path))
    answer = chat_completion("")
    answer["choices"][0]["message"]["tool_calls"] = [{"id": ["x"], "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    upstream.then(Step(body=answer))
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="chat", messages=[u("q")], extra_headers={"memoryId": "bad"})
    assert caught.value.status_code == 502 and caught.value.code == "unstorable_reply"
    assert "tool_calls[0].id" in caught.value.message
    assert (await stored(client, "bad"))[0] == 404


async def test_json_answer_to_a_stream_request_is_replayed_and_stored(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, tmp_path))
    upstream.then(Step(body=chat_completion("as json")))
    text, headers = await ask(client, [u("q")], {"memoryId": "j"}, stream=True)
    assert text == "as json" and headers["content-type"].startswith("text/event-stream")
    status, stored_body = await stored(client, "j")
    assert status == 200 and stored_body["messages"] == [u("q"), a("as json")]
