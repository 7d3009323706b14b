"""POST /v1/messages end to end: the official `anthropic` SDK as the client, real fake upstreams.

The upstreams are an OpenAI-compatible fake (tests/support/fakes.py), to which requests are translated,
and a fake Anthropic Messages API (tests/support/fakes_anthropic.py) behind `anthropic` targets, to which
they pass through (test_messages_api_native_e2e.py has the pass-through itself).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import orjson
import pytest

from tests.support.anthropic_clients import (
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
from tests.support.fakes import (
    FakeUpstream,
    Step,
    broken_stream,
    chat_completion,
    error_body,
    stream_of,
    usage_chunk,
)
from tests.support.fakes_anthropic import (
    Answer,
    FakeAnthropic,
    message_events,
    overloaded,
    rate_limited,
)
from tests.support.gateway import GATEWAY_KEY
from tests.support.memory_turns import SYSTEM, a, stored, u
from tests.support.metrics import scrape, value
from tests.support.routes import fallback_route
from tests.support.tool_calls import CALL, QUESTION, calling_answer, calling_stream

# litellm's pydantic types warn once per process when first built; litellm itself hides it, pytest shows it
pytestmark = pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning")

def openai_route(upstream: FakeUpstream, *, name: str = "chat", memory: Path | None = None) -> str:
    store = f'memory: {{store: sqlite, path: "{memory}"}}\n' if memory is not None else ""
    return f'{store}routes: {{{name}: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}'


async def post(clients: Clients, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    """A raw POST /v1/messages: the status and the JSON body."""
    async with aiohttp.ClientSession() as session, session.post(
        clients.root + "/v1/messages", data=body, headers={"Content-Type": "application/json", **headers}
    ) as response:
        return response.status, await response.json(content_type=None)


def anthropic_error(body: Any, kind: str) -> str:
    """The message of an Anthropic-shaped error body of type `kind` (asserting the shape)."""
    assert isinstance(body, dict) and set(body) == {"type", "error"}, body
    assert body["type"] == "error" and body["error"]["type"] == kind, body
    message: str = body["error"]["message"]
    return message


# ---------------------------------------------------------------- answers from an OpenAI-compatible upstream


async def test_a_message_is_answered_through_an_openai_upstream(start: Start, upstream: FakeUpstream) -> None:
    clients = await start(openai_route(upstream))
    raw = await clients.anthropic_client.messages.with_raw_response.create(
        model="chat", max_tokens=64, system="Be terse.", messages=HELLO, temperature=0.5
    )
    message = raw.parse()
    assert message.type == "message" and message.role == "assistant" and message.model == "chat"
    assert [(block.type, getattr(block, "text", None)) for block in message.content] == [("text", "Hello from upstream")]
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (5, 3)
    assert raw.headers["x-gateway-route"] == "chat" and raw.headers["x-gateway-target"] == "up"
    sent = upstream.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["messages"] == [{"role": "system", "content": "Be terse."}, *HELLO]
    assert (sent.body["max_tokens"], sent.body["temperature"]) == (64, 0.5)


async def test_a_stream_through_messages_stream_gives_the_final_message(start: Start, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=[*stream_of("Hel", "lo", done=False), usage_chunk(5, 2), b"data: [DONE]\n\n"]))
    clients = await start(openai_route(upstream))
    async with clients.anthropic_client.messages.stream(model="chat", max_tokens=64, messages=HELLO) as stream:
        texts = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert texts == ["Hel", "lo"]
    assert [block.text for block in final.content if block.type == "text"] == ["Hello"]
    assert final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (5, 2)
    assert upstream.requests[0].body["stream"] is True


async def test_a_raw_stream_is_anthropics_event_sequence(start: Start, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=stream_of("Hel", "lo")))
    clients = await start(openai_route(upstream))
    stream = await clients.anthropic_client.messages.create(model="chat", max_tokens=64, messages=HELLO, stream=True)
    events = [event async for event in stream]
    assert [event.type for event in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop",
    ]  # fmt: skip
    deltas = [event.delta for event in events if event.type == "content_block_delta"]
    assert "".join(delta.text for delta in deltas if delta.type == "text_delta") == "Hello"
    assert [event.delta.stop_reason for event in events if event.type == "message_delta"] == ["end_turn"]


# ---------------------------------------------------------------- tool use


async def test_tool_use_round_trip(start: Start, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=calling_answer()), Step(body=chat_completion("It is sunny in Paris.")))
    clients = await start(openai_route(upstream))
    first, second = await use_the_tool(clients.anthropic_client, "sunny in Paris")
    assert first.stop_reason == "tool_use"
    [use] = first.content
    assert use.type == "tool_use"
    assert (use.id, use.name, use.input) == ("call_1", "get_weather", {"city": "Paris"})
    assert [block.text for block in second.content if block.type == "text"] == ["It is sunny in Paris."]
    sent = upstream.requests[1].body
    assert sent["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "parameters": WEATHER_TOOL["input_schema"], "description": "The weather in a city.",
    }}]  # fmt: skip
    assert sent["messages"] == [
        QUESTION,
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny in Paris"},
    ]


async def test_a_streamed_tool_call_is_a_tool_use_block(start: Start, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=calling_stream()))
    clients = await start(openai_route(upstream))
    async with clients.anthropic_client.messages.stream(
        model="chat", max_tokens=64, messages=[QUESTION], tools=[WEATHER_TOOL]
    ) as stream:
        final = await stream.get_final_message()
    [use] = final.content
    assert use.type == "tool_use"
    assert (use.id, use.name, use.input) == ("call_1", "get_weather", {"city": "Paris"})
    assert final.stop_reason == "tool_use"


async def test_an_agents_tool_loop_with_memory_is_not_doubled(start: Start, upstream: FakeUpstream, tmp_path: Path) -> None:
    # the upstream spaces its arguments; the client resends them as the SDK encodes tool_use input
    calling = calling_answer()
    spaced = {**CALL, "function": {**CALL["function"], "arguments": '{"city": "Paris"}'}}
    calling["choices"][0]["message"].update(content="Let me check.", tool_calls=[spaced])
    upstream.then(Step(body=calling), Step(body=chat_completion("Sunny.")), Step(body=chat_completion("Rain.")))
    clients = await start(openai_route(upstream, memory=tmp_path / "memory.db"))
    options: dict[str, Any] = {"model": "chat", "max_tokens": 64, "system": "Be terse.", "tools": [WEATHER_TOOL],
                               "extra_headers": {"memoryId": "loop"}}
    history: list[Any] = [QUESTION]
    first = await clients.anthropic_client.messages.create(messages=history, **options)
    result = {"type": "tool_result", "tool_use_id": first.content[1].id, "content": "sunny"}
    history += [{"role": "assistant", "content": first.content}, {"role": "user", "content": [result]}]
    second = await clients.anthropic_client.messages.create(messages=history, **options)
    history += [{"role": "assistant", "content": second.content}, u("Tomorrow?")]
    await clients.anthropic_client.messages.create(messages=history, **options)
    turn = [QUESTION, {"role": "assistant", "content": "Let me check.", "tool_calls": [spaced]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    system = {"role": "system", "content": "Be terse."}
    assert upstream.requests[1].body["messages"] == [system, *turn]
    assert upstream.requests[2].body["messages"] == [system, *turn, a("Sunny."), u("Tomorrow?")]
    _, kept = await stored(clients.openai_client, "loop")
    assert kept["messages"] == [*turn, a("Sunny."), u("Tomorrow?"), a("Rain.")]


# ---------------------------------------------------------------- fallback


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_failing_target_falls_back_to_the_next(
    start: Start, make_upstream: Callable[..., Awaitable[FakeUpstream]], stream: bool
) -> None:
    first, second = await make_upstream(Step(status=503, body=error_body(503))), await make_upstream()
    second.then(Step(events=stream_of("from second")) if stream else Step(body=chat_completion("from second")))
    clients = await start(fallback_route(first, second))
    if stream:
        async with clients.anthropic_client.messages.stream(model="chat", max_tokens=64, messages=HELLO) as events:
            message = await events.get_final_message()
            headers = events.response.headers
    else:
        raw = await clients.anthropic_client.messages.with_raw_response.create(model="chat", max_tokens=64, messages=HELLO)
        message, headers = raw.parse(), raw.headers
    assert [block.text for block in message.content if block.type == "text"] == ["from second"]
    assert message.stop_reason == "end_turn"
    assert (headers["x-gateway-target"], headers["x-gateway-attempts"]) == ("second", "2")
    assert (first.calls, second.calls) == (1, 1)


async def test_an_overloaded_anthropic_target_falls_back_to_an_openai_one(
    start: Start, claude: FakeAnthropic, upstream: FakeUpstream
) -> None:
    claude.then(overloaded())
    upstream.then(Step(body=chat_completion("from openai")))
    clients = await start(f"""
