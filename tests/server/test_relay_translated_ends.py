"""A translated stream the translator cannot end is the upstream's malformed answer, not the gateway's failure.

A chat stream reaches a Responses or Anthropic Messages client through a translator, which can
find only at the end that the answer cannot be translated: a tool call that never got its
function name has no Responses item. That is the upstream's fault, as a chunk the translator
cannot read is: the client's stream ends with the API's error event (upstream_stream_error,
502, no `response.completed`), the attempt counts as the upstream's stream_error, and nothing
is logged as the gateway's own failure (no error record, no traceback). The same answer not
streamed is a 502 too. Messages ends these streams whole; every end it might refuse (a
translator's finish that raises) is checked on the relay itself, for both APIs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import orjson
import pytest
from aiohttp import web

from gateway.core.translate import MalformedAnswer
from gateway.core.translate.reshape import AnthropicReshape, ResponsesReshape, StreamReshape
from gateway.observe.logs import JsonFormatter
from gateway.observe.trace import STREAM_ERROR, Trace
from gateway.server.relay import relay_stream
from tests.support.committed import Recorder, ScriptedStream, a_target, committed
from tests.support.fakes import FakeUpstream, Step, chunk
from tests.support.gateway import GATEWAY_KEY, Gateway

JSON = dict[str, Any]


def call(index: int, **fields: Any) -> JSON:
    """A delta carrying one tool call piece: `id` and the function's fields as given (None included)."""
    piece: JSON = {"index": index}
    if "id" in fields:
        piece["id"] = fields.pop("id")
    piece["function"] = fields
    return {"tool_calls": [piece]}


# Chat streams whose tool calls never get a function name, each its own way.
UNNAMED: dict[str, list[JSON]] = {
    "no-name": [call(0, id="a", arguments="{}")],
    "name-null": [call(0, id="a", name=None, arguments="{}")],
    "name-empty": [call(0, id="a", name="", arguments='{"city": "Paris"}')],
    "function-null": [{"tool_calls": [{"index": 0, "id": "a", "function": None}]}],
    "arguments-only": [call(0, arguments='{"ci'), call(0, arguments='ty": "Paris"}')],
    "second-call-unnamed": [call(0, id="a", name="get_weather", arguments="{}"), call(1, id="b", arguments="{}")],
}


def streamed(deltas: list[JSON]) -> Step:
    events: list[Any] = [chunk({"role": "assistant", "content": None}), *map(chunk, deltas)]
    return Step(events=[*events, chunk({}, "tool_calls"), b"data: [DONE]\n\n"])


def answered(deltas: list[JSON]) -> Step:
    """The same answer as one chat completion: each call's pieces joined, a missing name left missing."""
    calls: dict[int, JSON] = {}
    for delta in deltas:
        for piece in delta["tool_calls"]:
            joined = calls.setdefault(piece["index"], {"type": "function", "function": {}})
            if "id" in piece:
                joined["id"] = piece["id"]
            if piece["function"] is None:
                joined["function"] = None
                continue
            for key, value in piece["function"].items():
                joined["function"][key] = (joined["function"].get(key) or "") + value if value is not None else None
    message = {"role": "assistant", "content": None, "tool_calls": list(calls.values())}
    body = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}  # fmt: skip
    return Step(body=body)


def route(upstream: FakeUpstream) -> str:
    return f'routes: {{chat: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k, responsesApi: translate}}}}'


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[JSON]]]:
    """The gateway's log records so far, as the JSON it writes; none of them an error or a traceback."""
    caplog.set_level(logging.DEBUG)
    formatter = JsonFormatter()
    yield lambda: [orjson.loads(formatter.format(r)) for r in caplog.records if r.name.startswith("gateway")]
    ran = [r for r in caplog.get_records("call") if r.name.startswith("gateway")]
    assert not [(r.getMessage(), r.exc_info) for r in ran if r.levelno >= logging.ERROR or r.exc_info]


def access_lines(records: Callable[[], list[JSON]]) -> list[tuple[Any, Any]]:
    return [(line["status"], line["error_code"]) for line in records() if line.get("logger") == "gateway.access"]


