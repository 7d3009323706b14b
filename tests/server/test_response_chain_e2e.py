"""`previous_response_id` on a route with no target that serves the Responses API: the gateway keeps the chain.

The client is the official openai SDK, the upstream a scripted chat completions server: each
translated response is recorded (input and output, by tenant), and a request continuing one is
forwarded after the chain's history, within the route's memory window. On every store.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.support.fakes import FakeUpstream, Step, broken_stream, chat_completion, stream_of
from tests.support.gateway import Gateway
from tests.support.memory_turns import a, u
from tests.support.openai_errors import error_object
from tests.support.response_chains import store, translated_config

__all__ = ["store"]  # the fixture: each test runs on the in-process store, SQLite and Redis


def sent(upstream: FakeUpstream, index: int = -1) -> list[dict[str, Any]]:
    """The chat messages the upstream received in its `index`th request."""
    return upstream.requests[index].body["messages"]  # type: ignore[no-any-return]


async def test_a_chain_of_three_turns_and_a_fork_each_see_their_own_history(
    gateway: Gateway, upstream: FakeUpstream, store: str
) -> None:
    upstream.then(*(Step(body=chat_completion(text)) for text in ("A1", "A2", "A3", "B2")))
    client = await gateway(translated_config(upstream, store))
    first = await client.responses.create(model="chat", input="Q1", instructions="Be terse.")
    second = await client.responses.create(model="chat", input="Q2", previous_response_id=first.id)
    raw = await client.responses.with_raw_response.create(model="chat", input="Q3", previous_response_id=second.id)
    third = raw.parse()
    fork = await client.responses.create(model="chat", input="Q2b", previous_response_id=first.id)
    assert [r.output_text for r in (first, second, third, fork)] == ["A1", "A2", "A3", "B2"]
    assert sent(upstream, 0) == [{"role": "system", "content": "Be terse."}, u("Q1")]
    # instructions are not carried over, as OpenAI does with previous_response_id
    assert sent(upstream, 1) == [u("Q1"), a("A1"), u("Q2")]
    assert sent(upstream, 2) == [u("Q1"), a("A1"), u("Q2"), a("A2"), u("Q3")]
    assert sent(upstream, 3) == [u("Q1"), a("A1"), u("Q2b")]
    assert (third.previous_response_id, fork.previous_response_id) == (second.id, first.id)
    assert (raw.headers["x-memory-history"], raw.headers["x-memory-evicted"]) == ("4", "0")
    assert "x-memory-id" not in raw.headers


async def test_the_routes_window_bounds_what_a_long_chain_sends(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(translated_config(upstream, "memory: {store: memory}", window="maxMessages: 3"))
    previous = None
    for number in range(6):
        answer = await client.responses.with_raw_response.create(
            model="chat", input=f"Q{number}", **({"previous_response_id": previous} if previous else {})
        )
        previous = answer.parse().id
    assert sent(upstream) == [u("Q4"), a("Hello from upstream"), u("Q5")]
    assert (answer.headers["x-memory-history"], answer.headers["x-memory-evicted"]) == ("2", "8")


async def test_a_stream_is_recorded_once_complete_and_a_cut_off_one_is_not(gateway: Gateway, upstream: FakeUpstream, store: str) -> None:
    upstream.then(Step(events=stream_of("Hel", "lo")), broken_stream())
    client = await gateway(translated_config(upstream, store))
    async with client.responses.stream(model="chat", input="Q1") as events:
        first = await events.get_final_response()
    assert first.output_text == "Hello"
    cut = await client.responses.create(model="chat", input="Q2", previous_response_id=first.id, stream=True)
    events = [event async for event in cut]
    assert (events[0].type, events[-1].type) == ("response.created", "error")
    cut_id = events[0].response.id  # type: ignore[union-attr]
    with pytest.raises(openai.NotFoundError) as caught:
        await client.responses.create(model="chat", input="Q3", previous_response_id=cut_id)
    assert error_object(caught.value)["param"] == "previous_response_id"
    await client.responses.create(model="chat", input="Q3", previous_response_id=first.id)
    assert sent(upstream) == [u("Q1"), a("Hello"), u("Q3")]


async def test_store_false_records_nothing_but_may_continue(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(translated_config(upstream, "memory: {store: memory}"))
    kept = await client.responses.create(model="chat", input="Q1")
    unkept = await client.responses.create(model="chat", input="Q2", previous_response_id=kept.id, store=False)
    assert sent(upstream) == [u("Q1"), a("Hello from upstream"), u("Q2")]
    with pytest.raises(openai.NotFoundError):
        await client.responses.create(model="chat", input="Q3", previous_response_id=unkept.id)
    alone = await client.responses.create(model="chat", input="Q4", store=False)
    with pytest.raises(openai.NotFoundError):
        await client.responses.create(model="chat", input="Q5", previous_response_id=alone.id)


async def test_an_unknown_or_another_keys_response_is_an_openai_shaped_404(
    gateway: Gateway, upstream: FakeUpstream, store: str
) -> None:
    client = await gateway(translated_config(upstream, store))
    mine = await client.responses.create(model="chat", input="Q1")
    other = client.with_options(api_key="other-key")
    for who, response_id in ((client, "resp_nobody_answered"), (other, mine.id)):
        with pytest.raises(openai.NotFoundError) as caught:
            await who.responses.create(model="chat", input="Q2", previous_response_id=response_id)
        error = error_object(caught.value)
        assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "not_found", "previous_response_id")
        assert response_id in error["message"]
    assert upstream.calls == 1


async def test_a_chain_calling_tools_continues_with_their_outputs(gateway: Gateway, upstream: FakeUpstream) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    calling = {**chat_completion(""), "choices": [{"index": 0, "finish_reason": "tool_calls",
                                                   "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}
    upstream.then(Step(body=calling), Step(body=chat_completion("Sunny.")))
    client = await gateway(translated_config(upstream, "memory: {store: memory}"))
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    first = await client.responses.create(model="chat", input="Weather in Paris?", tools=[tool])  # type: ignore[list-item]
    output = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
    second = await client.responses.create(model="chat", input=[output], tools=[tool], previous_response_id=first.id)  # type: ignore[list-item]
    assert second.output_text == "Sunny."
    assert sent(upstream) == [
        u("Weather in Paris?"),
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]


async def test_a_reply_memory_cannot_keep_is_answered_all_the_same_and_not_recorded(gateway: Gateway, upstream: FakeUpstream) -> None:
    call = {"type": "function", "function": {"name": "get_weather", "arguments": "{}"}}  # no id: memory cannot keep it
    calling = {**chat_completion(""), "choices": [{"index": 0, "finish_reason": "tool_calls",
                                                   "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}
    upstream.then(Step(body=calling))
    client = await gateway(translated_config(upstream, "memory: {store: memory}"))
    answered = await client.responses.create(model="chat", input="Weather?")
    assert [item.type for item in answered.output] == ["function_call"]
    with pytest.raises(openai.NotFoundError):
        await client.responses.create(model="chat", input="Q2", previous_response_id=answered.id)
