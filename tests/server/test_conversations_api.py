"""gateway.server.conversations_api: the official openai SDK's client.conversations on a real gateway, over each store.

A conversation is a memory conversation: a chat completion with memoryId=<its id> has its items
as history, and GET /v1/memory/{id} shows them.
"""

from __future__ import annotations

import time

import openai
import pytest

from tests.support.conversations import OTHER_KEY, memory_block, start_conversations_gateway, two_keys
from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.memory_turns import a, received, u
from tests.support.plain_http import AUTH, call

__all__ = ["memory_block"]  # the fixture, found by pytest among the module's globals


def said(role: str, text: str) -> dict[str, object]:
    """A message item as the SDK sends it."""
    return {"type": "message", "role": role, "content": text}


async def test_a_conversation_made_by_the_sdk_is_a_memory_conversation(
    aiohttp_server: object, upstream: FakeUpstream, memory_block: str
) -> None:
    client, _ = await start_conversations_gateway(aiohttp_server, two_keys(upstream.url, memory_block))
    started = int(time.time())
    conversation = await client.conversations.create(
        items=[said("user", "hello"), said("assistant", "hi there")], metadata={"topic": "demo"}
    )
    assert conversation.id.startswith("conv_") and conversation.object == "conversation"
    assert conversation.metadata == {"topic": "demo"} and started - 1 <= conversation.created_at <= time.time() + 1

    got = await client.conversations.retrieve(conversation.id)
    assert (got.id, got.created_at, got.metadata) == (conversation.id, conversation.created_at, {"topic": "demo"})
    updated = await client.conversations.update(conversation.id, metadata={"topic": "other", "n": "2"})
    assert updated.metadata == {"topic": "other", "n": "2"}

    added = await client.conversations.items.create(conversation.id, items=[said("user", "one"), said("user", "two")])
    assert [item.content[0].text for item in added.data] == ["one", "two"]  # type: ignore[union-attr]

    items = [item async for item in client.conversations.items.list(conversation.id, order="asc", limit=2)]
    texts = [item.content[0].text for item in items]  # type: ignore[union-attr]
    assert texts == ["hello", "hi there", "one", "two"]
    assert [item.content[0].type for item in items] == ["input_text", "output_text", "input_text", "input_text"]  # type: ignore[union-attr]
    assert {item.type for item in items} == {"message"} and len({item.id for item in items}) == 4
    newest = await client.conversations.items.list(conversation.id, limit=3)
    assert [item.id for item in newest.data] == [item.id for item in reversed(items)][:3] and newest.has_more is True

    one = await client.conversations.items.retrieve(items[2].id, conversation_id=conversation.id)
    assert one.id == items[2].id and one.role == "user"  # type: ignore[union-attr]
    after = await client.conversations.items.delete(items[2].id, conversation_id=conversation.id)
    assert after.id == conversation.id and after.object == "conversation"

    upstream.then(Step(body=chat_completion("re two")))
    await client.chat.completions.create(model="chat", messages=[u("three")], extra_headers={"memoryId": conversation.id})  # type: ignore[list-item]
    assert received(upstream)[-1] == [u("hello"), a("hi there"), u("two"), u("three")]
    status, _, body = await call(client, "GET", f"/v1/memory/{conversation.id}", headers=AUTH)
    assert status == 200
    assert [m["content"] for m in body["messages"]] == ["hello", "hi there", "two", "three", "re two"]
    listed = [item.id async for item in client.conversations.items.list(conversation.id)]
    assert listed[2:] == [items[3].id, items[1].id, items[0].id] and len(listed) == 5  # newest first, ids kept

    deleted = await client.conversations.delete(conversation.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (conversation.id, True, "conversation.deleted")
    with pytest.raises(openai.NotFoundError) as caught:
        await client.conversations.retrieve(conversation.id)
    assert caught.value.code == "conversation_not_found"
    await client.close()


async def test_an_empty_conversation_exists_before_any_turn(aiohttp_server: object, upstream: FakeUpstream, memory_block: str) -> None:
    client, _ = await start_conversations_gateway(aiohttp_server, two_keys(upstream.url, memory_block))
    conversation = await client.conversations.create()
    assert conversation.metadata == {}
    assert (await client.conversations.retrieve(conversation.id)).id == conversation.id
    page = await client.conversations.items.list(conversation.id, include=["message.output_text.logprobs"])
    assert page.data == [] and page.has_more is False  # include is taken, and adds nothing
    status, _, listed = await call(client, "GET", "/v1/memory", headers=AUTH)
    assert status == 200 and [m["id"] for m in listed["data"]] == [conversation.id]
    await client.close()


async def test_a_memory_conversation_is_a_conversation_with_function_calls_as_items(
    aiohttp_server: object, upstream: FakeUpstream, memory_block: str
) -> None:
    client, _ = await start_conversations_gateway(aiohttp_server, two_keys(upstream.url, memory_block))
    upstream.then(Step(body=chat_completion("sunny")))
    await client.chat.completions.create(model="chat", messages=[u("weather?")], extra_headers={"memoryId": "chat-7"})  # type: ignore[list-item]
    conversation = await client.conversations.create(
        items=[
            said("user", "weather in Paris?"),
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Paris"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ]
    )
    items = (await client.conversations.items.list(conversation.id, order="asc")).data
    assert [item.type for item in items] == ["message", "function_call", "function_call_output"]
    assert items[1].call_id == "c1" and items[1].name == "weather" and items[2].output == "sunny"  # type: ignore[union-attr]
    memory_items = (await client.conversations.items.list("chat-7", order="asc")).data
    assert [item.role for item in memory_items] == ["user", "assistant"]  # type: ignore[union-attr]
    assert (await client.conversations.retrieve("chat-7")).metadata == {}
    await client.close()


async def test_another_tenants_conversation_is_unknown(aiohttp_server: object, upstream: FakeUpstream, memory_block: str) -> None:
    client, base_url = await start_conversations_gateway(aiohttp_server, two_keys(upstream.url, memory_block))
    other = openai.AsyncOpenAI(base_url=base_url, api_key=OTHER_KEY, max_retries=0)
    conversation = await client.conversations.create(items=[said("user", "secret")])
    item_id = (await client.conversations.items.list(conversation.id)).data[0].id
    for attempt in (
        other.conversations.retrieve(conversation.id),
        other.conversations.update(conversation.id, metadata={"a": "b"}),
        other.conversations.items.list(conversation.id),
        other.conversations.items.create(conversation.id, items=[said("user", "x")]),
        other.conversations.items.retrieve(item_id, conversation_id=conversation.id),
        other.conversations.items.delete(item_id, conversation_id=conversation.id),
        other.conversations.delete(conversation.id),
    ):
        with pytest.raises(openai.NotFoundError):
            await attempt
    assert [i.id for i in (await client.conversations.items.list(conversation.id)).data] == [item_id]
    await other.close()
    await client.close()


async def test_an_empty_answer_and_a_refusal_are_items_that_can_be_listed_and_deleted(
    aiohttp_server: object, upstream: FakeUpstream, memory_block: str
) -> None:
    client, _ = await start_conversations_gateway(aiohttp_server, two_keys(upstream.url, memory_block))
    upstream.then(Step(body=chat_completion("")))
    await client.chat.completions.create(model="chat", messages=[u("say nothing")], extra_headers={"memoryId": "chat-e"})  # type: ignore[list-item]
    items = (await client.conversations.items.list("chat-e", order="asc")).data
    assert [item.role for item in items] == ["user", "assistant"]  # type: ignore[union-attr]
    assert items[1].content[0].type == "output_text" and items[1].content[0].text == ""  # type: ignore[union-attr]
    await client.conversations.items.delete(items[1].id, conversation_id="chat-e")
    assert [item.id for item in (await client.conversations.items.list("chat-e")).data] == [items[0].id]

    refusal = {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot help with that."}]}
    conversation = await client.conversations.create(items=[said("user", "pick a lock"), refusal])  # type: ignore[list-item]
    items = (await client.conversations.items.list(conversation.id, order="asc")).data
    assert items[1].content[0].type == "refusal" and items[1].content[0].refusal == "I cannot help with that."  # type: ignore[union-attr]
    one = await client.conversations.items.retrieve(items[1].id, conversation_id=conversation.id)
    assert one.id == items[1].id
    await client.conversations.items.delete(items[1].id, conversation_id=conversation.id)
    assert [item.id for item in (await client.conversations.items.list(conversation.id)).data] == [items[0].id]
    await client.close()


async def test_a_reasoning_item_is_refused_not_dropped(aiohttp_server: object, upstream: FakeUpstream, memory_block: str) -> None:
    client, _ = await start_conversations_gateway(aiohttp_server, two_keys(upstream.url, memory_block))
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}]}
    with pytest.raises(openai.BadRequestError) as caught:
        await client.conversations.create(items=[said("user", "hi"), reasoning])  # type: ignore[list-item]
    assert (caught.value.code, caught.value.param) == ("unsupported_value", "items[1]")  # type: ignore[attr-defined]
    conversation = await client.conversations.create(items=[said("user", "hi")])
    with pytest.raises(openai.BadRequestError) as caught:
        await client.conversations.items.create(conversation.id, items=[reasoning, said("user", "more")])  # type: ignore[list-item]
    assert (caught.value.code, caught.value.param) == ("unsupported_value", "items[0]")  # type: ignore[attr-defined]
    assert len((await client.conversations.items.list(conversation.id)).data) == 1
    await client.close()
