"""`GET` / `DELETE /v1/responses/{id}` on the responses a gateway keeps for a translated route.

The client is the official openai SDK (`responses.retrieve`, `responses.delete`), the upstream a
scripted chat completions server: a kept response reads back as a Response, only to the key it
was answered to, and deleting it erases the record, which ends the chain through it. On every store.
"""

from __future__ import annotations

import openai
import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.gateway import Gateway
from tests.support.openai_errors import error_object
from tests.support.response_chains import store, translated_config

__all__ = ["store"]  # the fixture: each test runs on the in-process store, SQLite and Redis


def assert_unknown(caught: pytest.ExceptionInfo[openai.NotFoundError], response_id: str) -> None:
    error = error_object(caught.value)
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "not_found", "response_id")
    assert response_id in error["message"] and "not stored" not in error["message"]


async def test_a_kept_response_reads_back_as_a_response(gateway: Gateway, upstream: FakeUpstream, store: str) -> None:
    upstream.then(Step(body=chat_completion("A1")), Step(body=chat_completion("A2")))
    client = await gateway(translated_config(upstream, store))
    first = await client.responses.create(model="chat", input="Q1")
    second = await client.responses.create(model="chat", input="Q2", previous_response_id=first.id)
    got = await client.responses.retrieve(second.id)
    assert (got.id, got.object, got.status, got.model) == (second.id, "response", "completed", "chat")
    assert (got.created_at, got.previous_response_id, got.output_text) == (second.created_at, first.id, "A2")
    assert [(item.type, item.role) for item in got.output] == [("message", "assistant")]  # type: ignore[union-attr]
    assert (await client.responses.retrieve(first.id)).previous_response_id is None


async def test_a_kept_tool_call_reads_back_as_a_function_call_item(gateway: Gateway, upstream: FakeUpstream) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    calling = {**chat_completion(""), "choices": [{"index": 0, "finish_reason": "tool_calls",
                                                   "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}
    upstream.then(Step(body=calling))
    client = await gateway(translated_config(upstream, "memory: {store: memory}"))
    answered = await client.responses.create(model="chat", input="Weather in Paris?")
    [item] = (await client.responses.retrieve(answered.id)).output
    assert item.type == "function_call"
    assert (item.call_id, item.name, item.arguments) == ("call_1", "get_weather", '{"city":"Paris"}')


async def test_another_keys_response_is_unknown_to_read_and_to_delete(
    gateway: Gateway, upstream: FakeUpstream, store: str
) -> None:
    client = await gateway(translated_config(upstream, store))
    mine = await client.responses.create(model="chat", input="Q1")
    other = client.with_options(api_key="other-key")
    attempts = ((other.responses.retrieve, mine.id), (other.responses.delete, mine.id),
                (client.responses.retrieve, "resp_nobody_answered"))
    for attempt, response_id in attempts:
        with pytest.raises(openai.NotFoundError) as caught:
            await attempt(response_id)
        assert_unknown(caught, response_id)
    assert (await client.responses.retrieve(mine.id)).id == mine.id  # the other key's delete erased nothing
    await client.responses.create(model="chat", input="Q2", previous_response_id=mine.id)


async def test_deleting_a_kept_response_erases_it_and_ends_the_chain(
    gateway: Gateway, upstream: FakeUpstream, store: str
) -> None:
    client = await gateway(translated_config(upstream, store))
    first = await client.responses.create(model="chat", input="Q1")
    raw = await client.responses.with_raw_response.delete(first.id)
    assert (raw.status_code, raw.http_response.json()) == (200, {"id": first.id, "object": "response.deleted", "deleted": True})
    for attempt in (client.responses.retrieve, client.responses.delete):
        with pytest.raises(openai.NotFoundError) as caught:
            await attempt(first.id)
        assert_unknown(caught, first.id)
    with pytest.raises(openai.NotFoundError) as continued:
        await client.responses.create(model="chat", input="Q2", previous_response_id=first.id)
    assert error_object(continued.value)["param"] == "previous_response_id"
    assert upstream.calls == 1


async def test_a_deleted_response_is_no_longer_forwarded_by_the_responses_continuing_it(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    upstream.then(*(Step(body=chat_completion(text)) for text in ("A1", "A2", "A3")))
    client = await gateway(translated_config(upstream, "memory: {store: memory}"))
    first = await client.responses.create(model="chat", input="Q1")
    second = await client.responses.create(model="chat", input="Q2", previous_response_id=first.id)
    await client.responses.delete(first.id)
    await client.responses.create(model="chat", input="Q3", previous_response_id=second.id)
    assert [message["content"] for message in upstream.requests[-1].body["messages"]] == ["Q2", "A2", "Q3"]
