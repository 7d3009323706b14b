"""POST /v1/responses translated: the official openai SDK and LangChain as clients, a chat completions upstream.

The targets here are translated onto chat completions (`responsesApi: translate`, or a provider
other than openai): what the upstream receives is a chat payload, and what the client reads is a
Responses object or event stream. Pass-through is in test_responses_api_native_e2e.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from tests.support.fakes import (
    FakeUpstream,
    Step,
    broken_stream,
    chat_completion,
    error_body,
    stream_of,
    usage_chunk,
)
from tests.support.fakes_anthropic import MODEL as CLAUDE_MODEL
from tests.support.fakes_anthropic import start_anthropic
from tests.support.gateway import GATEWAY_KEY, KEYS, Gateway
from tests.support.memory_turns import a, stored, u
from tests.support.metrics import scrape, value
from tests.support.openai_errors import error_object
from tests.support.routes import fallback_route
from tests.support.tool_calls import CALL, QUESTION, calling_answer, calling_stream

# litellm's pydantic types warn once per process when first built; litellm itself hides it, pytest shows it
pytestmark = pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning")

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def route(upstream: FakeUpstream, *, name: str = "chat") -> str:
    """Route `name` to `upstream`, translated; response ids are looked up in an in-process store."""
    target = f'name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k, responsesApi: translate'
    return f"{KEYS}\nmemory: {{store: memory}}\nroutes: {{{name}: {{{target}}}}}"


# ---------------------------------------------------------------- answers


async def test_create_answers_a_response_object(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(route(upstream))
    raw = await client.responses.with_raw_response.create(
        model="chat", instructions="Be terse.", input="hello", max_output_tokens=20, temperature=0.5
    )
    response = raw.parse()
    assert response.object == "response" and response.status == "completed" and response.id.startswith("resp_")
    assert response.output_text == "Hello from upstream"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (5, 3, 8)
    assert response.instructions == "Be terse."
    assert (raw.headers["x-gateway-route"], raw.headers["x-gateway-target"]) == ("chat", "up")
    sent = upstream.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["messages"] == [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hello"}]
    assert (sent.body["max_completion_tokens"], sent.body["temperature"]) == (20, 0.5)
    assert "input" not in sent.body and "instructions" not in sent.body


async def test_create_with_stream_yields_responses_events(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=[*stream_of("Hel", "lo", done=False), usage_chunk(5, 2), b"data: [DONE]\n\n"]))
    client = await gateway(route(upstream))
    stream = await client.responses.create(model="chat", input="hello", stream=True)
    events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed" and "error" not in kinds
    assert "".join(event.delta for event in events if event.type == "response.output_text.delta") == "Hello"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == "Hello"
    assert completed.response.usage is not None and completed.response.usage.output_tokens == 2
    sent = upstream.requests[0].body
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


async def test_the_stream_helper_gives_the_final_response(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=stream_of("Hel", "lo")))
    client = await gateway(route(upstream))
    async with client.responses.stream(model="chat", input="hello") as stream:
        deltas = [event.delta async for event in stream if event.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert deltas == ["Hel", "lo"]
    assert final.output_text == "Hello" and final.status == "completed"


# ---------------------------------------------------------------- function tools and structured output


async def test_a_function_call_round_trip(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=calling_answer()), Step(body=chat_completion("It is sunny in Paris.")))
    client = await gateway(route(upstream))
    first = await client.responses.create(model="chat", input=[QUESTION], tools=[WEATHER])
    [call] = first.output
    assert call.type == "function_call"
    assert (call.call_id, call.name, orjson.loads(call.arguments)) == ("call_1", "get_weather", {"city": "Paris"})
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny in Paris"}
    second = await client.responses.create(model="chat", tools=[WEATHER], input=[QUESTION, *first.output, output])
    assert second.output_text == "It is sunny in Paris."
    sent = upstream.requests[1].body
    assert sent["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city.", "parameters": WEATHER["parameters"],
    }}]  # fmt: skip
    assert sent["messages"] == [
        QUESTION,
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny in Paris"},
    ]


async def test_a_streamed_function_call_is_a_function_call_item(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(events=calling_stream()))
    client = await gateway(route(upstream))
    async with client.responses.stream(model="chat", input=[QUESTION], tools=[WEATHER]) as stream:
        final = await stream.get_final_response()
    [call] = final.output
    assert call.type == "function_call"
    assert (call.call_id, call.name, orjson.loads(call.arguments)) == ("call_1", "get_weather", {"city": "Paris"})


class City(BaseModel):
    city: str
    celsius: int


async def test_structured_output_is_parsed_into_the_model(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=chat_completion('{"city":"Paris","celsius":18}')))
    client = await gateway(route(upstream))
    parsed = await client.responses.parse(model="chat", input="Weather in Paris?", text_format=City)
    assert parsed.output_parsed == City(city="Paris", celsius=18)
    response_format = upstream.requests[0].body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "City"
    assert response_format["json_schema"]["schema"]["required"] == ["city", "celsius"]


# ---------------------------------------------------------------- refused and unknown


async def test_what_chat_completions_cannot_do_is_a_400_naming_the_param(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(route(upstream))
    param = "tools[0].type"
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="chat", input="hello", tools=[{"type": "file_search", "vector_store_ids": ["vs_1"]}])
    assert caught.value.param == param
    error = error_object(caught.value)
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert upstream.calls == 0


async def test_an_unknown_model_is_an_openai_shaped_404(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(route(upstream))
    with pytest.raises(openai.NotFoundError) as caught:
        await client.responses.create(model="no-such-model", input="hello")
    error = error_object(caught.value)
    assert (error["code"], error["param"]) == ("model_not_found", "model")
    assert "no-such-model" in error["message"]
    assert upstream.calls == 0


async def test_a_wrong_key_is_an_openai_shaped_401(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = (await gateway(route(upstream))).with_options(api_key="wrong-key")
    with pytest.raises(openai.AuthenticationError) as caught:
        await client.responses.create(model="chat", input="hello")
    assert error_object(caught.value)["code"] == "invalid_api_key"
    assert upstream.calls == 0


# ---------------------------------------------------------------- fallback and failures


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_failing_target_falls_back_to_the_next(
    gateway: Gateway, make_upstream: Callable[..., Awaitable[FakeUpstream]], stream: bool
) -> None:
    first, second = await make_upstream(Step(status=503, body=error_body(503))), await make_upstream()
    second.then(Step(events=stream_of("from second")) if stream else Step(body=chat_completion("from second")))
    client = await gateway(f"{KEYS}\n{fallback_route(first, second, responses_api='translate')}")
    if stream:
        async with client.responses.with_streaming_response.create(model="chat", input="hello", stream=True) as streamed:
            events = [event async for event in await streamed.parse()]
        assert events[-1].type == "response.completed"
        text, headers = events[-1].response.output_text, streamed.headers
    else:
        raw = await client.responses.with_raw_response.create(model="chat", input="hello")
        text, headers = raw.parse().output_text, raw.headers
    assert text == "from second"
    assert (headers["x-gateway-target"], headers["x-gateway-attempts"]) == ("second", "2")
    assert (first.calls, second.calls) == (1, 1)
    assert second.requests[0].headers["Authorization"] == "Bearer k2"


async def test_every_target_failing_is_an_openai_shaped_error(
    gateway: Gateway, make_upstream: Callable[..., Awaitable[FakeUpstream]]
) -> None:
    failing = await make_upstream(Step(status=500, body=error_body(500)))
    client = await gateway(route(failing))
    with pytest.raises(openai.InternalServerError) as caught:
        await client.responses.create(model="chat", input="hello")
    error = error_object(caught.value)
    assert caught.value.status_code == 500 and "up: 500" in error["message"]


async def test_a_stream_that_breaks_ends_with_an_error_event_and_no_completed(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(broken_stream())
    client = await gateway(route(upstream))
    stream = await client.responses.create(model="chat", input="hello", stream=True)
    events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and "response.output_text.delta" in kinds
    assert kinds[-1] == "error" and "response.completed" not in kinds
    error = events[-1]
    assert error.type == "error"
    assert error.code == "upstream_stream_error" and "up:" in error.message
    assert error.sequence_number == len(events) - 1


async def test_the_stream_helper_has_no_final_response_after_a_break(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(broken_stream())
    client = await gateway(route(upstream))
    async with client.responses.stream(model="chat", input="hello") as stream:
        kinds = [event.type async for event in stream]
        assert kinds[-1] == "error"
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            await stream.get_final_response()


# ---------------------------------------------------------------- LangChain


def chat_model(client: openai.AsyncOpenAI) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=str(client.base_url),
        api_key=GATEWAY_KEY,  # type: ignore[arg-type]
        model="chat",
        max_retries=0,
        use_responses_api=True,
    )


async def test_langchain_chat_openai_on_the_responses_api(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=chat_completion("Bonjour")), Step(events=stream_of("Bon", "jour")))
    client = await gateway(route(upstream))
    model = chat_model(client)
    answer = await model.ainvoke([HumanMessage("Say hello in French.")])
    assert isinstance(answer, AIMessage) and answer.text == "Bonjour"
    whole: Any = None
    async for piece in model.astream([HumanMessage("Say hello in French.")]):
        whole = piece if whole is None else whole + piece
    assert whole.text == "Bonjour"
    assert [request.path for request in upstream.requests] == ["/v1/chat/completions"] * 2
    for request in upstream.requests:
        assert request.body["messages"] == [{"role": "user", "content": "Say hello in French."}]
    assert upstream.requests[1].body["stream"] is True


async def test_langchain_reasoning_switches_to_the_responses_api_by_itself(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=chat_completion("Bonjour")))
    client = await gateway(route(upstream))
    model = ChatOpenAI(base_url=str(client.base_url), api_key=GATEWAY_KEY, model="chat", max_retries=0,  # type: ignore[arg-type]
                       reasoning={"effort": "low", "summary": "auto"})
    answer = await model.ainvoke("Say hello in French.")
    assert answer.text == "Bonjour"
    assert upstream.requests[0].body["reasoning_effort"] == "low"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_langchain_tool_loop_with_memory_is_not_doubled(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, stream: bool
) -> None:
    answers = [Step(events=calling_stream()), Step(events=stream_of("Sunny.")), Step(events=stream_of("Rain."))]
    if not stream:
        answers = [Step(body=calling_answer()), Step(body=chat_completion("Sunny.")), Step(body=chat_completion("Rain."))]
    upstream.then(*answers)
    client = await gateway(route(upstream).replace("{store: memory}", f'{{store: sqlite, path: "{tmp_path / "memory.db"}"}}'))
    model = ChatOpenAI(base_url=str(client.base_url), api_key=GATEWAY_KEY, model="chat", max_retries=0,  # type: ignore[arg-type]
                       use_responses_api=True, default_headers={"memoryId": "agent"}).bind_tools([WEATHER])

    async def ask(messages: list[Any]) -> Any:
        if not stream:
            return await model.ainvoke(messages)
        whole: Any = None
        async for piece in model.astream(messages):
            whole = piece if whole is None else whole + piece
        return whole

    # an agent's loop: the model asks for a tool, the agent runs it and resends everything
    messages: list[Any] = [SystemMessage("Be terse."), HumanMessage(QUESTION["content"])]
    calling = await ask(messages)
    assert [(call["id"], call["name"], call["args"]) for call in calling.tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris"})
    ]
    messages += [calling, ToolMessage("sunny in Paris", tool_call_id="call_1")]
    answer = await ask(messages)
    assert answer.text == "Sunny."
    messages += [answer, HumanMessage("Tomorrow?")]
    assert (await ask(messages)).text == "Rain."

    system = {"role": "system", "content": "Be terse."}
    turn = [QUESTION, {"role": "assistant", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny in Paris"}]
    assert upstream.requests[1].body["messages"] == [system, *turn]
    assert upstream.requests[2].body["messages"] == [system, *turn, a("Sunny."), u("Tomorrow?")]
    _, kept = await stored(client, "agent")
    assert kept["messages"] == [*turn, a("Sunny."), u("Tomorrow?"), a("Rain.")]


# ---------------------------------------------------------------- a litellm-backed target


async def test_an_anthropic_target_answers_json_and_stream(gateway: Gateway, aiohttp_server: Any) -> None:
    claude = await start_anthropic(aiohttp_server)
    target = f'{{name: claude, provider: anthropic, baseUrl: "{claude.url}", apiKey: sk-ant, overrideParams: {{model: {CLAUDE_MODEL}}}}}'
    client = await gateway(f"{KEYS}\nroutes: {{chat: {target}}}")
    response = await client.responses.create(model="chat", instructions="Be terse.", input="hello", max_output_tokens=20)
    assert response.output_text == "Hello from Claude"
    assert response.usage is not None and (response.usage.input_tokens, response.usage.output_tokens) == (11, 7)
    async with client.responses.stream(model="chat", input="hello") as stream:
        final = await stream.get_final_response()
    assert final.output_text == "Hello from Claude" and final.status == "completed"
    first, second = (request.body for request in claude.requests)
    assert (first["model"], first["max_tokens"]) == (CLAUDE_MODEL, 20)
    assert first["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    assert "Be terse." in orjson.dumps(first["system"]).decode()
    assert second["stream"] is True


# ---------------------------------------------------------------- metrics


async def test_metrics_count_responses_requests_by_route(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=chat_completion()), Step(events=stream_of("hi")), broken_stream())
    client = await gateway(route(upstream))
    await client.responses.create(model="chat", input="hello")
    async with client.responses.stream(model="chat", input="hello") as stream:
        await stream.get_final_response()
    broken = await client.responses.create(model="chat", input="hello", stream=True)
    assert [event.type async for event in broken][-1] == "error"
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="chat", status_code="200", stream="false") == 1
    assert value(samples, "gateway_requests_total", route="chat", status_code="200", stream="true") == 1
    assert value(samples, "gateway_requests_total", route="chat", status_code="502", stream="true") == 1


async def test_a_bad_chat_request_on_a_known_route_is_counted_under_that_route(gateway: Gateway, upstream: FakeUpstream) -> None:
    """The baseline the next test holds /v1/responses to."""
    client = await gateway(route(upstream))
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="chat", messages=[])
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="chat", status_code="400", stream="false") == 1


async def test_a_refused_request_on_a_known_route_is_counted_under_that_route(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(route(upstream))
    with pytest.raises(openai.BadRequestError):
        await client.responses.create(model="chat", input="hello", tools=[{"type": "file_search", "vector_store_ids": ["v"]}])
    await client.responses.create(model="chat", input="hello")
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="chat", status_code="400", stream="false") == 1
    assert value(samples, "gateway_inflight_requests", route="chat") == 0  # the route resolved once per request
