"""POST /v1/messages (and count_tokens) passed through to anthropic targets: the official `anthropic` SDK as the client.

An anthropic target gets the client's body as it is (the model set by its overrideParams) at
`{baseUrl}/v1/messages` over aiohttp, with the operator's key in `x-api-key` and the client's
`anthropic-version` and `anthropic-beta`; the answer, SSE included, comes back as it was sent.
A stream commits at its first output; a failure after that ends with Anthropic's `error` event.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import anthropic
import orjson
import pytest

from tests.support.anthropic_clients import (
    CLAUDE_KEY,
    HELLO,
    WEATHER_TOOL,
    Clients,
    Start,
    anthropic_gateway,  # noqa: F401  (the `start` fixture)
    claude_route,
    claude_target,
    fake_claude,  # noqa: F401  (the `claude` fixture)
    header_text,
    read_until_error,
    use_the_tool,
)
from tests.support.fakes import FakeUpstream, Step, stream_of
from tests.support.fakes_anthropic import COUNTED, Answer, FakeAnthropic, anthropic_error, message_events, sse
from tests.support.fakes_anthropic import MODEL as CLAUDE_MODEL
from tests.support.fakes_anthropic import message as claude_message
from tests.support.gateway import GATEWAY_KEY
from tests.support.memory_turns import a, stored, u
from tests.support.metrics import scrape, value
from tests.support.tool_calls import QUESTION

# litellm's pydantic types warn once per process when first built; litellm itself hides it, pytest shows it
pytestmark = pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning")
REPO = Path(__file__).resolve().parents[2]


def bare_route(fake: FakeAnthropic) -> str:
    """An anthropic target without overrideParams: nothing in the body changes."""
    return f'routes: {{chat: {{name: claude, provider: anthropic, baseUrl: "{fake.url}", apiKey: {CLAUDE_KEY}}}}}'


def mixed_route(fake: FakeAnthropic, upstream: FakeUpstream, *, codes: str = "[529]") -> str:
    """Route `chat`: the anthropic target, then an OpenAI-compatible one."""
    return f"""
routes:
  chat:
    strategy: {{mode: fallback, onStatusCodes: {codes}}}
    targets:
      - {claude_target(fake)}
      - {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}
