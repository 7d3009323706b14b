"""The OpenAI Agents SDK against the gateway on the mock provider: an agent's state kept by the gateway.

`Runner.run` with `conversation_id` (the Responses API's `conversation`), with `previous_response_id`,
and with an `OpenAIConversationsSession` on an existing conversation: each second turn reaches the
model after the first one's question and answer, which the mock's reply counts ("received N messages").
"""

from __future__ import annotations

import uuid
from typing import Any

import agents
import openai

from tests.support.conversations import memory_block, start_conversations_gateway
from tests.support.gateway import KEYS

__all__ = ["memory_block"]  # the fixture: each test runs on SQLite, the in-process store and Redis


def config(memory: str) -> str:
    """One key, `memory`, and route mock-1 to the mock provider."""
    return f"{KEYS}\nmemory: {memory}\nroutes: {{mock-1: {{provider: mock}}}}"


def assistant_of(client: openai.AsyncOpenAI) -> Any:
    """An agent on route mock-1 through the Responses API, with tracing off (no calls to OpenAI)."""
    agents.set_tracing_disabled(True)
    model = agents.OpenAIResponsesModel(model="mock-1", openai_client=client)
    return agents.Agent(name="assistant", instructions="Answer briefly.", model=model)


async def test_runs_with_one_conversation_id_share_its_history(
    aiohttp_server: Any, memory_block: str
) -> None:
    client, _ = await start_conversations_gateway(aiohttp_server, config(memory_block))
    agent, conversation = assistant_of(client), f"conv_{uuid.uuid4().hex}"
    first = await agents.Runner.run(agent, "Capital of Italy?", conversation_id=conversation)
    second = await agents.Runner.run(agent, "And of France?", conversation_id=conversation)
    assert first.final_output == 'Mock reply: received 2 messages; last user message: "Capital of Italy?"'
    assert second.final_output == 'Mock reply: received 4 messages; last user message: "And of France?"'
    items = [item async for item in client.conversations.items.list(conversation, order="asc")]
    assert [item.role for item in items] == ["user", "assistant", "user", "assistant"]  # type: ignore[union-attr]
    await client.close()


async def test_a_run_continues_the_previous_runs_response(aiohttp_server: Any, memory_block: str) -> None:
    client, _ = await start_conversations_gateway(aiohttp_server, config(memory_block))
    agent = assistant_of(client)
    first = await agents.Runner.run(agent, "Capital of Italy?")
    second = await agents.Runner.run(agent, "And of France?", previous_response_id=first.last_response_id)
    assert second.final_output == 'Mock reply: received 4 messages; last user message: "And of France?"'
    third = await agents.Runner.run(agent, "And of Spain?", previous_response_id=second.last_response_id)
    assert third.final_output == 'Mock reply: received 6 messages; last user message: "And of Spain?"'
    await client.close()


async def test_a_session_on_a_conversation_made_with_the_openai_sdk(
    aiohttp_server: Any, memory_block: str
) -> None:
    client, base_url = await start_conversations_gateway(aiohttp_server, config(memory_block))
    conversation = await client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "Capital of Italy?"}], metadata={"app": "poc"}
    )
    session_client = openai.AsyncOpenAI(base_url=base_url, api_key=client.api_key, max_retries=0, timeout=20)
    session = agents.OpenAIConversationsSession(conversation_id=conversation.id, openai_client=session_client)
    assert [item["role"] for item in await session.get_items()] == ["user"]
    result = await agents.Runner.run(assistant_of(session_client), "And of France?", session=session)
    assert result.final_output == 'Mock reply: received 3 messages; last user message: "And of France?"'
    assert [item["role"] for item in await session.get_items()] == ["user", "user", "assistant"]
    await session_client.close()
    await client.close()


async def test_streamed_runs_with_one_conversation_id_share_its_history(
    aiohttp_server: Any, memory_block: str
) -> None:
    client, _ = await start_conversations_gateway(aiohttp_server, config(memory_block))
    agent, conversation = assistant_of(client), f"conv_{uuid.uuid4().hex}"
    for question in ("Capital of Italy?", "And of France?"):
        run = agents.Runner.run_streamed(agent, question, conversation_id=conversation)
        deltas = [
            event.data.delta
            async for event in run.stream_events()
            if event.type == "raw_response_event" and event.data.type == "response.output_text.delta"
        ]
        assert "".join(deltas) == run.final_output
    assert run.final_output == 'Mock reply: received 4 messages; last user message: "And of France?"'
    await client.close()
