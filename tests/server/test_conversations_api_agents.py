"""The Agents SDK's OpenAIConversationsSession on the gateway's Conversations API: a session's history is a memory conversation."""

from __future__ import annotations

from typing import Any

import agents

from tests.support.conversations import start_conversations_gateway, two_keys
from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.memory_turns import received, u
from tests.support.plain_http import AUTH, call


def text_of(content: Any) -> str:
    """A chat message's text, whether a string or text parts."""
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


async def test_a_session_keeps_its_items_in_a_gateway_conversation(aiohttp_server: Any, upstream: FakeUpstream) -> None:
    client, _ = await start_conversations_gateway(aiohttp_server, two_keys(upstream.url, "{store: memory}"))
    session = agents.OpenAIConversationsSession(openai_client=client)
    assert await session.get_items() == []
    await session.add_items(
        [
            {"role": "user", "content": "What is the capital of Italy?"},
            {
                "id": "msg_abc", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "Rome.", "annotations": []}],
            },
            {"role": "user", "content": "And of France?"},
        ]
    )  # fmt: skip
    items = await session.get_items()
    assert [(item["role"], item["content"][0]["text"]) for item in items] == [
        ("user", "What is the capital of Italy?"), ("assistant", "Rome."), ("user", "And of France?")
    ]  # fmt: skip
    assert [item["role"] for item in await session.get_items(limit=2)] == ["assistant", "user"]
    popped = await session.pop_item()
    assert popped is not None and popped["content"][0]["text"] == "And of France?"

    upstream.then(Step(body=chat_completion("Paris.")))  # the session's conversation is a memoryId
    await client.chat.completions.create(
        model="chat", messages=[u("And France?")], extra_headers={"memoryId": session.session_id}  # type: ignore[list-item]
    )
    assert received(upstream)[-1] == [u("What is the capital of Italy?"), {"role": "assistant", "content": "Rome."}, u("And France?")]
    assert [item["content"][0]["text"] for item in await session.get_items()][-1] == "Paris."

    conversation_id = session.session_id
    await session.clear_session()
    status, _, _ = await call(client, "GET", f"/v1/memory/{conversation_id}", headers=AUTH)
    assert status == 404
    await client.close()


async def test_an_agent_run_keeps_its_turns_in_the_session(aiohttp_server: Any, upstream: FakeUpstream) -> None:
    """Runner.run with the session: the history goes to /v1/responses as input items, translated for a chat target."""
    config = two_keys(upstream.url, "{store: memory}").replace("apiKey: k}", "apiKey: k, responsesApi: translate}")
    client, _ = await start_conversations_gateway(aiohttp_server, config)
    agents.set_tracing_disabled(True)
    agent = agents.Agent(name="guide", instructions="Answer briefly.", model=agents.OpenAIResponsesModel(model="chat", openai_client=client))
    session = agents.OpenAIConversationsSession(openai_client=client)
    upstream.then(Step(body=chat_completion("Rome.")))
    first = await agents.Runner.run(agent, "Capital of Italy?", session=session)
    upstream.then(Step(body=chat_completion("Paris.")))
    second = await agents.Runner.run(agent, "And of France?", session=session)
    assert (first.final_output, second.final_output) == ("Rome.", "Paris.")
    sent = received(upstream)[-1]
    assert [text_of(m["content"]) for m in sent if m["role"] != "system"] == ["Capital of Italy?", "Rome.", "And of France?"]
    items = await session.get_items()
    assert [(item["role"], item["content"][0]["text"]) for item in items] == [
        ("user", "Capital of Italy?"), ("assistant", "Rome."), ("user", "And of France?"), ("assistant", "Paris.")
    ]  # fmt: skip
    status, _, stored = await call(client, "GET", f"/v1/memory/{session.session_id}", headers=AUTH)
    assert status == 200 and [m["content"] for m in stored["messages"]][-1] == "Paris."
    await client.close()