"""


async def post(clients: Clients, path: str, body: bytes, **headers: str) -> tuple[int, bytes, dict[str, str]]:
    async with aiohttp.ClientSession() as session, session.post(
        clients.root + path, data=body, headers={"Content-Type": "application/json", "x-api-key": GATEWAY_KEY, **headers}
    ) as response:
        return response.status, await response.read(), dict(response.headers)


# ---------------------------------------------------------------- pass-through


async def test_the_clients_bytes_and_the_upstreams_answer_pass_through_unchanged(start: Start, claude: FakeAnthropic) -> None:
    clients = await start(bare_route(claude))
    body = b'{"model": "chat",  "max_tokens": 64, "messages": [{"role": "user", "content": "hello"}], "x_extra": [1, 2]}'
    answer = {**claude_message("Hello from Claude"), "extra_field": {"kept": True}}
    claude.then(Answer(body=answer))
    status, relayed, headers = await post(clients, "/v1/messages", body)
    assert status == 200 and orjson.loads(relayed) == answer
    assert (headers["x-gateway-route"], headers["x-gateway-target"]) == ("chat", "claude")
    [sent] = claude.requests
    assert sent.path == "/v1/messages" and sent.raw == body  # byte for byte: nothing was re-serialized
    assert sent.headers["x-api-key"] == CLAUDE_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"  # the client sent none
    assert "Authorization" not in sent.headers and GATEWAY_KEY not in header_text(sent.headers)


async def test_the_sdk_gets_anthropics_answer_and_stream_as_sent(start: Start, claude: FakeAnthropic) -> None:
    clients = await start(claude_route(claude))
    beta = {"anthropic-beta": "prompt-caching-2024-07-31"}
    message = await clients.anthropic_client.messages.create(
        model="chat", max_tokens=64, system="Be terse.", messages=HELLO, extra_headers=beta
    )
    assert message.model == CLAUDE_MODEL and [block.text for block in message.content if block.type == "text"] == [
        "Hello from Claude"
    ]
    assert (message.usage.input_tokens, message.usage.output_tokens) == (11, 7)
    stream = await clients.anthropic_client.messages.create(model="chat", max_tokens=64, messages=HELLO, stream=True)
    kinds = [event.type async for event in stream]
    assert kinds == ["message_start", "content_block_start", "content_block_delta", "content_block_delta",
                     "content_block_stop", "message_delta", "message_stop"]  # fmt: skip
    first, second = claude.requests
    assert first.body == {"model": CLAUDE_MODEL, "max_tokens": 64, "system": "Be terse.", "messages": HELLO}
    assert second.body["stream"] is True and second.body["messages"] == HELLO
    assert first.headers["anthropic-beta"] == "prompt-caching-2024-07-31"
    assert first.headers["anthropic-version"] == "2023-06-01"  # the SDK's own
    for request in claude.requests:  # the operator's key goes upstream, never the caller's
        assert request.headers["x-api-key"] == CLAUDE_KEY
        assert GATEWAY_KEY not in header_text(request.headers)
    samples = await scrape(clients.openai_client)
    labels = {"route": "chat", "target": "claude", "provider": "anthropic"}
    assert value(samples, "gateway_tokens_total", **labels, kind="prompt") == 22  # 11 from each answer
    assert value(samples, "gateway_tokens_total", **labels, kind="completion") == 14


async def test_the_stream_helper_reads_a_relayed_stream(start: Start, claude: FakeAnthropic) -> None:
    clients = await start(claude_route(claude))
    async with clients.anthropic_client.messages.stream(model="chat", max_tokens=64, messages=HELLO) as stream:
        texts = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert "".join(texts) == "Hello from Claude" and final.stop_reason == "end_turn"


async def test_tool_use_round_trip_passes_through(start: Start, claude: FakeAnthropic) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    calling = {**claude_message(""), "content": [{"type": "text", "text": "Checking."}, use], "stop_reason": "tool_use"}
    claude.then(Answer(body=calling))
    clients = await start(claude_route(claude))
    first, second = await use_the_tool(clients.anthropic_client, "sunny")
    assert first.stop_reason == "tool_use"
    assert [block.model_dump(exclude_none=True) for block in first.content] == calling["content"]
    assert [block.text for block in second.content if block.type == "text"] == ["Hello from Claude"]
    sent = claude.requests[1].body
    assert sent["tools"] == [WEATHER_TOOL]
    assert sent["messages"] == [
        QUESTION,
        {"role": "assistant", "content": calling["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
    ]


# ---------------------------------------------------------------- the commit point and failures


def overloaded_stream() -> Answer:
    """A 200 stream that reports an overload before any output, as Anthropic does."""
    start_event = message_events("x")[0]
    return Answer(events=[start_event, sse("error", anthropic_error("overloaded_error", "Overloaded"))])


async def test_an_error_event_before_any_output_falls_back(start: Start, claude: FakeAnthropic, upstream: FakeUpstream) -> None:
    claude.then(overloaded_stream())
    upstream.then(Step(events=stream_of("from openai")))
    clients = await start(mixed_route(claude, upstream))
    async with clients.anthropic_client.messages.stream(model="chat", max_tokens=64, messages=HELLO) as stream:
        final = await stream.get_final_message()
        headers = stream.response.headers
    assert [block.text for block in final.content if block.type == "text"] == ["from openai"]
    assert (headers["x-gateway-target"], headers["x-gateway-attempts"]) == ("up", "2")
    assert upstream.requests[0].path == "/v1/chat/completions"  # that attempt alone was translated
    assert upstream.requests[0].body["messages"] == HELLO and upstream.requests[0].body["stream"] is True


async def test_an_error_event_after_the_first_output_ends_with_an_anthropic_error(start: Start, claude: FakeAnthropic) -> None:
    events = message_events("Hel", complete=False)
    claude.then(Answer(events=[*events, sse("error", anthropic_error("overloaded_error", "Overloaded"))]))
    clients = await start(claude_route(claude))
    seen, error = await read_until_error(clients.anthropic_client)
    assert seen[0] == "message_start" and "content_block_delta" in seen and "message_stop" not in seen
    assert error.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert "claude: Overloaded" in error.body["error"]["message"]  # type: ignore[index]


async def test_a_stream_that_ends_without_message_stop_is_cut_off(start: Start, claude: FakeAnthropic) -> None:
    claude.then(Answer(events=message_events("Hel", "lo", complete=False)))  # a clean end, but early
    clients = await start(claude_route(claude))
    seen, error = await read_until_error(clients.anthropic_client)
    assert "message_stop" not in seen
    assert "ended without message_stop" in error.body["error"]["message"]  # type: ignore[index]


async def test_an_event_that_is_not_json_ends_the_stream_with_an_anthropic_error(start: Start, claude: FakeAnthropic) -> None:
    corrupted = b"event: content_block_delta\ndata: {not json\n\n"
    claude.then(Answer(events=[*message_events("Hel", complete=False), corrupted, *message_events("lo")[3:]]))
    clients = await start(claude_route(claude))
    seen, error = await read_until_error(clients.anthropic_client)
    assert seen[-1] == "content_block_delta" and "message_stop" not in seen  # nothing after it relayed
    assert "claude: upstream sent a stream event that is not JSON" in error.body["error"]["message"]  # type: ignore[index]


async def test_a_translated_attempt_is_refused_for_what_only_anthropic_can_do(
    start: Start, claude: FakeAnthropic, upstream: FakeUpstream
) -> None:
    """An Anthropic client tool goes to the anthropic target as it is; the openai one cannot take it."""
    claude.then(Answer(529, anthropic_error("overloaded_error", "Overloaded")))
    clients = await start(mixed_route(claude, upstream))
    bash = {"type": "bash_20250124", "name": "bash"}  # run by the client, defined by Anthropic: no chat form
    with pytest.raises(anthropic.BadRequestError) as caught:
        await clients.anthropic_client.messages.create(
            model="chat", max_tokens=64, messages=HELLO, tools=[bash],  # type: ignore[list-item]
        )  # fmt: skip
    assert claude.requests[0].body["tools"] == [bash]
    assert "claude: 529" in caught.value.body["error"]["message"]  # type: ignore[index]
    assert upstream.calls == 0


# ---------------------------------------------------------------- count_tokens


async def test_count_tokens_is_asked_of_an_anthropic_target(start: Start, claude: FakeAnthropic) -> None:
    clients = await start(claude_route(claude))
    counted = await clients.anthropic_client.messages.count_tokens(
        model="chat", system="Be terse.", messages=HELLO, extra_headers={"anthropic-beta": "token-counting-2024-11-01"}
    )
    assert counted.input_tokens == COUNTED
    [sent] = claude.requests
    assert sent.path == "/v1/messages/count_tokens"
    assert sent.body == {"model": CLAUDE_MODEL, "system": "Be terse.", "messages": HELLO}
    assert sent.headers["x-api-key"] == CLAUDE_KEY and sent.headers["anthropic-beta"] == "token-counting-2024-11-01"


async def test_count_tokens_is_estimated_for_other_targets(start: Start, upstream: FakeUpstream) -> None:
    clients = await start(f'routes: {{chat: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    short = await clients.anthropic_client.messages.count_tokens(model="chat", messages=HELLO)
    long = await clients.anthropic_client.messages.count_tokens(
        model="chat", system="Be terse.", messages=[{"role": "user", "content": "hello " * 1000}], tools=[WEATHER_TOOL]
    )
    assert 0 < short.input_tokens < 20 and 1000 < long.input_tokens < 1100
    assert upstream.calls == 0


async def test_count_tokens_falls_back_to_an_estimate(start: Start, claude: FakeAnthropic, upstream: FakeUpstream) -> None:
    claude.then(Answer(529, anthropic_error("overloaded_error", "Overloaded")))
    clients = await start(mixed_route(claude, upstream))
    raw = await clients.anthropic_client.messages.with_raw_response.count_tokens(model="chat", messages=HELLO)
    assert 0 < raw.parse().input_tokens < 20
    assert (raw.headers["x-gateway-target"], raw.headers["x-gateway-attempts"]) == ("up", "2")
    assert upstream.calls == 0


async def test_a_malformed_count_tokens_request_is_an_anthropic_400(start: Start, upstream: FakeUpstream) -> None:
    clients = await start(f'routes: {{chat: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    status, body, _ = await post(clients, "/v1/messages/count_tokens", b'{"model": "chat", "messages": "nope"}')
    assert status == 400
    error = orjson.loads(body)
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"


# ---------------------------------------------------------------- memory goes the translated way


async def test_memory_through_an_anthropic_target_stores_the_turn(start: Start, claude: FakeAnthropic, tmp_path: Path) -> None:
    clients = await start(f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}\n{claude_route(claude)}')
    memory = {"memoryId": "conv"}
    await clients.anthropic_client.messages.create(model="chat", max_tokens=64, messages=[u("q1")], extra_headers=memory)
    async with clients.anthropic_client.messages.stream(
        model="chat", max_tokens=64, messages=[u("q2")], extra_headers=memory
    ) as stream:
        await stream.get_final_message()
    history = claude.requests[1].body["messages"]  # litellm's rendering of the chat history
    assert [turn["role"] for turn in history] == ["user", "assistant", "user"]
    _, kept = await stored(clients.openai_client, "conv")
    assert kept["messages"] == [u("q1"), a("Hello from Claude"), u("q2"), a("Hello from Claude")]


@pytest.mark.parametrize("failure", ["overloaded", "cut-off"])
async def test_memory_through_an_anthropic_target_stores_nothing_on_failure(
    start: Start, claude: FakeAnthropic, tmp_path: Path, failure: str
) -> None:
    if failure == "overloaded":
        claude.then(Answer(529, anthropic_error("overloaded_error", "Overloaded")))
    else:
        claude.then(Answer(events=message_events("Hel", "lo", complete=False), cut=True))
    clients = await start(f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}\n{claude_route(claude)}')
    memory = {"memoryId": "conv"}
    with pytest.raises(anthropic.APIStatusError):
        async with clients.anthropic_client.messages.stream(
            model="chat", max_tokens=64, messages=[u("q1")], extra_headers=memory
        ) as stream:
            await stream.get_final_message()
    assert claude.calls == 1
    status, _ = await stored(clients.openai_client, "conv")
    assert status == 404  # nothing was stored


# ---------------------------------------------------------------- litellm stays out of it

_PROBE = """
import asyncio, json, sys

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from gateway.config.loader import parse_config
from gateway.server.app import create_app
from tests.support.fakes_anthropic import FakeAnthropic