routes:
  chat:
    strategy: {{mode: fallback, onStatusCodes: [529]}}
    targets:
      - {claude_target(claude)}
      - {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}
""")
    raw = await clients.anthropic_client.messages.with_raw_response.create(model="chat", max_tokens=64, messages=HELLO)
    assert [block.text for block in raw.parse().content if block.type == "text"] == ["from openai"]
    assert (raw.headers["x-gateway-target"], raw.headers["x-gateway-attempts"]) == ("up", "2")
    assert (claude.calls, upstream.calls) == (1, 1)


# ---------------------------------------------------------------- errors are Anthropic-shaped


async def test_malformed_json_is_an_anthropic_invalid_request_error(start: Start, upstream: FakeUpstream) -> None:
    clients = await start(openai_route(upstream))
    status, body = await post(clients, b'{"model": "chat", "max_tokens": ', {"x-api-key": GATEWAY_KEY})
    assert status == 400
    anthropic_error(body, "invalid_request_error")
    assert upstream.calls == 0


async def test_missing_max_tokens_is_an_anthropic_invalid_request_error(start: Start, upstream: FakeUpstream) -> None:
    clients = await start(openai_route(upstream))
    with pytest.raises(anthropic.BadRequestError) as caught:
        await clients.anthropic_client.messages.create(model="chat", messages=HELLO, max_tokens=anthropic.NOT_GIVEN)
    assert caught.value.status_code == 400
    assert "max_tokens" in anthropic_error(caught.value.body, "invalid_request_error")
    assert upstream.calls == 0


async def test_an_unknown_model_is_an_anthropic_not_found_error(start: Start, upstream: FakeUpstream) -> None:
    clients = await start(openai_route(upstream))
    with pytest.raises(anthropic.NotFoundError) as caught:
        await clients.anthropic_client.messages.create(model="no-such-model", max_tokens=64, messages=HELLO)
    assert "no-such-model" in anthropic_error(caught.value.body, "not_found_error")
    assert caught.value.response.headers["x-request-id"]
    assert upstream.calls == 0


@pytest.mark.parametrize("header", ["x-api-key", "Authorization"])
async def test_a_wrong_key_is_an_anthropic_authentication_error(
    start: Start, upstream: FakeUpstream, header: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    clients = await start(openai_route(upstream))
    key = {"api_key": "wrong-key"} if header == "x-api-key" else {"auth_token": "wrong-key"}
    async with clients.new_client(**key) as sdk:
        with pytest.raises(anthropic.AuthenticationError) as caught:
            await sdk.messages.create(model="chat", max_tokens=64, messages=HELLO)
    assert caught.value.status_code == 401
    assert caught.value.response.request.headers[header].endswith("wrong-key")  # the SDK sent it where meant
    anthropic_error(caught.value.body, "authentication_error")
    assert upstream.calls == 0


async def test_the_gateway_key_is_accepted_as_a_bearer_token_too(
    start: Start, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    clients = await start(openai_route(upstream))
    async with clients.new_client(auth_token=GATEWAY_KEY) as sdk:
        message = await sdk.messages.create(model="chat", max_tokens=64, messages=HELLO)
    assert message.content[0].type == "text"
    assert upstream.requests[0].headers["Authorization"] == "Bearer k"


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [(500, anthropic.InternalServerError, "api_error"), (529, anthropic.OverloadedError, "overloaded_error")],
)
async def test_every_target_failing_is_an_anthropic_server_error(
    start: Start, make_upstream: Callable[..., Awaitable[FakeUpstream]], status: int, error: type[Exception], kind: str
) -> None:
    failing = await make_upstream(Step(status=status, body=error_body(status)))
    clients = await start(openai_route(failing))
    with pytest.raises(error) as caught:
        await clients.anthropic_client.messages.create(model="chat", max_tokens=64, messages=HELLO)
    assert isinstance(caught.value, anthropic.APIStatusError) and caught.value.status_code == status
    assert f"up: {status}" in anthropic_error(caught.value.body, kind)


@pytest.mark.parametrize(
    ("answer", "error", "kind"),
    [(overloaded(), anthropic.OverloadedError, "overloaded_error"), (rate_limited("3"), anthropic.RateLimitError, "rate_limit_error")],
    ids=["529", "429"],
)
async def test_an_anthropic_targets_failure_reaches_the_client_with_its_type(
    start: Start, claude: FakeAnthropic, answer: Answer, error: type[anthropic.APIStatusError], kind: str
) -> None:
    claude.then(answer)
    clients = await start(claude_route(claude))
    with pytest.raises(error) as caught:
        await clients.anthropic_client.messages.create(model="chat", max_tokens=64, messages=HELLO)
    assert caught.value.status_code == answer.status
    assert f"claude: {answer.status}" in anthropic_error(caught.value.body, kind)
    assert caught.value.response.headers.get("retry-after") == answer.headers.get("retry-after")


async def test_a_stream_that_breaks_after_the_commit_ends_with_an_error_and_no_message_stop(
    start: Start, upstream: FakeUpstream
) -> None:
    upstream.then(broken_stream())
    clients = await start(openai_route(upstream))
    seen, error = await read_until_error(clients.anthropic_client)
    assert seen[0] == "message_start" and "content_block_delta" in seen
    assert "message_stop" not in seen and "message_delta" not in seen
    assert "up:" in anthropic_error(error.body, "api_error")


async def test_the_stream_helper_raises_on_a_broken_stream(start: Start, upstream: FakeUpstream) -> None:
    upstream.then(broken_stream())
    clients = await start(openai_route(upstream))
    texts: list[str] = []
    with pytest.raises(anthropic.APIStatusError):
        async with clients.anthropic_client.messages.stream(model="chat", max_tokens=64, messages=HELLO) as stream:
            async for text in stream.text_stream:
                texts.append(text)
            await stream.get_final_message()
    assert texts == ["Hel"]


async def test_an_anthropic_targets_broken_stream_ends_with_an_error_and_no_message_stop(
    start: Start, claude: FakeAnthropic
) -> None:
    claude.then(Answer(events=message_events("Hel", "lo", complete=False), cut=True))
    clients = await start(claude_route(claude))
    seen, error = await read_until_error(clients.anthropic_client)
    assert seen[0] == "message_start" and "content_block_delta" in seen
    assert "message_stop" not in seen and "message_delta" not in seen
    assert "claude:" in anthropic_error(error.body, "api_error")


# ---------------------------------------------------------------- keys are never forwarded


async def test_neither_the_gateway_key_nor_the_callers_headers_reach_the_upstream(start: Start, upstream: FakeUpstream) -> None:
    clients = await start(openai_route(upstream))
    await clients.anthropic_client.messages.create(model="chat", max_tokens=64, messages=HELLO)
    async with (
        clients.new_client(auth_token=GATEWAY_KEY, api_key=None) as sdk,
        sdk.messages.stream(model="chat", max_tokens=64, messages=HELLO) as stream,
    ):
        await stream.get_final_message()
    assert upstream.calls == 2
    for request in upstream.requests:
        headers = {name.lower(): value for name, value in request.headers.items()}
        assert "x-api-key" not in headers
        assert headers["authorization"] == "Bearer k"
        assert GATEWAY_KEY not in header_text(headers)


# ---------------------------------------------------------------- one conversation across the three APIs


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_memory_continues_one_conversation_across_chat_messages_and_responses(
    start: Start, upstream: FakeUpstream, tmp_path: Path, stream: bool
) -> None:
    for reply in ("r1", "r2", "r3"):
        upstream.then(Step(events=stream_of(reply)) if stream and reply != "r1" else Step(body=chat_completion(reply)))
    clients = await start(openai_route(upstream, memory=tmp_path / "memory.db"))
    memory = {"memoryId": "conv-x"}
    first = await clients.openai_client.chat.completions.create(model="chat", messages=[SYSTEM, u("q1")], extra_headers=memory)
    assert first.choices[0].message.content == "r1"

    if stream:
        async with clients.anthropic_client.messages.stream(
            model="chat", max_tokens=64, messages=[u("q2")], extra_headers=memory
        ) as events:
            second = await events.get_final_message()
            headers = events.response.headers
    else:
        raw = await clients.anthropic_client.messages.with_raw_response.create(
            model="chat", max_tokens=64, messages=[u("q2")], extra_headers=memory
        )
        second, headers = raw.parse(), raw.headers
    assert [block.text for block in second.content if block.type == "text"] == ["r2"]
    assert (headers["x-memory-id"], headers["x-memory-history"]) == ("conv-x", "2")
    assert upstream.requests[1].body["messages"] == [SYSTEM, u("q1"), a("r1"), u("q2")]

    if stream:
        async with clients.openai_client.responses.stream(model="chat", input="q3", extra_headers=memory) as events:
            third_text = (await events.get_final_response()).output_text
    else:
        third_text = (await clients.openai_client.responses.create(model="chat", input="q3", extra_headers=memory)).output_text
    assert third_text == "r3"
    assert upstream.requests[2].body["messages"] == [SYSTEM, u("q1"), a("r1"), u("q2"), a("r2"), u("q3")]

    status, kept = await stored(clients.openai_client, "conv-x")
    assert status == 200
    assert kept["messages"] == [u("q1"), a("r1"), u("q2"), a("r2"), u("q3"), a("r3")]
    assert kept["turns"] == 3 and SYSTEM["content"] in orjson.dumps(kept["system"]).decode()


async def test_a_claude_code_style_client_resending_its_history_is_not_doubled(
    start: Start, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.then(Step(events=stream_of("r1")), Step(events=stream_of("r2")))
    clients = await start(openai_route(upstream, memory=tmp_path / "memory.db"))
    # what such a client sends: the beta endpoint, cached system blocks, thinking, metadata, the whole history
    system = [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}]
    q1 = {"role": "user", "content": [{"type": "text", "text": "q1", "cache_control": {"type": "ephemeral"}}]}
    options: dict[str, Any] = {
        "model": "chat", "max_tokens": 1024, "system": system, "metadata": {"user_id": "user-1"},
        "thinking": {"type": "enabled", "budget_tokens": 512},
        "extra_headers": {"memoryId": "agent", "anthropic-beta": "interleaved-thinking-2025-05-14"},
    }  # fmt: skip
    async with clients.anthropic_client.beta.messages.stream(messages=[q1], **options) as stream:
        first = await stream.get_final_message()
    thinking = {"type": "thinking", "thinking": "earlier reasoning", "signature": "c2ln"}
    resent = [q1, {"role": "assistant", "content": [thinking, *first.content]}, u("q2")]
    async with clients.anthropic_client.beta.messages.stream(messages=resent, **options) as stream:
        await stream.get_final_message()
    system_message = {"role": "system", "content": "You are a coding agent."}
    q1_chat = {"role": "user", "content": [{"type": "text", "text": "q1"}]}
    assert upstream.requests[1].body["messages"] == [system_message, q1_chat, a("r1"), u("q2")]
    assert upstream.requests[1].body["user"] == "user-1" and "thinking" not in upstream.requests[1].body
    _, kept = await stored(clients.openai_client, "agent")
    assert kept["messages"] == [q1_chat, a("r1"), u("q2"), a("r2")]


# ---------------------------------------------------------------- metrics


async def test_metrics_count_messages_requests_by_route(start: Start, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=chat_completion()), Step(events=stream_of("hi")), Step(status=500, body=error_body(500)))
    clients = await start(openai_route(upstream))
    await clients.anthropic_client.messages.create(model="chat", max_tokens=64, messages=HELLO)
    async with clients.anthropic_client.messages.stream(model="chat", max_tokens=64, messages=HELLO) as stream:
        await stream.get_final_message()
    with pytest.raises(anthropic.InternalServerError):
        await clients.anthropic_client.messages.create(model="chat", max_tokens=64, messages=HELLO)
    samples = await scrape(clients.openai_client)
    assert value(samples, "gateway_requests_total", route="chat", status_code="200", stream="false") == 1
    assert value(samples, "gateway_requests_total", route="chat", status_code="200", stream="true") == 1
    assert value(samples, "gateway_requests_total", route="chat", status_code="500", stream="false") == 1
    upstream_labels = {"route": "chat", "target": "up", "provider": "openai"}
    assert value(samples, "gateway_upstream_requests_total", **upstream_labels, outcome="200") == 2


async def test_a_refused_request_on_a_known_route_is_counted_under_that_route(start: Start, upstream: FakeUpstream) -> None:
    clients = await start(openai_route(upstream))
    with pytest.raises(anthropic.BadRequestError):
        await clients.anthropic_client.messages.create(model="chat", messages=HELLO, max_tokens=anthropic.NOT_GIVEN)
    await clients.anthropic_client.messages.create(model="chat", max_tokens=64, messages=HELLO)
    samples = await scrape(clients.openai_client)
    assert value(samples, "gateway_requests_total", route="chat", status_code="400", stream="false") == 1
    assert value(samples, "gateway_inflight_requests", route="chat") == 0  # the route resolved once per request
