"""The openai SDK and LangChain against a loopback server that answers through the translation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from pydantic import BaseModel

from gateway.core.translate import TranslationError
from gateway.core.translate.responses.answer import from_chat
from gateway.core.translate.responses.request import to_chat
from gateway.core.translate.responses.stream import StreamTranslator
from tests.support.responses_translation import (
    CREATED,
    RESPONSE_ID,
    TEXT_CHUNKS,
    USAGE,
    WEATHER,
    call_delta,
    chunk,
    completion,
    tool_call,
    usage_chunk,
)


@dataclass
class Script:
    """What the loopback server's "upstream" says: a chat answer, or chunks and then maybe a failure."""

    answer: dict[str, Any] = field(default_factory=completion)
    chunks: list[dict[str, Any]] = field(default_factory=lambda: list(TEXT_CHUNKS))
    fail: bool = False
    chat: list[dict[str, Any]] = field(default_factory=list)  # the chat payloads to_chat made

Serve = Callable[[Script], Awaitable[openai.AsyncOpenAI]]


@pytest.fixture
async def serve(aiohttp_server: Any) -> Any:
    clients: list[openai.AsyncOpenAI] = []

    async def start(script: Script) -> openai.AsyncOpenAI:
        async def responses(request: web.Request) -> web.StreamResponse:
            payload = await request.json()
            try:
                script.chat.append(to_chat(payload))
            except TranslationError as exc:
                return web.Response(status=exc.status, body=exc.to_json(), content_type="application/json")
            if not payload.get("stream"):
                return web.json_response(from_chat(script.answer, request=payload, response_id=RESPONSE_ID,
                                                   created_at=CREATED))
            stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await stream.prepare(request)
            translator = StreamTranslator(payload, RESPONSE_ID, CREATED)
            for piece in script.chunks:
                await stream.write(b"".join(translator.feed(piece)))
            if script.fail:
                await stream.write(translator.error_event("upstream went away", "upstream_error"))
            else:
                await stream.write(b"".join(translator.finish()))
            await stream.write_eof()
            return stream

        app = web.Application()
        app.router.add_post("/v1/responses", responses)
        server: TestServer = await aiohttp_server(app)
        client = openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="k", max_retries=0)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()

TOOL_CHUNKS = [
    chunk({"role": "assistant", "content": None}),
    chunk(call_delta(0, call_id="call_1", name="weather", arguments="")),
    chunk(call_delta(0, arguments='{"city":')),
    chunk(call_delta(0, arguments='"Paris"}')),
    chunk({}, "tool_calls"),
    usage_chunk(),
]


async def test_sdk_create_reads_the_translated_answer(serve: Serve) -> None:
    script = Script(answer=completion("Bonjour", usage=USAGE))
    client = await serve(script)
    response = await client.responses.create(model="m", instructions="French.", input="Hello",
                                             max_output_tokens=20)
    assert response.output_text == "Bonjour"
    assert response.usage is not None and response.usage.input_tokens_details.cached_tokens == 4
    assert script.chat[0]["messages"] == [{"role": "system", "content": "French."},
                                          {"role": "user", "content": "Hello"}]
    assert script.chat[0]["max_completion_tokens"] == 20


async def test_sdk_create_stream_yields_the_text(serve: Serve) -> None:
    client = await serve(Script())
    stream = await client.responses.create(model="m", input="hi", stream=True)
    events = [event async for event in stream]
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Hello there"
    assert events[-1].type == "response.completed" and events[-1].response.output_text == "Hello there"


async def test_sdk_stream_accumulates_a_function_call(serve: Serve) -> None:
    script = Script(chunks=TOOL_CHUNKS)
    client = await serve(script)
    async with client.responses.stream(model="m", input="Weather in Paris?", tools=[WEATHER]) as stream:
        arguments = [event.snapshot async for event in stream if event.type == "response.function_call_arguments.delta"]
        final = await stream.get_final_response()
    assert arguments == ['{"city":', '{"city":"Paris"}']
    [call] = final.output
    assert call.type == "function_call" and (call.call_id, call.name) == ("call_1", "weather")
    assert call.parsed_arguments == {"city": "Paris"}  # strict tools are parsed
    assert script.chat[0]["tools"][0]["function"]["name"] == "weather"


class City(BaseModel):
    city: str
    celsius: int


async def test_sdk_stream_parses_structured_output(serve: Serve) -> None:
    script = Script(chunks=[chunk({"content": '{"city":"Paris",'}), chunk({"content": '"celsius":18}'}),
                            chunk({}, "stop")])
    client = await serve(script)
    async with client.responses.stream(model="m", input="Paris?", text_format=City) as stream:
        final = await stream.get_final_response()
    assert final.output_parsed == City(city="Paris", celsius=18)
    assert script.chat[0]["response_format"]["type"] == "json_schema"


async def test_sdk_stream_that_fails_midway_has_no_final_response(serve: Serve) -> None:
    client = await serve(Script(chunks=TEXT_CHUNKS[:2], fail=True))
    async with client.responses.stream(model="m", input="hi") as stream:
        events = [event async for event in stream]
        assert events[-1].type == "error" and events[-1].message == "upstream went away"
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            await stream.get_final_response()


async def test_sdk_sees_a_refused_request_as_a_400(serve: Serve) -> None:
    client = await serve(Script())
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="m", input="hi", tools=[{"type": "file_search", "vector_store_ids": ["vs_1"]}])
    assert caught.value.param == "tools[0].type"


async def test_langchain_responses_api_invoke_and_stream(serve: Serve) -> None:
    from langchain_openai import ChatOpenAI

    script = Script(answer=completion(None, finish="tool_calls",
                                      tool_calls=[tool_call("call_1", "weather", '{"city":"Paris"}')]),
                    chunks=TOOL_CHUNKS)
    client = await serve(script)
    model = ChatOpenAI(model="m", base_url=str(client.base_url), api_key="k",
                       use_responses_api=True, max_retries=0)
    bound = model.bind_tools([{"type": "function", "name": "weather", "description": "Weather in a city",
                               "parameters": WEATHER["parameters"]}])
    message = await bound.ainvoke("Weather in Paris?")
    assert [(c["name"], c["args"], c["id"]) for c in message.tool_calls] == [("weather", {"city": "Paris"}, "call_1")]
    streamed: Any = None
    async for piece in bound.astream("Weather in Paris?"):
        streamed = piece if streamed is None else streamed + piece
    assert [(c["name"], c["args"]) for c in streamed.tool_calls] == [("weather", {"city": "Paris"})]
    script.answer = completion("Hello there")
    text = await model.ainvoke("hi")
    assert text.text == "Hello there"
    assert script.chat[-1]["messages"] == [{"role": "user", "content": "hi"}]