async def main():
    fake = FakeAnthropic()
    upstream = TestServer(fake.app())
    await upstream.start_server()
    url = str(upstream.make_url("")).rstrip("/")
    config = parse_config(f'routes: {{chat: {{provider: anthropic, baseUrl: "{url}", apiKey: k}}}}')
    gateway = TestServer(create_app(config))
    await gateway.start_server()
    body = {"model": "chat", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    async with ClientSession() as session:
        for path, extra in (("/v1/messages", {}), ("/v1/messages", {"stream": True}), ("/v1/messages/count_tokens", {})):
            async with session.post(gateway.make_url(path), json={**body, **extra}) as answer:
                assert answer.status == 200, await answer.text()
                await answer.read()
    await gateway.close()
    await upstream.close()


asyncio.run(main())
print(json.dumps({"litellm": "litellm" in sys.modules}))
"""


def test_native_messages_traffic_never_imports_litellm(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"litellm": False}


async def test_chat_completions_to_an_anthropic_target_still_go_through_litellm(start: Start, claude: FakeAnthropic) -> None:
    """Three first requests at once: litellm, imported on a thread at the first need, serves them all."""
    clients = await start(claude_route(claude))
    answers = await asyncio.gather(*(
        clients.openai_client.chat.completions.create(model="chat", messages=[u("hi")]) for _ in range(3)
    ))  # fmt: skip
    assert [answer.choices[0].message.content for answer in answers] == ["Hello from Claude"] * 3
    assert [request.path for request in claude.requests] == ["/v1/messages"] * 3