@pytest.mark.parametrize("deltas", list(UNNAMED.values()), ids=list(UNNAMED))
async def test_a_responses_stream_whose_tool_call_has_no_name_ends_as_the_upstreams_failure(
    gateway: Gateway, upstream: FakeUpstream, records: Callable[[], list[JSON]], deltas: list[JSON]
) -> None:
    upstream.then(streamed(deltas), answered(deltas))
    client = await gateway(route(upstream))
    stream = await client.responses.create(model="chat", input="weather?", stream=True)
    events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "error" and "response.completed" not in kinds, kinds
    error = events[-1]
    assert error.type == "error"
    assert error.code == "upstream_stream_error" and error.message.startswith("up: "), error
    assert "never got a function name" in error.message
    assert [event.sequence_number for event in events] == list(range(len(events)))

    with pytest.raises(openai.APIStatusError) as caught:  # not streamed: the same answer is a 502
        await client.responses.create(model="chat", input="weather?")
    assert caught.value.status_code == 502, caught.value.response.text
    assert access_lines(records) == [(502, "upstream_stream_error"), (502, "malformed_upstream_response")]


@pytest.mark.parametrize("deltas", list(UNNAMED.values()), ids=list(UNNAMED))
async def test_a_messages_stream_of_the_same_answers_is_never_the_gateways_failure(
    gateway: Gateway, upstream: FakeUpstream, records: Callable[[], list[JSON]], deltas: list[JSON]
) -> None:
    upstream.then(streamed(deltas))
    client = await gateway(route(upstream))
    root = str(client.base_url).rstrip("/").removesuffix("/v1")
    async with anthropic.AsyncAnthropic(base_url=root, api_key=GATEWAY_KEY, max_retries=0, timeout=20) as claude:
        try:
            stream = await claude.messages.create(
                model="chat", max_tokens=64, messages=[{"role": "user", "content": "weather?"}], stream=True
            )
            kinds = [event.type async for event in stream]
        except anthropic.APIStatusError as exc:  # an in-band error event, raised by the SDK: the upstream's
            assert exc.status_code == 502 and "up: " in str(exc), exc
        else:
            assert kinds[0] == "message_start" and kinds[-1] == "message_stop", kinds
    ((status, code),) = access_lines(records)
    assert status in (200, 502) and code != "internal_error", (status, code)


class _Unending:
    """A real translator whose end the answer fails, as a translator's finish may raise MalformedAnswer."""

    def __init__(self, translator: StreamReshape) -> None:
        self.translator = translator

    def feed(self, chunk: Any) -> list[bytes]:
        return self.translator.feed(chunk)

    def finish(self, usage: Any) -> list[bytes]:
        raise MalformedAnswer("the stream's tool call 0 never got a function name")

    def error(self, message: str, code: str, status: int) -> bytes:
        return self.translator.error(message, code, status)


RESHAPES = {
    "responses": lambda: ResponsesReshape({"model": "chat", "input": "hi"}, response_id="resp_1", created_at=1).translator(),
    "messages": lambda: AnthropicReshape("chat", message_id="msg_1").translator(),
}


def error_of(event: bytes) -> tuple[str, str]:
    """(the error's code or type, its message) from a Responses or Anthropic `error` event."""
    name, data = event.split(b"\n", 1)
    assert name == b"event: error", event
    error = orjson.loads(data.removeprefix(b"data: "))
    inner = error.get("error")
    return (inner["type"], inner["message"]) if isinstance(inner, dict) else (error["code"], error["message"])


@pytest.mark.parametrize("api", list(RESHAPES))
async def test_any_end_a_translator_refuses_is_the_upstreams_malformed_answer(
    aiohttp_client: Any, records: Callable[[], list[JSON]], api: str
) -> None:
    target, recorder = a_target(), Recorder()
    trace = Trace(recorder)
    stream = ScriptedStream([[chunk({"content": " there"}, "stop"), b"data: [DONE]\n\n"]])

    async def relay(request: web.Request) -> web.StreamResponse:
        result = committed(target, chunk({"role": "assistant", "content": "Hi"}), stream)
        return await relay_stream(request, result, {}, trace=trace, translator=_Unending(RESHAPES[api]()))

    app = web.Application()
    app.router.add_get("/", relay)
    response = await (await aiohttp_client(app)).get("/")
    events = [event for event in (await response.read()).split(b"\n\n") if event]
    assert response.status == 200 and b"Hi" in b"".join(events[:-1])
    code, message = error_of(events[-1])
    assert code == ("upstream_stream_error" if api == "responses" else "api_error")
    assert message == "a: the stream's tool call 0 never got a function name"
    assert (trace.failed_status, trace.error_code) == (502, "upstream_stream_error")
    assert recorder.attempts == [("a", STREAM_ERROR)] and stream.closed
