"""POST /v1/responses passed through to OpenAI targets (`responsesApi: native`, the default), and stored responses.

The client is the official openai SDK (and LangChain); the upstream a fake Responses API
(tests/support/fakes_responses.py). The body goes to `{baseUrl}/responses` as the client sent it and the
answer comes back as it was sent; a stream commits at its first output. Every answered response
id is recorded with the target that produced it: `previous_response_id`, `GET` and `DELETE`
go there and nowhere else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI

from tests.support.fakes import FakeUpstream, Step, chat_completion, stream_of
from tests.support.fakes_anthropic import MODEL as CLAUDE_MODEL
from tests.support.fakes_anthropic import start_anthropic
from tests.support.fakes_responses import (
    Answer,
    FakeResponses,
    error_event,
    failed_event,
    openai_error,
    response,
    response_events,
    start_responses,
)
from tests.support.gateway import GATEWAY_KEY, KEYS, Gateway
from tests.support.memory_turns import a, stored, u
from tests.support.metrics import scrape, value
from tests.support.openai_errors import error_object as error_of

# litellm's pydantic types warn once per process when first built; litellm itself hides it, pytest shows it
pytestmark = pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning")
REPO = Path(__file__).resolve().parents[2]
MEMORY = "memory: {store: memory}"  # where response ids are recorded

Make = Callable[..., Awaitable[FakeResponses]]


@pytest.fixture
def make_responses(aiohttp_server: Any) -> Make:
    async def make(name: str = "up", text: str = "Hello from Responses") -> FakeResponses:
        return await start_responses(aiohttp_server, name, text)

    return make


def target(fake: FakeResponses, *, extra: str = "") -> str:
    return f'{{name: {fake.name}, provider: openai, baseUrl: "{fake.url}", apiKey: key-{fake.name}{extra}}}'


def single(fake: FakeResponses, *, extra: str = "") -> str:
    return f"{KEYS}\n{MEMORY}\nroutes: {{chat: {target(fake, extra=extra)}}}"


def fallback(*targets: str, codes: str = "[503]", memory: str = MEMORY) -> str:
    listed = "\n".join(f"      - {t}" for t in targets)
    return f"""{KEYS}
{memory}
routes:
  chat:
    strategy: {{mode: fallback, onStatusCodes: {codes}}}
    targets:
{listed}
"""


async def kinds_of(stream: Any) -> list[str]:
    return [event.type async for event in stream]


# ---------------------------------------------------------------- pass-through


async def test_the_clients_bytes_and_the_upstreams_answer_pass_through_unchanged(gateway: Gateway, make_responses: Make) -> None:
    up = await make_responses()
    client = await gateway(single(up))
    body = (b'{"model": "chat", "input": "hello",  "tools": [{"type": "web_search"}], '
            b'"reasoning": {"effort": "low", "summary": "auto"}, "x_extra": 1}')  # fmt: skip
    answer = {**response("Searched.", "resp_x"), "extra_field": {"kept": True}}
    up.then(Answer(body=answer))
    async with aiohttp.ClientSession() as session, session.post(
        f"{client.base_url}responses", data=body, headers={"Authorization": f"Bearer {GATEWAY_KEY}"}
    ) as reply:
        assert reply.status == 200
        assert orjson.loads(await reply.read()) == answer
        assert (reply.headers["x-gateway-route"], reply.headers["x-gateway-target"]) == ("chat", "up")
    [sent] = up.requests
    assert (sent.path, sent.raw) == ("/v1/responses", body)  # byte for byte: nothing was re-serialized
    assert sent.headers["Authorization"] == "Bearer key-up" and GATEWAY_KEY not in str(sent.headers)


async def test_the_sdk_gets_the_response_and_its_stream_as_sent(gateway: Gateway, make_responses: Make) -> None:
    up = await make_responses()
    client = await gateway(single(up, extra=", overrideParams: {model: gpt-4.1}"))
    created = await client.responses.create(model="chat", input="hello", instructions="Be terse.")
    assert created.output_text == "Hello from Responses" and created.id == "resp_up1"
    stream = await client.responses.create(model="chat", input="hello", stream=True)
    events = [event async for event in stream]
    assert [event.type for event in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed",
    ]  # fmt: skip
    assert [event.sequence_number for event in events] == list(range(10))
    first, second = (request.body for request in up.requests)
    assert first == {"model": "gpt-4.1", "input": "hello", "instructions": "Be terse."}  # only the model changed
    assert second == {"model": "gpt-4.1", "input": "hello", "stream": True}  # no stream_options added
    samples = await scrape(client)
    labels = {"route": "chat", "target": "up", "provider": "openai"}
    assert value(samples, "gateway_tokens_total", **labels, kind="prompt") == 18  # input_tokens of both
    assert value(samples, "gateway_tokens_total", **labels, kind="completion") == 8
    assert value(samples, "gateway_requests_total", route="chat", status_code="200", stream="true") == 1


async def test_the_stream_helper_and_langchain_read_a_relayed_stream(gateway: Gateway, make_responses: Make) -> None:
    up = await make_responses(text="Bonjour")
    client = await gateway(single(up))
    async with client.responses.stream(model="chat", input="hello") as stream:
        deltas = [event.delta async for event in stream if event.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert "".join(deltas) == "Bonjour" and final.output_text == "Bonjour"
    model = ChatOpenAI(base_url=str(client.base_url), api_key=GATEWAY_KEY, model="chat", max_retries=0,  # type: ignore[arg-type]
                       use_responses_api=True)
    answer = await model.ainvoke([HumanMessage("Say hello in French.")])
    assert isinstance(answer, AIMessage) and answer.text == "Bonjour"
    whole: Any = None
    async for piece in model.astream([HumanMessage("Say hello in French.")]):
        whole = piece if whole is None else whole + piece
    assert whole.text == "Bonjour"
    assert [request.path for request in up.requests] == ["/v1/responses"] * 3


# ---------------------------------------------------------------- the commit point, failures, and translated attempts


@pytest.mark.parametrize("failure", ["error", "response.failed"])
async def test_a_failure_before_any_output_falls_back(gateway: Gateway, make_responses: Make, failure: str) -> None:
    one, two = await make_responses("one"), await make_responses("two")
    opening = response_events("x", response_id="resp_one9")[:2]
    failed = error_event("server_error", "boom", 2) if failure == "error" else failed_event("server_error", "boom", "resp_one9", 2)
    one.then(Answer(events=[*opening, failed]))
    client = await gateway(fallback(target(one), target(two), codes="[500]"))
    async with client.responses.with_streaming_response.create(model="chat", input="hello", stream=True) as raw:
        events = [event async for event in await raw.parse()]
    assert events[-1].type == "response.completed"
    final, headers = events[-1].response, raw.headers
    assert final.output_text == "Hello from Responses" and final.id == "resp_two1"
    assert (headers["x-gateway-target"], headers["x-gateway-attempts"]) == ("two", "2")


async def test_an_error_after_the_first_output_ends_with_an_error_event(gateway: Gateway, make_responses: Make) -> None:
    up = await make_responses()
    events = response_events("Hel", response_id="resp_9", complete=False)
    up.then(Answer(events=[*events, error_event("server_error", "exploded", len(events))]))
    client = await gateway(single(up))
    seen = [event async for event in await client.responses.create(model="chat", input="hello", stream=True)]
    assert [event.type for event in seen][-2:] == ["response.output_text.delta", "error"]
    error = seen[-1]
    assert error.type == "error" and "up: exploded" in error.message and error.code == "upstream_stream_error"
    assert error.sequence_number == len(events)  # numbered after the last event relayed
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="chat", status_code="502", stream="true") == 1


@pytest.mark.parametrize("cut", [True, False], ids=["connection-lost", "clean-end"])
async def test_a_stream_cut_off_before_response_completed_ends_with_an_error_event(
    gateway: Gateway, make_responses: Make, cut: bool
) -> None:
    up = await make_responses()
    up.then(Answer(events=list(response_events("Hel", "lo", response_id="resp_9", complete=False)), cut=cut))
    client = await gateway(single(up))
    async with client.responses.stream(model="chat", input="hello") as stream:
        kinds = [event.type async for event in stream]
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            await stream.get_final_response()
    assert kinds[-1] == "error" and "response.completed" not in kinds


async def test_a_failed_response_after_output_is_relayed_as_the_upstream_sent_it(gateway: Gateway, make_responses: Make) -> None:
    up = await make_responses()
    events = response_events("Hel", response_id="resp_9", complete=False)
    up.then(Answer(events=[*events, failed_event("server_error", "gave up", "resp_9", len(events))]))
    client = await gateway(single(up))
    kinds = await kinds_of(await client.responses.create(model="chat", input="hello", stream=True))
    assert kinds[-1] == "response.failed" and "error" not in kinds
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="chat", status_code="500", stream="true") == 1


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_fallback_to_an_anthropic_target_translates_that_attempt(
    gateway: Gateway, make_responses: Make, aiohttp_server: Any, stream: bool
) -> None:
    up, claude = await make_responses(), await start_anthropic(aiohttp_server)
    up.then(Answer(503, openai_error(503)))
    claude_target = f'{{name: claude, provider: anthropic, baseUrl: "{claude.url}", apiKey: sk-ant, overrideParams: {{model: {CLAUDE_MODEL}}}}}'
    client = await gateway(fallback(target(up), claude_target))
    if stream:
        async with client.responses.with_streaming_response.create(model="chat", input="hello", stream=True) as streamed:
            events = [event async for event in await streamed.parse()]
        assert events[-1].type == "response.completed"
        final, headers = events[-1].response, streamed.headers
    else:
        raw = await client.responses.with_raw_response.create(model="chat", input="hello")
        final, headers = raw.parse(), raw.headers
    assert final.output_text == "Hello from Claude" and final.status == "completed"
    assert (headers["x-gateway-target"], headers["x-gateway-attempts"]) == ("claude", "2")
    assert up.requests[0].body["input"] == "hello"  # the first attempt passed the body through
    assert claude.requests[0].body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]


FILE_SEARCH = {"type": "file_search", "vector_store_ids": ["vs_1"]}  # needs OpenAI's vector stores


async def test_a_translated_attempt_refuses_what_only_the_responses_api_can_do(
    gateway: Gateway, make_responses: Make, upstream: FakeUpstream
) -> None:
    up = await make_responses()
    up.then(Answer(503, openai_error(503)))
    chat_target = f'{{name: chat-up, provider: openai, baseUrl: "{upstream.url}", apiKey: k, responsesApi: translate}}'
    client = await gateway(fallback(target(up), chat_target))
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="chat", input="hello", tools=[FILE_SEARCH])
    assert caught.value.param == "tools[0].type" and "up: 503" in error_of(caught.value)["message"]
    assert up.requests[0].body["tools"] == [FILE_SEARCH] and upstream.calls == 0


# ---------------------------------------------------------------- previous_response_id pins the request


async def test_a_continuation_stays_on_the_target_that_produced_the_response(gateway: Gateway, make_responses: Make) -> None:
    one, two = await make_responses("one"), await make_responses("two")
    one.then(Answer(503, openai_error(503)))  # the first answer falls back to two; one is healthy after that
    client = await gateway(fallback(target(one), target(two)))
    first = await client.responses.create(model="chat", input="hello")
    assert first.id == "resp_two1" and (one.calls, two.calls) == (1, 1)

    raw = await client.responses.with_raw_response.create(model="chat", input="and then?", previous_response_id=first.id)
    assert raw.parse().id == "resp_two2"
    assert (raw.headers["x-gateway-target"], raw.headers["x-gateway-attempts"]) == ("two", "1")
    assert (one.calls, two.calls) == (1, 2)  # one, first in the route and healthy, was not asked
    assert two.requests[-1].body["previous_response_id"] == "resp_two1"

    async with client.responses.stream(model="chat", input="more", previous_response_id=first.id) as stream:
        assert (await stream.get_final_response()).id == "resp_two3"
    assert (one.calls, two.calls) == (1, 3)

    two.then(Answer(503, openai_error(503, "two is down")))
    with pytest.raises(openai.InternalServerError) as caught:  # the pinned target's error, no fallback to one
        await client.responses.create(model="chat", input="again", previous_response_id=first.id)
    assert "two: 503 two is down" in error_of(caught.value)["message"]
    assert (one.calls, two.calls) == (1, 4)


async def test_a_loadbalanced_continuation_is_pinned_too(gateway: Gateway, make_responses: Make) -> None:
    one, two = await make_responses("one"), await make_responses("two")
    client = await gateway(f"""{KEYS}
{MEMORY}
routes:
  chat:
    strategy: {{mode: loadbalance}}
    targets: [{target(one)}, {target(two)}]
""")
    first = await client.responses.create(model="chat", input="hello")
    producer = one if first.id.startswith("resp_one") else two
    for _ in range(6):
        await client.responses.create(model="chat", input="and?", previous_response_id=first.id)
    assert producer.calls == 7 and one.calls + two.calls == 7


async def test_an_unknown_previous_response_id_walks_the_route_and_the_upstream_answers(
    gateway: Gateway, make_responses: Make
) -> None:
    one, two = await make_responses("one"), await make_responses("two")
    client = await gateway(fallback(target(one), target(two)))
    with pytest.raises(openai.NotFoundError) as caught:
        await client.responses.create(model="chat", input="hello", previous_response_id="resp_elsewhere")
    assert "resp_elsewhere" in error_of(caught.value)["message"]
    assert (one.calls, two.calls) == (1, 0)


async def test_another_keys_response_cannot_be_continued_and_unknown_ids_are_refused_between_tenants(
    gateway: Gateway, make_responses: Make
) -> None:
    """Every tenant calls the upstream with the operator's key: one must never continue another's response."""
    up = await make_responses()
    two_tenants = f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}, {{name: team-b, key: other-key}}]}}"
    client = await gateway(single(up).replace(KEYS, two_tenants))
    created = await client.responses.create(model="chat", input="hello")
    other = client.with_options(api_key="other-key")
    for response_id in (created.id, "resp_never_answered_here"):
        with pytest.raises(openai.NotFoundError) as caught:
            await other.responses.create(model="chat", input="and?", previous_response_id=response_id)
        assert error_of(caught.value)["param"] == "previous_response_id"
    assert up.calls == 1  # neither reached the upstream
    continued = await client.responses.create(model="chat", input="and?", previous_response_id=created.id)
    assert continued.id != created.id and up.calls == 2


async def test_a_response_not_stored_upstream_is_not_recorded(gateway: Gateway, make_responses: Make) -> None:
    one, two = await make_responses("one"), await make_responses("two")
    one.then(Answer(503, openai_error(503)))
    client = await gateway(fallback(target(one), target(two)))
    first = await client.responses.create(model="chat", input="hello", store=False)
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(first.id)
    assert two.calls == 1


# ---------------------------------------------------------------- GET and DELETE /v1/responses/{id}


async def test_retrieve_and_delete_go_to_the_target_that_produced_the_response(gateway: Gateway, make_responses: Make) -> None:
    one, two = await make_responses("one"), await make_responses("two")
    one.then(Answer(503, openai_error(503)))
    client = await gateway(fallback(target(one), target(two)))
    async with client.responses.stream(model="chat", input="hello") as stream:
        created = await stream.get_final_response()
    raw = await client.responses.with_raw_response.retrieve(created.id, include=["message.output_text.logprobs"])
    assert raw.parse().output_text == "Hello from Responses" and raw.headers["x-gateway-target"] == "two"
    get = two.requests[-1]
    assert (get.method, get.path, get.headers["Authorization"]) == ("GET", f"/v1/responses/{created.id}", "Bearer key-two")
    assert "include" in get.query

    await client.responses.delete(created.id)
    assert (two.requests[-1].method, created.id in two.kept) == ("DELETE", False)
    with pytest.raises(openai.NotFoundError) as caught:  # forgotten: the gateway answers itself
        await client.responses.retrieve(created.id)
    assert error_of(caught.value)["param"] == "response_id"
    assert one.calls == 1 and two.calls == 3


async def test_an_unknown_or_another_keys_response_is_an_openai_shaped_404(gateway: Gateway, make_responses: Make) -> None:
    up = await make_responses()
    config = single(up).replace(KEYS, f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}, {{name: team-b, key: other-key}}]}}")
    client = await gateway(config)
    created = await client.responses.create(model="chat", input="hello")
    for response_id, key in (("resp_never", GATEWAY_KEY), (created.id, "other-key"), ("bad id!", GATEWAY_KEY)):
        for method in ("GET", "DELETE"):
            async with aiohttp.ClientSession() as session, session.request(
                method, f"{client.base_url}responses/{response_id}", headers={"Authorization": f"Bearer {key}"}
            ) as reply:
                body = await reply.json()
                assert reply.status == 404, body
                assert set(body["error"]) == {"message", "type", "param", "code"} and body["error"]["code"] == "not_found"
    assert up.calls == 1 and created.id in up.kept


async def test_a_translated_response_is_pinned_to_its_target_and_not_stored(
    gateway: Gateway, make_responses: Make, upstream: FakeUpstream
) -> None:
    up = await make_responses()
    up.then(Answer(503, openai_error(503)))
    upstream.then(Step(body=chat_completion("translated")))
    chat_target = f'{{name: chat-up, provider: openai, baseUrl: "{upstream.url}", apiKey: k, responsesApi: translate}}'
    client = await gateway(fallback(target(up), chat_target))
    created = await client.responses.create(model="chat", input="hello")
    assert created.output_text == "translated"
    with pytest.raises(openai.NotFoundError) as caught:
        await client.responses.retrieve(created.id)
    assert "translation" in error_of(caught.value)["message"]
    with pytest.raises(openai.BadRequestError) as refused:  # pinned: it cannot continue there, nor go elsewhere
        await client.responses.create(model="chat", input="and?", previous_response_id=created.id)
    assert refused.value.param == "previous_response_id"
    assert (up.calls, upstream.calls) == (1, 1)


# ---------------------------------------------------------------- memory goes the translated way


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_memory_on_a_native_route_is_translated_and_stored(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, stream: bool
) -> None:
    upstream.then(*(Step(events=stream_of(r)) if stream else Step(body=chat_completion(r)) for r in ("r1", "r2")))
    memory = f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}'
    client = await gateway(fallback(f'{{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}', memory=memory))
    for question in ("q1", "q2"):
        if stream:
            async with client.responses.stream(model="chat", input=question, extra_headers={"memoryId": "c"}) as events:
                await events.get_final_response()
        else:
            await client.responses.create(model="chat", input=question, extra_headers={"memoryId": "c"})
    assert [request.path for request in upstream.requests] == ["/v1/chat/completions"] * 2
    assert upstream.requests[1].body["messages"] == [u("q1"), a("r1"), u("q2")]
    _, kept = await stored(client, "c")
    assert kept["messages"] == [u("q1"), a("r1"), u("q2"), a("r2")]


@pytest.mark.parametrize("failure", ["503", "cut-off"])
async def test_memory_on_a_native_route_stores_nothing_on_failure(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, failure: str
) -> None:
    step = Step(status=503, body=openai_error(503)) if failure == "503" else Step(events=stream_of("Hel", done=False)[:2], reset=True)
    upstream.then(step)
    memory = f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}'
    client = await gateway(fallback(f'{{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}', memory=memory))
    with pytest.raises((openai.APIError, RuntimeError)):  # a 503, or a stream without response.completed
        async with client.responses.stream(model="chat", input="q1", extra_headers={"memoryId": "c"}) as events:
            await events.get_final_response()
    status, _ = await stored(client, "c")
    assert status == 404 and upstream.calls == 1


# ---------------------------------------------------------------- litellm stays out of it

_PROBE = """
import asyncio, json, sys

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from gateway.config.loader import parse_config
from gateway.server.app import create_app
from tests.support.fakes_responses import FakeResponses


async def main():
    fake = FakeResponses()
    upstream = TestServer(fake.app())
    await upstream.start_server()
    url = str(upstream.make_url("/v1"))
    config = parse_config(f'memory: {{store: memory}}\\nroutes: {{chat: {{provider: openai, baseUrl: "{url}", apiKey: k}}}}')
    gateway = TestServer(create_app(config))
    await gateway.start_server()
    async with ClientSession() as session:
        for extra in ({}, {"stream": True}):
            async with session.post(gateway.make_url("/v1/responses"), json={"model": "chat", "input": "hi", **extra}) as answer:
                assert answer.status == 200, await answer.text()
                await answer.read()
        async with session.get(gateway.make_url("/v1/responses/resp_up1")) as answer:
            assert answer.status == 200, await answer.text()
    await gateway.close()
    await upstream.close()


asyncio.run(main())
print(json.dumps({"litellm": "litellm" in sys.modules}))
"""


def test_native_responses_traffic_never_imports_litellm(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"litellm": False}
